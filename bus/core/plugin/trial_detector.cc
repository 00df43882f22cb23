#include "bus/core/plugin/trial_detector.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include "bus/core/plugin/engine_choice.h"
#include "bus/core/plugin/plugin_loader.h"

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
    : out_(out), out_many_(out_many), limits_(limits), clock_(std::move(clock)) {}

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
    std::lock_guard lock(outcome_mu_);
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

void TrialDetector::reported(size_t candidate, size_t pattern, const Match& match) {
  if (!deciding_) {
    // Dropped candidates are destroyed when the trial decides, so this is
    // the kept one.
    forward(pattern, match);
    return;
  }
  if (unbalanced_overflow_ || candidates_.size() == 1) {
    if (candidate == 0) forward(pattern, match);
    return;
  }
  MatchKey key{pattern, {}, {}};
  key.events.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) key.events.push_back(match.event(i));
  key.ends.reserve(match.elementCount());
  uint32_t end = 0;
  for (size_t j = 0; j < match.elementCount(); ++j) {
    end += static_cast<uint32_t>(match.elementEvents(j).size());
    key.ends.push_back(end);
  }
  auto book = [&](Ledger& ledger, int64_t delta) {
    auto [it, inserted] = ledger.try_emplace(key, 0);
    if ((it->second += delta) == 0) ledger.erase(it);
    if (ledger.size() > limits_.max_unbalanced) unbalanced_overflow_ = true;
  };
  if (candidate != 0) {
    book(candidates_[candidate].ledger, -1);
    return;
  }
  for (size_t c = 1; c < candidates_.size(); ++c) book(candidates_[c].ledger, +1);
  // The output's cost is the caller's, not the prior's: time a sample of it.
  if (timing_ && forwards_++ % kSinkSample == 0) {
    const double started = clock_();
    forward(pattern, match);
    sampled_sink_seconds_ += clock_() - started;
    ++sampled_forwards_;
  } else {
    forward(pattern, match);
  }
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
    const double started = timing_ ? clock_() : 0;
    const Status s = call(*candidate.detector);
    if (timing_) candidate.cpu_seconds += clock_() - started;
    if (c == 0) {
      prior = s;
    } else if (!s) {
      candidate.failed = true;  // the prior is the authority on errors
    }
  }
  ++calls_;
  events_ += events;
  if (timing_) timed_events_ += events;
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

Result<std::string> TrialDetector::exportModel(std::string_view format) const {
  return runningDetector().exportModel(format);
}

std::optional<DetectorState> TrialDetector::state() const { return runningDetector().state(); }

std::optional<TrialOutcome> TrialDetector::outcome() const {
  std::lock_guard lock(outcome_mu_);
  return outcome_;
}

std::string TrialDetector::running() const {
  std::lock_guard lock(outcome_mu_);
  return running_;
}

double TrialDetector::cpuOf(size_t c) const {
  double cpu = candidates_[c].cpu_seconds;
  if (c == 0 && sampled_forwards_ > 0) {
    cpu -= sampled_sink_seconds_ * static_cast<double>(forwards_) /
           static_cast<double>(sampled_forwards_);
  }
  return std::max(cpu, 0.0);
}

size_t TrialDetector::cheapest() const {
  size_t best = 0;
  for (size_t c = 1; c < candidates_.size(); ++c) {
    if (candidates_[c].failed) continue;
    if (cpuOf(c) < cpuOf(best) * (best == 0 ? limits_.switch_below : 1.0)) best = c;
  }
  return best;
}

bool TrialDetector::over() const {
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
  if (timed_events_ >= limits_.events || spent >= limits_.cpu_seconds) return true;
  return timed_events_ >= limits_.min_events && least <= most * limits_.decisive_below;
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
  for (size_t i = 0; i < candidates_.size(); ++i) out.push_back({candidates_[i].engine, cpuOf(i)});
  return out;
}

void TrialDetector::keep(size_t c, std::string note, std::vector<TrialOutcome::Measured> measured) {
  TrialOutcome outcome;
  outcome.kept = candidates_[c].engine;
  outcome.events = timed_events_;
  outcome.warmup = events_ - timed_events_;
  outcome.note = std::move(note);
  outcome.measured = std::move(measured);
  // The others go (each detector before its sink); the kept one's sink
  // forwards everything from now on.
  deciding_ = false;
  Candidate kept = std::move(candidates_[c]);
  kept.ledger = Ledger();
  candidates_.clear();
  candidates_.push_back(std::move(kept));
  {
    std::lock_guard lock(outcome_mu_);
    running_ = outcome.kept;
    outcome_ = outcome;
  }
  if (on_decided_) on_decided_(outcome);
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
  if (!over()) return;
  // The figures of the trial, before levelWith() flushes.
  std::vector<TrialOutcome::Measured> figures = measured();
  const size_t best = cheapest();
  if (best == 0) return keep(0, "", std::move(figures));
  if (!levelWith(best)) {
    return keep(0,
                candidates_[best].engine + "'s matches did not line up with " +
                    candidates_[0].engine + "'s at the switch",
                std::move(figures));
  }
  keep(best, "", std::move(figures));
}

Result<AutoTrial> makeAutoTrial(std::string_view prior, const DetectorOptions& options,
                                MatchSink* out, MultiMatchSink* out_many, const EngineMaker& make,
                                TrialLimits limits) {
  AutoTrial made;
  const std::vector<std::string_view> challengers = trialChallengers(prior);
  if (challengers.empty()) return made;
  auto slack = slackOption(options);
  if (!slack) return slack.status();
  const DetectorOptions engine_options = options.without("slack");
  auto trial = out_many != nullptr ? std::make_unique<TrialDetector>(*out_many, limits)
                                   : std::make_unique<TrialDetector>(*out, limits);
  auto maker = [&](std::string_view engine) {
    return [&, engine](MatchSink& one, MultiMatchSink& many) {
      return make(engine, engine_options, one, many);
    };
  };
  if (Status s = trial->addCandidate(std::string(prior), maker(prior)); !s) return s;
  std::string against;
  for (std::string_view engine : challengers) {
    if (trial->addCandidate(std::string(engine), maker(engine))) {
      against += (against.empty() ? "" : ", ") + std::string(engine);
    }
  }
  if (against.empty()) return made;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%g", limits.cpu_seconds * 1e3);
  made.describe = "trial against " + against + " over " + std::to_string(limits.events) +
                  " events after the first " + std::to_string(limits.warmup_events) + ", or " + ms +
                  " ms of CPU";
  made.trial = trial.get();
  made.detector =
      orderAndGuard("engine 'auto' detector (" + std::string(prior) + ", " + against + ")", nullptr,
                    std::move(trial), *slack);
  return made;
}

}  // namespace cepbus::plugin
