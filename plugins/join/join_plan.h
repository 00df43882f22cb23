#pragma once

// The join engine's compiled query (P4): which streams join on which key,
// under which per-pair time bound and probability threshold, and how the
// window is expired, partitioned and spilled.
//
// Accepted queries: `PATTERN AND(T1 a, T2 b, ...)` of two or more single named
// elements and a WHERE made only of key equalities `x.k = y.k` that connect
// every variable, one key attribute per variable, e.g.
//
//   PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate
//   RETURN ClonedPlate(a.plate, a.site, b.site, a.ts, b.ts)
//
// Either every element has its own event type (each type is a stream; pairs
// join events of two different streams), or there are exactly two elements of
// one type (a self-join: any two events of that type). Optional `WITHIN n`
// bounds |t1 - t2| <= n. Anything else is rejected with InvalidArgument.
//
// A pair (e1, e2), e1 arriving first, joins iff its keys are equal,
// |ts2 - ts1| < bound(site1, site2) and p1 * p2 >= threshold, where
// bound = min(time[site1][site2], window) (just `window` without a time
// matrix). Both comparisons follow P4: "|t1 - t2| below the fastest travel
// time" is strict, and a tuple is dropped only when its probability is
// *below* the threshold, so a product equal to the threshold passes.
//
// Immutable once compiled; shared by a detector's dispatcher and workers.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "plugins/join/time_matrix.h"

namespace cepbus::plugins::join {

enum class Expiry : uint8_t {
  kOnInsert,  // P4's real-time mode: stale entries leave the list being probed
  kBatch,     // every deletion_interval time units, scan every list
};

enum class SpillStrategy : uint8_t {
  kNone,
  kWindowHalf,           // the lower-probability half of every list
  kLessThanProbability,  // entries with prob * prob[i] <= Probability, else all
};

struct JoinPlan {
  struct Stream {
    Symbol type;
    Symbol key;       // the key attribute of this stream's events
    std::string var;  // the variable naming it in WHERE and RETURN
  };
  std::vector<Stream> streams;  // one for a self-join, else one per element
  bool self_join = false;
  std::vector<std::string> vars;  // element variables in pattern order

  std::shared_ptr<const TimeMatrix> matrix;  // null: the window alone bounds pairs
  Symbol site;                               // site attribute (with a matrix)
  double threshold = 0;
  // Exclusive bound on |t1 - t2| and on the age of a windowed tuple:
  // an entry is stale once now - ts >= window.
  Timestamp window = 0;

  size_t workers = 1;
  Expiry expiry = Expiry::kOnInsert;
  Timestamp deletion_interval = 0;  // kBatch; defaults to the window
  size_t index_slots = 1u << 14;    // ULI hash buckets per worker, a power of two
  // Tuples the dispatcher gathers before handing them to the workers. Pairs
  // are reported by the onEvent() calls that hand off and by flush(), so a
  // pair waits for about this many more tuples (or flush()): smaller is
  // sooner, larger is faster.
  size_t batch = 1024;

  SpillStrategy spill = SpillStrategy::kNone;
  size_t memory_budget = 0;  // bytes of windowed tuples, all workers together
  std::string spill_dir;
  double spill_probability = 0.8;  // P4's "Probability"
  double spill_m = 3;              // P4's M: spill everything if less than win_size/M would go

  std::shared_ptr<const pattern::CompiledReturn> returns;  // null without RETURN
  pattern::BindingLayout layout;

  // The stream of an event type: an index into `streams`, or -1.
  int streamOf(Symbol type) const {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (streams[i].type == type) return static_cast<int>(i);
    }
    return -1;
  }
  // bound(site1, site2); sites are -1 without a matrix.
  double bound(int32_t site1, int32_t site2) const {
    const double w = static_cast<double>(window);
    if (!matrix) return w;
    const double t = matrix->at(static_cast<size_t>(site1), static_cast<size_t>(site2));
    return t < w ? t : w;
  }
};

using JoinPlanPtr = std::shared_ptr<const JoinPlan>;

// Every option the engine reads (DetectorOptions::checkKnown rejects others).
// time_matrix=CSV, site=ATTR, threshold=P in [0,1], window=N > 0,
// workers=N in [1,64], expiry=on_insert|batch, deletion_interval=N > 0,
// index_slots=N, batch=N in [1, 65536], spill=none|window_half|less_than_probability,
// memory_budget=BYTES, spill_dir=DIR, spill_probability=P, spill_m=M > 0.
// time_matrix and site go together; without a matrix, window (or WITHIN) is
// required; the window defaults to the matrix's largest entry.
Result<JoinPlanPtr> compileJoin(const pattern::Query& query,
                                const plugin::DetectorOptions& options);

}  // namespace cepbus::plugins::join
