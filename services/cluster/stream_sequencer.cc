#include "services/cluster/stream_sequencer.h"

#include <algorithm>

#include "services/cluster/stream_read_back.h"

namespace cepbus::services::cluster {

std::optional<StreamSequencer::Tag> StreamSequencer::tagOf(std::string_view message_id,
                                                           std::optional<uint64_t> seq) {
  if (!seq) return std::nullopt;
  const std::optional<uint64_t> run = StreamReadBack::runOf(message_id);
  if (!run) return std::nullopt;
  return Tag{*run, *seq};
}

StreamSequencer::StreamSequencer(size_t max_held, std::chrono::milliseconds max_wait)
    : max_held_(max_held), max_wait_(max_wait) {}

StreamSequencer::Offer StreamSequencer::offer(uint64_t offset, std::optional<Tag> tag, Time now) {
  Offer out;
  if (!tag) return out;
  auto [it, first] = runs_.try_emplace(tag->run);
  Run& run = it->second;
  run.last = now;
  if (first) run.next = tag->seq;
  if (tag->seq < run.next) return out;
  if (tag->seq > run.next) {
    // A copy of a message already held is held with it.
    run.held.try_emplace(tag->seq, Held{{}, now}).first->second.offsets.push_back(offset);
    ++held_count_;
    out.held = true;
    // Too much held: this run's first gap is given up (the offered message
    // may come out with it).
    if (held_count_ > max_held_) skipGap(run, out.then);
    return out;
  }
  ++run.next;
  drain(run, out.then);
  return out;
}

std::vector<uint64_t> StreamSequencer::expire(Time now) {
  std::vector<uint64_t> out;
  for (auto& entry : runs_) {
    Run& run = entry.second;
    // A message held behind the first gap waits on it too, whatever its place.
    auto waited = [&] {
      return std::any_of(run.held.begin(), run.held.end(),
                         [&](const auto& entry) { return now - entry.second.since >= max_wait_; });
    };
    while (!run.held.empty() && waited()) skipGap(run, out);
  }
  // A run quiet for long is over (each publish has a run of its own): it is
  // forgotten, so a node that lives through many publishes stays small.
  std::erase_if(runs_, [&](const auto& entry) {
    return entry.second.held.empty() && now - entry.second.last >= kForgetAfter * max_wait_;
  });
  return out;
}

void StreamSequencer::drain(Run& run, std::vector<uint64_t>& out) {
  for (auto it = run.held.begin(); it != run.held.end() && it->first <= run.next;
       it = run.held.erase(it)) {
    out.insert(out.end(), it->second.offsets.begin(), it->second.offsets.end());
    held_count_ -= it->second.offsets.size();
    if (it->first == run.next) ++run.next;
  }
}

void StreamSequencer::skipGap(Run& run, std::vector<uint64_t>& out) {
  if (run.held.empty()) return;
  gaps_ += run.held.begin()->first - run.next;
  run.next = run.held.begin()->first;
  drain(run, out);
}

}  // namespace cepbus::services::cluster
