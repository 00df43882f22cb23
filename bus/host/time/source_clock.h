#pragma once

// SourceClock: the event time of a stream merged from several sources (the
// publishing AMQP links of a query, a replay, another query's output), each
// delivering its own events in about timestamp order.
//
// Each source's newest `ts` is kept. A source is **live** while it was heard
// from within the idle timeout: the event time is then the minimum of the
// live sources' newest `ts`, so a slower source still holds back what it may
// precede. A source silent for longer is **idle** and holds nothing back;
// when every source is idle the event time is the newest `ts` of any of
// them. A source idle for kForgetAfter idle timeouts is forgotten (when a
// new one comes), so that links that came and went cost nothing.
//
// A source that ended cleanly (its link closed, its replay finished) holds
// nothing back from then on, without waiting for the idle timeout: it is
// dropped, and an event of it that still comes (one resent after the end)
// counts towards the newest ts only.
//
// A checkpoint keeps the clock as two figures (save()): its event time and the
// newest ts. The links it heard die with the process, so after a restart
// restore() takes them back as one source at that event time, heard at the
// restart: it holds the time there for an idle timeout, as the silent links
// would have (what the journal redelivers from them is not late), and then
// lets it move up to the newest ts, so the events a restored detection holds
// back for the slowest source are released even if nothing more comes.
//
// The wall clock is the caller's (`now`), so a test drives it with a fake
// one; wallTime() turns a wall-clock time into `ts` units for a stream that
// declares its time unit (the owner's choice: when every source is idle,
// event time may then follow the wall clock).
//
// Cost: the bus asks for the event time after every event, so it is kept,
// not recomputed: a full pass over the sources happens only when the
// slowest live ones have all moved on, when a source comes back from idle,
// or when the first live one can have gone idle; otherwise heard() and
// eventTime() are O(1). With many publishers at one `ts` (a timestamp in
// seconds), the slowest are counted, so that each moving on is O(1) too.
//
// Thread safety: none (one per detection, on its worker). Ownership: a value.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "bus/core/event.h"
#include "bus/core/pattern/parser.h"

namespace cepbus::plugin {

// The query option that sets the idle timeout, in milliseconds, and its default.
inline constexpr std::string_view kIdleTimeoutOption = "idle_timeout";
inline constexpr std::chrono::milliseconds kDefaultIdleTimeout{2000};

class SourceClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Names a source; 0 is a source too (the events of no known link).
  using SourceId = uint64_t;
  // An idle source is forgotten after this many idle timeouts of silence.
  static constexpr int kForgetAfter = 100;

  explicit SourceClock(std::chrono::milliseconds idle_timeout);

  // `source` delivered an event at `ts` at `now`.
  void heard(SourceId source, Timestamp ts, TimePoint now);
  // `source` ended at `now`: it sends nothing more.
  void ended(SourceId source, TimePoint now);
  // The minimum of the live sources' newest ts; when none is live, the
  // newest ts of any source; nullopt before any source was heard (or after
  // all were forgotten).
  std::optional<Timestamp> eventTime(TimePoint now) const;
  // Whether no source was heard from within the idle timeout (true with none).
  bool allIdle(TimePoint now) const { return idleSources(now) == sources(); }

  // What a checkpoint keeps of the clock (see the top of this file).
  struct Saved {
    Timestamp time;    // eventTime() when saved
    Timestamp newest;  // the newest ts of any source
  };
  // Nullopt before any source was heard.
  std::optional<Saved> save(TimePoint now) const;
  // Before any event: the sources of `saved` as one source, `source` (an id
  // no link has), heard at `now`.
  void restore(SourceId source, const Saved& saved, TimePoint now);

  size_t sources() const { return sources_.size(); }
  size_t idleSources(TimePoint now) const;
  std::chrono::milliseconds idleTimeout() const { return idle_timeout_; }

 private:
  struct Source {
    Timestamp newest;
    TimePoint last_heard;
  };
  bool idle(const Source& source, TimePoint now) const {
    return now - source.last_heard > idle_timeout_;
  }
  // Drops the sources idle for kForgetAfter idle timeouts, keeping their
  // newest ts for eventTime() when none is left, and the ends as old.
  void forget(TimePoint now);
  // The full pass: the live minimum, how many live sources are at it, and
  // when the first live source can go idle.
  void recompute(TimePoint now) const;

  const std::chrono::milliseconds idle_timeout_;
  std::unordered_map<SourceId, Source> sources_;
  // The sources that ended, and when: looked up only when an unknown source
  // is heard, so an event of a known one pays nothing for them.
  std::unordered_map<SourceId, TimePoint> ended_;
  // The newest ts of any source, the forgotten ones included.
  Timestamp newest_ = INT64_MIN;

  // What recompute() found, valid while !stale_ and until valid_until_.
  mutable bool stale_ = true;
  mutable std::optional<Timestamp> live_min_;
  mutable size_t at_min_ = 0;  // live sources whose newest ts is live_min_
  mutable size_t live_ = 0;    // live sources
  mutable TimePoint valid_until_;
};

// `now` in `unit` since the epoch; nullopt for TimeUnit::kNone (a stream whose
// ts has no declared unit has no wall-clock time).
std::optional<Timestamp> wallTime(pattern::TimeUnit unit,
                                  std::chrono::system_clock::time_point now);

// The event time a host moves its detection to on a tick: its sources'
// (SourceClock::eventTime()), and, for a stream that declares its time unit,
// while every source is idle, at least the wall clock in ts units, so that
// windows close and timers fire with no traffic. Never back: a wall clock
// set back holds the time where it went. The bus's CEP query and a cluster
// partition (whose one source is the partition) both take it from here.
//
// Thread safety: none (the owner's, with its SourceClock). Ownership: a value.
class WallClockAdvance {
 public:
  explicit WallClockAdvance(pattern::TimeUnit unit) : unit_(unit) {}

  // `sources`' event time at `now`, moved up to `wall` (in the unit) when
  // every source is idle and the unit is declared; nullopt before any
  // source was heard.
  std::optional<Timestamp> eventTime(const SourceClock& sources, SourceClock::TimePoint now,
                                     std::chrono::system_clock::time_point wall);
  // Whether the wall clock can move the time (a unit is declared).
  bool follows() const { return unit_ != pattern::TimeUnit::kNone; }

 private:
  const pattern::TimeUnit unit_;
  Timestamp wall_time_ = INT64_MIN;  // the wall-clock time it last moved to
};

}  // namespace cepbus::plugin
