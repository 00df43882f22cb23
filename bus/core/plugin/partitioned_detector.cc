#include "bus/core/plugin/partitioned_detector.h"

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <unordered_set>
#include <utility>

namespace cepbus::plugin {
namespace {

// The first error of a sequence of calls.
void keepFirst(Status& first, Status s) {
  if (!s && first) first = std::move(s);
}

pattern::Query withoutPartitions(const pattern::Query& query) {
  pattern::Query copy = query;
  copy.partition_by.clear();
  return copy;
}

std::optional<Timestamp> largestWindow(std::span<const NamedQuery> queries) {
  Timestamp w = 0;
  for (const NamedQuery& q : queries) {
    if (!q.query.within) return std::nullopt;
    w = std::max(w, *q.query.within);
  }
  return w;
}

}  // namespace

Result<std::unique_ptr<PartitionedDetector>> PartitionedDetector::create(
    std::span<const std::string> partition_by, std::optional<Timestamp> window, MakeDetector make,
    std::optional<StateCaps> caps) {
  if (partition_by.empty()) return Status::invalidArgument("PARTITION BY names no attribute");
  auto model = make();
  if (!model) return model.status();
  std::vector<Symbol> attrs;
  for (const std::string& a : partition_by) attrs.push_back(Symbol::intern(a));
  return std::unique_ptr<PartitionedDetector>(new PartitionedDetector(
      std::move(attrs), window, std::move(make), std::move(model).value(), caps));
}

PartitionedDetector::PartitionedDetector(std::vector<Symbol> attrs, std::optional<Timestamp> window,
                                         MakeDetector make, std::unique_ptr<Detector> model,
                                         std::optional<StateCaps> caps)
    : attrs_(std::move(attrs)),
      window_(window),
      make_(std::move(make)),
      model_(std::move(model)),
      counts_(model_->state().has_value()),
      caps_(caps) {}

Status PartitionedDetector::onEvent(const EventPtr& event) {
  if (event->ts() < now_) return late(*event);
  Status first = advanceTo(event->ts());
  Status made;
  Partition* p = partitionOf(*event, made);
  if (p == nullptr) {
    keepFirst(first, std::move(made));
    return first;
  }
  keepFirst(first, p->detector->onEvent(event));
  sample(*p);
  enforceTotalCap();
  return first;
}

Status PartitionedDetector::onEvents(std::span<const EventPtr> events) {
  Status first = Status::ok();
  size_t i = 0;
  while (i < events.size()) {
    if (events[i]->ts() < now_) {
      keepFirst(first, late(*events[i++]));
      continue;
    }
    keepFirst(first, advanceTo(events[i]->ts()));
    Status made;
    Partition* p = partitionOf(*events[i], made);
    if (p == nullptr) {
      keepFirst(first, std::move(made));
      ++i;
      continue;
    }
    // The run: later events of the same tick and partition (p, touched at now_).
    size_t end = i + 1;
    while (end < events.size() && events[end]->ts() == now_) {
      keyOf(*events[end]);
      const auto it = partitions_.find(key_);
      if (it == partitions_.end() || &it->second != p) break;
      ++end;
    }
    keepFirst(first, p->detector->onEvents(events.subspan(i, end - i)));
    sample(*p);
    enforceTotalCap();
    i = end;
  }
  return first;
}

Status PartitionedDetector::flush() {
  Status first = Status::ok();
  touched_.clear();
  for (auto* entry : order_) {
    Partition& p = entry->second;
    p.touched = false;
    keepFirst(first, p.detector->flush());
    sample(p);
  }
  return first;
}

Status PartitionedDetector::onWatermark(Timestamp t) {
  Status first = Status::ok();
  for (auto* entry : order_) {
    Partition& p = entry->second;
    keepFirst(first, p.detector->onWatermark(t));
    sample(p);
  }
  return first;
}

Result<std::string> PartitionedDetector::exportModel(std::string_view format) const {
  return model_->exportModel(format);
}

std::optional<DetectorState> PartitionedDetector::state() const {
  if (!counts_) return std::nullopt;
  DetectorState s = total_.total();
  s.evicted += evicted_;
  return s;
}

void PartitionedDetector::sample(Partition& p) {
  if (!counts_) return;
  total_.update(p.share, p.detector->state().value_or(DetectorState{}));
}

Status PartitionedDetector::late(const Event& event) const {
  return Status::invalidArgument("partitioned detector: event at ts " + std::to_string(event.ts()) +
                                 " arrived after ts " + std::to_string(now_) +
                                 "; events must arrive in timestamp order");
}

Status PartitionedDetector::advanceTo(Timestamp ts) {
  if (ts == now_) return Status::ok();
  now_ = ts;
  Status s = flushTouched();
  if (window_ && ts >= next_drop_) {
    dropQuiet();
    next_drop_ = ts + std::max<Timestamp>(*window_, 1);
  }
  return s;
}

void PartitionedDetector::keyOf(const Event& event) {
  static const Symbol kKey = Symbol::intern("key");
  key_.clear();
  for (Symbol attr : attrs_) {
    const Value* v = event.find(attr);
    if (v == nullptr && attr == kKey) v = &event.key();
    key_.push_back(v != nullptr ? *v : Value());
  }
}

PartitionedDetector::Partition* PartitionedDetector::partitionOf(const Event& event,
                                                                 Status& error) {
  keyOf(event);
  if (refusesNew() && !partitions_.contains(key_)) {
    ++evicted_;
    return nullptr;
  }
  Partitions::value_type* entry = findOrMake(error);
  if (entry == nullptr) return nullptr;
  Partition& p = entry->second;
  p.newest = now_;
  if (!p.touched) {
    p.touched = true;
    touched_.push_back(&p);
  }
  return &p;
}

PartitionedDetector::Partitions::value_type* PartitionedDetector::findOrMake(Status& error) {
  auto it = partitions_.find(key_);
  if (it == partitions_.end()) {
    auto made = make_();
    if (!made) {
      error = made.status();
      return nullptr;
    }
    it = partitions_.emplace(key_, Partition{std::move(made).value(), INT64_MIN, false, {}}).first;
    order_.push_back(&*it);
  }
  return &*it;
}

Status PartitionedDetector::flushTouched() {
  Status first = Status::ok();
  for (Partition* p : touched_) {
    p->touched = false;
    keepFirst(first, p->detector->flush());
    sample(*p);
  }
  touched_.clear();
  return first;
}

bool PartitionedDetector::refusesNew() const {
  return caps_ && counts_ && caps_->refuseNew() && total_.total().partial_matches >= caps_->total;
}

void PartitionedDetector::enforceTotalCap() {
  if (!caps_ || !counts_ || caps_->refuseNew() || total_.total().partial_matches <= caps_->total) {
    return;
  }
  // The partitions of the open tick stay: their detectors hold its events
  // and touched_ points to them; they are the most recently active anyway.
  std::vector<Partitions::value_type*> idle;
  for (auto* entry : order_) {
    if (!entry->second.touched) idle.push_back(entry);
  }
  std::stable_sort(idle.begin(), idle.end(), [](const auto* a, const auto* b) {
    return a->second.newest < b->second.newest;
  });
  const uint64_t target = caps_->total - caps_->total / 10;
  size_t shed = 0;
  while (shed < idle.size() && total_.total().partial_matches > target) {
    const Partition& p = idle[shed++]->second;
    evicted_ += p.share.partial_matches;
    total_.remove(p.share);
  }
  if (shed == 0) return;
  const std::unordered_set<const Partitions::value_type*> gone(
      idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(shed));
  std::erase_if(order_, [&](Partitions::value_type* entry) {
    if (!gone.contains(entry)) return false;
    partitions_.erase(partitions_.find(entry->first));
    return true;
  });
}

void PartitionedDetector::dropQuiet() {
  // Called with touched_ empty, so no pointer into a dropped partition remains.
  std::erase_if(order_, [&](Partitions::value_type* entry) {
    if (entry->second.newest >= now_ - *window_) return false;
    total_.remove(entry->second.share);
    partitions_.erase(partitions_.find(entry->first));
    return true;
  });
}

Status PartitionedDetector::snapshot(SnapshotWriter& out) const {
  // An engine that does not snapshot refuses in its own words.
  if (model_->snapshotVersion() == 0) return model_->snapshot(out);
  out.section("partitioned", kSnapshotVersion);
  out.signedVarint(now_);
  out.signedVarint(next_drop_);
  out.varint(evicted_);
  out.varint(order_.size());
  for (const auto* entry : order_) {
    for (const Value& v : entry->first) out.value(v);
    out.signedVarint(entry->second.newest);
    if (Status s = entry->second.detector->snapshot(out); !s) return s;
  }
  out.varint(touched_.size());
  for (const Partition* t : touched_) {
    const auto at = std::find_if(order_.begin(), order_.end(),
                                 [t](const auto* entry) { return &entry->second == t; });
    out.varint(static_cast<uint64_t>(at - order_.begin()));
  }
  return Status::ok();
}

Status PartitionedDetector::restore(SnapshotReader& in) {
  if (!in.section("partitioned", kSnapshotVersion)) return in.status();
  if (!order_.empty()) return Status::invalidArgument("restore into a detector that ran");
  now_ = in.signedVarint();
  next_drop_ = in.signedVarint();
  evicted_ = in.varint();
  const uint64_t partitions = in.count();
  for (uint64_t i = 0; i < partitions && in.ok(); ++i) {
    key_.clear();
    for (size_t a = 0; a < attrs_.size(); ++a) key_.push_back(in.value());
    const Timestamp newest = in.signedVarint();
    if (!in.ok()) break;
    if (partitions_.contains(key_)) {
      in.fail("partition " + std::to_string(i) + " repeats an earlier partition's key");
      break;
    }
    Status made;
    Partitions::value_type* entry = findOrMake(made);
    if (entry == nullptr) return made;
    entry->second.newest = newest;
    if (Status s = entry->second.detector->restore(in); !s) return s;
    sample(entry->second);
  }
  const uint64_t touched = in.count();
  for (uint64_t i = 0; i < touched && in.ok(); ++i) {
    const uint64_t at = in.varint();
    if (at >= order_.size() || order_[at]->second.touched) {
      in.fail("an open tick's partition " + std::to_string(at) + " of " +
              std::to_string(order_.size()) + " (out of range or repeated)");
      break;
    }
    order_[at]->second.touched = true;
    touched_.push_back(&order_[at]->second);
  }
  return in.status();
}

Result<std::unique_ptr<Detector>> createPartitioned(const DetectorFactory& engine,
                                                    const pattern::Query& query,
                                                    const DetectorOptions& options,
                                                    MatchSink& sink) {
  auto caps = StateCaps::parse(options);
  if (!caps) return caps.status();
  auto made = PartitionedDetector::create(
      query.partition_by, query.within,
      [&engine, unpartitioned = withoutPartitions(query), options, &sink] {
        return engine.create(unpartitioned, options, sink);
      },
      *caps);
  if (!made) return made.status();
  return std::unique_ptr<Detector>(std::move(made).value());
}

Result<std::unique_ptr<Detector>> createManyPartitioned(const DetectorFactory& engine,
                                                        std::span<const NamedQuery> queries,
                                                        const DetectorOptions& options,
                                                        MultiMatchSink& sink) {
  if (Status s = checkNamedQueries(queries); !s) return s;
  const auto& by = queries.front().query.partition_by;
  const bool same = std::all_of(queries.begin(), queries.end(),
                                [&](const NamedQuery& q) { return q.query.partition_by == by; });
  if (!same || by.empty()) return engine.DetectorFactory::createMany(queries, options, sink);
  auto caps = StateCaps::parse(options);
  if (!caps) return caps.status();
  std::vector<NamedQuery> unpartitioned(queries.begin(), queries.end());
  for (NamedQuery& q : unpartitioned) q.query.partition_by.clear();
  auto made = PartitionedDetector::create(
      by, largestWindow(queries),
      [&engine, unpartitioned = std::move(unpartitioned), options, &sink] {
        return engine.createMany(unpartitioned, options, sink);
      },
      *caps);
  if (!made) return made.status();
  return std::unique_ptr<Detector>(std::move(made).value());
}

}  // namespace cepbus::plugin
