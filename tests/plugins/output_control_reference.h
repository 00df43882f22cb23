#pragma once

// The brute-force reference of output control (docs/pattern-language.md,
// "Output control"): of every match of a query (the reference matcher's),
// those EMIT and AFTER MATCH let out, straight from their definitions over
// the whole list — no event time, no holding — for the differential suite
// to hold the host's rules (bus/host/detection/output_control.h) to on every
// engine.

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/value.h"

namespace cepbus::plugins::testing {

class OutputControlReference {
 public:
  // `per_attr`: the query's EMIT ... PER names this attribute of the
  // match's first event (the differential writes PER v0.attr with v0 the
  // pattern's first element, a single one); empty for no PER.
  OutputControlReference(const pattern::Query& query, std::string per_attr)
      : query_(query), per_attr_(std::move(per_attr)) {}

  // The matches (ids in pattern order) of `all` that come out, in any order.
  std::vector<std::vector<EventId>> run(const std::vector<EventPtr>& events,
                                        const std::vector<std::vector<EventId>>& all) const {
    std::unordered_map<EventId, EventPtr> by_id;
    for (const EventPtr& e : events) by_id[e->id()] = e;
    std::vector<M> ms;
    for (const auto& ids : all) {
      M m;
      m.ids = ids;
      for (EventId id : ids) m.events.push_back(by_id.at(id));
      m.start = INT64_MAX;
      m.end = INT64_MIN;
      for (const EventPtr& e : m.events) {
        m.start = std::min(m.start, e->ts());
        m.end = std::max(m.end, e->ts());
      }
      ms.push_back(std::move(m));
    }
    std::sort(ms.begin(), ms.end(), before);
    if (query_.skip_past_last_event) ms = skipPastLastEvent(ms);
    if (query_.emit) {
      ms = query_.emit->kind == pattern::EmitKind::kFirst ? firstEvery(ms) : lastEvery(ms);
    }
    std::vector<std::vector<EventId>> out;
    for (const M& m : ms) out.push_back(m.ids);
    return out;
  }

 private:
  struct M {
    std::vector<EventId> ids;
    std::vector<EventPtr> events;
    Timestamp start = 0;
    Timestamp end = 0;
  };

  // By end, then the bound events by (ts, id) lexicographically.
  static bool before(const M& a, const M& b) {
    if (a.end != b.end) return a.end < b.end;
    auto key = [](const M& m) {
      std::vector<std::pair<Timestamp, EventId>> k;
      for (const EventPtr& e : m.events) k.emplace_back(e->ts(), e->id());
      return k;
    };
    return key(a) < key(b);
  }

  static std::string attrOf(const M& m, const std::string& attr) {
    const Value* v = m.events.front()->find(Symbol::intern(attr));
    return v == nullptr ? "<none>" : v->toString();
  }

  std::string partitionOf(const M& m) const {
    std::string key;
    for (const std::string& a : query_.partition_by) key += attrOf(m, a) + "|";
    return key;
  }

  std::string perKeyOf(const M& m) const { return per_attr_.empty() ? "" : attrOf(m, per_attr_); }

  // Per partition, for each end in turn: of the matches ending there that
  // start after the end of the last one let out, the one starting last (then
  // the first in order).
  std::vector<M> skipPastLastEvent(const std::vector<M>& ms) const {
    std::map<std::string, Timestamp> last_end;
    std::vector<M> out;
    for (size_t i = 0; i < ms.size();) {
      size_t j = i;
      while (j < ms.size() && ms[j].end == ms[i].end) ++j;
      std::map<std::string, const M*> pick;  // per partition, among [i, j)
      for (size_t k = i; k < j; ++k) {
        const std::string p = partitionOf(ms[k]);
        auto last = last_end.find(p);
        if (last != last_end.end() && ms[k].start <= last->second) continue;
        const M*& best = pick[p];
        if (best == nullptr || ms[k].start > best->start) best = &ms[k];
      }
      for (const auto& [p, m] : pick) {
        last_end[p] = m->end;
        out.push_back(*m);
      }
      i = j;
    }
    std::sort(out.begin(), out.end(), before);
    return out;
  }

  // Per key: the first match (in order) ending at least d after the end of
  // the last one let out.
  std::vector<M> firstEvery(const std::vector<M>& ms) const {
    std::map<std::string, Timestamp> last;
    std::vector<M> out;
    for (const M& m : ms) {
      const std::string k = perKeyOf(m);
      auto it = last.find(k);
      if (it != last.end() && m.end < it->second + query_.emit->every) continue;
      last[k] = m.end;
      out.push_back(m);
    }
    return out;
  }

  // Per key and aligned interval [i*d, (i+1)*d) of the end: the last match.
  std::vector<M> lastEvery(const std::vector<M>& ms) const {
    const Timestamp d = query_.emit->every;
    std::map<std::pair<std::string, Timestamp>, const M*> last;
    for (const M& m : ms) {
      const Timestamp interval = m.end >= 0 ? m.end / d : -((-m.end + d - 1) / d);
      last[{perKeyOf(m), interval}] = &m;  // ms is in order: the later one stays
    }
    std::vector<M> out;
    for (const auto& [k, m] : last) out.push_back(*m);
    return out;
  }

  const pattern::Query& query_;
  const std::string per_attr_;
};

}  // namespace cepbus::plugins::testing
