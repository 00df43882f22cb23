#pragma once

// PendingBatches: which row of the journal's `pending_batches` table holds
// each pending record, and which of a row's records are acknowledged. The
// journal plans a transaction's acknowledgements with it (which rows to
// delete, which bitmaps to store) and applies the plan only once the
// transaction committed, so one that fails leaves the index as the
// database is.
//
// A row's acknowledged records are a bitmap, bit i (bit i % 8 of byte
// i / 8) for its i-th record in the order the row stores them. While some
// of a row's records are pending the bitmap is stored beside it (table
// `pending_acked`); the row and its bitmap are deleted with its last one.
//
// Thread-safety: none; one thread at a time, as the journal's.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cepbus::flows {

class PendingBatches {
 public:
  // What acknowledging some records does to one row.
  struct RowChange {
    int64_t row = 0;
    size_t acknowledged = 0;  // of its records, newly
    bool emptied = false;     // they were its last: delete the row
    bool had_bitmap = false;  // one is stored for it already
    std::string acked;        // when not emptied: its bitmap to store
  };
  struct Plan {
    std::vector<RowChange> rows;
    std::vector<uint64_t> held;     // the sequence numbers some row holds
    std::vector<uint64_t> unknown;  // those no row holds
  };

  // What acknowledging `seqs` (sorted, without duplicates) changes.
  Plan plan(std::span<const uint64_t> seqs) const;
  // Applies a plan of this index (after its transaction committed).
  void apply(const Plan& plan);
  // A row holding `seqs`, in the order it stores them; `acked` its bitmap
  // (empty: none acknowledged).
  void add(int64_t row, std::span<const uint64_t> seqs, std::string acked = {});
  // Forgets a row (one that does not decode, deleted).
  void remove(int64_t row);
  bool holds(uint64_t seq) const { return places_.contains(seq); }
  // The sequence numbers of `row` in its order, or null when it is not held.
  const std::vector<uint64_t>* seqsOf(int64_t row) const;
  // Whether the `index`-th record is acknowledged in `bitmap`.
  static bool isAcked(std::string_view bitmap, size_t index);

 private:
  struct Row {
    std::vector<uint64_t> seqs;
    std::string acked;   // empty while none is acknowledged
    size_t pending = 0;  // records not acknowledged
  };
  struct Place {
    int64_t row = 0;
    size_t index = 0;
  };

  std::unordered_map<int64_t, Row> rows_;
  std::unordered_map<uint64_t, Place> places_;  // of the pending records only
};

}  // namespace cepbus::flows
