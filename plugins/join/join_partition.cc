#include "plugins/join/join_partition.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "bus/core/event_json.h"

namespace cepbus::plugins::join {
namespace {

constexpr size_t kProbeLogCommitEvery = 256;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t getU64(std::string_view p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// The bytes a windowed tuple is accounted for: its entry and its event.
uint32_t accountedBytes(const Event& e, size_t entry_size) {
  size_t n = entry_size + sizeof(Event) + e.attributes().size() * sizeof(Attribute);
  for (const Attribute& a : e.attributes()) {
    if (a.value.kind() == Value::Kind::kString) n += a.value.asString().size();
  }
  return static_cast<uint32_t>(n);
}

// Keys are strings or integers (makeTuple checks): compared directly, not
// through Value's cross-kind ordering.
bool sameKey(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  return a.kind() == Value::Kind::kInt ? a.asInt() == b.asInt() : a.asString() == b.asString();
}

bool pairHolds(const JoinPlan& plan, uint64_t h1, const Value* k1, Timestamp ts1, double p1,
               int32_t site1, uint32_t stream1, const Tuple& later, double& prob) {
  if (h1 != later.hash) return false;
  if (!plan.self_join && stream1 == later.stream) return false;
  if (!sameKey(*k1, *later.key)) return false;
  const Timestamp dt = later.ts >= ts1 ? later.ts - ts1 : ts1 - later.ts;
  if (!(static_cast<double>(dt) < plan.bound(site1, later.site))) return false;
  prob = p1 * later.prob;
  return prob >= plan.threshold;
}

}  // namespace

uint64_t hashKey(const Value& key) {
  if (key.kind() == Value::Kind::kInt) return mix(static_cast<uint64_t>(key.asInt()));
  return mix(std::hash<std::string_view>()(key.asString()));
}

Result<Tuple> makeTuple(const JoinPlan& plan, const EventPtr& event, int stream, uint64_t seq) {
  const JoinPlan::Stream& s = plan.streams[static_cast<size_t>(stream)];
  auto where = [&] {
    return std::string(event->type().name()) + " event at ts " + std::to_string(event->ts());
  };
  Tuple t;
  // One pass for both attributes (they are sorted by symbol, as Event::find
  // relies on too).
  const Value* site = nullptr;
  const bool want_site = plan.matrix != nullptr;
  for (const Attribute& a : event->attributes()) {
    if (a.name == s.key) t.key = &a.value;
    if (want_site && a.name == plan.site) site = &a.value;
    if (t.key != nullptr && (!want_site || site != nullptr)) break;
  }
  if (t.key == nullptr || t.key->isNull()) {
    return Status::invalidArgument("join: " + where() + " has no key attribute '" +
                                   std::string(s.key.name()) + "'");
  }
  if (t.key->kind() != Value::Kind::kInt && t.key->kind() != Value::Kind::kString) {
    return Status::invalidArgument("join: " + where() + ": key attribute '" +
                                   std::string(s.key.name()) + "' is a " + kindName(t.key->kind()) +
                                   ", expected a string or an integer");
  }
  if (want_site) {
    if (site == nullptr || site->isNull()) {
      return Status::invalidArgument("join: " + where() + " has no site attribute '" +
                                     std::string(plan.site.name()) + "'");
    }
    const int64_t idx = plan.matrix->indexOf(*site);
    if (idx < 0) {
      return Status::invalidArgument("join: " + where() + ": site " + site->toString() +
                                     " is not in the time matrix");
    }
    t.site = static_cast<int32_t>(idx);
  }
  t.event = event;
  t.hash = hashKey(*t.key);
  t.prob = event->probability();
  t.ts = event->ts();
  t.seq = seq;
  t.stream = static_cast<uint32_t>(stream);
  return t;
}

bool joinable(const JoinPlan& plan, const Tuple& earlier, const Tuple& later, double& prob) {
  return pairHolds(plan, earlier.hash, earlier.key, earlier.ts, earlier.prob, earlier.site,
                   earlier.stream, later, prob);
}

JoinPartition::JoinPartition(JoinPlanPtr plan, size_t budget_bytes,
                             std::unique_ptr<SpillStore> entries,
                             std::unique_ptr<SpillStore> probes)
    : plan_(std::move(plan)),
      budget_(budget_bytes),
      slots_(plan_->index_slots),
      mask_(plan_->index_slots - 1),
      entry_store_(std::move(entries)),
      probe_store_(std::move(probes)) {
  if (plan_->spill == SpillStrategy::kLessThanProbability) {
    bucket_probes_.assign(plan_->index_slots, 0);
    bucket_hits_.assign(plan_->index_slots, 0);
  }
  spill_disabled_ = budget_ == 0 || !entry_store_ || !probe_store_;
}

JoinPartition::Entry JoinPartition::toEntry(Tuple&& t) {
  // Bytes are accounted only where a budget is enforced.
  const uint32_t bytes = budget_ > 0 ? accountedBytes(*t.event, sizeof(Entry)) : 0;
  owned_.push_back(Owned{t.ts, std::move(t.event)});
  return Entry{t.prob, t.ts, t.seq, t.site, t.stream, bytes, &owned_.back().event};
}

void JoinPartition::release() {
  // The events leave in arrival order: the ones a few places behind the front
  // leave next.
  constexpr size_t kAhead = 8;
  while (!owned_.empty() && stale(owned_.front().ts)) {
    if (owned_.size() > kAhead) prefetchRefCount(owned_[kAhead].event);
    owned_.pop_front();
  }
}

JoinPartition::Group& JoinPartition::groupOf(size_t slot, uint64_t hash, const Value& key) {
  Bucket& bucket = slots_[slot];
  for (Group& g : bucket) {
    if (g.hash == hash && sameKey(g.key, key)) return g;
  }
  bucket.push_back(Group{hash, key, {}});
  return bucket.back();
}

void JoinPartition::insert(Group& g, Entry e) {
  // After every entry of equal or higher probability: lists stay in
  // descending probability and equal ones in arrival order.
  auto pos = std::upper_bound(g.list.begin(), g.list.end(), e.prob,
                              [](double p, const Entry& x) { return p > x.prob; });
  ++entries_;
  bytes_ += e.bytes;
  g.list.insert(pos, e);
}

namespace {

// The pair condition once the keys are known to be equal.
inline bool boundHolds(const JoinPlan& plan, Timestamp ts1, double p1, int32_t site1,
                       uint32_t stream1, const Tuple& later, double& prob) {
  if (!plan.self_join && stream1 == later.stream) return false;
  const Timestamp dt = later.ts >= ts1 ? later.ts - ts1 : ts1 - later.ts;
  if (!(static_cast<double>(dt) < plan.bound(site1, later.site))) return false;
  prob = p1 * later.prob;
  return prob >= plan.threshold;
}

}  // namespace

void JoinPartition::process(Tuple t, std::vector<JoinedPair>& out) {
  // Never back: what release() gave back must stay stale. The host feeds
  // tuples in time order, but a restored clock may be ahead of them.
  now_ = std::max(now_, t.ts);
  last_seq_ = t.seq;
  if (spilled_count_ > 0 && now_ - first_spill_now_ >= plan_->window) restoreAll(out);
  if (spilled_count_ > 0) {
    if (probe_store_->pendingRecords() >= kProbeLogCommitEvery) {
      if (Status s = probe_store_->commit(); s) {
        unlogged_.clear();
      } else {
        noteError(Status::ioError(s.message() + "; spilling disabled, the join goes on in memory"));
        spill_disabled_ = true;
        restoreAll(out);  // before `t` is logged: it finds the restored entries in memory
      }
    }
    if (spilled_count_ > 0) {
      std::string payload;
      putU64(payload, t.seq);
      if (encodeFor(*t.event, payload)) {
        probe_store_->append(payload);
        unlogged_.push_back(t);
      } else {
        restoreAll(out);  // `t` is not logged yet: it finds the restored entries in memory
      }
    }
  }
  if (plan_->expiry == Expiry::kBatch) {
    if (now_ >= next_deletion_) {
      expireAll();
      next_deletion_ = now_ + plan_->deletion_interval;
    }
  } else {
    release();
  }

  const size_t slot = t.hash & mask_;
  Group& group = groupOf(slot, t.hash, *t.key);
  std::vector<Entry>& list = group.list;
  const double threshold = plan_->threshold;
  const size_t found_before = out.size();
  double prob = 0;
  if (plan_->expiry == Expiry::kOnInsert) {
    // One pass drops stale entries and probes the live ones.
    size_t w = 0;
    bool stopped = false;
    for (size_t i = 0; i < list.size(); ++i) {
      Entry& e = list[i];
      if (stale(e.ts)) {
        --entries_;
        bytes_ -= e.bytes;
        continue;
      }
      if (!stopped) {
        if (e.prob * t.prob < threshold) {
          stopped = true;
          ++stats_.probes_stopped_early;
        } else if (boundHolds(*plan_, e.ts, e.prob, e.site, e.stream, t, prob)) {
          out.push_back(JoinedPair{*e.event, t.event, prob, t.seq});
        }
      }
      if (w != i) list[w] = e;
      ++w;
    }
    list.erase(list.begin() + static_cast<ptrdiff_t>(w), list.end());
  } else {
    for (const Entry& e : list) {
      if (e.prob * t.prob < threshold) {
        ++stats_.probes_stopped_early;
        break;
      }
      if (boundHolds(*plan_, e.ts, e.prob, e.site, e.stream, t, prob)) {
        out.push_back(JoinedPair{*e.event, t.event, prob, t.seq});
      }
    }
  }
  if (!bucket_probes_.empty()) {
    ++bucket_probes_[slot];
    ++total_probes_;
    const size_t hits = out.size() - found_before;
    bucket_hits_[slot] += static_cast<uint32_t>(hits);
    total_hits_ += hits;
  }
  insert(group, toEntry(std::move(t)));
  // The events are released above: what stale entries still cost is their
  // list slots, so the sweep runs only once they outnumber the window.
  if (plan_->expiry == Expiry::kOnInsert &&
      (budget_ > 0 || entries_ > 2 * owned_.size() + slots_.size())) {
    expireBucket(slots_[sweep_hand_]);
    sweep_hand_ = (sweep_hand_ + 1) & mask_;
  }
  if (!spill_disabled_ && bytes_ > budget_) spill(out);
}

void JoinPartition::prefetchBucket(uint64_t hash) const {
  __builtin_prefetch(&slots_[hash & mask_]);
}

void JoinPartition::prefetchGroups(uint64_t hash) const {
  // Every line of the groups (a few at most): prefetchList() scans them all.
  const Bucket& bucket = slots_[hash & mask_];
  const char* p = reinterpret_cast<const char*>(bucket.data());
  const size_t bytes = std::min(bucket.size() * sizeof(Group), size_t{4} * 64);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

void JoinPartition::prefetchList(uint64_t hash) const {
  for (const Group& g : slots_[hash & mask_]) {
    if (g.hash == hash) {
      if (!g.list.empty()) __builtin_prefetch(g.list.data());
      return;
    }
  }
}

void JoinPartition::processAll(std::vector<Tuple>& tuples, std::vector<JoinedPair>& out) {
  // Distances in tuples between the stages (and the probe itself).
  constexpr size_t kBucketAhead = 12, kGroupsAhead = 8, kListAhead = 4;
  const size_t n = tuples.size();
  for (size_t i = 0; i < std::min(n, kBucketAhead); ++i) prefetchBucket(tuples[i].hash);
  for (size_t i = 0; i < std::min(n, kGroupsAhead); ++i) {
    prefetchGroups(tuples[i].hash);
    __builtin_prefetch(tuples[i].key);
  }
  for (size_t i = 0; i < std::min(n, kListAhead); ++i) prefetchList(tuples[i].hash);
  for (size_t i = 0; i < n; ++i) {
    if (i + kBucketAhead < n) prefetchBucket(tuples[i + kBucketAhead].hash);
    if (i + kGroupsAhead < n) {
      prefetchGroups(tuples[i + kGroupsAhead].hash);
      // The key lives in the event's attributes, last touched by the
      // dispatcher: with worker threads, in another core's cache.
      __builtin_prefetch(tuples[i + kGroupsAhead].key);
    }
    if (i + kListAhead < n) prefetchList(tuples[i + kListAhead].hash);
    process(std::move(tuples[i]), out);
  }
}

void JoinPartition::expireAll() {
  for (Bucket& bucket : slots_) expireBucket(bucket);
  release();
}

void JoinPartition::expireBucket(Bucket& bucket) {
  for (Group& g : bucket) {
    std::vector<Entry>& list = g.list;
    size_t w = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (stale(list[i].ts)) {
        --entries_;
        bytes_ -= list[i].bytes;
        continue;
      }
      if (w != i) list[w] = list[i];
      ++w;
    }
    list.erase(list.begin() + static_cast<ptrdiff_t>(w), list.end());
  }
  std::erase_if(bucket, [](const Group& g) { return g.list.empty(); });
}

void JoinPartition::spill(std::vector<JoinedPair>& out) {
  // Stale entries never join again: drop them rather than write them.
  expireAll();
  if (bytes_ <= budget_) return;
  // Each list spills a suffix (the lists are in descending probability);
  // cut holds, per group in bucket order, where its suffix starts.
  std::vector<size_t> cut;
  size_t selected_bytes = 0;
  if (plan_->spill == SpillStrategy::kWindowHalf) {
    for (const Bucket& bucket : slots_) {
      for (const Group& g : bucket) {
        cut.push_back(g.list.size() / 2);
        for (size_t k = cut.back(); k < g.list.size(); ++k) selected_bytes += g.list[k].bytes;
      }
    }
  } else {
    // prob[i]: bucket i's join success rate relative to the mean, so that
    // uniform data gives prob[i] = 1 (P4's experiment); 1 without evidence.
    const double mean = total_probes_ == 0
                            ? 0
                            : static_cast<double>(total_hits_) / static_cast<double>(total_probes_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      double prob_i = 1;
      if (mean > 0 && bucket_probes_[i] > 0) {
        prob_i = (static_cast<double>(bucket_hits_[i]) / bucket_probes_[i]) / mean;
      }
      for (const Group& g : slots_[i]) {
        size_t c = g.list.size();
        while (c > 0 && g.list[c - 1].prob * prob_i <= plan_->spill_probability) --c;
        cut.push_back(c);
        for (size_t k = c; k < g.list.size(); ++k) selected_bytes += g.list[k].bytes;
      }
    }
    if (static_cast<double>(selected_bytes) < static_cast<double>(bytes_) / plan_->spill_m) {
      selected_bytes = bytes_;
      std::fill(cut.begin(), cut.end(), 0);
    }
  }
  size_t selected = 0;
  std::string payload;
  size_t gi = 0;
  for (const Bucket& bucket : slots_) {
    for (const Group& g : bucket) {
      for (size_t k = cut[gi]; k < g.list.size(); ++k) {
        const Entry& e = g.list[k];
        payload.clear();
        putU64(payload, e.seq);
        putU64(payload, last_seq_);
        if (!encodeFor(**e.event, payload)) {
          entry_store_->discardPending();
          restoreAll(out);
          return;
        }
        entry_store_->append(payload);
        ++selected;
      }
      ++gi;
    }
  }
  if (selected == 0) return;
  if (Status s = entry_store_->commit(); !s) {
    // Nothing of this spill left memory; what earlier spills wrote comes back
    // now, and the join goes on in memory only.
    noteError(Status::ioError(s.message() + "; spilling disabled, the join goes on in memory"));
    spill_disabled_ = true;
    restoreAll(out);
    return;
  }
  if (spilled_count_ == 0) first_spill_now_ = now_;
  gi = 0;
  for (Bucket& bucket : slots_) {
    for (Group& g : bucket) {
      for (size_t k = cut[gi]; k < g.list.size(); ++k) {
        --entries_;
        bytes_ -= g.list[k].bytes;
        spilled_bytes_ += g.list[k].bytes;
        g.list[k].event->reset();  // the event's memory leaves with it
      }
      g.list.erase(g.list.begin() + static_cast<ptrdiff_t>(cut[gi]), g.list.end());
      ++gi;
    }
    std::erase_if(bucket, [](const Group& g) { return g.list.empty(); });
  }
  spilled_count_ += selected;
  ++stats_.spills;
  stats_.spilled_total += selected;
}

void JoinPartition::restoreIfRoom(std::vector<JoinedPair>& out) {
  if (spilled_count_ > 0 && bytes_ + spilled_bytes_ <= budget_) restoreAll(out);
}

void JoinPartition::restoreAll(std::vector<JoinedPair>& out) {
  if (spilled_count_ == 0) return;
  if (probe_store_->pendingRecords() > 0) {
    if (Status s = probe_store_->commit(); s) {
      unlogged_.clear();
    } else {
      noteError(std::move(s));
      spill_disabled_ = true;
    }
  }
  // The tuples that arrived while anything was on disk, by key hash.
  std::unordered_map<uint64_t, std::vector<Tuple>> partners;
  Status read = probe_store_->readAll([&](std::string_view payload) -> Status {
    if (payload.size() < 8) return Status::ioError("probe log record too short");
    auto event = decodeEvent(payload.substr(8));
    if (!event) return event.status();
    auto t = makeTuple(*plan_, *event, plan_->streamOf((*event)->type()), getU64(payload));
    if (!t) return t.status();
    partners[t->hash].push_back(std::move(*t));
    return Status::ok();
  });
  for (Tuple& t : unlogged_) partners[t.hash].push_back(std::move(t));
  unlogged_.clear();
  if (read) {
    read = entry_store_->readAll([&](std::string_view payload) -> Status {
      if (payload.size() < 16) return Status::ioError("spilled entry record too short");
      const uint64_t left_at = getU64(payload.substr(8));
      auto event = decodeEvent(payload.substr(16));
      if (!event) return event.status();
      auto e = makeTuple(*plan_, *event, plan_->streamOf((*event)->type()), getU64(payload));
      if (!e) return e.status();
      if (auto it = partners.find(e->hash); it != partners.end()) {
        double prob = 0;
        for (const Tuple& t : it->second) {
          if (t.seq > left_at && joinable(*plan_, *e, t, prob)) {
            out.push_back(JoinedPair{e->event, t.event, prob, last_seq_});
            ++stats_.restored_pairs;
          }
        }
      }
      if (!stale(e->ts)) {
        Group& g = groupOf(e->hash & mask_, e->hash, *e->key);
        insert(g, toEntry(std::move(*e)));
      }
      return Status::ok();
    });
  }
  if (!read)
    noteError(Status::ioError("join: restoring spilled tuples failed, pairs may be lost: " +
                              read.message()));
  entry_store_->clear();
  probe_store_->clear();
  spilled_count_ = 0;
  spilled_bytes_ = 0;
  ++stats_.restores;
}

bool JoinPartition::encodeFor(const Event& event, std::string& payload) {
  auto line = encodeEventExactly(event, EventFormat::kFull);
  if (line) {
    payload += *line;
    return true;
  }
  // Some strings (invalid UTF-8) would not come back as they were: such an
  // event cannot be spilled, so nothing is.
  noteError(Status::ioError("join: cannot spill an event: " + line.status().message() +
                            "; spilling disabled, the join goes on in memory"));
  spill_disabled_ = true;
  return false;
}

void JoinPartition::noteError(Status s) {
  if (error_.isOk()) error_ = std::move(s);
}

Status JoinPartition::takeError() {
  Status s = std::move(error_);
  error_ = Status::ok();
  return s;
}

// --- snapshots ----------------------------------------------------------------

void JoinPartition::snapshotEntry(const Entry& e,
                                  const std::unordered_map<const EventPtr*, uint64_t>& at,
                                  plugin::SnapshotWriter& out) const {
  out.real(e.prob);
  out.signedVarint(e.ts);
  out.varint(e.seq);
  out.signedVarint(e.site);
  out.varint(e.stream);
  out.varint(e.bytes);
  const auto it = at.find(e.event);
  out.varint(it == at.end() ? 0 : it->second + 1);
}

Status JoinPartition::snapshot(plugin::SnapshotWriter& out) const {
  out.signedVarint(now_);
  out.varint(last_seq_);
  out.signedVarint(next_deletion_);
  out.varint(sweep_hand_);
  out.flag(spill_disabled_);
  // The FIFO of windowed events (an event is null once spilled), then the
  // lists, whose entries name their event by its place in it.
  std::unordered_map<const EventPtr*, uint64_t> at;
  out.varint(owned_.size());
  for (const Owned& o : owned_) {
    at.emplace(&o.event, at.size());
    out.signedVarint(o.ts);
    out.event(o.event);
  }
  uint64_t used = 0;
  for (const Bucket& bucket : slots_) used += bucket.empty() ? 0 : 1;
  out.varint(used);
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot].empty()) continue;
    out.varint(slot);
    out.varint(slots_[slot].size());
    for (const Group& g : slots_[slot]) {
      out.value(g.key);
      out.varint(g.list.size());
      for (const Entry& e : g.list) snapshotEntry(e, at, out);
    }
  }
  // less_than_probability's evidence: probes and hits per bucket.
  uint64_t probed = 0;
  for (uint32_t n : bucket_probes_) probed += n > 0 ? 1 : 0;
  out.varint(probed);
  for (size_t i = 0; i < bucket_probes_.size(); ++i) {
    if (bucket_probes_[i] == 0) continue;
    out.varint(i);
    out.varint(bucket_probes_[i]);
    out.varint(bucket_hits_[i]);
  }
  out.varint(total_probes_);
  out.varint(total_hits_);
  out.varint(stats_.spills);
  out.varint(stats_.spilled_total);
  out.varint(stats_.restores);
  out.varint(stats_.restored_pairs);
  out.varint(stats_.probes_stopped_early);
  return snapshotSpilled(out);
}

Status JoinPartition::snapshotSpilled(plugin::SnapshotWriter& out) const {
  out.varint(spilled_count_);
  if (spilled_count_ == 0) return Status::ok();
  out.varint(spilled_bytes_);
  out.signedVarint(first_spill_now_);
  for (const SpillStore* store : {entry_store_.get(), probe_store_.get()}) {
    std::vector<std::string> records;
    Status read = store->readAll([&](std::string_view record) {
      records.emplace_back(record);
      return Status::ok();
    });
    if (!read)
      return Status::ioError("join: cannot read back the spilled tuples: " + read.message());
    out.varint(records.size());
    for (const std::string& record : records) out.string(record);
  }
  // The probe log's tail not committed yet: the tuples themselves.
  out.varint(unlogged_.size());
  for (const Tuple& t : unlogged_) {
    out.event(t.event);
    out.varint(t.seq);
  }
  return Status::ok();
}

void JoinPartition::restoreSpilled(plugin::SnapshotReader& in) {
  const uint64_t spilled = in.varint();
  if (spilled == 0 || !in.ok()) return;
  if (!entry_store_ || !probe_store_) {
    in.fail("spilled tuples, and this join does not spill");
    return;
  }
  spilled_bytes_ = in.varint();
  first_spill_now_ = in.signedVarint();
  // Entry records hold the entry's and the spill's arrival numbers, probe
  // records the probe's, before the event.
  for (auto [store, header] :
       {std::pair{entry_store_.get(), 16}, std::pair{probe_store_.get(), 8}}) {
    const uint64_t n = in.count();
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      const std::string record = in.string();
      if (record.size() < static_cast<size_t>(header)) in.fail("a spilled record too short");
      store->append(record);
    }
    if (!in.ok()) return;
    if (Status s = store->commit(); !s) {
      in.fail("cannot write the restored spilled tuples: " + s.message());
      return;
    }
  }
  if (entry_store_->committedRecords() != spilled)
    in.fail("spilled tuples and their records differ");
  const uint64_t unlogged = in.count(2);
  for (uint64_t i = 0; i < unlogged && in.ok(); ++i) {
    EventPtr event = in.event();
    const uint64_t seq = in.varint();
    const int stream = event ? plan_->streamOf(event->type()) : -1;
    auto t = stream < 0 ? Result<Tuple>(Status::invalidArgument("not of the query's types"))
                        : makeTuple(*plan_, event, stream, seq);
    if (!t || seq > last_seq_) {
      in.fail("a probe logged while spilled is not one of the query's");
      break;
    }
    std::string payload;
    putU64(payload, seq);
    if (!encodeFor(*event, payload)) {
      in.fail("a probe logged while spilled cannot be encoded");
      break;
    }
    probe_store_->append(payload);
    unlogged_.push_back(std::move(*t));
  }
  spilled_count_ = spilled;
}

JoinPartition::Entry JoinPartition::restoreEntry(plugin::SnapshotReader& in) {
  Entry e{};
  e.prob = in.real();
  e.ts = in.signedVarint();
  e.seq = in.varint();
  const int64_t site = in.signedVarint();
  const uint64_t stream = in.varint();
  const uint64_t bytes = in.varint();
  const uint64_t at = in.varint();
  const bool site_ok =
      plan_->matrix ? site >= 0 && static_cast<uint64_t>(site) < plan_->matrix->size() : site == -1;
  if (!(e.prob >= 0 && e.prob <= 1)) in.fail("a windowed tuple's probability is not in [0, 1]");
  if (!site_ok) in.fail("a windowed tuple's site is not in the time matrix");
  if (stream >= plan_->streams.size()) in.fail("a windowed tuple of no stream of the query");
  if (bytes > UINT32_MAX) in.fail("a windowed tuple's size is out of range");
  if (at > owned_.size()) in.fail("a windowed tuple's event is not in the window");
  if (e.seq > last_seq_) in.fail("a windowed tuple arrived after the partition's last one");
  e.site = static_cast<int32_t>(site);
  e.stream = static_cast<uint32_t>(stream);
  e.bytes = static_cast<uint32_t>(bytes);
  e.event = at == 0 || at > owned_.size() ? &released_ : &owned_[at - 1].event;
  // A live entry is probed and its event joined: it must be there.
  if (!stale(e.ts) && (*e.event == nullptr || (*e.event)->ts() != e.ts ||
                       plan_->streamOf((*e.event)->type()) != static_cast<int>(e.stream))) {
    in.fail("a live windowed tuple without its event");
  }
  return e;
}

void JoinPartition::restore(plugin::SnapshotReader& in) {
  now_ = in.signedVarint();
  last_seq_ = in.varint();
  next_deletion_ = in.signedVarint();
  sweep_hand_ = in.varint();
  if (sweep_hand_ > mask_) in.fail("the expiry sweep is past the last bucket");
  spill_disabled_ = in.flag() || budget_ == 0 || !entry_store_ || !probe_store_;
  const uint64_t owned = in.count(2);
  for (uint64_t i = 0; i < owned && in.ok(); ++i) {
    const Timestamp ts = in.signedVarint();
    EventPtr event = in.event();
    // release() frees an event by this time, and its entries stop being
    // probed by theirs: the two must agree.
    if (event && event->ts() != ts) in.fail("a windowed event's time is not its own");
    owned_.push_back(Owned{ts, std::move(event)});
  }
  const uint64_t used = in.count(2);
  size_t previous = 0;
  for (uint64_t b = 0; b < used && in.ok(); ++b) {
    const uint64_t slot = in.varint();
    if (slot >= slots_.size() || (b > 0 && slot <= previous)) {
      in.fail("a bucket of the window index out of range or out of order");
      break;
    }
    previous = slot;
    const uint64_t groups = in.count(2);
    for (uint64_t gi = 0; gi < groups && in.ok(); ++gi) {
      Value key = in.value();
      if (key.kind() != Value::Kind::kInt && key.kind() != Value::Kind::kString) {
        in.fail("a key of the window index is neither a string nor an integer");
        break;
      }
      const uint64_t hash = hashKey(key);
      if ((hash & mask_) != slot) {
        in.fail("a key in another bucket than its hash's");
        break;
      }
      Group& g = slots_[slot].emplace_back(Group{hash, std::move(key), {}});
      const uint64_t n = in.count(8);
      for (uint64_t k = 0; k < n && in.ok(); ++k) {
        g.list.push_back(restoreEntry(in));
        ++entries_;
        bytes_ += g.list.back().bytes;
      }
    }
  }
  const uint64_t probed = in.count(3);
  if (probed > 0 && bucket_probes_.empty())
    in.fail("bucket statistics without spill=less_than_probability");
  for (uint64_t i = 0; i < probed && in.ok(); ++i) {
    const uint64_t slot = in.varint();
    const uint64_t probes = in.varint();
    const uint64_t hits = in.varint();
    if (slot >= bucket_probes_.size() || probes > UINT32_MAX || hits > UINT32_MAX) {
      in.fail("bucket statistics out of range");
      break;
    }
    bucket_probes_[slot] = static_cast<uint32_t>(probes);
    bucket_hits_[slot] = static_cast<uint32_t>(hits);
  }
  total_probes_ = in.varint();
  total_hits_ = in.varint();
  stats_.spills = in.varint();
  stats_.spilled_total = in.varint();
  stats_.restores = in.varint();
  stats_.restored_pairs = in.varint();
  stats_.probes_stopped_early = in.varint();
  restoreSpilled(in);
}

PartitionStats JoinPartition::stats() const {
  PartitionStats s = stats_;
  s.entries = entries_;
  s.memory_bytes = bytes_;
  s.spilled = spilled_count_;
  s.spill_disabled = spill_disabled_;
  return s;
}

}  // namespace cepbus::plugins::join
