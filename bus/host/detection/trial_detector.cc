#include "bus/host/detection/trial_detector.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace cepbus::plugin {

double threadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::string TrialOutcome::describe() const {
  std::string out = "kept " + kept + ":";
  for (size_t i = 0; i < measured.size(); ++i) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", measured[i].cpu_seconds * 1e3);
    out += (i == 0 ? " " : ", ") + measured[i].engine + " " + ms + " ms";
  }
  out += " CPU on " + std::to_string(events) + " events";
  if (warmup > 0) out += " after the first " + std::to_string(warmup);
  if (!ended_early.empty()) out += "; " + ended_early;
  if (!note.empty()) out += " (" + note + ")";
  return out;
}

// Where one candidate's detector reports: back to the TrialDetector, which
// knows whether the match is booked, forwarded or both.
class TrialDetector::CandidateSink final : public MatchSink, public MultiMatchSink {
 public:
  CandidateSink(TrialDetector& owner, size_t index) : owner_(owner), index_(index) {}
  void onMatch(const Match& match) override { owner_.reported(index_, 0, match); }
  void onMatch(size_t pattern, const Match& match) override {
    owner_.reported(index_, pattern, match);
  }

 private:
  TrialDetector& owner_;
  const size_t index_;
};

size_t TrialDetector::MatchKeyHash::operator()(const MatchKey& key) const {
  // FNV-1a over the pattern, the events' addresses (each event is one
  // allocation, kept alive by the key) and the element bounds.
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; };
  mix(key.pattern);
  for (const EventPtr& e : key.events) mix(reinterpret_cast<uintptr_t>(e.get()));
  for (uint32_t end : key.ends) mix(end);
  return static_cast<size_t>(h);
}

TrialDetector::TrialDetector(MatchSink& out, TrialLimits limits, CpuClock clock)
    : TrialDetector(&out, nullptr, limits, std::move(clock)) {}

TrialDetector::TrialDetector(MultiMatchSink& out_many, TrialLimits limits, CpuClock clock)
    : TrialDetector(nullptr, &out_many, limits, std::move(clock)) {}

TrialDetector::TrialDetector(MatchSink* out, MultiMatchSink* out_many, TrialLimits limits,
                             CpuClock clock)
    : out_(out), out_many_(out_many), limits_(limits), clock_(std::move(clock)) {
  // What a timed interval with nothing in it reads: the clock's own cost,
  // which a timed forward would otherwise count as the output's.
  clock_cost_ = 1;
  for (int i = 0; i < 8; ++i) {
    const double started = clock_();
    clock_cost_ = std::min(clock_cost_, clock_() - started);
  }
}

TrialDetector::~TrialDetector() = default;

Status TrialDetector::addCandidate(std::string engine, const Maker& make) {
  auto sink = std::make_unique<CandidateSink>(*this, candidates_.size());
  auto made = make(*sink, *sink);
  if (!made) return made.status();
  Candidate c;
  c.engine = std::move(engine);
  c.sink = std::move(sink);
  c.detector = std::move(made).value();
  candidates_.push_back(std::move(c));
  if (candidates_.size() == 1) {
    MutexLock lock(outcome_mu_);
    running_ = candidates_.front().engine;
  }
  return Status::ok();
}

void TrialDetector::forward(size_t pattern, const Match& match) {
  if (out_many_ != nullptr) {
    out_many_->onMatch(pattern, match);
  } else {
    out_->onMatch(match);
  }
}

void TrialDetector::HeldMatches::add(size_t pattern, const Match& match) {
  entries_.push_back({pattern, events_.size(), match.size(), ends_.size(), match.elementCount()});
  for (size_t i = 0; i < match.size(); ++i) events_.push_back(match.event(i));
  uint32_t end = 0;
  for (size_t j = 0; j < match.elementCount(); ++j) {
    end += static_cast<uint32_t>(match.elementEvents(j).size());
    ends_.push_back(end);
  }
}

void TrialDetector::HeldMatches::release(
    const std::function<void(size_t pattern, const Match& match)>& to) {
  std::vector<const EventPtr*> events;
  for (const Entry& e : entries_) {
    events.clear();
    for (size_t i = 0; i < e.events; ++i) events.push_back(&events_[e.first_event + i]);
    // No composer: the copy is only booked, never composed.
    to(e.pattern,
       Match(events, std::span<const uint32_t>(ends_).subspan(e.first_end, e.ends), nullptr));
  }
  entries_.clear();
  events_.clear();
  ends_.clear();
}

void TrialDetector::reported(size_t candidate, size_t pattern, const Match& match) {
  if (!deciding_) {
    // Dropped candidates are destroyed when the trial decides, so this is
    // the kept one.
    forward(pattern, match);
    return;
  }
  // The match is a view valid only now (its composer may be the engine's
  // local): the prior's is forwarded at once.
  if (candidate == 0) forwardTimed(pattern, match);
  if (unbalanced_overflow_ || candidates_.size() == 1) return;
  if (holding_) {
    candidates_[candidate].held.add(pattern, match);
  } else {
    book(candidate, pattern, match);
  }
}

void TrialDetector::forwardTimed(size_t pattern, const Match& match) {
  if (!timing_ || timed_forwards_++ % kSinkSample != 0) return forward(pattern, match);
  const double started = clock_();
  forward(pattern, match);
  sink_samples_.push_back(std::max(clock_() - started - clock_cost_, 0.0));
}

void TrialDetector::book(size_t candidate, size_t pattern, const Match& match) {
  MatchKey key{pattern, {}, {}};
  key.events.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) key.events.push_back(match.event(i));
  key.ends.reserve(match.elementCount());
  uint32_t end = 0;
  for (size_t j = 0; j < match.elementCount(); ++j) {
    end += static_cast<uint32_t>(match.elementEvents(j).size());
    key.ends.push_back(end);
  }
  auto add = [&](Ledger& ledger, int64_t delta) {
    auto [it, inserted] = ledger.try_emplace(key, 0);
    if ((it->second += delta) == 0) ledger.erase(it);
    if (ledger.size() > limits_.max_unbalanced) unbalanced_overflow_ = true;
  };
  if (candidate != 0) return add(candidates_[candidate].ledger, -1);
  for (size_t c = 1; c < candidates_.size(); ++c) add(candidates_[c].ledger, +1);
}

Status TrialDetector::everyCandidate(const std::function<Status(Detector&)>& call, size_t events) {
  // The first events pay one-time costs (first-touch page faults, code run
  // for the first time) that would decide a short trial: not timed.
  timing_ = events_ >= limits_.warmup_events;
  Status prior = Status::ok();
  // Who goes first takes turns: the first to touch a batch's events pays
  // for bringing them into the cache.
  const size_t n = candidates_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t c = (k + calls_) % n;
    Candidate& candidate = candidates_[c];
    if (candidate.failed) continue;
    holding_ = timing_;
    const double started = timing_ ? clock_() : 0;
    const Status s = call(*candidate.detector);
    if (timing_) candidate.cpu_seconds += clock_() - started;
    holding_ = false;
    candidate.held.release([&](size_t pattern, const Match& match) {
      if (!unbalanced_overflow_) book(c, pattern, match);
    });
    if (c == 0) {
      prior = s;
    } else if (!s) {
      candidate.failed = true;  // the prior is the authority on errors
    }
  }
  ++calls_;
  events_ += events;
  if (timing_) {
    timed_events_ += events;
    maybeCloseBlock();
  }
  return prior;
}

Status TrialDetector::onEvent(const EventPtr& event) {
  if (!deciding_) return runningDetector().onEvent(event);
  const Status s = everyCandidate([&](Detector& d) { return d.onEvent(event); }, 1);
  maybeDecide();
  return s;
}

Status TrialDetector::onEvents(std::span<const EventPtr> events) {
  if (!deciding_) return runningDetector().onEvents(events);
  const Status s = everyCandidate([&](Detector& d) { return d.onEvents(events); }, events.size());
  maybeDecide();
  return s;
}

Status TrialDetector::flush() {
  if (!deciding_) return runningDetector().flush();
  const Status s = everyCandidate([](Detector& d) { return d.flush(); }, 0);
  maybeDecide();
  return s;
}

Status TrialDetector::onWatermark(Timestamp t) {
  if (!deciding_) return runningDetector().onWatermark(t);
  const Status s = everyCandidate([t](Detector& d) { return d.onWatermark(t); }, 0);
  maybeDecide();
  return s;
}

Result<std::string> TrialDetector::exportModel(std::string_view format) const {
  return runningDetector().exportModel(format);
}

std::optional<DetectorState> TrialDetector::state() const { return runningDetector().state(); }

std::optional<TrialOutcome> TrialDetector::outcome() const {
  MutexLock lock(outcome_mu_);
  return outcome_;
}

std::string TrialDetector::running() const {
  MutexLock lock(outcome_mu_);
  return running_;
}

double TrialDetector::cpuOf(size_t c) const {
  double cpu = candidates_[c].cpu_seconds;
  if (c == 0 && !sink_samples_.empty()) {
    // The median sampled forward: one cold or interrupted forward among few
    // samples, scaled to all, would otherwise take the prior's figure to 0.
    std::vector<double> samples = sink_samples_;
    auto mid = samples.begin() + static_cast<ptrdiff_t>(samples.size() / 2);
    std::nth_element(samples.begin(), mid, samples.end());
    cpu -= *mid * static_cast<double>(timed_forwards_);
  }
  return std::max(cpu, 0.0);
}

void TrialDetector::maybeCloseBlock() {
  if (timed_events_ - block_start_events_ < limits_.block_events) return;
  for (size_t c = 0; c < candidates_.size(); ++c) {
    Candidate& candidate = candidates_[c];
    const double now = cpuOf(c);
    candidate.blocks.push_back(now - candidate.block_start);
    candidate.block_start = now;
  }
  block_start_events_ = timed_events_;
}

bool TrialDetector::settled() const {
  const size_t k = limits_.agreeing_blocks;
  const std::vector<double>& prior = candidates_[0].blocks;
  if (k == 0 || prior.size() < k) return false;
  const size_t first = prior.size() - k;
  for (size_t c = 1; c < candidates_.size(); ++c) {
    if (candidates_[c].failed) continue;
    const std::vector<double>& blocks = candidates_[c].blocks;
    auto cheaper = [&](size_t i) { return blocks[i] < prior[i] * limits_.switch_below; };
    for (size_t i = first + 1; i < prior.size(); ++i) {
      if (cheaper(i) != cheaper(first)) return false;
    }
  }
  return true;
}

TrialDetector::Ending TrialDetector::ending() const {
  double spent = 0;
  double least = -1;
  double most = 0;
  for (size_t c = 0; c < candidates_.size(); ++c) {
    if (candidates_[c].failed) continue;
    const double cpu = cpuOf(c);
    spent += cpu;
    least = least < 0 ? cpu : std::min(least, cpu);
    most = std::max(most, cpu);
  }
  if (timed_events_ >= limits_.events || spent >= limits_.cpu_seconds) return Ending::kBounds;
  if (settled()) return Ending::kSettled;
  if (timed_events_ >= limits_.min_events && least <= most * limits_.decisive_below) {
    return Ending::kClearWinner;
  }
  if (!candidates_[0].blocks.empty() && most >= limits_.overwhelming_cpu_seconds &&
      least <= most * limits_.overwhelming_below) {
    return Ending::kOverwhelmingWinner;
  }
  return Ending::kNotYet;
}

std::vector<double> TrialDetector::cpus() const {
  std::vector<double> out;
  for (size_t c = 0; c < candidates_.size(); ++c) out.push_back(cpuOf(c));
  return out;
}

std::vector<double> TrialDetector::cpus(size_t blocks) const {
  std::vector<double> out;
  for (const Candidate& candidate : candidates_) {
    const auto& b = candidate.blocks;
    out.push_back(std::accumulate(b.end() - static_cast<ptrdiff_t>(blocks), b.end(), 0.0));
  }
  return out;
}

std::string TrialDetector::endedEarly(Ending end) const {
  char share[32];
  switch (end) {
    case Ending::kSettled:
      return "the last " + std::to_string(limits_.agreeing_blocks) + " blocks of " +
             std::to_string(limits_.block_events) + " events agreed";
    case Ending::kClearWinner:
    case Ending::kOverwhelmingWinner:
      std::snprintf(
          share, sizeof share, "%g",
          end == Ending::kClearWinner ? limits_.decisive_below : limits_.overwhelming_below);
      return std::string("one took at most ") + share + " of another's CPU";
    case Ending::kBounds:
    case Ending::kNotYet:
      break;
  }
  return "";
}

size_t TrialDetector::cheapest(const std::vector<double>& cpu) const {
  size_t best = 0;
  for (size_t c = 1; c < candidates_.size(); ++c) {
    if (candidates_[c].failed) continue;
    if (cpu[c] < cpu[best] * (best == 0 ? limits_.switch_below : 1.0)) best = c;
  }
  return best;
}

bool TrialDetector::levelWith(size_t c) {
  Candidate& challenger = candidates_[c];
  if (challenger.ledger.empty()) return true;
  // Reported at different moments: flushing both reports what each still
  // holds for the events so far (and lets more events follow).
  const Status prior = candidates_[0].detector->flush();
  const Status other = challenger.detector->flush();
  return prior && other && challenger.ledger.empty();
}

std::vector<TrialOutcome::Measured> TrialDetector::measured() const {
  std::vector<TrialOutcome::Measured> out;
  for (size_t c = 0; c < candidates_.size(); ++c) out.push_back({candidates_[c].engine, cpuOf(c)});
  return out;
}

void TrialDetector::keep(size_t c, std::string note, std::vector<TrialOutcome::Measured> measured,
                         std::string ended_early) {
  TrialOutcome outcome;
  outcome.kept = candidates_[c].engine;
  outcome.events = timed_events_;
  outcome.warmup = events_ - timed_events_;
  outcome.note = std::move(note);
  outcome.ended_early = std::move(ended_early);
  outcome.measured = std::move(measured);
  adopt(c, outcome);
  if (on_decided_) on_decided_(outcome);
}

void TrialDetector::adopt(size_t c, const TrialOutcome& outcome) {
  // The others go (each detector before its sink); the kept one's sink
  // forwards everything from now on.
  deciding_ = false;
  Candidate kept = std::move(candidates_[c]);
  kept.ledger = Ledger();
  candidates_.clear();
  candidates_.push_back(std::move(kept));
  MutexLock lock(outcome_mu_);
  running_ = outcome.kept;
  outcome_ = outcome;
}

void TrialDetector::maybeDecide() {
  if (candidates_.size() < 2) {
    deciding_ = false;  // nothing to compare: the prior runs alone, untimed
    return;
  }
  const bool everyone_failed = [&] {
    for (size_t c = 1; c < candidates_.size(); ++c) {
      if (!candidates_[c].failed) return false;
    }
    return true;
  }();
  if (everyone_failed) return keep(0, "every other candidate failed", measured());
  if (unbalanced_overflow_) {
    return keep(0,
                "more than " + std::to_string(limits_.max_unbalanced) +
                    " matches reported by one candidate and not yet by another",
                measured());
  }
  const Ending end = ending();
  if (end == Ending::kNotYet) return;
  std::string ended_early = endedEarly(end);
  // The figures of the trial, before levelWith() flushes.
  std::vector<TrialOutcome::Measured> figures = measured();
  const size_t best = cheapest(end == Ending::kSettled ? cpus(limits_.agreeing_blocks) : cpus());
  if (best == 0) return keep(0, "", std::move(figures), std::move(ended_early));
  if (!levelWith(best)) {
    return keep(0,
                candidates_[best].engine + "'s matches did not line up with " +
                    candidates_[0].engine + "'s at the switch",
                std::move(figures), std::move(ended_early));
  }
  keep(best, "", std::move(figures), std::move(ended_early));
}

namespace {

constexpr uint32_t kTrialSnapshotVersion = 1;

}  // namespace

uint32_t TrialDetector::snapshotVersion() const {
  for (const Candidate& c : candidates_) {
    if (c.detector->snapshotVersion() > 0) return kTrialSnapshotVersion;
  }
  return 0;
}

Status TrialDetector::snapshot(SnapshotWriter& out) const {
  if (deciding_ && events_ > 0) {
    std::string engines;
    for (const Candidate& c : candidates_) engines += (engines.empty() ? "" : ", ") + c.engine;
    return Status::invalidArgument(
        "engine auto's trial between " + engines + " is still running after " +
        std::to_string(events_) +
        " events and cannot be checkpointed until it decides; checkpoint later, or name the "
        "engine (--engine " +
        candidates_.front().engine + ")");
  }
  out.section("trial", kTrialSnapshotVersion);
  const std::optional<TrialOutcome> decided = outcome();
  out.flag(!deciding_);
  if (deciding_) return Status::ok();
  // A trial with one candidate decides nothing and keeps it without an outcome.
  out.string(decided ? decided->kept : candidates_.front().engine);
  out.flag(decided.has_value());
  if (decided) {
    out.varint(decided->measured.size());
    for (const TrialOutcome::Measured& m : decided->measured) {
      out.string(m.engine);
      out.real(m.cpu_seconds);
    }
    out.varint(decided->events);
    out.varint(decided->warmup);
    out.string(decided->note);
    out.string(decided->ended_early);
  }
  return candidates_.front().detector->snapshot(out);
}

Status TrialDetector::restore(SnapshotReader& in) {
  if (!in.section("trial", kTrialSnapshotVersion)) return in.status();
  if (!in.flag()) return in.status();  // taken before the first event
  const std::string kept = in.string();
  TrialOutcome outcome;
  outcome.kept = kept;
  const bool decided = in.flag();
  if (decided) {
    const uint64_t n = in.count(9);
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      TrialOutcome::Measured m;
      m.engine = in.string();
      m.cpu_seconds = in.real();
      outcome.measured.push_back(std::move(m));
    }
    outcome.events = in.varint();
    outcome.warmup = in.varint();
    outcome.note = in.string();
    outcome.ended_early = in.string();
  }
  if (!in.ok()) return in.status();
  size_t c = 0;
  while (c < candidates_.size() && candidates_[c].engine != kept) ++c;
  if (c == candidates_.size()) {
    in.fail("the trial kept engine '" + kept + "', which is not a candidate of this run");
    return in.status();
  }
  if (decided) {
    adopt(c, outcome);
    // The host hears which engine runs, as when the trial decided.
    if (on_decided_) on_decided_(outcome);
  } else if (candidates_.size() > 1) {
    in.fail("a lone candidate's state, and this run's trial has several");
    return in.status();
  } else {
    deciding_ = false;  // a lone candidate, as maybeDecide() leaves it
  }
  return candidates_.front().detector->restore(in);
}

}  // namespace cepbus::plugin
