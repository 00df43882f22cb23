#include "bus/core/plugin/detector.h"

#include <algorithm>
#include <set>

namespace cepbus::plugin {

Result<DetectorOptions> DetectorOptions::parse(std::span<const std::string> items) {
  std::map<std::string, std::string, std::less<>> values;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalidArgument("option '" + item + "': expected key=value");
    }
    values[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return DetectorOptions(std::move(values));
}

const std::string* DetectorOptions::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

DetectorOptions DetectorOptions::without(std::string_view key) const {
  auto values = values_;
  if (auto it = values.find(key); it != values.end()) values.erase(it);
  return DetectorOptions(std::move(values)).withBaseDir(base_dir_);
}

DetectorOptions DetectorOptions::withBaseDir(std::filesystem::path dir) const {
  DetectorOptions copy = *this;
  copy.base_dir_ = std::move(dir);
  return copy;
}

std::filesystem::path DetectorOptions::resolvePath(std::string_view path) const {
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir_.empty()) return p;
  return base_dir_ / p;
}

Status DetectorOptions::checkKnown(std::span<const std::string_view> known,
                                   std::string_view engine) const {
  for (const auto& [key, value] : values_) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return Status::invalidArgument("engine '" + std::string(engine) + "' has no option '" + key +
                                     "' (known: " + (list.empty() ? "none" : list) + ")");
    }
  }
  return Status::ok();
}

Status Detector::onEvents(std::span<const EventPtr> events) {
  // Each event is an allocation of its own, and a batch that a reorder
  // buffer put in ts order holds them out of the order they were made in:
  // loaded a few places ahead, an event is in cache when its turn comes.
  constexpr size_t kAhead = 8;
  Status first = Status::ok();
  for (size_t i = 0; i < events.size(); ++i) {
    if (i + kAhead < events.size()) __builtin_prefetch(events[i + kAhead].get());
    Status s = onEvent(events[i]);
    if (!s && first) first = std::move(s);
  }
  return first;
}

Status Detector::onWatermark(Timestamp /*t*/) { return Status::ok(); }

Result<std::string> Detector::exportModel(std::string_view format) const {
  return Status::invalidArgument("engine does not export its model (format '" +
                                 std::string(format) + "')");
}

std::optional<DetectorState> Detector::state() const { return std::nullopt; }

Status Detector::snapshot(SnapshotWriter& /*out*/) const {
  return Status::invalidArgument("the engine does not snapshot its state");
}

Status Detector::restore(SnapshotReader& /*in*/) {
  return Status::invalidArgument("the engine does not restore a snapshot");
}

Status checkNamedQueries(std::span<const NamedQuery> queries) {
  if (queries.empty()) return Status::invalidArgument("no queries to run");
  std::set<std::string_view> names;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (queries[i].name.empty()) {
      return Status::invalidArgument("query " + std::to_string(i + 1) + " has no name");
    }
    if (!names.insert(queries[i].name).second) {
      return Status::invalidArgument("two queries are named '" + queries[i].name + "'");
    }
  }
  return Status::ok();
}

namespace {

// The default multi-pattern detector: one detector per query, each event fed
// to all of them in query order, each detector's matches labelled with its
// query's index.
class FanOutDetector final : public Detector {
 public:
  class Label final : public MatchSink {
   public:
    Label(size_t index, MultiMatchSink& sink) : index_(index), sink_(&sink) {}
    void onMatch(const Match& match) override { sink_->onMatch(index_, match); }

   private:
    size_t index_;
    MultiMatchSink* sink_;
  };

  // Labels first: each detector reports to its own, which must outlive it.
  explicit FanOutDetector(std::vector<std::unique_ptr<Label>> labels)
      : labels_(std::move(labels)) {}
  void add(std::unique_ptr<Detector> detector) {
    counts_ = detector->state().has_value() && (detectors_.empty() || counts_);
    detectors_.push_back(std::move(detector));
    shares_.emplace_back();
  }

  Status onEvent(const EventPtr& event) override {
    Status first = Status::ok();
    for (size_t i = 0; i < detectors_.size(); ++i) {
      Status s = detectors_[i]->onEvent(event);
      if (!s && first) first = std::move(s);
      sample(i);
    }
    return first;
  }
  // Each detector takes the whole batch in turn: within one batch, matches
  // come query by query (each query's in event order), not event by event.
  Status onEvents(std::span<const EventPtr> events) override {
    Status first = Status::ok();
    for (size_t i = 0; i < detectors_.size(); ++i) {
      Status s = detectors_[i]->onEvents(events);
      if (!s && first) first = std::move(s);
      sample(i);
    }
    return first;
  }
  Status flush() override {
    return everyDetector([](Detector& d) { return d.flush(); });
  }
  Status onWatermark(Timestamp t) override {
    return everyDetector([t](Detector& d) { return d.onWatermark(t); });
  }
  // Counted only when every query's detector counts: a partial sum would
  // pass for the whole.
  std::optional<DetectorState> state() const override {
    if (!counts_) return std::nullopt;
    return total_.total();
  }
  // Every query's detector is of one engine: its version, 0 when one does not snapshot.
  uint32_t snapshotVersion() const override {
    uint32_t version = detectors_.empty() ? 0 : detectors_[0]->snapshotVersion();
    for (const auto& d : detectors_) version = std::min(version, d->snapshotVersion());
    return version;
  }
  Status snapshot(SnapshotWriter& out) const override {
    out.section("fan-out", 1);
    out.varint(detectors_.size());
    for (const auto& d : detectors_) {
      if (Status s = d->snapshot(out); !s) return s;
    }
    return Status::ok();
  }
  Status restore(SnapshotReader& in) override {
    if (!in.section("fan-out", 1)) return in.status();
    if (const uint64_t n = in.varint(); in.ok() && n != detectors_.size()) {
      in.fail("state of " + std::to_string(n) + " queries for " +
              std::to_string(detectors_.size()));
    }
    for (size_t i = 0; i < detectors_.size() && in.ok(); ++i) {
      if (Status s = detectors_[i]->restore(in); !s) return s;
      sample(i);
    }
    return in.status();
  }

 private:
  // Brings detector i's share of the total up to date.
  // `call` on each detector in query order, sampling each; the first error.
  template <typename Call>
  Status everyDetector(Call call) {
    Status first = Status::ok();
    for (size_t i = 0; i < detectors_.size(); ++i) {
      Status s = call(*detectors_[i]);
      if (!s && first) first = std::move(s);
      sample(i);
    }
    return first;
  }
  void sample(size_t i) {
    if (!counts_) return;
    total_.update(shares_[i], detectors_[i]->state().value_or(DetectorState{}));
  }

  std::vector<std::unique_ptr<Label>> labels_;  // declared first: outlive the detectors
  std::vector<std::unique_ptr<Detector>> detectors_;
  std::vector<DetectorState> shares_;  // per detector, as last sampled
  bool counts_ = false;
  StateTotal total_;
};

}  // namespace

Result<std::unique_ptr<Detector>> DetectorFactory::createMany(std::span<const NamedQuery> queries,
                                                              const DetectorOptions& options,
                                                              MultiMatchSink& sink) const {
  if (Status s = checkNamedQueries(queries); !s) return s;
  std::vector<std::unique_ptr<FanOutDetector::Label>> labels;
  labels.reserve(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    labels.push_back(std::make_unique<FanOutDetector::Label>(i, sink));
  }
  std::vector<FanOutDetector::Label*> raw;
  raw.reserve(labels.size());
  for (const auto& l : labels) raw.push_back(l.get());
  auto fan = std::make_unique<FanOutDetector>(std::move(labels));
  for (size_t i = 0; i < queries.size(); ++i) {
    auto made = create(queries[i].query, options, *raw[i]);
    if (!made) {
      return Status::invalidArgument("query '" + queries[i].name + "': " + made.status().message());
    }
    fan->add(std::move(made).value());
  }
  return std::unique_ptr<Detector>(std::move(fan));
}

}  // namespace cepbus::plugin
