#include "flows/journal_writer.h"

#include <algorithm>
#include <iterator>
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

bool JournalWriter::append(JournalRecord record, uint64_t token) {
  {
    std::lock_guard lock(mu_);
    if (!running_ || stopping_ || records_.size() >= options_.max_backlog) return false;
    records_.push_back(std::move(record));
    tokens_.push_back(token);
    ++appended_;
  }
  work_cv_.notify_one();
  return true;
}

void JournalWriter::acknowledge(JournalAck ack) {
  {
    std::lock_guard lock(mu_);
    if (!running_) return;
    acks_.push_back(ack);
  }
  work_cv_.notify_one();
}

void JournalWriter::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = appended_;
  flushed_cv_.wait(lock, [&] { return !running_ || committed_ >= target; });
}

JournalWriterMetrics JournalWriter::metrics() const {
  std::lock_guard lock(mu_);
  JournalWriterMetrics m = metrics_;
  m.backlog = records_.size();
  return m;
}

void JournalWriter::run() {
  std::vector<JournalRecord> records;
  std::vector<uint64_t> tokens;
  std::vector<JournalAck> acks;
  auto next_tick = std::chrono::steady_clock::now() + options_.tick;

  std::unique_lock lock(mu_);
  while (true) {
    if (records_.empty() && acks_.empty()) {
      if (stopping_) break;
      work_cv_.wait_until(lock, next_tick,
                          [&] { return stopping_ || !records_.empty() || !acks_.empty(); });
    }
    // Take one batch: at most max_batch records, and every acknowledgement.
    records.clear();
    tokens.clear();
    if (records_.size() <= options_.max_batch) {
      records.swap(records_);
      tokens.swap(tokens_);
    } else {
      const auto n = static_cast<ptrdiff_t>(options_.max_batch);
      records.assign(std::make_move_iterator(records_.begin()),
                     std::make_move_iterator(records_.begin() + n));
      records_.erase(records_.begin(), records_.begin() + n);
      tokens.assign(tokens_.begin(), tokens_.begin() + n);
      tokens_.erase(tokens_.begin(), tokens_.begin() + n);
    }
    acks.swap(acks_);
    const bool stopping = stopping_;
    lock.unlock();

    if (!records.empty() || !acks.empty()) {
      const Status status = journal_->commit(records, acks);
      if (!records.empty()) on_commit_(tokens, status);
      lock.lock();
      ++metrics_.commits;
      if (status.isOk()) {
        metrics_.inserted += records.size();
        metrics_.acknowledged += acks.size();
      } else {
        ++metrics_.errors;
      }
      committed_ += records.size();
      lock.unlock();
      flushed_cv_.notify_all();
    }
    acks.clear();

    const auto now = std::chrono::steady_clock::now();
    if (!stopping && now >= next_tick) {
      on_tick_(now);
      next_tick = now + options_.tick;
    }
    lock.lock();
  }
}

}  // namespace cepbus::flows
