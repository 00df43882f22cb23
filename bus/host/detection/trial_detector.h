#pragma once

// engine="auto" decided at run time: a short trial of the engines that run
// the queries, then the cheaper one alone (docs/engines.md, "Choosing an
// engine: auto").
//
// No rule over the query text picks the faster engine on every stream: the
// NFA's partitioned stacks win on a dense stream of the pattern's own type,
// the merged Petri net on a sparse one. So TrialDetector runs its candidates
// side by side on the first events, measures each one's CPU (the thread CPU
// clock around each candidate's call), keeps the cheapest and drops the
// others. The first candidate is the prior (plugin::chooseEngine's pick): it
// alone is heard during the trial, and it stays when the others are not
// clearly cheaper, when they fail, or when the switch cannot be made exact.
//
// Exactness. During the trial the prior's matches go to the output and each
// other candidate's are only booked against them: a ledger per challenger
// holds the multiset difference of what the prior and the challenger have
// reported (keyed by pattern, bound events and element bounds). Engines
// report a match at different moments (the nfa's batched construction at
// the next batch boundary or at flush), so at the decision the ledger may
// not be empty; then both are flushed (Detector::flush: every match still
// pending is reported, and more events may follow), which brings two correct
// engines level. The switch happens only with an empty ledger, at a call
// boundary: the output so far is exactly what the kept engine has reported,
// and from then on its own reports are the rest. Otherwise the prior stays.
// A stream that ends during the trial yields the prior's matches only.
//
// Cost. The trial's overhead is the dropped candidates' work on its events,
// so it ends as soon as its decision is settled: the timed events are cut
// into blocks, and once the last few blocks each put every challenger on the
// same side of the switch threshold (TrialLimits::switch_below), more
// blocks would most likely say the same. A difference too close to the
// threshold for that, where blocks fall on either side, runs to the bounds
// in events and CPU; there keeping either engine costs about the same.
// Measuring fairly:
// the first events (one-time costs) are not timed, the candidates take turns
// going first on each call (the first to touch a batch pays its cache
// misses), and what the trial does with a match is not the engine's: in a
// timed call a candidate's matches are only copied aside and booked once
// its call has returned, and what the output sink spends on the prior's
// (forwarded at once: a Match is valid only during onMatch) is sampled
// (every kSinkSample-th forward timed, net of the clock's own cost) and its
// median taken off.
//
// Thread safety: a Detector (one thread at a time), except outcome() and
// running(), which may be called from any thread.

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"

namespace cepbus::plugin {

// How long a trial lasts: after `warmup_events` (run by every candidate,
// not timed), until the candidates have seen `events` timed events or have
// spent `cpu_seconds` between them, whichever comes first (at the end of
// the call that crosses it); sooner when, from `min_events` timed events
// on, one is already at most `decisive_below` of another's CPU, or from the
// first block on at most `overwhelming_below` of it where that other has
// taken `overwhelming_cpu_seconds` or more, or when the last
// `agreeing_blocks` blocks of `block_events` timed events agree (each block
// ends at the first call boundary past its size): in each of them every
// challenger took less than `switch_below` of the prior's CPU, or in each
// of them it did not. 0 agreeing blocks: only the others end it; 0 for
// overwhelming_below: no decision on the first block.
// docs/engines.md says why these numbers.
struct TrialLimits {
  uint64_t warmup_events = 256;
  uint64_t events = 4096;
  double cpu_seconds = 0.010;
  uint64_t min_events = 512;
  double decisive_below = 0.5;
  // A gap this wide is not one block's timing noise (a block of the slower
  // engine at twice its usual CPU leaves the engines 2x apart, not 4x), and
  // waiting for min_events would only add the loser's work: at 100 patterns
  // a fifth to a quarter of what auto costs over the engine it keeps. Not
  // on blocks of a few microseconds, though: there the output's cost taken
  // off the prior's figure (sampled) can bring it near 0.
  double overwhelming_below = 0.25;
  double overwhelming_cpu_seconds = 0.0005;
  uint64_t block_events = 256;
  uint64_t agreeing_blocks = 3;
  // A challenger replaces the prior only when it took less than this share
  // of the prior's CPU (over the whole trial, or in each agreeing block): the
  // static rule breaks near-ties, where measurement noise would otherwise
  // decide. A tie, either engine within 10 % of the other, is on the prior's
  // side of it.
  double switch_below = 0.9;
  // Matches one candidate has reported and another not yet; beyond it the
  // engines are too far apart to be compared, and the prior stays.
  size_t max_unbalanced = 1 << 16;
};

// What a trial measured and kept.
struct TrialOutcome {
  struct Measured {
    std::string engine;
    double cpu_seconds = 0;
  };
  std::string kept;
  std::vector<Measured> measured;  // the prior first
  uint64_t events = 0;             // how many timed events each candidate saw
  uint64_t warmup = 0;             // the untimed events before them
  std::string note;                // why the cheapest was not kept; usually empty
  // Why the trial ended before its bounds ("the last 3 blocks of 256 events
  // agreed"); empty when it ran to them.
  std::string ended_early;

  // "kept nfa: petri 5.01 ms, nfa 1.62 ms CPU on 4096 events after the first
  // 256", then "; <ended_early>" and " (<note>)" when they are not empty.
  std::string describe() const;
};

// The calling thread's CPU time in seconds.
double threadCpuSeconds();

class TrialDetector final : public Detector {
 public:
  using CpuClock = std::function<double()>;
  // Makes one candidate's detector reporting to the sinks it is given: `one`
  // for a single-query detector, `many` for createMany().
  using Maker =
      std::function<Result<std::unique_ptr<Detector>>(MatchSink& one, MultiMatchSink& many)>;
  // How often the output sink's cost is timed during the trial.
  static constexpr uint64_t kSinkSample = 16;

  // Reports to `out` (a single query) or `out_many` (several), which must
  // outlive it.
  explicit TrialDetector(MatchSink& out, TrialLimits limits = {},
                         CpuClock clock = threadCpuSeconds);
  explicit TrialDetector(MultiMatchSink& out_many, TrialLimits limits = {},
                         CpuClock clock = threadCpuSeconds);
  ~TrialDetector() override;

  // Adds the candidate `engine` made by `make`, which reports to the sinks it
  // is handed; the first added is the prior. Its error when make fails (the
  // engine refuses the queries): the candidate is then not added. Before
  // the first event only.
  Status addCandidate(std::string engine, const Maker& make);
  size_t candidates() const { return candidates_.size(); }
  // Called once, on the detector's thread, when the trial decides. Before
  // the first event only.
  void onDecided(std::function<void(const TrialOutcome&)> callback) {
    on_decided_ = std::move(callback);
  }

  Status onEvent(const EventPtr& event) override;
  Status onEvents(std::span<const EventPtr> events) override;
  Status flush() override;
  // To every candidate during the trial, else to the running engine.
  Status onWatermark(Timestamp t) override;
  // The running engine's (during the trial, the prior's).
  Result<std::string> exportModel(std::string_view format) const override;
  std::optional<DetectorState> state() const override;
  // Snapshots (section "trial", version 1): before the first event, an
  // empty trial; once the trial has decided, its outcome and then the kept
  // engine's state, which a restored TrialDetector runs alone, with no trial
  // (its onDecided() callback hears the outcome as restored).
  // While the trial runs a checkpoint is refused, saying so: the candidates'
  // ledgers and timings are not written. The version is the trial's own, 0
  // when no candidate snapshots; the kept engine's state carries its own.
  uint32_t snapshotVersion() const override;
  Status snapshot(SnapshotWriter& out) const override;
  Status restore(SnapshotReader& in) override;

  // Any thread: the trial's outcome once it has decided.
  std::optional<TrialOutcome> outcome() const;
  // The engine whose matches are the output now: the prior's until the
  // trial decides.
  std::string running() const;

 private:
  class CandidateSink;
  struct MatchKey {
    size_t pattern;
    std::vector<EventPtr> events;
    std::vector<uint32_t> ends;
    bool operator==(const MatchKey& other) const = default;
  };
  struct MatchKeyHash {
    size_t operator()(const MatchKey& key) const;
  };
  // The prior's reported matches minus one challenger's: only the entries
  // whose count differs.
  using Ledger = std::unordered_map<MatchKey, int64_t, MatchKeyHash>;
  // The matches one candidate reported in a timed call, copied in order
  // into flat arrays (once warm, no allocation per match), until release()
  // hands each to `to` as a Match again, to be booked (it has no composer).
  class HeldMatches {
   public:
    void add(size_t pattern, const Match& match);
    void release(const std::function<void(size_t pattern, const Match& match)>& to);

   private:
    struct Entry {
      size_t pattern;
      size_t first_event;  // in events_
      size_t events;
      size_t first_end;  // in ends_
      size_t ends;
    };
    std::vector<Entry> entries_;
    std::vector<EventPtr> events_;
    std::vector<uint32_t> ends_;
  };
  struct Candidate {
    std::string engine;
    std::unique_ptr<CandidateSink> sink;  // declared before detector: outlives it
    std::unique_ptr<Detector> detector;
    double cpu_seconds = 0;
    double block_start = 0;      // cpuOf() when the open block began
    std::vector<double> blocks;  // the CPU of each closed block
    bool failed = false;         // a challenger that returned an error: out of the trial
    Ledger ledger;               // challengers only
    HeldMatches held;
  };
  // Why the trial ends at a call boundary.
  enum class Ending { kNotYet, kBounds, kClearWinner, kOverwhelmingWinner, kSettled };

  TrialDetector(MatchSink* out, MultiMatchSink* out_many, TrialLimits limits, CpuClock clock);

  // A candidate reported `match` of query `pattern`.
  void reported(size_t candidate, size_t pattern, const Match& match);
  void forward(size_t pattern, const Match& match);
  // The prior's forward, a sample of them timed.
  void forwardTimed(size_t pattern, const Match& match);
  // Books candidate `c`'s `match` in the ledgers.
  void book(size_t c, size_t pattern, const Match& match);
  // Runs `call` (on `events` events) on every candidate in the trial,
  // timing each once past the warm-up; the prior's status.
  Status everyCandidate(const std::function<Status(Detector&)>& call, size_t events);
  // At a call boundary: ends the trial once its limits are reached.
  void maybeDecide();
  // Candidate `c`'s CPU in the trial: for the prior, without the output's
  // sampled cost.
  double cpuOf(size_t c) const;
  // Closes the open block once it has its events.
  void maybeCloseBlock();
  // Whether the last agreeing_blocks blocks put each challenger on one side
  // of switch_below.
  bool settled() const;
  Ending ending() const;
  // What TrialOutcome::ended_early says for `end`.
  std::string endedEarly(Ending end) const;
  // Each candidate's CPU over the whole trial, or over its last `blocks`
  // closed blocks.
  std::vector<double> cpus() const;
  std::vector<double> cpus(size_t blocks) const;
  // The cheapest candidate by `cpu`, the prior unless another took less
  // than switch_below of its CPU.
  size_t cheapest(const std::vector<double>& cpu) const;
  // Whether the output can move to challenger `c` exactly now (flushing
  // both when their ledger is not empty).
  bool levelWith(size_t c);
  std::vector<TrialOutcome::Measured> measured() const;
  void keep(size_t c, std::string note, std::vector<TrialOutcome::Measured> measured,
            std::string ended_early = "");
  // Ends the trial with candidate `c` running alone, as `outcome` says.
  void adopt(size_t c, const TrialOutcome& outcome);
  // The kept candidate is candidates_[0] once the trial has decided.
  Detector& runningDetector() const { return *candidates_.front().detector; }

  MatchSink* const out_;
  MultiMatchSink* const out_many_;
  const TrialLimits limits_;
  const CpuClock clock_;
  std::vector<Candidate> candidates_;
  bool deciding_ = true;             // in the trial
  uint64_t events_ = 0;              // events offered during the trial
  uint64_t timed_events_ = 0;        // of those, past the warm-up
  uint64_t block_start_events_ = 0;  // timed_events_ when the open block began
  uint64_t calls_ = 0;               // calls during the trial: who goes first
  bool timing_ = false;              // in a timed call
  bool unbalanced_overflow_ = false;
  bool holding_ = false;  // in a timed call: matches go to the candidate's `held`
  // The output sink's sampled cost during the trial.
  double clock_cost_ = 0;  // an empty interval of clock_
  uint64_t timed_forwards_ = 0;
  std::vector<double> sink_samples_;
  std::function<void(const TrialOutcome&)> on_decided_;

  mutable Mutex outcome_mu_;
  std::optional<TrialOutcome> outcome_ GUARDED_BY(outcome_mu_);
  std::string running_ GUARDED_BY(outcome_mu_);
};

}  // namespace cepbus::plugin
