#include "flows/journal/pending_batches.h"

#include <utility>

namespace cepbus::flows {

namespace {

void setAcked(std::string& bitmap, size_t index) {
  bitmap[index / 8] =
      static_cast<char>(static_cast<unsigned char>(bitmap[index / 8]) | (1u << (index % 8)));
}

}  // namespace

bool PendingBatches::isAcked(std::string_view bitmap, size_t index) {
  return index / 8 < bitmap.size() &&
         ((static_cast<unsigned char>(bitmap[index / 8]) >> (index % 8)) & 1u) != 0;
}

PendingBatches::Plan PendingBatches::plan(std::span<const uint64_t> seqs) const {
  Plan plan;
  // Where each touched row's change is in plan.rows: a transaction's
  // acknowledgements mostly come in runs of one row, so the last is tried first.
  std::unordered_map<int64_t, size_t> changes;
  size_t last = 0;
  for (uint64_t seq : seqs) {
    const auto place = places_.find(seq);
    if (place == places_.end()) {
      plan.unknown.push_back(seq);
      continue;
    }
    plan.held.push_back(seq);
    const auto [row, index] = place->second;
    if (plan.rows.empty() || plan.rows[last].row != row) {
      const auto [at, added] = changes.try_emplace(row, plan.rows.size());
      last = at->second;
      if (added) {
        const Row& held = rows_.at(row);
        RowChange change{row, 0, false, !held.acked.empty(), held.acked};
        change.acked.resize((held.seqs.size() + 7) / 8);
        plan.rows.push_back(std::move(change));
      }
    }
    RowChange& change = plan.rows[last];
    setAcked(change.acked, index);
    ++change.acknowledged;
  }
  for (RowChange& change : plan.rows) {
    change.emptied = change.acknowledged == rows_.at(change.row).pending;
    if (change.emptied) change.acked.clear();
  }
  return plan;
}

void PendingBatches::apply(const Plan& plan) {
  for (uint64_t seq : plan.held) places_.erase(seq);
  for (const RowChange& change : plan.rows) {
    if (change.emptied) {
      rows_.erase(change.row);
      continue;
    }
    Row& row = rows_.at(change.row);
    row.acked = change.acked;
    row.pending -= change.acknowledged;
  }
}

void PendingBatches::add(int64_t row, std::span<const uint64_t> seqs, std::string acked) {
  Row& added = rows_[row];
  added.seqs.assign(seqs.begin(), seqs.end());
  added.acked = std::move(acked);
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (isAcked(added.acked, i)) continue;
    places_[seqs[i]] = Place{row, i};
    ++added.pending;
  }
}

void PendingBatches::remove(int64_t row) {
  const auto it = rows_.find(row);
  if (it == rows_.end()) return;
  for (size_t i = 0; i < it->second.seqs.size(); ++i) {
    if (!isAcked(it->second.acked, i)) places_.erase(it->second.seqs[i]);
  }
  rows_.erase(it);
}

const std::vector<uint64_t>* PendingBatches::seqsOf(int64_t row) const {
  const auto it = rows_.find(row);
  return it == rows_.end() ? nullptr : &it->second.seqs;
}

}  // namespace cepbus::flows
