#include "services/cep/cep_service.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <span>
#include <unordered_map>

#include "bus/core/pattern/parser.h"
#include "bus/host/detection/engine_choice.h"
#include "bus/host/detection/trial_detector.h"
#include "bus/host/loader/plugin_loader.h"
#include "flows/exchange.h"
#include "router/relays.h"
#include "router/topic.h"
#include "services/cep/output_backlog.h"
#include "services/service_factory_registry.h"
#include "stages/stage.h"

namespace cepbus::services::cep {
namespace {

constexpr size_t kMaxCapacity = size_t{1} << 30;
// Each worker holds a batch's slots for good: a bound that keeps that small.
constexpr size_t kMaxBatchSize = size_t{1} << 16;
// The query options the service implements itself (see cep_service.h).
constexpr std::string_view kFlushWhenIdle = "flush_when_idle";
constexpr std::string_view kOutputQos = "output_qos";
constexpr std::string_view kRunInline = "run_inline";
constexpr std::string_view kShareDetector = "share_detector";

using QueryOptions = std::map<std::string, std::string, std::less<>>;

// Takes the host option `name` out of `options` (the engine never sees it)
// and returns its value, one of `allowed` (the first is the default);
// InvalidArgument, saying what it must be, for any other value.
Result<std::string> takeHostOption(QueryOptions& options, std::string_view name,
                                   std::initializer_list<std::string_view> allowed) {
  auto it = options.find(name);
  if (it == options.end()) return std::string(*allowed.begin());
  std::string value = std::move(it->second);
  options.erase(it);
  std::string expected;
  for (std::string_view a : allowed) {
    if (a == value) return value;
    expected += (expected.empty() ? "" : " or ") + std::string(a);
  }
  return Status::invalidArgument("option " + std::string(name) + " must be " + expected +
                                 ", not \"" + value + "\"");
}

// Run-time failures repeat per event under a bad feed: log when a count
// reaches 1, 2, 4, 8 ... so that the log shows them without flooding.
bool worthLogging(uint64_t before, uint64_t after) {
  return std::bit_width(before) < std::bit_width(after);
}

// The stage item that asks a query's worker to flush its detector: an event
// no publisher can produce, recognised by identity.
const EventPtr& flushMarker() {
  static const EventPtr marker = EventBuilder(Symbol::intern("cepbus.flush")).build();
  return marker;
}

// The stage item that asks a query's worker to wait until the bus takes the
// composite events it refused for now (OutputBacklog), recognised by identity.
const EventPtr& retryMarker() {
  static const EventPtr marker = EventBuilder(Symbol::intern("cepbus.retry-output")).build();
  return marker;
}

// Set while this thread offers an item to a detector's stage: a detect()
// call running then is a run inline (stages/stage.h), on a thread that must
// not wait for the bus to take held composites.
thread_local bool t_offering = false;

class OfferingScope {
 public:
  OfferingScope() : was_(t_offering) { t_offering = true; }
  ~OfferingScope() { t_offering = was_; }
  OfferingScope(const OfferingScope&) = delete;
  OfferingScope& operator=(const OfferingScope&) = delete;

 private:
  const bool was_;
};

// How long a stopping query waits for the bus to take the composite events
// it refused for now before it gives them up (counted, logged); and how
// long removing one query of a shared detector waits for a worker that is
// waiting for the bus.
constexpr std::chrono::seconds kStopDrain{5};

// The type of the stage items that ask a shared detector's worker to mute a
// query, each made for one removal and recognised by identity: a publisher
// may send an event of that type, which is then detected as any other.
Symbol detachType() {
  static const Symbol type = Symbol::intern("cepbus.detach");
  return type;
}

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

// Reads the unit's param `name`, an integer in [1, max], into `out` when
// present; a bad value is added to `errors`.
void sizeParam(const descriptor::ServiceUnit& unit, const char* name, size_t max, size_t& out,
               std::vector<std::string>& errors) {
  const descriptor::Param* p = unit.param(name);
  if (p == nullptr) return;
  size_t v = 0;
  const char* last = p->value.data() + p->value.size();
  auto [end, ec] = std::from_chars(p->value.data(), last, v);
  if (ec != std::errc() || end != last || v < 1 || v > max) {
    errors.push_back(p->where
                         .error("<param name=\"" + std::string(name) +
                                "\">: expected an integer in [1, " + std::to_string(max) +
                                "], got \"" + p->value + "\"")
                         .toString());
    return;
  }
  out = v;
}

// "a", "a, b, c" or "a..z (40)": queries named in the log.
std::string namesOf(const std::vector<std::string>& names) {
  if (names.size() <= 3) return joined(names, ", ");
  return names.front() + ".." + names.back() + " (" + std::to_string(names.size()) + ")";
}

std::string queryLabel(const descriptor::QuerySpec& spec) {
  return "<query name=\"" + spec.name + "\">";
}

// parseQuery() reports "line L, column C: what"; L counts lines of the query
// text, whose first line is text_where.line of the descriptor.
std::string textError(const descriptor::QuerySpec& spec, std::string_view message) {
  const descriptor::Location& at = spec.text_where.file.empty() ? spec.where : spec.text_where;
  int line = 0;
  int column = 0;
  std::string_view rest = message;
  auto number = [&rest](std::string_view prefix, int& out) {
    if (!rest.starts_with(prefix)) return false;
    rest.remove_prefix(prefix.size());
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), out);
    if (ec != std::errc()) return false;
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    return true;
  };
  if (number("line ", line) && number(", column ", column) && rest.starts_with(": ")) {
    rest.remove_prefix(2);
    descriptor::Location mapped = at;
    if (mapped.line > 0) mapped.line += line - 1;
    return mapped
        .error(queryLabel(spec) + ": " + std::string(rest) + " (line " + std::to_string(line) +
               ", column " + std::to_string(column) + " of the query text)")
        .toString();
  }
  return at.error(queryLabel(spec) + ": " + std::string(message)).toString();
}

}  // namespace

// A query's own part: its output, its matches and its registry entry. What
// it consumes and how belongs to its Detection, which other queries of the
// unit may share. Held by the service while listed, by its Detection while
// a member, and weakly by its registry probe.
class CepService::Query final {
 public:
  Query(const descriptor::QuerySpec& spec, const std::string& service, flows::Qos output_qos,
        ServiceContext& context)
      : name_(spec.name),
        service_(service),
        entry_name_(service + "/" + spec.name + ":detector"),
        inputs_(spec.inputs),
        output_(spec.output),
        text_(spec.text),
        output_symbol_(Symbol::intern(spec.output)),
        sender_(Symbol::intern(service + "/" + spec.name)),
        output_qos_(output_qos),
        context_(context),
        log_(Poco::Logger::get("cepbus.cep")) {}

  const std::string& name() const { return name_; }
  const std::string& output() const { return output_; }
  Detection& detection() const { return *detection_; }
  // Set once the planner has built its detector, before the query is listed.
  void assign(Detection* detection, std::string engine, std::string engine_choice) {
    detection_ = detection;
    engine_ = std::move(engine);
    engine_choice_ = std::move(engine_choice);
  }

  // Adds the registry entry, whose detector numbers come from `detection`.
  Status enter(const std::shared_ptr<Query>& self, const std::shared_ptr<Detection>& detection);
  // Leaves the registry. Idempotent.
  void leave();
  // On the detector's thread, inside a detector call.
  void publish(const plugin::Match& match);
  // The bus will not take one of its composite events: counted and logged.
  void lost(const flows::SendOutcome& out);
  Symbol sender() const { return sender_; }
  // The detector's last state() sample into the registry entry (any thread).
  void publishPartials(const Detection& detection);
  // Once engine auto's trial has decided, the engine it kept (any thread).
  void publishEngine(const Detection& detection);

  QueryStats stats() const;
  uint64_t matches() const { return matches_.load(std::memory_order_relaxed); }

 private:
  const std::string name_;
  const std::string service_;
  const std::string entry_name_;
  const std::vector<std::string> inputs_;
  const std::string output_;
  const std::string text_;
  const Symbol output_symbol_;
  const Symbol sender_;
  const flows::Qos output_qos_;
  ServiceContext& context_;
  Poco::Logger& log_;
  Detection* detection_ = nullptr;  // owned by the service, alive while this query is listed
  std::string engine_;              // the one that runs it
  std::string engine_choice_;       // why auto chose engine_; empty when the descriptor named it
  // Set by enter() before any event can arrive, kept after leave() for
  // deliveries still in flight.
  std::shared_ptr<router::ComponentEntry> entry_;
  bool entered_ = false;  // control plane only

  std::atomic<uint64_t> matches_{0};
  std::atomic<uint64_t> publish_failures_{0};
};

// A detector and what feeds it, for one query or several sharing it: an
// endpoint subscribed to their inputs and a stage of one worker. The
// endpoint's consumer holds it (shared) so that a straight-through delivery
// still in flight after the endpoint was removed finds it alive; its stage
// then refuses the event. The service stops it before dropping it; its
// destructor only lets the stage drain, since the broker may be going away
// when the last holder (an endpoint) lets go.
class CepService::Detection final : public plugin::MatchSink, public plugin::MultiMatchSink {
 public:
  // `members[i]` receives the matches of pattern i; `inputs` are theirs
  // (the same for all); the detector comes with setDetector().
  Detection(std::vector<std::shared_ptr<Query>> members, std::vector<std::string> inputs,
            bool flush_when_idle, bool run_inline, const CepServiceConfig& config,
            ServiceContext& context)
      : members_(std::move(members)),
        live_(members_.size()),
        inputs_(std::move(inputs)),
        flush_when_idle_(flush_when_idle),
        run_inline_(run_inline),
        service_(config.name),
        capacity_(config.capacity),
        batch_size_(config.batch_size),
        context_(context),
        log_(Poco::Logger::get("cepbus.cep")),
        backlog_([&broker = context.broker](const flows::Exchange& e) { return broker.publish(e); },
                 [this](const flows::Exchange& e, const flows::SendOutcome& out) {
                   if (auto it = senders_.find(e.sender); it != senders_.end())
                     it->second->lost(out);
                 }) {
    for (const auto& q : members_) {
      outputs_.push_back(q->output());
      senders_.emplace(q->sender(), q);
    }
  }

  void setDetector(std::unique_ptr<plugin::GuardedDetector> detector) {
    detector_ = std::move(detector);
    counts_partials_ = detector_->state().has_value();
  }
  // The detector is engine auto's trial (`trial`, inside it): its outcome
  // goes to the log when it decides and to the registry after.
  void watchTrial(plugin::TrialDetector* trial) {
    trial_ = trial;
    trial->onDecided([this](const plugin::TrialOutcome& outcome) {
      log_.information("%s: engine auto's trial %s", label_, outcome.describe());
    });
  }
  // Any thread: what the trial kept, once it has decided.
  std::optional<plugin::TrialOutcome> trialOutcome() const {
    return trial_ != nullptr ? trial_->outcome() : std::nullopt;
  }
  // Names the endpoint and makes the stage: once the planner keeps it.
  void open(std::string endpoint);

  const std::string& endpoint() const { return endpoint_; }
  const std::string& label() const { return label_; }
  // The queries it was built for, muted ones included.
  size_t sharedBy() const { return members_.size(); }
  // Members not removed; control plane only.
  size_t live() const { return live_; }
  bool consumes(const std::string& address) const {
    for (const std::string& input : inputs_) {
      if (router::topicMatches(input, address)) return true;
    }
    return false;
  }
  // The outputs of its queries, muted ones included (for the stop order).
  const std::vector<std::string>& outputs() const { return outputs_; }

  // Its queries' registry entries, stage, endpoint, subscriptions. `self`
  // is this detection, captured by the endpoint's consumer. On failure it
  // is stopped.
  Status start(const std::shared_ptr<Detection>& self);
  // Unsubscribes, drains the stage, flushes the detector, takes its queries
  // out of the registry. Idempotent; it cannot run again.
  void stop();
  // Queues a flush of the detector behind the events already queued, so it
  // runs on the detector's thread. False when the stage refused it (full).
  bool requestFlush();
  // Mutes `query`, one of several live members, after the events queued so
  // far: the detector is flushed (without releasing the slack) so that the
  // query's pending matches are published, and its later matches are
  // dropped. Waits for the worker to get there. The caller takes the query
  // out of the registry.
  void detach(const Query& query);

  // A reliable query's composite event (Query::publish()), on the
  // detector's thread inside a detector call: published, or held in the
  // backlog when the bus refuses it for now (detect() then waits for it).
  void publishReliably(flows::Exchange exchange) {
    if (!backlog_.publish(std::move(exchange))) return;
    const uint64_t held = backlog_.heldTotal();
    if (worthLogging(held - 1, held)) {
      log_.warning(
          "%s: the bus refused a composite event for now (%Lu held so far); the query "
          "holds it, and its input waits, until the bus takes it (output_held counts "
          "what waits)",
          label_, held);
    }
  }

  // The detector's numbers; matches and publish failures are its queries'.
  QueryStats stats() const {
    QueryStats s;
    s.output_held = backlog_.size();
    s.consumed = consumed_.load(std::memory_order_relaxed);
    s.errors = errors_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
    s.queued = pending_.load(std::memory_order_acquire);
    s.ran_inline = stage_->metrics().ran_inline;
    if (counts_partials_) {
      s.partial_matches = plugin::DetectorState{partials_.load(std::memory_order_relaxed),
                                                peak_partials_.load(std::memory_order_relaxed)};
    }
    return s;
  }
  Result<std::string> exportModel(std::string_view format) const {
    std::lock_guard lock(detector_mu_);
    return detector_->exportModel(format);
  }
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }

  // The detector's sinks (one query, or pattern `pattern` of several). Run
  // on the detector's thread, with detector_mu_ held.
  void onMatch(const plugin::Match& match) override;
  void onMatch(size_t pattern, const plugin::Match& match) override;

 private:
  Status consume(const flows::Exchange& exchange);  // the endpoint's consumer
  // The stage's handler: every event of `items` goes to the detector in one
  // onEvents() call per run between flush markers.
  stages::StageBatchResult detect(std::span<stages::StageItem> items);
  void detectEvents(std::span<stages::StageItem> items, stages::StageBatchResult& result);
  void detectorFailed(const char* call, const Status& status);
  // Publishes the detector's state() for readers on other threads; called
  // under detector_mu_ after each call into it.
  void sampleState();
  // A stage item that is no event to detect: a flush marker, or one of
  // detaches_' markers.
  bool isControl(const EventPtr& event);
  // The flush (when `flush`: the detector runs) and mute of detach(), on
  // whichever thread gets there.
  void mute(const Query& query, bool flush);
  // Waits until the bus took every held composite event, or gives them up
  // once a stop's deadline passed. Not on a thread running inline.
  void awaitOutputs();
  // Asks the worker to awaitOutputs(): from a run inline, which must not wait.
  void queueRetry();

  // A detach() waiting for the worker.
  struct Detach {
    EventPtr marker;
    const Query* query = nullptr;
    std::promise<void> done;
  };

  // Pattern i's query; null once removed. Written under both the service's
  // mutex and detector_mu_, so either one makes reading it safe.
  std::vector<std::shared_ptr<Query>> members_;
  size_t live_;  // control plane only
  std::vector<std::string> outputs_;
  const std::vector<std::string> inputs_;
  const bool flush_when_idle_;
  const bool run_inline_;
  const std::string service_;
  const size_t capacity_;
  const size_t batch_size_;
  ServiceContext& context_;
  Poco::Logger& log_;
  std::string endpoint_;  // set by open()
  std::string label_;     // "query <endpoint>" or "queries <endpoint>", for the log

  // Its queries by sender, for the composites the backlog loses; fixed at construction.
  std::unordered_map<Symbol, std::shared_ptr<Query>> senders_;
  // Declared before stage_: the stage's destructor drains into the detector,
  // which publishes through the backlog.
  OutputBacklog backlog_;
  std::atomic<bool> retry_queued_{false};  // a retryMarker() is in the stage's queue
  // When awaitOutputs() gives up: never while running, set by stop().
  std::atomic<std::chrono::steady_clock::rep> give_up_at_{
      std::chrono::steady_clock::time_point::max().time_since_epoch().count()};
  // Declared before stage_: the stage's destructor drains into the detector.
  std::unique_ptr<plugin::GuardedDetector> detector_;
  const plugin::TrialDetector* trial_ = nullptr;  // in detector_, under engine auto
  // Held by every call into the detector: the worker's (uncontended),
  // exportModel()'s and detach()'s from any thread.
  mutable std::mutex detector_mu_;
  // The events of one detectEvents() call (the worker's only): reused, empty between calls.
  std::vector<EventPtr> batch_;
  std::unique_ptr<stages::Stage> stage_;
  std::mutex detach_mu_;  // guards detaches_ (control plane and worker)
  std::vector<std::shared_ptr<Detach>> detaches_;
  bool started_ = false;  // control plane only (the service's mutex)
  bool stopped_ = false;  // control plane only
  bool endpoint_added_ = false;
  bool counts_partials_ = false;  // set by setDetector(): state() is not nullopt

  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<size_t> pending_{0};          // admitted to the stage, not yet detected
  std::atomic<uint64_t> partials_{0};       // state() as of the last call
  std::atomic<uint64_t> peak_partials_{0};  // its peak
};

// Turns the specs of one addQueries() call into detections: parses and
// checks each query, groups those that can share a detector and builds each
// group's detector (the rule is in cep_service.h). Runs under the service's
// mutex; nothing it makes is visible until the service lists it.
class CepService::Planner {
 public:
  Planner(const CepServiceConfig& config, ServiceContext& context, uint64_t& shared_made)
      : config_(config),
        context_(context),
        shared_made_(shared_made),
        log_(Poco::Logger::get("cepbus.cep")) {}

  // InvalidArgument naming every query that cannot run, one per line in
  // the order of `specs`.
  Status plan(std::span<const descriptor::QuerySpec> specs);

  std::vector<std::shared_ptr<Query>> queries;  // in the order of the specs
  std::vector<std::shared_ptr<Detection>> detections;

 private:
  // A query parsed and checked, before it has a detector.
  struct Prepared {
    size_t index = 0;  // in the specs
    const descriptor::QuerySpec* spec = nullptr;
    pattern::Query query;
    plugin::DetectorOptions options;  // the engine's and slack
    std::vector<std::string> sorted_inputs;
    bool flush_when_idle = true;
    bool run_inline = false;
    bool share = true;
    std::shared_ptr<Query> made;
    std::string engine_choice;  // auto's reason, once decided
  };
  using Members = std::vector<Prepared*>;
  // A group of queries and the detector built for them.
  struct Built {
    std::string engine;
    Members members;
    std::shared_ptr<Detection> detection;
    plugin::PluginPtr plugin;
  };

  void prepare(size_t index, const descriptor::QuerySpec& spec);
  // Whether `a` and `b` see the same events the same way.
  static bool canShare(const Prepared& a, const Prepared& b);
  // The detector of `engine` for `members`, into `out` when it accepts.
  // `refused` tells the engine's refusal apart from a plugin that failed to load.
  Status build(std::string_view engine, const Members& members, Built& out,
               bool* refused = nullptr);
  // The detector of `engine` for `members`: create() for one query,
  // createMany() for several, reporting to `one` or `many`.
  static Result<std::unique_ptr<plugin::GuardedDetector>> detectorFor(
      const plugin::Plugin& plugin, std::string_view engine, const Members& members,
      const plugin::DetectorOptions& options, plugin::MatchSink& one, plugin::MultiMatchSink& many);
  // Puts auto's pick for `built` on trial against the other engines that
  // run its queries (plugin::TrialDetector), when every query of it is auto.
  void startTrial(Built& built);
  void planNamed(const std::string& engine, const Members& members, std::vector<Built>& built);
  void planAuto(const Members& members, std::vector<Built>& built);
  // `p` on a detector of its own: its named engine, or auto's choice for it alone.
  void alone(Prepared& p, std::vector<Built>& built);
  void fail(const Prepared& p, const std::string& message);
  void keep(Built& built);

  const CepServiceConfig& config_;
  ServiceContext& context_;
  uint64_t& shared_made_;
  Poco::Logger& log_;
  std::vector<std::unique_ptr<Prepared>> prepared_;
  std::vector<std::pair<size_t, std::string>> errors_;  // spec index, message
};

// --------------------------------------------------------------------------

Status CepService::Planner::plan(std::span<const descriptor::QuerySpec> specs) {
  for (size_t i = 0; i < specs.size(); ++i) prepare(i, specs[i]);
  std::vector<Built> built;
  if (errors_.empty()) {
    // Groups of queries that may share, each in the order of the specs.
    std::vector<Members> groups;
    for (const auto& p : prepared_) {
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&p](const Members& g) { return canShare(*g.front(), *p); });
      if (same == groups.end()) {
        groups.push_back({p.get()});
      } else {
        same->push_back(p.get());
      }
    }
    for (const Members& group : groups) {
      Members autos;
      std::vector<std::pair<std::string, Members>> named;  // by engine, in order of appearance
      for (Prepared* p : group) {
        if (p->spec->engine == plugin::kAutoEngine) {
          autos.push_back(p);
          continue;
        }
        auto it = std::find_if(named.begin(), named.end(),
                               [p](const auto& n) { return n.first == p->spec->engine; });
        if (it == named.end()) {
          named.emplace_back(p->spec->engine, Members{p});
        } else {
          it->second.push_back(p);
        }
      }
      std::vector<Built> made;
      // Auto first, so that the queries naming the engine it chose can join it.
      if (!autos.empty()) planAuto(autos, made);
      for (const auto& [engine, members] : named) planNamed(engine, members, made);
      for (Built& b : made) built.push_back(std::move(b));
    }
  }
  if (!errors_.empty()) {
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> messages;
    for (auto& [index, message] : errors_) messages.push_back(std::move(message));
    return Status::invalidArgument(joined(messages, "\n"));
  }
  for (Built& b : built) keep(b);
  for (const auto& p : prepared_) queries.push_back(p->made);
  return Status::ok();
}

void CepService::Planner::prepare(size_t index, const descriptor::QuerySpec& spec) {
  auto error = [&](const std::string& message) {
    errors_.emplace_back(index, spec.where.error(queryLabel(spec) + ": " + message).toString());
  };
  if (spec.inputs.empty()) return error("no input address");
  if (Status s = router::validateAddress(spec.output); !s) return error("output: " + s.message());
  for (const std::string& input : spec.inputs) {
    if (Status s = router::validatePattern(input); !s) return error("input: " + s.message());
  }
  // The loader takes a name with a '/' for a library path; an engine is a name.
  if (spec.engine.empty() || spec.engine.find('/') != std::string::npos) {
    return error("engine \"" + spec.engine + "\" is not an engine name");
  }
  auto query = pattern::parseQuery(spec.text);
  if (!query) {
    errors_.emplace_back(index, textError(spec, query.status().message()));
    return;
  }

  QueryOptions values;
  for (const descriptor::Param& option : spec.options) values[option.name] = option.value;
  auto flush_when_idle = takeHostOption(values, kFlushWhenIdle, {"true", "false"});
  if (!flush_when_idle) return error(flush_when_idle.status().message());
  auto output_qos = takeHostOption(values, kOutputQos, {"best_effort", "reliable"});
  if (!output_qos) return error(output_qos.status().message());
  auto run_inline = takeHostOption(values, kRunInline, {"never", "when_idle"});
  if (!run_inline) return error(run_inline.status().message());
  auto share = takeHostOption(values, kShareDetector, {"true", "false"});
  if (!share) return error(share.status().message());

  auto p = std::make_unique<Prepared>();
  p->index = index;
  p->spec = &spec;
  p->query = std::move(*query);
  p->options = plugin::DetectorOptions(std::move(values)).withBaseDir(spec.base_dir);
  p->sorted_inputs = spec.inputs;
  std::sort(p->sorted_inputs.begin(), p->sorted_inputs.end());
  p->flush_when_idle = *flush_when_idle == "true";
  p->run_inline = *run_inline == "when_idle";
  p->share = *share == "true";
  p->made = std::make_shared<Query>(
      spec, config_.name,
      *output_qos == "reliable" ? flows::Qos::kReliable : flows::Qos::kBestEffort, context_);
  prepared_.push_back(std::move(p));
}

bool CepService::Planner::canShare(const Prepared& a, const Prepared& b) {
  return a.share && b.share && a.sorted_inputs == b.sorted_inputs &&
         a.options.values() == b.options.values() && a.options.baseDir() == b.options.baseDir() &&
         a.flush_when_idle == b.flush_when_idle && a.run_inline == b.run_inline;
}

Status CepService::Planner::build(std::string_view engine, const Members& members, Built& out,
                                  bool* refused) {
  if (refused != nullptr) *refused = false;
  auto loaded = context_.plugins.load(engine);
  if (!loaded) {
    if (loaded.status().code() == Status::Code::kNotFound) {
      return Status::notFound("unknown engine \"" + std::string(engine) +
                              "\": " + loaded.status().message());
    }
    return Status::invalidArgument("engine \"" + std::string(engine) +
                                   "\" cannot be loaded: " + loaded.status().message());
  }
  const Prepared& first = *members.front();
  std::vector<std::shared_ptr<Query>> queries;
  for (const Prepared* p : members) queries.push_back(p->made);
  auto detection =
      std::make_shared<Detection>(std::move(queries), first.spec->inputs, first.flush_when_idle,
                                  first.run_inline, config_, context_);
  auto made = detectorFor(**loaded, engine, members, first.options, *detection, *detection);
  if (!made) {
    if (refused != nullptr) *refused = true;
    return made.status();
  }
  detection->setDetector(std::move(*made));
  out = Built{std::string(engine), members, std::move(detection), std::move(*loaded)};
  return Status::ok();
}

Result<std::unique_ptr<plugin::GuardedDetector>> CepService::Planner::detectorFor(
    const plugin::Plugin& plugin, std::string_view engine, const Members& members,
    const plugin::DetectorOptions& options, plugin::MatchSink& one, plugin::MultiMatchSink& many) {
  if (members.size() == 1) {
    return plugin.createDetector(engine, members.front()->query, options, one);
  }
  std::vector<plugin::NamedQuery> named;
  for (const Prepared* p : members) named.push_back({p->spec->name, p->query});
  return plugin.createManyDetectors(engine, named, options, many);
}

void CepService::Planner::startTrial(Built& built) {
  const Members& members = built.members;
  for (const Prepared* p : members) {
    if (p->spec->engine != plugin::kAutoEngine) return;  // a named engine pins the set
  }
  Detection& detection = *built.detection;
  const bool one = members.size() == 1;
  auto made = plugin::makeAutoTrial(
      built.engine, members.front()->options, one ? &detection : nullptr,
      one ? nullptr : &detection,
      [&](std::string_view engine, const plugin::DetectorOptions& options,
          plugin::MatchSink& candidate_one,
          plugin::MultiMatchSink& candidate_many) -> Result<std::unique_ptr<plugin::Detector>> {
        auto loaded = context_.plugins.load(engine);
        if (!loaded) return loaded.status();
        auto d = detectorFor(**loaded, engine, members, options, candidate_one, candidate_many);
        if (!d) return d.status();
        return std::unique_ptr<plugin::Detector>(std::move(d).value());
      });
  if (!made) {
    // The prior's own detector, already built, runs alone.
    std::vector<std::string> names;
    for (const Prepared* p : members) names.push_back(p->spec->name);
    log_.warning("queries %s: engine auto runs %s without a trial: %s", namesOf(names),
                 built.engine, made.status().message());
    return;
  }
  if (made->detector == nullptr) return;
  detection.setDetector(std::move(made->detector));
  detection.watchTrial(made->trial);
  for (Prepared* p : members) p->engine_choice += "; " + made->describe;
}

void CepService::Planner::planNamed(const std::string& engine, const Members& members,
                                    std::vector<Built>& built) {
  // Auto's queries that went to this engine share with them.
  for (Built& chosen : built) {
    if (chosen.engine != engine) continue;
    Members both = chosen.members;
    both.insert(both.end(), members.begin(), members.end());
    std::sort(both.begin(), both.end(),
              [](const Prepared* a, const Prepared* b) { return a->index < b->index; });
    Built merged;
    if (Status s = build(engine, both, merged); s) {
      chosen = std::move(merged);
      return;
    }
    break;
  }
  Built own;
  bool refused = false;
  const Status s = build(engine, members, own, &refused);
  if (s) {
    built.push_back(std::move(own));
    return;
  }
  if (members.size() == 1) {
    fail(*members.front(),
         refused ? "engine \"" + engine + "\" cannot run the query: " + s.message() : s.message());
    return;
  }
  // One by one, so that each error names its query and a query the engine
  // runs still runs.
  const size_t errors = errors_.size();
  for (Prepared* p : members) alone(*p, built);
  if (errors_.size() == errors) {
    std::vector<std::string> names;
    for (const Prepared* p : members) names.push_back(p->spec->name);
    log_.warning(
        "queries %s: engine %s runs each but cannot share a detector between them (%s); "
        "each gets its own",
        namesOf(names), engine, s.message());
  }
}

void CepService::Planner::planAuto(const Members& members, std::vector<Built>& built) {
  if (members.size() == 1) return alone(*members.front(), built);
  std::vector<const pattern::Query*> queries;
  for (const Prepared* p : members) queries.push_back(&p->query);
  const plugin::PatternSetShape shape = plugin::shapeOf(queries);
  const std::vector<std::string_view> order = plugin::autoCandidates(shape);
  Built set;
  auto choice = plugin::chooseEngine(
      shape, [&](std::string_view engine) { return build(engine, members, set); });
  if (choice && choice->engine == order.front()) {
    for (Prepared* p : members) p->engine_choice = choice->reason;
    built.push_back(std::move(set));
    return;
  }
  // The preferred engine refuses some of them. The set splits at the first
  // engine that runs some of them alone: those are decided again as a set,
  // the others as a set of their own, so that no query goes to a later
  // engine (algebra reads a query without CONTEXT differently) only because
  // another query needs it.
  for (std::string_view engine : order) {
    Members accepted;
    Members refused;
    for (Prepared* p : members) {
      Built probe;
      (build(engine, {p}, probe) ? accepted : refused).push_back(p);
    }
    if (accepted.empty()) continue;
    if (!refused.empty()) {
      planAuto(accepted, built);
      planAuto(refused, built);
      return;
    }
    if (choice && choice->engine == engine) {
      for (Prepared* p : members) p->engine_choice = choice->reason;
      built.push_back(std::move(set));
      return;
    }
    std::vector<std::string> names;
    for (const Prepared* p : members) names.push_back(p->spec->name);
    log_.warning(
        "queries %s: engine %s runs each but not all in one detector (%s); each gets its "
        "own",
        namesOf(names), std::string(engine), choice ? choice->reason : choice.status().message());
    break;
  }
  // Each alone: no engine runs any of them (each error then says why), or
  // the shared detector could not be built.
  for (Prepared* p : members) alone(*p, built);
}

void CepService::Planner::alone(Prepared& p, std::vector<Built>& built) {
  Built own;
  const std::string& engine = p.spec->engine;
  if (engine != plugin::kAutoEngine) {
    bool refused = false;
    if (Status s = build(engine, {&p}, own, &refused); !s) {
      return fail(p, refused ? "engine \"" + engine + "\" cannot run the query: " + s.message()
                             : s.message());
    }
  } else {
    const pattern::Query* one = &p.query;
    auto choice = plugin::chooseEngine(plugin::shapeOf({&one, 1}), [&](std::string_view candidate) {
      return build(candidate, {&p}, own);
    });
    if (!choice) return fail(p, choice.status().message());
    p.engine_choice = choice->reason;
  }
  built.push_back(std::move(own));
}

void CepService::Planner::fail(const Prepared& p, const std::string& message) {
  errors_.emplace_back(p.index,
                       p.spec->where.error(queryLabel(*p.spec) + ": " + message).toString());
}

void CepService::Planner::keep(Built& built) {
  startTrial(built);
  const Members& members = built.members;
  std::vector<std::string> names;
  for (const Prepared* p : members) names.push_back(p->spec->name);
  std::string reason;
  for (const Prepared* p : members) {
    if (reason.empty()) reason = p->engine_choice;
  }
  if (members.size() == 1) {
    built.detection->open(config_.name + "/" + names.front());
    if (!reason.empty()) {
      log_.information("%s: engine %s (%s)", queryLabel(*members.front()->spec), built.engine,
                       reason);
    }
  } else {
    built.detection->open(config_.name + "/shared-" + std::to_string(++shared_made_) + ":" +
                          names.front() + ".." + names.back());
    log_.information("queries %s: engine %s%s, one detector on %s (endpoint %s)", namesOf(names),
                     built.engine, reason.empty() ? std::string() : " (" + reason + ")",
                     joined(members.front()->spec->inputs, ","), built.detection->endpoint());
  }
  for (Prepared* p : members) {
    p->made->assign(built.detection.get(), built.engine, p->engine_choice);
    // An engine default that changes the matches (the algebra engine's
    // CONTEXT recent) is said where the operator reads the bus log.
    for (const std::string& notice : built.plugin->notices(built.engine, p->query)) {
      log_.notice("%s: %s", queryLabel(*p->spec), notice);
    }
  }
  detections.push_back(std::move(built.detection));
}

// --------------------------------------------------------------------------

Status CepService::Query::enter(const std::shared_ptr<Query>& self,
                                const std::shared_ptr<Detection>& detection) {
  auto entry = context_.registry.add(entry_name_, router::ComponentKind::kService, service_);
  if (!entry) return entry.status();
  entered_ = true;
  entry_ = *entry;
  entry_->setMetadata("type", "cep-query");
  entry_->setMetadata("engine", engine_);
  if (!engine_choice_.empty()) entry_->setMetadata("engine_choice", engine_choice_);
  // A relay: publishers of its input are paced by its output's subscribers.
  entry_->setMetadata(std::string(router::kRelayInputs), joined(inputs_, ","));
  entry_->setMetadata(std::string(router::kRelayOutput), output_);
  entry_->setMetadata("text", text_);
  entry_->setMetadata("endpoint", detection->endpoint());
  if (detection->sharedBy() > 1) {
    entry_->setMetadata("shared_by", std::to_string(detection->sharedBy()));
  }
  entry_->setMetadata("matches", "0");
  publishPartials(*detection);
  // The detector's numbers and the matches change on every detection; the
  // registry reads them only when it takes a snapshot, which runs the probe
  // before copying the metadata.
  const std::weak_ptr<Query> weak = self;
  const std::weak_ptr<Detection> weak_detection = detection;
  entry_->setProbe([weak, weak_detection](router::LiveNumbers& numbers) {
    const std::shared_ptr<Query> q = weak.lock();
    const std::shared_ptr<Detection> d = weak_detection.lock();
    if (q == nullptr || d == nullptr) return;
    const QueryStats s = d->stats();
    numbers.queue_length = s.queued;
    numbers.delivered = s.consumed;
    numbers.failed = s.errors;
    numbers.rejected = s.rejected;
    q->entry_->setMetadata("matches", std::to_string(q->matches()));
    q->publishPartials(*d);
    q->publishEngine(*d);
  });
  entry_->setState(router::ComponentState::kStarted);
  return Status::ok();
}

void CepService::Query::leave() {
  if (!entered_) return;
  entered_ = false;
  entry_->setMetadata("matches", std::to_string(matches()));
  publishPartials(*detection_);
  publishEngine(*detection_);
  entry_->setState(router::ComponentState::kStopped);
  context_.registry.remove(entry_name_);
}

void CepService::Query::publishEngine(const Detection& detection) {
  const std::optional<plugin::TrialOutcome> outcome = detection.trialOutcome();
  if (!outcome) return;
  entry_->setMetadata("engine", outcome->kept);
  entry_->setMetadata("engine_choice", engine_choice_ + "; by trial: " + outcome->describe());
}

void CepService::Query::publishPartials(const Detection& detection) {
  const std::optional<plugin::DetectorState> held = detection.stats().partial_matches;
  if (!held) return;
  entry_->setMetadata("partial_matches", std::to_string(held->partial_matches));
  entry_->setMetadata("partial_matches_peak", std::to_string(held->peak_partial_matches));
}

QueryStats CepService::Query::stats() const {
  QueryStats s = detection_->stats();
  s.matches = matches_.load(std::memory_order_relaxed);
  s.publish_failures = publish_failures_.load(std::memory_order_relaxed);
  return s;
}

void CepService::Query::publish(const plugin::Match& match) {
  matches_.fetch_add(1, std::memory_order_relaxed);
  flows::Exchange exchange;
  exchange.event = match.composite();
  exchange.address = output_symbol_;
  exchange.sender = sender_;
  exchange.qos = output_qos_;
  if (output_qos_ == flows::Qos::kReliable) {
    detection_->publishReliably(std::move(exchange));
    return;
  }
  const flows::SendOutcome out = context_.broker.publish(exchange);
  if (!out.status.isOk()) lost(out);
}

void CepService::Query::lost(const flows::SendOutcome& out) {
  const uint64_t failures = std::max<uint64_t>(1, out.rejected + out.failed);
  const uint64_t n = publish_failures_.fetch_add(failures, std::memory_order_relaxed) + failures;
  if (worthLogging(n - failures, n)) {
    log_.warning("query %s/%s: composite event to %s refused by %Lu target(s) (%Lu so far): %s",
                 service_, name_, output_, static_cast<Poco::UInt64>(failures),
                 static_cast<Poco::UInt64>(n), out.status.toString());
  }
}

// --------------------------------------------------------------------------

void CepService::Detection::open(std::string endpoint) {
  endpoint_ = std::move(endpoint);
  label_ = (members_.size() == 1 ? "query " : "queries ") + endpoint_;
  stages::StageConfig stage;
  stage.name = "cep:" + endpoint_;
  stage.capacity = capacity_;
  stage.batch_size = batch_size_;
  // A detector is single-threaded and needs its events in arrival order:
  // one worker, and one cost class so that costs do not reorder them.
  stage.min_threads = 1;
  stage.max_threads = 1;
  stage.cost_thresholds.clear();
  stage.run_inline_when_idle = run_inline_;
  batch_.reserve(stage.batch_size);
  stage_ = std::make_unique<stages::Stage>(
      std::move(stage), [this](std::span<stages::StageItem> items) { return detect(items); });
}

Status CepService::Detection::start(const std::shared_ptr<Detection>& self) {
  if (started_ || stopped_) return Status::ok();
  started_ = true;
  for (const auto& q : members_) {
    if (q == nullptr) continue;
    if (Status s = q->enter(q, self); !s) {
      stop();
      return s;
    }
  }
  stage_->start();
  Status added = context_.broker.addEndpoint(
      endpoint_,
      [self](const flows::Exchange& exchange, flows::DeliveryContext&) {
        return self->consume(exchange);
      },
      service_);
  if (!added) {
    stop();
    return added;
  }
  endpoint_added_ = true;
  for (const std::string& input : inputs_) {
    auto id = context_.broker.subscribe(endpoint_, input);
    if (!id) {
      stop();
      return id.status();
    }
  }
  log_.debug("%s started: input %s", label_, joined(inputs_, ","));
  return Status::ok();
}

void CepService::Detection::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Composites the bus refuses for now get kStopDrain from here to go out,
  // however many events are still queued.
  give_up_at_.store((std::chrono::steady_clock::now() + kStopDrain).time_since_epoch().count(),
                    std::memory_order_release);
  // Removing the endpoint drops its subscriptions and drains the flows'
  // queues into the stage; stopping the stage then runs every queued event.
  // Stopping: there is nothing to do about an endpoint already gone.
  if (endpoint_added_) (void)context_.broker.removeEndpoint(endpoint_);
  if (stage_) stage_->stop();
  if (started_) {
    {
      // The stage's worker is joined; exportModel() may still come.
      std::lock_guard lock(detector_mu_);
      if (Status s = detector_->flush(); !s) detectorFailed("flush", s);
      sampleState();
    }
    awaitOutputs();
  }
  for (const auto& q : members_) {
    if (q != nullptr) q->leave();
  }
}

void CepService::Detection::detach(const Query& query) {
  // Behind the events already queued, as for a query of its own whose stage
  // drains before it goes: what was delivered before the removal counts.
  if (started_ && !stopped_) {
    auto request = std::make_shared<Detach>();
    request->marker = EventBuilder(detachType()).build();
    request->query = &query;
    std::future<void> done = request->done.get_future();
    {
      std::lock_guard lock(detach_mu_);
      detaches_.push_back(request);
    }
    pending_.fetch_add(1, std::memory_order_acq_rel);
    stages::StageItem item;
    item.event = request->marker;
    stages::Admission admission;
    {
      OfferingScope offering;
      admission = stage_->offer(std::move(item));
    }
    if (admission != stages::Admission::kRejected) {
      // Bounded: a worker waiting for the bus to take held composites gets
      // to the marker only then, and a removal must not hang on a stuck
      // subscriber. The query stays a member (alive) until it is muted.
      if (done.wait_for(kStopDrain) == std::future_status::timeout) {
        log_.warning(
            "%s: query %s removed while its detector waits for the bus to take its held "
            "composite events; it is muted when the detector gets there",
            label_, query.name());
      }
    } else {
      // A full stage: muted now, the events still queued no longer count for it.
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      {
        std::lock_guard lock(detach_mu_);
        std::erase(detaches_, request);
      }
      mute(query, true);
    }
  } else {
    mute(query, false);
  }
  --live_;
  log_.information(
      "%s: query %s removed; its pattern stays in the detector, muted, while %Lu other queries "
      "use it",
      label_, query.name(), static_cast<Poco::UInt64>(live_));
}

void CepService::Detection::mute(const Query& query, bool flush) {
  std::lock_guard lock(detector_mu_);
  // A flush mid-stream is allowed (the detector takes more events after
  // it); what the slack holds back stays held for the queries that stay.
  if (flush) {
    if (Status s = detector_->flushReleased(); !s) detectorFailed("flush", s);
    sampleState();
  }
  for (auto& q : members_) {
    if (q.get() == &query) q.reset();
  }
}

bool CepService::Detection::isControl(const EventPtr& event) {
  if (event == flushMarker() || event == retryMarker()) return true;
  if (event->type() != detachType()) return false;
  std::lock_guard lock(detach_mu_);
  return std::any_of(detaches_.begin(), detaches_.end(),
                     [&event](const auto& d) { return d->marker == event; });
}

Status CepService::Detection::consume(const flows::Exchange& exchange) {
  // Counted before the offer: the worker may detect the event before offer() returns.
  pending_.fetch_add(1, std::memory_order_acq_rel);
  stages::StageItem item;
  item.event = exchange.event;
  item.reliable = exchange.qos == flows::Qos::kReliable;
  OfferingScope offering;
  if (stage_->offer(std::move(item)) != stages::Admission::kRejected) return Status::ok();
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  const uint64_t n = rejected_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (worthLogging(n - 1, n)) {
    log_.warning("%s: its stage refused an event (%Lu so far): queue full or query stopped", label_,
                 static_cast<Poco::UInt64>(n));
  }
  return Status::rejected(label_ + ": queue full or query stopped");
}

bool CepService::Detection::requestFlush() {
  if (!started_ || stopped_) return true;
  pending_.fetch_add(1, std::memory_order_acq_rel);
  stages::StageItem item;
  item.event = flushMarker();
  OfferingScope offering;
  if (stage_->offer(std::move(item)) != stages::Admission::kRejected) return true;
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  return false;
}

void CepService::Detection::queueRetry() {
  if (retry_queued_.exchange(true, std::memory_order_acq_rel)) return;
  pending_.fetch_add(1, std::memory_order_acq_rel);
  stages::StageItem item;
  item.event = retryMarker();
  OfferingScope offering;
  if (stage_->offer(std::move(item)) != stages::Admission::kRejected) return;
  // A full stage: its worker gets to the backlog before its next batch.
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  retry_queued_.store(false, std::memory_order_release);
}

void CepService::Detection::awaitOutputs() {
  while (!backlog_.drain(std::chrono::steady_clock::now() + std::chrono::milliseconds(100))) {
    const std::chrono::steady_clock::time_point give_up{
        std::chrono::steady_clock::duration(give_up_at_.load(std::memory_order_acquire))};
    if (std::chrono::steady_clock::now() >= give_up) {
      log_.warning("%s: stopped while the bus refused %Lu of its composite events; given up",
                   label_, static_cast<Poco::UInt64>(backlog_.size()));
      backlog_.abandon();
      return;
    }
  }
}

stages::StageBatchResult CepService::Detection::detect(std::span<stages::StageItem> items) {
  stages::StageBatchResult result;
  // The worker takes no more events while the bus refuses composites; a
  // run inline never waits, it asks the worker to.
  const bool on_worker = !t_offering;
  if (on_worker && !backlog_.empty()) awaitOutputs();
  // A marker splits the batch: the events before it, then the flush, the
  // wait for held composites or the mute.
  while (!items.empty()) {
    const auto marker =
        std::find_if(items.begin(), items.end(),
                     [this](const stages::StageItem& i) { return isControl(i.event); });
    const auto run = static_cast<size_t>(marker - items.begin());
    if (run > 0) detectEvents(items.first(run), result);
    if (run == items.size()) break;
    if (marker->event == flushMarker()) {
      std::lock_guard lock(detector_mu_);
      if (Status s = detector_->flush(); !s) detectorFailed("flush", s);
      sampleState();
    } else if (marker->event == retryMarker()) {
      retry_queued_.store(false, std::memory_order_release);
      if (on_worker) awaitOutputs();
    } else {
      std::shared_ptr<Detach> request;
      {
        std::lock_guard lock(detach_mu_);
        const auto it = std::find_if(detaches_.begin(), detaches_.end(), [&marker](const auto& d) {
          return d->marker == marker->event;
        });
        request = *it;
        detaches_.erase(it);
      }
      mute(*request->query, true);
      request->done.set_value();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    items = items.subspan(run + 1);
  }
  if (!backlog_.empty()) {
    if (on_worker) {
      awaitOutputs();
    } else {
      queueRetry();
    }
  }
  return result;
}

void CepService::Detection::detectEvents(std::span<stages::StageItem> items,
                                         stages::StageBatchResult& result) {
  for (stages::StageItem& item : items) batch_.push_back(std::move(item.event));
  const size_t n = batch_.size();
  Status status = Status::ok();
  Status flushed = Status::ok();
  {
    std::lock_guard lock(detector_mu_);
    status = detector_->onEvents(batch_);
    // Nothing is queued behind these events: the input paused, so a batching
    // engine reports what it holds now instead of at its next batch
    // boundary, which may be far off when events are sparse. Under load the
    // queue is rarely empty and the engine keeps batching.
    // A pause is not the end of the stream: what the slack holds back stays
    // held, or the next event of a slower producer would be late.
    if (flush_when_idle_ && pending_.load(std::memory_order_acquire) == n) {
      flushed = detector_->flushReleased();
    }
    sampleState();
  }
  batch_.clear();
  consumed_.fetch_add(n, std::memory_order_relaxed);
  // onEvents() reports the first error of the batch only: one error is
  // counted (and one item failed) however many of its events were refused.
  if (!status) {
    detectorFailed("event", status);
    if (result.failed++ == 0) result.first_error = status;
  }
  if (!flushed) detectorFailed("flush", flushed);
  // Last: matches of these events are published by now, so an idle query
  // has handed everything on.
  pending_.fetch_sub(n, std::memory_order_acq_rel);
}

void CepService::Detection::sampleState() {
  if (!counts_partials_) return;
  if (const std::optional<plugin::DetectorState> s = detector_->state()) {
    partials_.store(s->partial_matches, std::memory_order_relaxed);
    peak_partials_.store(s->peak_partial_matches, std::memory_order_relaxed);
  }
}

void CepService::Detection::detectorFailed(const char* call, const Status& status) {
  const uint64_t n = errors_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (worthLogging(n - 1, n)) {
    log_.warning("%s: detector refused %s (%Lu errors so far): %s", label_, std::string(call),
                 static_cast<Poco::UInt64>(n), status.toString());
  }
}

void CepService::Detection::onMatch(const plugin::Match& match) {
  if (members_.front() != nullptr) members_.front()->publish(match);
}

void CepService::Detection::onMatch(size_t pattern, const plugin::Match& match) {
  // A removed query's pattern still runs; its matches go nowhere.
  if (pattern < members_.size() && members_[pattern] != nullptr) members_[pattern]->publish(match);
}

// --------------------------------------------------------------------------

CepService::CepService(CepServiceConfig config, ServiceContext& context)
    : config_(std::move(config)), context_(context) {}

CepService::~CepService() { stop(); }

Status CepService::start() {
  std::lock_guard lock(mu_);
  if (stopped_) return Status::unavailable(config_.name + ": stopped; it cannot start again");
  if (started_) return Status::ok();
  auto entry = context_.registry.add(config_.name, router::ComponentKind::kService);
  if (!entry) return entry.status();
  entry_ = *entry;
  entry_->setMetadata("type", "cep");
  publishQueryList();
  started_ = true;
  for (const auto& d : detections_) {
    if (Status s = d->start(d); !s) {
      stopLocked();
      return s;
    }
  }
  entry_->setState(router::ComponentState::kStarted);
  return Status::ok();
}

void CepService::stop() {
  std::lock_guard lock(mu_);
  stopLocked();
}

void CepService::stopLocked() {
  if (stopped_) return;
  stopped_ = true;
  for (const auto& d : stopOrder()) d->stop();
  detections_.clear();
  queries_.clear();
  if (entry_) {
    entry_->setState(router::ComponentState::kStopped);
    context_.registry.remove(config_.name);
    entry_.reset();
  }
}

void CepService::flush() {
  std::lock_guard lock(mu_);
  for (const auto& d : stopOrder()) {
    if (!d->requestFlush()) {
      Poco::Logger::get("cepbus.cep").warning("%s: stage full, flush deferred to stop", d->label());
    }
  }
}

bool CepService::finished() const {
  std::lock_guard lock(mu_);
  for (const auto& d : detections_) {
    if (!d->idle()) return false;
  }
  return true;
}

Status CepService::addQuery(const descriptor::QuerySpec& spec) {
  return addQueries(std::span(&spec, 1));
}

Status CepService::addQueries(std::span<const descriptor::QuerySpec> specs) {
  std::lock_guard lock(mu_);
  if (stopped_) return Status::unavailable(config_.name + ": stopped; no query can be added");
  for (size_t i = 0; i < specs.size(); ++i) {
    const descriptor::QuerySpec& spec = specs[i];
    const bool taken = findQuery(spec.name) != nullptr ||
                       std::any_of(specs.begin(), specs.begin() + static_cast<ptrdiff_t>(i),
                                   [&spec](const auto& s) { return s.name == spec.name; });
    if (taken) {
      return Status::alreadyExists(spec.where
                                       .error(queryLabel(spec) + ": " + config_.name +
                                              " already runs a query \"" + spec.name + "\"")
                                       .toString());
    }
  }
  Planner planner(config_, context_, shared_made_);
  Status planned = Status::ok();
  try {
    planned = planner.plan(specs);
  } catch (const std::exception& e) {
    const std::string where =
        specs.size() == 1 ? specs[0].where.error(queryLabel(specs[0]) + ": " + e.what()).toString()
                          : config_.name + ": " + e.what();
    planned = Status::internal(where);
  }
  if (!planned) return planned;
  if (started_) {
    for (size_t i = 0; i < planner.detections.size(); ++i) {
      const auto& d = planner.detections[i];
      if (Status s = d->start(d); !s) {
        for (size_t j = 0; j <= i; ++j) planner.detections[j]->stop();
        return s;
      }
    }
  }
  for (auto& d : planner.detections) detections_.push_back(std::move(d));
  for (auto& q : planner.queries) queries_.push_back(std::move(q));
  publishQueryList();
  return Status::ok();
}

Status CepService::removeQuery(std::string_view name) {
  std::lock_guard lock(mu_);
  const auto it = std::find_if(queries_.begin(), queries_.end(),
                               [name](const auto& q) { return q->name() == name; });
  if (it == queries_.end()) {
    return Status::notFound(config_.name + ": no query \"" + std::string(name) + "\"");
  }
  const std::shared_ptr<Query> query = *it;
  queries_.erase(it);
  publishQueryList();
  Detection& detection = query->detection();
  if (detection.live() > 1) {
    detection.detach(*query);
    query->leave();
    return Status::ok();
  }
  const auto d = std::find_if(detections_.begin(), detections_.end(),
                              [&detection](const auto& p) { return p.get() == &detection; });
  const std::shared_ptr<Detection> last = *d;
  detections_.erase(d);
  last->stop();
  return Status::ok();
}

std::shared_ptr<CepService::Query> CepService::findQuery(std::string_view name) const {
  for (const auto& q : queries_) {
    if (q->name() == name) return q;
  }
  return nullptr;
}

std::vector<std::string> CepService::queries() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& q : queries_) out.push_back(q->name());
  return out;
}

std::optional<QueryStats> CepService::stats(std::string_view name) const {
  std::lock_guard lock(mu_);
  const std::shared_ptr<Query> q = findQuery(name);
  if (q == nullptr) return std::nullopt;
  return q->stats();
}

uint64_t CepService::matches(std::string_view name) const {
  const std::optional<QueryStats> s = stats(name);
  return s ? s->matches : 0;
}

Result<std::string> CepService::exportModel(std::string_view name, std::string_view format) const {
  std::shared_ptr<Detection> detection;
  {
    std::lock_guard lock(mu_);
    if (const std::shared_ptr<Query> q = findQuery(name)) {
      for (const auto& d : detections_) {
        if (d.get() == &q->detection()) detection = d;
      }
    }
  }
  if (detection == nullptr) {
    return Status::notFound("service " + config_.name + " has no query '" + std::string(name) +
                            "'");
  }
  return detection->exportModel(format);
}

std::string CepService::endpointName(std::string_view query) const {
  std::lock_guard lock(mu_);
  if (const std::shared_ptr<Query> q = findQuery(query)) return q->detection().endpoint();
  return config_.name + "/" + std::string(query);
}

std::vector<std::shared_ptr<CepService::Detection>> CepService::stopOrder() const {
  // Kahn's algorithm over "i's output feeds j"; ties (and cycles, which
  // have no right order) go in the order the detectors were made.
  const size_t n = detections_.size();
  std::vector<std::vector<size_t>> feeds(n);
  std::vector<size_t> inputs_pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const auto& outputs = detections_[i]->outputs();
      if (std::any_of(outputs.begin(), outputs.end(),
                      [&](const std::string& o) { return detections_[j]->consumes(o); })) {
        feeds[i].push_back(j);
        ++inputs_pending[j];
      }
    }
  }
  std::vector<bool> done(n, false);
  std::vector<std::shared_ptr<Detection>> order;
  while (order.size() < n) {
    size_t pick = n;
    for (size_t i = 0; i < n && pick == n; ++i) {
      if (!done[i] && inputs_pending[i] == 0) pick = i;
    }
    for (size_t i = 0; i < n && pick == n; ++i) {
      if (!done[i]) pick = i;
    }
    done[pick] = true;
    order.push_back(detections_[pick]);
    for (size_t j : feeds[pick]) {
      if (inputs_pending[j] > 0) --inputs_pending[j];
    }
  }
  return order;
}

void CepService::publishQueryList() {
  if (!entry_) return;
  std::vector<std::string> names;
  for (const auto& q : queries_) names.push_back(q->name());
  entry_->setMetadata("queries", joined(names, ","));
}

// --------------------------------------------------------------------------

Result<std::unique_ptr<Service>> CepServiceFactory::create(
    const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit,
    ServiceContext& context) const {
  CepServiceConfig config;
  config.name = assembly.name + "." + unit.name;
  std::vector<std::string> errors;
  sizeParam(unit, "capacity", kMaxCapacity, config.capacity, errors);
  sizeParam(unit, "batch_size", kMaxBatchSize, config.batch_size, errors);
  if (Status s = checkParamNames(unit, type(), {"capacity", "batch_size"}); !s)
    errors.push_back(s.message());
  if (unit.queries.empty() || !unit.subscriptions.empty() || !unit.publications.empty()) {
    errors.push_back(unit.where
                         .error("cep \"" + unit.name +
                                "\": expected one or more <query> and no <subscribe> or "
                                "<publish> (a query names its input and output addresses)")
                         .toString());
  }
  if (!errors.empty()) return Status::invalidArgument(joined(errors, "\n"));
  auto service = std::make_unique<CepService>(std::move(config), context);
  std::vector<descriptor::QuerySpec> queries = unit.queries;
  for (descriptor::QuerySpec& query : queries) query.base_dir = assembly.base_dir;
  // One call, so that the unit's queries share detectors.
  if (Status s = service->addQueries(queries); !s) return Status::invalidArgument(s.message());
  return std::unique_ptr<Service>(std::move(service));
}

}  // namespace cepbus::services::cep
