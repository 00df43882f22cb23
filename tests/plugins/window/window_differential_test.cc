// The window engine against a brute-force reference: random window queries
// (tumbling, sliding, session; WHERE, GROUP BY, HAVING, every aggregate,
// EMIT EVERY)
// over random streams, fed to the plugin (loaded through the ABI) behind the
// host's reordering with a random maximum delay, in three forms: in ts order,
// shuffled within the maximum delay, and with late events. The reference
// enumerates every window of every group from the accepted events, computes
// each aggregate in one pass of its own over the window's events, and drops
// the late ones the way the host defines them (more than the maximum delay
// behind the newest arrival); the late events must be the host's too. With
// EMIT EVERY d it adds, for every multiple p of d strictly inside a window
// (or before a session's gap runs out) and after its first event, the
// result over the window's events before p.
//
// The pattern engines, loaded the same way, must refuse a window query.
//
// The reference itself is checked once against SQLite: the same rows in an
// in-memory table, each kind of window written as a GROUP BY.
//
// The regular run is bounded (a fixed seed); CEPBUS_DIFFERENTIAL_CASES=N and
// CEPBUS_DIFFERENTIAL_SEED=S run longer.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/time/reorder.h"
#include "tests/plugins/built_engines.h"
#include "tests/plugins/window/window_test_support.h"

namespace cepbus::plugins::window {
namespace {

using plugins::testing::describeEvents;
using plugins::testing::envOr;
using plugins::testing::loadBuiltEngine;

const char* const kAggregates[] = {"count(t)", "count(t.v)",  "sum(t.v)",   "avg(t.v)", "min(t.v)",
                                   "max(t.v)", "stddev(t.v)", "first(t.v)", "last(t.v)"};

// A random query, as text and as what the reference needs of it.
struct Case {
  std::string text;
  pattern::WindowKind kind = pattern::WindowKind::kTumbling;
  int64_t length = 0;
  int64_t every = 0;
  std::optional<int64_t> where_above;  // WHERE t.v > c
  std::vector<std::string> group_by;   // of "g", "h"
  int having = 0;                      // 0 none, 1 count(t) >= c, 2 sum(t.v) > c, 3 max(t.v) < c
  int64_t having_value = 0;
  int64_t emit_every = 0;  // EMIT EVERY d, 0 when absent
};

Case randomCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Case c;
  c.kind = static_cast<pattern::WindowKind>(pick(0, 2));
  c.length = pick(1, 20);
  c.every = c.kind == pattern::WindowKind::kSliding ? pick(1, c.length) : c.length;
  if (pick(0, 1) == 1) c.where_above = pick(-3, 8);
  const int64_t grouping = pick(0, 2);
  if (grouping >= 1) c.group_by.push_back("g");
  if (grouping == 2) c.group_by.push_back("h");
  c.having = static_cast<int>(pick(0, 3));
  c.having_value = c.having == 1 ? pick(1, 4) : pick(0, 30);
  c.text = "FROM T t";
  if (c.where_above) c.text += " WHERE t.v > " + std::to_string(*c.where_above);
  switch (c.kind) {
    case pattern::WindowKind::kTumbling:
      c.text += " WINDOW TUMBLING " + std::to_string(c.length);
      break;
    case pattern::WindowKind::kSliding:
      c.text += " WINDOW SLIDING " + std::to_string(c.length) + " EVERY " + std::to_string(c.every);
      break;
    case pattern::WindowKind::kSession:
      c.text += " WINDOW SESSION GAP " + std::to_string(c.length);
      break;
  }
  for (size_t i = 0; i < c.group_by.size(); ++i) {
    c.text += (i == 0 ? " GROUP BY t." : ", t.") + c.group_by[i];
  }
  const char* having[] = {"", "count(t) >= ", "sum(t.v) > ", "max(t.v) < "};
  if (c.having != 0)
    c.text += std::string(" HAVING ") + having[c.having] + std::to_string(c.having_value);
  c.text += " RETURN R(";
  for (const std::string& g : c.group_by)
    c.text.append("t.").append(g).append(" AS ").append(g).append(", ");
  for (size_t i = 0; i < std::size(kAggregates); ++i) {
    c.text.append(i > 0 ? ", " : "")
        .append(kAggregates[i])
        .append(" AS a")
        .append(std::to_string(i));
  }
  c.text += ")";
  if (pick(0, 2) == 0) {
    c.emit_every = pick(1, 8);
    c.text += " EMIT EVERY " + std::to_string(c.emit_every);
  }
  return c;
}

// Events of type T (and some U, which only move time) in ts order; g, h and
// v are sometimes missing, v sometimes a half or a string.
std::vector<EventPtr> randomStream(std::mt19937_64& rng, size_t n) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<EventPtr> events;
  Timestamp ts = pick(-10, 5);
  for (size_t i = 0; i < n; ++i) {
    ts += pick(0, 4) == 0 ? pick(5, 25) : pick(0, 3);
    EventBuilder b(pick(0, 9) == 0 ? "U" : "T");
    b.at(ts);
    if (pick(0, 9) != 0) b.set("g", pick(0, 2));
    if (pick(0, 1) == 0) b.set("h", pick(0, 1) == 0 ? "x" : "y");
    const int64_t form = pick(0, 19);
    if (form == 0) {
      b.set("v", "n/a");
    } else if (form <= 3) {
      b.set("v", static_cast<double>(pick(-10, 30)) / 2);
    } else if (form != 4) {
      b.set("v", pick(-5, 20));
    }
    events.push_back(b.build());
  }
  return events;
}

// Moves each event up to `delay` behind its ts in arrival order, so that
// every event stays within the maximum delay of the newest before it.
std::vector<EventPtr> shuffledWithin(std::vector<EventPtr> events, int64_t delay,
                                     std::mt19937_64& rng) {
  std::vector<std::pair<Timestamp, size_t>> arrival;
  for (size_t i = 0; i < events.size(); ++i) {
    arrival.emplace_back(events[i]->ts() + std::uniform_int_distribution<int64_t>(0, delay)(rng),
                         i);
  }
  std::stable_sort(arrival.begin(), arrival.end());
  std::vector<EventPtr> out;
  out.reserve(arrival.size());
  for (const auto& [at, i] : arrival) out.push_back(events[i]);
  return out;
}

// Some events moved far back: many of them arrive late.
std::vector<EventPtr> withLateEvents(std::vector<EventPtr> events, std::mt19937_64& rng) {
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
      const size_t to =
          std::min(events.size() - 1, i + std::uniform_int_distribution<size_t>(1, 15)(rng));
      std::rotate(events.begin() + static_cast<std::ptrdiff_t>(i),
                  events.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                  events.begin() + static_cast<std::ptrdiff_t>(to) + 1);
    }
  }
  return events;
}

// One result: window bounds and the values by name; doubles compared with a
// tolerance, since a window's sums merge panes in an order of their own.
struct Row {
  Timestamp start = 0;
  Timestamp ts = 0;
  std::map<std::string, Value> attrs;
};

std::string describe(const Row& r) {
  std::string out = "[" + std::to_string(r.start) + "," + std::to_string(r.ts) + "]";
  for (const auto& [name, v] : r.attrs) out += " " + name + "=" + v.toString();
  return out;
}

bool sameRow(const Row& a, const Row& b) {
  if (a.start != b.start || a.ts != b.ts || a.attrs.size() != b.attrs.size()) return false;
  for (const auto& [name, v] : a.attrs) {
    auto it = b.attrs.find(name);
    if (it == b.attrs.end()) return false;
    const Value& w = it->second;
    if (v.kind() == Value::Kind::kDouble || w.kind() == Value::Kind::kDouble) {
      if (!v.isNumber() || !w.isNumber() ||
          std::fabs(v.toDouble() - w.toDouble()) > 1e-9 * std::max(1.0, std::fabs(v.toDouble()))) {
        return false;
      }
    } else if (!(v == w)) {
      return false;
    }
  }
  return true;
}

Row rowOf(const Event& e) {
  Row r{e.start(), e.ts(), {}};
  for (const Attribute& a : e.attributes()) r.attrs[std::string(a.name.name())] = a.value;
  return r;
}

const Value* attr(const Event& e, const char* name) { return e.find(Symbol::intern(name)); }

// The reference's value of every aggregate over `events` (in stream order),
// each computed on its own.
std::vector<Value> aggregatesOf(const std::vector<const Event*>& events) {
  std::vector<Value> present;
  std::vector<double> numbers;
  bool all_int = true;
  for (const Event* e : events) {
    const Value* v = attr(*e, "v");
    if (v == nullptr) continue;
    present.push_back(*v);
    if (!v->isNumber()) continue;
    numbers.push_back(v->toDouble());
    all_int &= v->kind() == Value::Kind::kInt;
  }
  double sum = 0;
  for (double d : numbers) sum += d;
  const double n = static_cast<double>(numbers.size());
  std::vector<Value> out;
  out.emplace_back(static_cast<int64_t>(events.size()));
  out.emplace_back(static_cast<int64_t>(present.size()));
  out.push_back(all_int ? Value(static_cast<int64_t>(sum)) : Value(sum));
  out.push_back(numbers.empty() ? Value() : Value(sum / n));
  Value lo, hi;
  for (const Value& v : present) {
    if (!v.isNumber()) continue;
    if (lo.isNull() || v.toDouble() < lo.toDouble()) lo = v;
    if (hi.isNull() || v.toDouble() > hi.toDouble()) hi = v;
  }
  out.push_back(lo);
  out.push_back(hi);
  if (numbers.size() < 2) {
    out.emplace_back();
  } else {
    double squares = 0;
    for (double d : numbers) squares += (d - sum / n) * (d - sum / n);
    out.emplace_back(std::sqrt(squares / (n - 1)));
  }
  out.push_back(present.empty() ? Value() : present.front());
  out.push_back(present.empty() ? Value() : present.back());
  return out;
}

bool havingHolds(const Case& c, const std::vector<Value>& a) {
  switch (c.having) {
    case 1:
      return a[0].toDouble() >= static_cast<double>(c.having_value);
    case 2:
      return a[2].toDouble() > static_cast<double>(c.having_value);
    case 3:
      return !a[5].isNull() && a[5].toDouble() < static_cast<double>(c.having_value);
    default:
      return true;
  }
}

// Every result of `c` over the accepted events, `accepted` in (ts, arrival) order.
std::vector<Row> reference(const Case& c, const std::vector<EventPtr>& accepted) {
  std::map<std::vector<std::string>, std::vector<const Event*>> groups;
  for (const EventPtr& e : accepted) {
    if (e->type() != Symbol::intern("T")) continue;
    if (c.where_above) {
      const Value* v = attr(*e, "v");
      if (v == nullptr || !v->isNumber() ||
          !(v->toDouble() > static_cast<double>(*c.where_above))) {
        continue;
      }
    }
    std::vector<std::string> key;
    for (const std::string& g : c.group_by) {
      const Value* v = attr(*e, g.c_str());
      key.push_back(v == nullptr ? "null" : v->toString());
    }
    groups[key].push_back(e.get());
  }
  std::vector<Row> rows;
  auto result = [&](const std::vector<const Event*>& in, Timestamp start, Timestamp ts,
                    std::optional<bool> partial) {
    if (in.empty()) return;
    const std::vector<Value> a = aggregatesOf(in);
    if (!havingHolds(c, a)) return;
    Row r{start, ts, {}};
    if (partial) r.attrs["partial"] = Value(*partial);
    for (const std::string& g : c.group_by) {
      const Value* v = attr(*in.front(), g.c_str());
      if (v != nullptr) r.attrs[g] = *v;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].isNull()) r.attrs["a" + std::to_string(i)] = a[i];
    }
    rows.push_back(std::move(r));
  };
  // A window's results: with EMIT EVERY, one at each point p in (first, last_point],
  // over its events before p, then the final one.
  auto results = [&](const std::vector<const Event*>& in, Timestamp start, Timestamp ts,
                     Timestamp last_point) {
    if (in.empty()) return;
    if (c.emit_every == 0) return result(in, start, ts, std::nullopt);
    const int64_t d = c.emit_every;
    const Timestamp first = in.front()->ts();
    for (Timestamp p = (first / d - (first % d < 0 ? 1 : 0) + 1) * d; p <= last_point; p += d) {
      std::vector<const Event*> before;
      for (const Event* e : in) {
        if (e->ts() < p) before.push_back(e);
      }
      result(before, start, c.kind == pattern::WindowKind::kSession ? before.back()->ts() : p - 1,
             true);
    }
    result(in, start, ts, false);
  };
  for (const auto& [key, events] : groups) {
    if (c.kind == pattern::WindowKind::kSession) {
      std::vector<const Event*> session;
      for (const Event* e : events) {
        if (!session.empty() && e->ts() - session.back()->ts() > c.length) {
          results(session, session.front()->ts(), session.back()->ts(),
                  session.back()->ts() + c.length);
          session.clear();
        }
        session.push_back(e);
      }
      if (!session.empty()) {
        results(session, session.front()->ts(), session.back()->ts(),
                session.back()->ts() + c.length);
      }
      continue;
    }
    const Timestamp lo = events.front()->ts() - c.length;
    const Timestamp hi = events.back()->ts();
    for (Timestamp start = lo - ((lo % c.every) + c.every) % c.every; start <= hi;
         start += c.every) {
      std::vector<const Event*> in;
      for (const Event* e : events) {
        if (e->ts() >= start && e->ts() < start + c.length) in.push_back(e);
      }
      results(in, start, start + c.length - 1, start + c.length - 1);
    }
  }
  return rows;
}

struct LateRecorder : plugin::LateSink {
  void onLate(const EventPtr& event, Timestamp) override { late.push_back(event->id()); }
  std::vector<EventId> late;
};

// The events the host accepts from `arrival` with maximum delay `delay`, in
// the order it releases them, and the ids it calls late.
std::pair<std::vector<EventPtr>, std::vector<EventId>> hostView(
    const std::vector<EventPtr>& arrival, int64_t delay) {
  std::vector<EventPtr> accepted;
  std::vector<EventId> late;
  Timestamp newest = INT64_MIN;
  for (const EventPtr& e : arrival) {
    if (newest != INT64_MIN && e->ts() < newest - delay) {
      late.push_back(e->id());
      continue;
    }
    newest = std::max(newest, e->ts());
    accepted.push_back(e);
  }
  std::stable_sort(accepted.begin(), accepted.end(),
                   [](const EventPtr& a, const EventPtr& b) { return a->ts() < b->ts(); });
  return {accepted, late};
}

bool sameRows(std::vector<Row> a, std::vector<Row> b) {
  auto order = [](const Row& x, const Row& y) { return describe(x) < describe(y); };
  std::sort(a.begin(), a.end(), order);
  std::sort(b.begin(), b.end(), order);
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), sameRow);
}

TEST(WindowDifferentialTest, MatchesTheBruteForceReference) {
  plugin::PluginPtr plugin = loadBuiltEngine("window");
  ASSERT_NE(plugin, nullptr);
  const uint64_t seed = envOr("CEPBUS_DIFFERENTIAL_SEED", 42);
  const uint64_t cases = envOr("CEPBUS_DIFFERENTIAL_CASES", 300);
  std::mt19937_64 rng(seed);
  size_t results = 0;
  size_t partial_results = 0;
  size_t late_events = 0;
  for (uint64_t n = 0; n < cases; ++n) {
    const Case c = randomCase(rng);
    auto query = pattern::parseQuery(c.text);
    ASSERT_TRUE(query.isOk()) << c.text << ": " << query.status().message();
    const int64_t delay = std::uniform_int_distribution<int64_t>(0, 6)(rng);
    const std::vector<EventPtr> ordered =
        randomStream(rng, std::uniform_int_distribution<size_t>(1, 60)(rng));
    const std::vector<EventPtr> streams[] = {ordered, shuffledWithin(ordered, delay, rng),
                                             withLateEvents(ordered, rng)};
    for (const std::vector<EventPtr>& arrival : streams) {
      testing::ResultSink sink;
      auto inner = plugin->createDetector("window", *query, {}, sink);
      ASSERT_TRUE(inner.isOk()) << inner.status().message();
      LateRecorder late;
      plugin::ReorderingDetector detector(std::move(inner).value(), delay, &late);
      for (const EventPtr& e : arrival) ASSERT_TRUE(detector.onEvent(e).isOk());
      ASSERT_TRUE(detector.flush().isOk());
      const auto [accepted, expected_late] = hostView(arrival, delay);
      EXPECT_EQ(late.late, expected_late);
      std::vector<Row> got;
      for (const EventPtr& e : sink.results) got.push_back(rowOf(*e));
      const std::vector<Row> want = reference(c, accepted);
      if (!sameRows(got, want)) {
        std::string g, w;
        for (const Row& r : got) g += describe(r) + "\n";
        for (const Row& r : want) w += describe(r) + "\n";
        FAIL() << "case " << n << " (seed " << seed << "), max delay " << delay << ": " << c.text
               << "\nengine:\n"
               << g << "reference:\n"
               << w << "arrival:\n"
               << describeEvents(arrival);
      }
      results += want.size();
      partial_results +=
          static_cast<size_t>(std::count_if(want.begin(), want.end(), [](const Row& r) {
            auto it = r.attrs.find("partial");
            return it != r.attrs.end() && it->second == Value(true);
          }));
      late_events += expected_late.size();
    }
  }
  // The cases must exercise what they claim to: results, and late events.
  EXPECT_GT(results, cases);
  EXPECT_GT(partial_results, cases / 10);
  EXPECT_GT(late_events, 0u);
}

// An in-memory SQLite database with the rows ev(ts, g, v), v only numbers
// or NULL (SQL's sum and avg would read a string as 0).
class SqliteRows {
 public:
  explicit SqliteRows(const std::vector<EventPtr>& events) {
    EXPECT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    exec("CREATE TABLE ev(ts INTEGER, g, v)");
    sqlite3_stmt* insert = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, "INSERT INTO ev VALUES (?, ?, ?)", -1, &insert, nullptr),
              SQLITE_OK);
    for (const EventPtr& e : events) {
      sqlite3_bind_int64(insert, 1, e->ts());
      bind(insert, 2, attr(*e, "g"));
      bind(insert, 3, attr(*e, "v"));
      EXPECT_EQ(sqlite3_step(insert), SQLITE_DONE);
      sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
  }
  ~SqliteRows() { sqlite3_close(db_); }
  SqliteRows(const SqliteRows&) = delete;
  SqliteRows& operator=(const SqliteRows&) = delete;

  void exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << sql << ": " << (error != nullptr ? error : "");
    sqlite3_free(error);
  }

  // The rows of `sql`, whose columns are start, ts, g, then a0 .. a5 (the
  // reference's count(t) .. max(t.v)) and a6 the sample variance.
  std::vector<Row> rows(const std::string& sql) {
    sqlite3_stmt* select = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &select, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    std::vector<Row> out;
    while (sqlite3_step(select) == SQLITE_ROW) {
      Row r{sqlite3_column_int64(select, 0), sqlite3_column_int64(select, 1), {}};
      for (int i = 2; i < sqlite3_column_count(select); ++i) {
        const std::string name = i == 2 ? "g" : "a" + std::to_string(i - 3);
        switch (sqlite3_column_type(select, i)) {
          case SQLITE_INTEGER:
            r.attrs[name] = Value(static_cast<int64_t>(sqlite3_column_int64(select, i)));
            break;
          case SQLITE_FLOAT:
            r.attrs[name] = Value(sqlite3_column_double(select, i));
            break;
          default:
            break;  // NULL: Missing, as the reference leaves it out
        }
      }
      out.push_back(std::move(r));
    }
    sqlite3_finalize(select);
    return out;
  }

 private:
  static void bind(sqlite3_stmt* s, int i, const Value* v) {
    if (v == nullptr) {
      sqlite3_bind_null(s, i);
    } else if (v->kind() == Value::Kind::kInt) {
      sqlite3_bind_int64(s, i, v->asInt());
    } else {
      sqlite3_bind_double(s, i, v->toDouble());
    }
  }

  sqlite3* db_ = nullptr;
};

// Averages and variances to 9 decimals, which the two compute in orders of
// their own, so that both sets of rows sort alike.
std::vector<Row> rounded(std::vector<Row> rows) {
  for (Row& r : rows) {
    for (const char* name : {"a3", "a6"}) {
      auto it = r.attrs.find(name);
      if (it != r.attrs.end()) it->second = Value(std::round(it->second.toDouble() * 1e9) / 1e9);
    }
  }
  return rows;
}

// The reference's rows of `c` (GROUP BY t.g, no WHERE or HAVING) as SQLite's
// columns give them: the variance for stddev, nothing of first and last.
std::vector<Row> referenceAsSql(const Case& c, const std::vector<EventPtr>& events) {
  std::vector<Row> out = reference(c, events);
  for (Row& r : out) {
    r.attrs.erase("a7");
    r.attrs.erase("a8");
    auto sd = r.attrs.find("a6");
    if (sd != r.attrs.end()) sd->second = Value(sd->second.toDouble() * sd->second.toDouble());
  }
  return rounded(std::move(out));
}

TEST(WindowDifferentialTest, TheReferenceAgreesWithSqliteGroupBy) {
  std::mt19937_64 rng(7);
  std::vector<EventPtr> events;
  for (const EventPtr& e : randomStream(rng, 400)) {
    const Value* v = attr(*e, "v");
    if (e->type() == Symbol::intern("T") && (v == nullptr || v->isNumber())) events.push_back(e);
  }
  SqliteRows db(events);
  // The aggregates, and a6 the sample variance (SQLite has no stddev).
  const std::string aggregates =
      "count(*), count(v), coalesce(sum(v), 0), avg(v), min(v), max(v), "
      "CASE WHEN count(v) > 1 THEN (sum(v * v) - 1.0 * sum(v) * sum(v) / count(v)) / (count(v) - "
      "1) "
      "END";
  Case tumbling;
  tumbling.kind = pattern::WindowKind::kTumbling;
  tumbling.length = tumbling.every = 7;
  tumbling.group_by = {"g"};
  Case sliding = tumbling;
  sliding.kind = pattern::WindowKind::kSliding;
  sliding.length = 12;
  sliding.every = 5;
  Case session = tumbling;
  session.kind = pattern::WindowKind::kSession;
  session.length = 3;
  session.every = 0;
  // Window starts from below the first event to the last one.
  db.exec("CREATE TABLE starts(s INTEGER)");
  for (Timestamp s = -20; s <= events.back()->ts(); ++s) {
    db.exec("INSERT INTO starts VALUES (" + std::to_string(s) + ")");
  }
  const std::pair<const Case*, std::string> queries[] = {
      {&tumbling, "SELECT ts - ((ts % 7) + 7) % 7 AS s, ts - ((ts % 7) + 7) % 7 + 6, g, " +
                      aggregates + " FROM ev GROUP BY s, g"},
      {&sliding, "SELECT s, s + 11, g, " + aggregates +
                     " FROM starts JOIN ev ON ts >= s AND ts < s + 12 WHERE ((s % 5) + 5) % 5 = 0 "
                     "GROUP BY s, g"},
      // A session starts where the gap to the group's previous event is over 3.
      {&session,
       "WITH marked AS (SELECT rowid AS r, ts, g, v, CASE WHEN ts - lag(ts) OVER (PARTITION BY "
       "g ORDER BY ts, rowid) > 3 THEN 1 ELSE 0 END AS opens FROM ev), "
       "numbered AS (SELECT ts, g, v, sum(opens) OVER (PARTITION BY g ORDER BY ts, r ROWS "
       "UNBOUNDED PRECEDING) AS n FROM marked) "
       "SELECT min(ts), max(ts), g, " +
           aggregates + " FROM numbered GROUP BY g, n"},
  };
  for (const auto& [c, sql] : queries) {
    const std::vector<Row> want = rounded(db.rows(sql));
    const std::vector<Row> got = referenceAsSql(*c, events);
    EXPECT_GT(want.size(), 20u) << sql;
    if (!sameRows(got, want)) {
      std::string g, w;
      for (const Row& r : got) g += describe(r) + "\n";
      for (const Row& r : want) w += describe(r) + "\n";
      ADD_FAILURE() << pattern::windowKindName(c->kind) << ": " << sql << "\nreference:\n"
                    << g << "SQLite:\n"
                    << w;
    }
  }
}

// A window query read as its source element would run on a pattern engine
// as a single-event pattern; each refuses it instead, naming the engine to use.
TEST(WindowDifferentialTest, PatternEnginesRefuseWindowQueries) {
  auto query = pattern::parseQuery("FROM T t WINDOW TUMBLING 10 RETURN R(count(t))");
  ASSERT_TRUE(query.isOk());
  for (const char* engine : {"nfa", "algebra", "petri", "join"}) {
    plugin::PluginPtr plugin = loadBuiltEngine(engine);
    ASSERT_NE(plugin, nullptr);
    testing::ResultSink sink;
    auto detector = plugin->createDetector(engine, *query, {}, sink);
    ASSERT_FALSE(detector.isOk()) << engine;
    EXPECT_EQ(detector.status().message(),
              std::string("the ") + engine +
                  " engine runs patterns, not window queries (FROM ... WINDOW tumbling): run it "
                  "with engine window (or auto)");
  }
}

}  // namespace
}  // namespace cepbus::plugins::window
