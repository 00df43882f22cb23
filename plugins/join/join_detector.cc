#include "plugins/join/join_detector.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>

namespace cepbus::plugins::join {
namespace {

// Hand-offs a worker may have queued before the dispatcher waits (bounds the
// memory in flight).
constexpr size_t kMaxQueued = 4;

// One worker on the caller's thread processes this many tuples at a time (or
// `batch` if smaller): enough for processAll() to prefetch ahead, few enough
// that pairs come out almost at once.
constexpr size_t kInlineBatch = 64;

const Symbol kDt = Symbol::intern("dt");
const Symbol kProb = Symbol::intern("prob");
const Symbol kKey = Symbol::intern("key");
const Symbol kMatchType = Symbol::intern("Match");

}  // namespace

// Builds the composite of a pair: the RETURN clause over the two bound
// variables (type Match with the key without RETURN), the joined probability
// as the event's probability, and attributes dt and prob unless RETURN names
// them.
class JoinDetector::Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(const JoinPlan& plan) : plan_(plan) {
    for (const std::string& v : plan.vars) slots_.push_back(*plan.layout.slotOf(v));
    if (plan.returns) {
      for (const auto& item : plan.returns->items) {
        if (item.name == kDt) has_dt_ = true;
        if (item.name == kProb) has_prob_ = true;
      }
    }
  }

  EventPtr compose(const plugin::Match& match) const override {
    const EventPtr& left = match.event(0);
    const EventPtr& right = match.event(1);
    const double prob = left->probability() * right->probability();
    const Timestamp dt = right->ts() - left->ts();
    EventBuilder b(plan_.returns ? plan_.returns->type : kMatchType);
    b.constituent(left).constituent(right).probability(prob);
    if (plan_.returns) {
      std::vector<pattern::SlotBinding> bind(plan_.layout.size());
      size_t left_var = 0, right_var = 1;
      if (!plan_.self_join) {
        left_var = static_cast<size_t>(plan_.streamOf(left->type()));
        right_var = static_cast<size_t>(plan_.streamOf(right->type()));
      }
      bind[slots_[left_var]].event = left.get();
      bind[slots_[right_var]].event = right.get();
      plan_.returns->apply(bind, prob, b);
    } else {
      const int s = plan_.streamOf(left->type());
      if (const Value* k = left->find(plan_.streams[static_cast<size_t>(s)].key)) b.set(kKey, *k);
    }
    if (!has_dt_) b.set(kDt, Value(static_cast<int64_t>(dt)));
    if (!has_prob_) b.set(kProb, Value(prob));
    return b.build();
  }

 private:
  const JoinPlan& plan_;
  std::vector<size_t> slots_;  // slot of each element's variable
  bool has_dt_ = false;
  bool has_prob_ = false;
};

JoinDetector::JoinDetector(JoinPlanPtr plan, plugin::MatchSink& sink)
    : plan_(std::move(plan)), sink_(sink), composer_(std::make_unique<Composer>(*plan_)) {}

Result<std::unique_ptr<JoinDetector>> JoinDetector::create(const JoinPlanPtr& plan,
                                                           plugin::MatchSink& sink) {
  std::unique_ptr<JoinDetector> d(new JoinDetector(plan, sink));
  const size_t n = plan->workers;
  if (plan->spill != SpillStrategy::kNone) {
    std::string tmpl = plan->spill_dir + "/cepbus-join-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Status::ioError("join: cannot create a spill directory in '" + plan->spill_dir +
                             "': " + std::strerror(errno));
    }
    d->spill_dir_ = tmpl;
  }
  for (size_t i = 0; i < n; ++i) {
    std::unique_ptr<SpillStore> entries, probes;
    if (!d->spill_dir_.empty()) {
      const std::string base = d->spill_dir_ + "/w" + std::to_string(i);
      auto e = SpillStore::open(base + "-entries.spill", true);
      if (!e) return e.status();
      auto p = SpillStore::open(base + "-probes.spill", true);
      if (!p) return p.status();
      entries = std::move(*e);
      probes = std::move(*p);
    }
    auto w = std::make_unique<Worker>();
    w->partition = std::make_unique<JoinPartition>(plan, plan->memory_budget / n,
                                                   std::move(entries), std::move(probes));
    d->workers_.push_back(std::move(w));
  }
  d->pending_.resize(n);
  d->inline_ = n == 1;
  if (d->inline_) return d;
  for (auto& w : d->workers_) {
    Worker* raw = w.get();
    w->thread = std::thread([d = d.get(), raw] { d->run(*raw); });
  }
  return d;
}

JoinDetector::~JoinDetector() {
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mu);
      w->stop = true;
    }
    w->cv.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  workers_.clear();  // closes (and deletes) the spill files
  if (!spill_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(spill_dir_, ec);
  }
}

void JoinDetector::run(Worker& w) {
  std::unique_lock lock(w.mu);
  while (true) {
    w.cv.wait(lock, [&] { return w.stop || !w.in.empty(); });
    if (w.stop) return;
    Batch batch = std::move(w.in.front());
    w.in.pop_front();
    lock.unlock();
    Chunk chunk;
    chunk.upto = batch.upto;
    Status error;
    // No exception may end the thread (it would end the process): one is
    // reported like any other error of this batch.
    try {
      w.partition->processAll(batch.tuples, chunk.pairs);
      if (batch.flush) {
        w.partition->restoreAll(chunk.pairs);
      } else if (w.partition->hasSpilled()) {
        bool idle = false;
        {
          std::lock_guard peek(w.mu);
          idle = w.in.empty();
        }
        // P4: bring the spilled tuples back when the input rate falls.
        if (idle) w.partition->restoreIfRoom(chunk.pairs);
      }
      error = w.partition->takeError();
    } catch (const std::exception& e) {
      error = Status::internal(std::string("join worker: ") + e.what());
    }
    lock.lock();
    if (!error.isOk() && w.error.isOk()) w.error = std::move(error);
    w.out.push_back(std::move(chunk));
    w.done_batch = batch.id;
    w.cv.notify_all();
  }
}

void JoinDetector::handOff(bool flush) {
  ++batch_id_;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = *workers_[i];
    {
      std::unique_lock lock(w.mu);
      w.cv.wait(lock, [&] { return w.in.size() < kMaxQueued; });
      Batch b;
      b.tuples = std::move(pending_[i]);
      b.id = batch_id_;
      b.upto = seq_;
      b.flush = flush;
      w.in.push_back(std::move(b));
    }
    w.cv.notify_all();
    pending_[i].clear();
    pending_[i].reserve(plan_->batch / workers_.size() + 16);
  }
  pending_count_ = 0;
}

void JoinDetector::collect(bool all) {
  for (auto& wp : workers_) {
    Worker& w = *wp;
    std::deque<Chunk> chunks;
    {
      std::lock_guard lock(w.mu);
      chunks.swap(w.out);
      if (!w.error.isOk() && error_.isOk()) error_ = std::move(w.error);
      w.error = Status::ok();
    }
    if (w.head > 0 && w.head * 2 >= w.ready.size()) {
      w.ready.erase(w.ready.begin(), w.ready.begin() + static_cast<ptrdiff_t>(w.head));
      w.head = 0;
    }
    for (Chunk& c : chunks) {
      w.ready.insert(w.ready.end(), std::make_move_iterator(c.pairs.begin()),
                     std::make_move_iterator(c.pairs.end()));
      w.upto = std::max(w.upto, c.upto);
    }
  }
  uint64_t bound = UINT64_MAX;
  if (!all) {
    for (auto& w : workers_) bound = std::min(bound, w->upto);
  }
  // Merge by arrival number: no worker can still produce a pair at or below `bound`.
  while (true) {
    Worker* best = nullptr;
    for (auto& w : workers_) {
      if (w->head < w->ready.size() && w->ready[w->head].seq <= bound &&
          (best == nullptr || w->ready[w->head].seq < best->ready[best->head].seq)) {
        best = w.get();
      }
    }
    if (best == nullptr) break;
    report(best->ready[best->head]);
    best->ready[best->head] = JoinedPair{};
    ++best->head;
  }
  for (auto& w : workers_) {
    if (w->head == w->ready.size()) {
      w->ready.clear();
      w->head = 0;
    }
  }
}

void JoinDetector::report(const JoinedPair& pair) {
  const EventPtr* events[2] = {&pair.left, &pair.right};
  static constexpr uint32_t kEnds[2] = {1, 2};
  plugin::Match match(events, kEnds, composer_.get());
  ++stats_.pairs;
  sink_.onMatch(match);
}

Status JoinDetector::takeError() {
  if (error_.isOk()) return Status::ok();
  Status s = std::move(error_);
  error_ = Status::ok();
  return s;
}

Status JoinDetector::dispatch(const EventPtr& event) {
  const Event& e = *event;
  if (e.ts() < last_ts_) {
    return Status::invalidArgument("join: event at ts " + std::to_string(e.ts()) +
                                   " arrives after ts " + std::to_string(last_ts_) +
                                   " (events must come in ts order)");
  }
  last_ts_ = e.ts();
  const int stream = plan_->streamOf(e.type());
  if (stream < 0) return Status::ok();
  ++stats_.events;
  if (e.probability() < plan_->threshold) {
    ++stats_.below_threshold;
    return Status::ok();
  }
  auto t = makeTuple(*plan_, event, stream, seq_ + 1);
  if (!t) return t.status();
  ++seq_;
  if (inline_) {
    processInline(std::move(*t));
    return Status::ok();
  }
  const size_t w = (t->hash >> 32) % workers_.size();
  pending_[w].push_back(std::move(*t));
  if (++pending_count_ >= plan_->batch) {
    handOff(false);
    collect(false);
  }
  return Status::ok();
}

Status JoinDetector::onEvent(const EventPtr& event) {
  Status s = dispatch(event);
  return s ? takeError() : s;
}

namespace {

// The cache lines of an event's fields (it spans up to three).
void prefetchEvent(const Event& e) {
  const char* p = reinterpret_cast<const char*>(&e);
  for (size_t off = 0; off < sizeof(Event); off += 64) __builtin_prefetch(p + off);
}

// The cache lines of its attributes (the key and site the tuple reads). Reads
// the event's own fields for where they are: prefetch those first.
void prefetchAttributes(const Event& e) {
  const std::span<const Attribute> attrs = e.attributes();
  const char* p = reinterpret_cast<const char*>(attrs.data());
  for (size_t off = 0; off < attrs.size_bytes(); off += 64) __builtin_prefetch(p + off);
}

}  // namespace

Status JoinDetector::onEvents(std::span<const EventPtr> events) {
  // Distances in events: the fields first, the attributes once those are in.
  constexpr size_t kFieldsAhead = 16, kAttributesAhead = 8;
  const size_t n = events.size();
  for (size_t i = 0; i < std::min(n, kFieldsAhead); ++i) prefetchEvent(*events[i]);
  for (size_t i = 0; i < std::min(n, kAttributesAhead); ++i) prefetchAttributes(*events[i]);
  Status first = Status::ok();
  for (size_t i = 0; i < n; ++i) {
    if (i + kFieldsAhead < n) prefetchEvent(*events[i + kFieldsAhead]);
    if (i + kAttributesAhead < n) {
      prefetchAttributes(*events[i + kAttributesAhead]);
      prefetchRefCount(events[i + kAttributesAhead]);
    }
    Status s = dispatch(events[i]);
    if (!s) {
      if (first) first = std::move(s);
    } else if (!error_.isOk() && first) {
      first = takeError();
    }
  }
  if (first) return takeError();
  return first;
}

void JoinDetector::processInline(Tuple t) {
  std::vector<Tuple>& pending = pending_[0];
  pending.push_back(std::move(t));
  if (pending.size() < std::min(plan_->batch, kInlineBatch)) return;
  if (Status s = runInline(); !s && error_.isOk()) error_ = std::move(s);
}

Status JoinDetector::runInline() {
  JoinPartition& part = *workers_[0]->partition;
  std::vector<Tuple>& pending = pending_[0];
  try {
    part.processAll(pending, inline_pairs_);
    // P4: bring the spilled tuples back when the input rate falls; a worker
    // of its own would look each time it finds its queue empty.
    since_idle_check_ += pending.size();
    if (part.hasSpilled() && since_idle_check_ >= plan_->batch) {
      since_idle_check_ = 0;
      part.restoreIfRoom(inline_pairs_);
    }
  } catch (const std::exception& e) {
    if (error_.isOk()) error_ = Status::internal(std::string("join worker: ") + e.what());
  }
  pending.clear();
  return reportInline();
}

Status JoinDetector::reportInline() {
  if (!inline_pairs_.empty()) {
    for (const JoinedPair& pair : inline_pairs_) report(pair);
    inline_pairs_.clear();
  }
  JoinPartition& part = *workers_[0]->partition;
  if (part.hasError() && error_.isOk()) error_ = part.takeError();
  return error_.isOk() ? Status::ok() : takeError();
}

Status JoinDetector::flush() {
  if (inline_) {
    if (Status s = runInline(); !s && error_.isOk()) error_ = std::move(s);
    try {
      workers_[0]->partition->restoreAll(inline_pairs_);
    } catch (const std::exception& e) {
      if (error_.isOk()) error_ = Status::internal(std::string("join worker: ") + e.what());
    }
    return reportInline();
  }
  handOff(true);
  for (auto& w : workers_) {
    std::unique_lock lock(w->mu);
    w->cv.wait(lock, [&] { return w->done_batch == batch_id_; });
  }
  collect(true);
  return takeError();
}

void JoinDetector::quiesce() const {
  if (inline_) return;
  for (const auto& w : workers_) {
    std::unique_lock lock(w->mu);
    w->cv.wait(lock, [&] { return w->done_batch == batch_id_; });
  }
}

Status JoinDetector::snapshot(plugin::SnapshotWriter& out) const {
  quiesce();
  for (const auto& w : workers_) {
    std::lock_guard lock(w->mu);
    if (!w->error.isOk()) {
      return Status::invalidArgument("join: a worker's error is not reported yet (" +
                                     w->error.message() + ")");
    }
  }
  out.section("join", kSnapshotVersion);
  out.varint(workers_.size());
  out.varint(seq_);
  out.signedVarint(last_ts_);
  out.varint(stats_.events);
  out.varint(stats_.below_threshold);
  out.varint(stats_.pairs);
  out.varint(since_idle_check_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = *workers_[i];
    out.varint(pending_[i].size());
    for (const Tuple& t : pending_[i]) {
      out.event(t.event);
      out.varint(t.seq);
    }
    // The pairs found and not yet reported, in the order they would be.
    std::vector<const JoinedPair*> pairs;
    uint64_t upto = w.upto;
    for (size_t k = w.head; k < w.ready.size(); ++k) pairs.push_back(&w.ready[k]);
    for (const Chunk& c : w.out) {
      for (const JoinedPair& p : c.pairs) pairs.push_back(&p);
      upto = std::max(upto, c.upto);
    }
    out.varint(pairs.size());
    for (const JoinedPair* p : pairs) {
      out.event(p->left);
      out.event(p->right);
      out.real(p->prob);
      out.varint(p->seq);
    }
    out.varint(upto);
    if (Status s = w.partition->snapshot(out); !s) return s;
  }
  return Status::ok();
}

Status JoinDetector::restore(plugin::SnapshotReader& in) {
  if (!in.section("join", kSnapshotVersion)) return in.status();
  const uint64_t workers = in.varint();
  if (in.ok() && workers != workers_.size()) {
    in.fail("the snapshot has " + std::to_string(workers) + " join workers, this join " +
            std::to_string(workers_.size()));
  }
  seq_ = in.varint();
  last_ts_ = in.signedVarint();
  stats_.events = in.varint();
  stats_.below_threshold = in.varint();
  stats_.pairs = in.varint();
  since_idle_check_ = in.varint();
  for (size_t i = 0; i < workers_.size() && in.ok(); ++i) {
    Worker& w = *workers_[i];
    const uint64_t pending = in.count(2);
    for (uint64_t k = 0; k < pending && in.ok(); ++k) {
      EventPtr event = in.event();
      const uint64_t seq = in.varint();
      const int stream = event ? plan_->streamOf(event->type()) : -1;
      if (stream < 0 || seq == 0 || seq > seq_) {
        in.fail("a tuple waiting for its worker is not one of the query's");
        break;
      }
      auto t = makeTuple(*plan_, event, stream, seq);
      if (!t) {
        in.fail("a tuple waiting for its worker: " + t.status().message());
        break;
      }
      if ((t->hash >> 32) % workers_.size() != i) {
        in.fail("a tuple waiting for another worker than its key's");
        break;
      }
      pending_[i].push_back(std::move(*t));
    }
    pending_count_ += pending_[i].size();
    const uint64_t pairs = in.count(12);
    for (uint64_t k = 0; k < pairs && in.ok(); ++k) {
      JoinedPair p;
      p.left = in.event();
      p.right = in.event();
      p.prob = in.real();
      p.seq = in.varint();
      if (p.left == nullptr || p.right == nullptr || plan_->streamOf(p.left->type()) < 0 ||
          plan_->streamOf(p.right->type()) < 0) {
        in.fail("a pair not yet reported without its events, or of events not of the query");
        break;
      }
      w.ready.push_back(std::move(p));
    }
    w.upto = in.varint();
    if (!in.ok()) break;
    w.partition->restore(in);
  }
  if (in.ok() && (inline_ ? pending_[0].size() >= std::min(plan_->batch, kInlineBatch)
                          : pending_count_ >= plan_->batch)) {
    in.fail("more tuples waiting for the workers than a batch");
  }
  return in.status();
}

JoinDetector::Stats JoinDetector::stats() const {
  Stats s = stats_;
  for (const auto& w : workers_) s.partitions.push_back(w->partition->stats());
  return s;
}

}  // namespace cepbus::plugins::join
