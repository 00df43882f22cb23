#include "flows/journal_writer.h"

#include <algorithm>
#include <utility>

namespace cepbus::flows {

JournalWriter::JournalWriter(JournalWriterOptions options, CommitCallback on_commit,
                             TickCallback on_tick)
    : options_(options), on_commit_(std::move(on_commit)), on_tick_(std::move(on_tick)) {}

JournalWriter::~JournalWriter() { stop(); }

void JournalWriter::start(std::unique_ptr<Journal> journal) {
  std::lock_guard lock(mu_);
  if (running_) return;
  journal_ = std::move(journal);
  running_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void JournalWriter::stop() {
  {
    std::lock_guard lock(mu_);
    if (!running_ || stopping_) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
  std::lock_guard lock(mu_);
  running_ = false;
  // Acknowledgements that arrived after the last commit stay journaled; the
  // records are redelivered after a restart and the dedupe window catches repeats.
  acks_.clear();
  journal_.reset();
  flushed_cv_.notify_all();
}

std::optional<uint64_t> JournalWriter::append(JournalRecord record, uint64_t token) {
  uint64_t ticket;
  bool wake;
  {
    std::lock_guard lock(mu_);
    if (!running_ || stopping_ || queue_.size() >= options_.max_backlog) return std::nullopt;
    // A record behind others ripens after them: the writer wakes for the
    // first one and sees the rest when it takes its batch.
    wake = queue_.empty();
    queue_.push_back(Queued{std::move(record), token, false, std::chrono::steady_clock::now()});
    ticket = ++appended_;
  }
  if (wake) work_cv_.notify_one();
  return ticket;
}

bool JournalWriter::cancel(uint64_t ticket) {
  std::lock_guard lock(mu_);
  if (!running_ || ticket <= taken_ || ticket > appended_) return false;
  Queued& queued = queue_[ticket - 1 - taken_];
  if (queued.cancelled) return false;
  queued.cancelled = true;
  queued.record = JournalRecord{};  // drop the event now, not when the batch is taken
  ++metrics_.cancelled;
  return true;
}

void JournalWriter::acknowledge(JournalAck ack) {
  bool wake;
  {
    std::lock_guard lock(mu_);
    if (!running_) return;
    wake = acks_.empty() || acks_.size() + 1 == options_.max_batch;
    if (wake) first_ack_at_ = std::chrono::steady_clock::now();
    acks_.push_back(ack);
  }
  if (wake) work_cv_.notify_one();
}

void JournalWriter::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = appended_;
  if (committed_ >= target) return;
  flush_through_ = std::max(flush_through_, target);
  work_cv_.notify_one();
  flushed_cv_.wait(lock, [&] { return !running_ || committed_ >= target; });
}

JournalWriterMetrics JournalWriter::metrics() const {
  std::lock_guard lock(mu_);
  JournalWriterMetrics m = metrics_;
  m.backlog = queue_.size();
  return m;
}

void JournalWriter::run() {
  std::vector<JournalRecord> records;
  std::vector<uint64_t> tokens;
  std::vector<JournalAck> acks;
  auto next_tick = std::chrono::steady_clock::now() + options_.tick;

  std::unique_lock lock(mu_);
  while (true) {
    // Records that waited commit_delay, or that stop() or flush() want now.
    const auto now = std::chrono::steady_clock::now();
    const auto ripe_before = now - options_.commit_delay;
    auto ripe = [&](size_t i) {
      return stopping_ || taken_ + i + 1 <= flush_through_ || queue_[i].appended_at <= ripe_before;
    };
    size_t taken = 0;
    while (taken < queue_.size() && taken < options_.max_batch && ripe(taken)) ++taken;
    const bool acks_ripe =
        !acks_.empty() && (taken > 0 || stopping_ || acks_.size() >= options_.max_batch ||
                           first_ack_at_ <= now - options_.ack_delay);
    if (taken == 0 && !acks_ripe) {
      if (stopping_) break;  // nothing left: stop() wants everything
      if (now >= next_tick) {
        lock.unlock();
        on_tick_(now);
        next_tick = now + options_.tick;
        lock.lock();
        continue;
      }
      // Until the oldest ripens or the next tick; append(), acknowledge()
      // into an empty queue, flush() and stop() wake it earlier.
      auto due = next_tick;
      if (!queue_.empty()) due = std::min(due, queue_.front().appended_at + options_.commit_delay);
      if (!acks_.empty()) due = std::min(due, first_ack_at_ + options_.ack_delay);
      work_cv_.wait_until(lock, due);
      continue;
    }
    // Take one batch: the ripe records, and every acknowledgement. From here
    // on cancel() cannot withdraw them.
    records.clear();
    tokens.clear();
    for (size_t i = 0; i < taken; ++i) {
      Queued& queued = queue_.front();
      if (!queued.cancelled) {
        records.push_back(std::move(queued.record));
        tokens.push_back(queued.token);
      }
      queue_.pop_front();
    }
    taken_ += taken;
    acks.swap(acks_);
    const bool stopping = stopping_;
    lock.unlock();

    const bool write = !records.empty() || !acks.empty();
    Status status;
    if (write) {
      status = journal_->commit(records, acks);
      if (!records.empty()) on_commit_(tokens, status);
    }
    if (write || taken != 0) {
      lock.lock();
      if (write) {
        ++metrics_.commits;
        if (status.isOk()) {
          metrics_.inserted += records.size();
          metrics_.acknowledged += acks.size();
        } else {
          ++metrics_.errors;
        }
      }
      committed_ += taken;  // cancelled records count as done, so flush() returns
      lock.unlock();
      flushed_cv_.notify_all();
    }
    acks.clear();

    const auto after = std::chrono::steady_clock::now();
    if (!stopping && after >= next_tick) {
      on_tick_(after);
      next_tick = after + options_.tick;
    }
    lock.lock();
  }
}

}  // namespace cepbus::flows
