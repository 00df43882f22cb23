#include "flows/journal/journal_writer.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <utility>

#include "bus/base/thread_name.h"

namespace cepbus::flows {

JournalWriter::JournalWriter(JournalWriterOptions options, CommitCallback on_commit,
                             TickCallback on_tick)
    : options_(std::move(options)),
      ripening_grid_(std::chrono::duration_cast<Clock::duration>(options_.commit_delay) / 2),
      on_commit_(std::move(on_commit)),
      on_tick_(std::move(on_tick)) {}

JournalWriter::~JournalWriter() { stop(); }

void JournalWriter::start(std::unique_ptr<Journal> journal) {
  MutexLock lock(mu_);
  if (running_) return;
  journal_ = std::move(journal);
  running_ = true;
  stopping_ = false;
  thread_ = std::thread([this] {
    nameThisThread(options_.thread_name);
    run();
  });
}

void JournalWriter::stop() {
  {
    MutexLock lock(mu_);
    if (!running_ || stopping_) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
  MutexLock lock(mu_);
  running_ = false;
  // Acknowledgements that arrived after the last commit stay journaled; the
  // records are redelivered after a restart and the dedupe window catches repeats.
  acks_.clear();
  journal_.reset();
  flushed_cv_.notify_all();
}

JournalWriter::Clock::time_point JournalWriter::ripeAt(Clock::time_point appended_at) const {
  const Clock::time_point ripe = appended_at + options_.commit_delay;
  if (ripening_grid_ == Clock::duration::zero()) return ripe;
  const Clock::duration into_slot = ripe.time_since_epoch() % ripening_grid_;
  return into_slot == Clock::duration::zero() ? ripe : ripe - into_slot + ripening_grid_;
}

bool JournalWriter::mustWake(Clock::time_point due) const { return due < wake_at_; }

std::optional<uint64_t> JournalWriter::append(JournalRecord record, uint64_t token) {
  uint64_t ticket;
  bool wake;
  {
    MutexLock lock(mu_);
    if (!running_ || stopping_ || queue_.size() >= options_.max_backlog) return std::nullopt;
    // A record behind others ripens with or after them: the writer is woken
    // only when it would otherwise sleep past this one.
    const Clock::time_point now = Clock::now();
    wake = mustWake(ripeAt(now));
    queue_.push_back(Queued{std::move(record), token, false, now});
    ticket = ++appended_;
  }
  if (wake) work_cv_.notify_one();
  return ticket;
}

bool JournalWriter::cancel(uint64_t ticket) {
  MutexLock lock(mu_);
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
    MutexLock lock(mu_);
    if (!running_) return;
    if (acks_.empty()) first_ack_at_ = Clock::now();
    wake = acks_.size() + 1 == options_.max_batch ||
           (acks_.empty() && mustWake(first_ack_at_ + options_.ack_delay));
    acks_.push_back(ack);
  }
  if (wake) work_cv_.notify_one();
}

void JournalWriter::checkpoint(CheckpointRecord record, std::vector<JournalAck> acks,
                               CheckpointDone done) {
  {
    MutexLock lock(mu_);
    if (running_) {
      checkpoints_.push_back(QueuedCheckpoint{std::move(record), std::move(acks), std::move(done)});
      work_cv_.notify_one();
      return;
    }
  }
  done(Status::unavailable("journal writer is not running: checkpoint " + record.name +
                           " not stored"));
}

void JournalWriter::flush() {
  MutexLock lock(mu_);
  const uint64_t target = appended_;
  if (committed_ >= target) return;
  flush_through_ = std::max(flush_through_, target);
  work_cv_.notify_one();
  flushed_cv_.wait(mu_, [&] {
    mu_.assertHeld();
    return !running_ || committed_ >= target;
  });
}

void JournalWriter::requestTicks() {
  MutexLock lock(mu_);
  ++tick_requests_;
  if (ticking_) return;
  ticking_ = true;
  next_tick_ = Clock::now() + options_.tick;
  if (mustWake(next_tick_)) work_cv_.notify_one();
}

JournalWriterMetrics JournalWriter::metrics() const {
  MutexLock lock(mu_);
  JournalWriterMetrics m = metrics_;
  m.backlog = queue_.size();
  return m;
}

void JournalWriter::run() {
  std::vector<JournalRecord> records;
  std::vector<uint64_t> tokens;
  std::vector<JournalAck> acks;
  std::vector<QueuedCheckpoint> checkpoints;
  std::vector<CheckpointRecord> rows;
  MutexLock lock(mu_);
  ticking_ = true;
  next_tick_ = Clock::now() + options_.tick;
  while (true) {
    const auto now = Clock::now();
    if (!stopping_ && ticking_ && now >= next_tick_) {
      const uint64_t requests = tick_requests_;
      lock.unlock();
      const bool again = on_tick_(now);
      lock.lock();
      next_tick_ = now + options_.tick;
      // A request made during the tick may concern what it did not see.
      if (!again && tick_requests_ == requests) ticking_ = false;
      continue;
    }
    // Records ripe by now (see ripeAt()), or that stop(), flush() or a
    // checkpoint want now; a checkpoint takes every one.
    const bool checkpointing = !checkpoints_.empty();
    auto ripe = [&](size_t i) {
      mu_.assertHeld();
      return stopping_ || checkpointing || taken_ + i + 1 <= flush_through_ ||
             ripeAt(queue_[i].appended_at) <= now;
    };
    size_t taken = 0;
    while (taken < queue_.size() && (taken < options_.max_batch || checkpointing) && ripe(taken)) {
      ++taken;
    }
    const bool acks_ripe =
        !acks_.empty() && (taken > 0 || stopping_ || acks_.size() >= options_.max_batch ||
                           first_ack_at_ <= now - options_.ack_delay);
    if (taken == 0 && !acks_ripe && !checkpointing) {
      if (stopping_) break;  // nothing left: stop() wants everything
      // Until the oldest ripens, the acknowledgements are due or the next
      // tick; append() and acknowledge() wake it earlier only for work due
      // before that, flush() and stop() always.
      wake_at_ = ticking_ ? next_tick_ : Clock::time_point::max();
      if (!queue_.empty()) wake_at_ = std::min(wake_at_, ripeAt(queue_.front().appended_at));
      if (!acks_.empty()) wake_at_ = std::min(wake_at_, first_ack_at_ + options_.ack_delay);
      if (wake_at_ == Clock::time_point::max()) {
        work_cv_.wait(mu_);
      } else {
        work_cv_.waitUntil(mu_, wake_at_);
      }
      wake_at_ = Clock::time_point::min();
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
    checkpoints.swap(checkpoints_);
    if (records.empty() && acks.empty() && checkpoints.empty()) {
      // Every record was cancelled (its target acknowledged it in time): the
      // common case at low rates, done without giving up the lock.
      committed_ += taken;
      flushed_cv_.notify_all();
      continue;
    }
    lock.unlock();

    rows.clear();
    const size_t own_acks = acks.size();
    for (QueuedCheckpoint& c : checkpoints) {
      acks.insert(acks.end(), c.acks.begin(), c.acks.end());
      rows.push_back(std::move(c.record));
    }
    const Status checkpointed = journal_->commit(records, acks, rows);
    Status status = checkpointed;
    if (!checkpointed.isOk() && !rows.empty()) {
      // A checkpoint the journal refuses (its row alone may be what fails)
      // must not take the records down with it: they go again on their own.
      acks.resize(own_acks);
      status = journal_->commit(records, acks);
    }
    if (!records.empty()) on_commit_(tokens, status);
    // After the records' callback: a sender hears its record is durable
    // before the checkpoint that acknowledged it is reported.
    for (QueuedCheckpoint& c : checkpoints) c.done(checkpointed);
    checkpoints.clear();
    logHealth(status);

    lock.lock();
    ++metrics_.commits;
    if (status.isOk()) {
      metrics_.inserted += records.size();
      metrics_.acknowledged += acks.size();
    } else {
      ++metrics_.errors;
    }
    committed_ += taken;  // cancelled records count as done, so flush() returns
    acks.clear();
    flushed_cv_.notify_all();
  }
}

void JournalWriter::logHealth(const Status& status) {
  if (status.isOk() != failing_) return;
  failing_ = !status.isOk();
  Poco::Logger& log = Poco::Logger::get("cepbus.journal");
  if (failing_) {
    log.error(status.message() + "; what cannot be journaled is refused until it can");
  } else {
    log.notice("journal " + journal_->path() + ": writing again");
  }
}

}  // namespace cepbus::flows
