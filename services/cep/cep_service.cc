#include "services/cep/cep_service.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <exception>
#include <map>
#include <span>

#include "bus/core/pattern/parser.h"
#include "bus/core/plugin/engine_choice.h"
#include "bus/core/plugin/plugin_loader.h"
#include "flows/exchange.h"
#include "router/topic.h"
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

// One hosted query. The endpoint's consumer holds it (shared) so that a
// straight-through delivery still in flight after the endpoint was removed
// finds it alive; its stage then refuses the event. The service stops it
// before dropping it; its destructor only lets the stage drain, since the
// broker may be going away when the last holder (an endpoint) lets go.
class CepService::Query final : public plugin::MatchSink {
 public:
  // Parses `spec`, finds its engine and creates its detector. Errors name
  // the descriptor file:line.
  static Result<std::shared_ptr<Query>> compile(const descriptor::QuerySpec& spec,
                                                const CepServiceConfig& config,
                                                ServiceContext& context);

  Query(const descriptor::QuerySpec& spec, const std::string& service, ServiceContext& context)
      : name_(spec.name),
        service_(service),
        endpoint_(service + "/" + spec.name),
        entry_name_(endpoint_ + ":detector"),
        engine_(spec.engine),
        inputs_(spec.inputs),
        output_(spec.output),
        text_(spec.text),
        output_symbol_(Symbol::intern(spec.output)),
        sender_(Symbol::intern(endpoint_)),
        context_(context),
        log_(Poco::Logger::get("cepbus.cep")) {}

  const std::string& name() const { return name_; }
  const std::string& output() const { return output_; }
  bool consumes(const std::string& address) const {
    for (const std::string& input : inputs_) {
      if (router::topicMatches(input, address)) return true;
    }
    return false;
  }

  // Registry entry, stage, endpoint, subscriptions. `self` is this query,
  // captured by the endpoint's consumer. On failure the query is stopped.
  Status start(const std::shared_ptr<Query>& self);
  // Unsubscribes, drains the stage, flushes the detector, leaves the
  // registry. Idempotent; the query cannot run again.
  void stop();
  // Queues a flush of the detector behind the events already queued, so it
  // runs on the detector's thread. False when the stage refused it (full).
  bool requestFlush();

  QueryStats stats() const {
    QueryStats s;
    s.consumed = consumed_.load(std::memory_order_relaxed);
    s.matches = matches_.load(std::memory_order_relaxed);
    s.errors = errors_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
    s.publish_failures = publish_failures_.load(std::memory_order_relaxed);
    s.queued = pending_.load(std::memory_order_acquire);
    s.ran_inline = stage_->metrics().ran_inline;
    if (counts_partials_) {
      s.partial_matches = plugin::DetectorState{partials_.load(std::memory_order_relaxed),
                                                peak_partials_.load(std::memory_order_relaxed)};
    }
    return s;
  }
  uint64_t matches() const { return matches_.load(std::memory_order_relaxed); }
  Result<std::string> exportModel(std::string_view format) const {
    std::lock_guard lock(detector_mu_);
    return detector_->exportModel(format);
  }
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }

  // Runs on the detector's thread (the stage worker, or stop() for the flush).
  void onMatch(const plugin::Match& match) override;

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
  // The last sample into the registry entry's metadata (any thread).
  void publishPartials();

  const std::string name_;
  const std::string service_;
  const std::string endpoint_;
  const std::string entry_name_;
  std::string engine_;         // the one that runs it (set by compile() under engine="auto")
  std::string engine_choice_;  // why auto chose engine_; empty when the descriptor named it
  const std::vector<std::string> inputs_;
  const std::string output_;
  const std::string text_;
  const Symbol output_symbol_;
  const Symbol sender_;
  ServiceContext& context_;
  Poco::Logger& log_;

  // Declared before stage_: the stage's destructor drains into the detector.
  std::unique_ptr<plugin::GuardedDetector> detector_;
  // Held by every call into the detector: the worker's (uncontended) and
  // exportModel()'s from any thread.
  mutable std::mutex detector_mu_;
  // The events of one detectEvents() call (the worker's only): reused, empty between calls.
  std::vector<EventPtr> batch_;
  std::unique_ptr<stages::Stage> stage_;
  // Set once by start() before any event can arrive, kept after stop() for
  // deliveries still in flight.
  std::shared_ptr<router::ComponentEntry> entry_;
  bool started_ = false;  // control plane only (the service's mutex)
  bool stopped_ = false;  // control plane only
  bool endpoint_added_ = false;
  bool flush_when_idle_ = true;                      // set by compile()
  bool counts_partials_ = false;                     // set by compile(): state() is not nullopt
  flows::Qos output_qos_ = flows::Qos::kBestEffort;  // set by compile()

  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> matches_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> publish_failures_{0};
  std::atomic<size_t> pending_{0};          // admitted to the stage, not yet detected
  std::atomic<uint64_t> partials_{0};       // state() as of the last call
  std::atomic<uint64_t> peak_partials_{0};  // its peak
};

Result<std::shared_ptr<CepService::Query>> CepService::Query::compile(
    const descriptor::QuerySpec& spec, const CepServiceConfig& config, ServiceContext& context) {
  const std::string label = queryLabel(spec);
  auto error = [&spec, &label](const std::string& message) {
    return Status::invalidArgument(spec.where.error(label + ": " + message).toString());
  };
  if (spec.inputs.empty()) return error("no input address");
  if (Status s = router::validateAddress(spec.output); !s) {
    return error("output: " + s.message());
  }
  for (const std::string& input : spec.inputs) {
    if (Status s = router::validatePattern(input); !s) return error("input: " + s.message());
  }
  // The loader takes a name with a '/' for a library path; an engine is a name.
  if (spec.engine.empty() || spec.engine.find('/') != std::string::npos) {
    return error("engine \"" + spec.engine + "\" is not an engine name");
  }
  auto query = pattern::parseQuery(spec.text);
  if (!query) return Status::invalidArgument(textError(spec, query.status().message()));

  QueryOptions values;
  for (const descriptor::Param& option : spec.options) values[option.name] = option.value;
  auto flush_when_idle = takeHostOption(values, kFlushWhenIdle, {"true", "false"});
  if (!flush_when_idle) return error(flush_when_idle.status().message());
  auto output_qos = takeHostOption(values, kOutputQos, {"best_effort", "reliable"});
  if (!output_qos) return error(output_qos.status().message());
  auto run_inline = takeHostOption(values, kRunInline, {"never", "when_idle"});
  if (!run_inline) return error(run_inline.status().message());

  auto made = std::make_shared<Query>(spec, config.name, context);
  made->flush_when_idle_ = *flush_when_idle == "true";
  made->output_qos_ = *output_qos == "reliable" ? flows::Qos::kReliable : flows::Qos::kBestEffort;
  const plugin::DetectorOptions options =
      plugin::DetectorOptions(std::move(values)).withBaseDir(spec.base_dir);
  plugin::PluginPtr plugin;
  bool refused = false;  // by the engine, as opposed to its plugin not loading
  // Makes the detector of `engine`; also the probe of engine="auto", so the
  // engine it picks has its detector made once.
  auto build = [&](std::string_view engine) -> Status {
    auto loaded = context.plugins.load(engine);
    if (!loaded) {
      if (loaded.status().code() == Status::Code::kNotFound) {
        return Status::notFound("unknown engine \"" + std::string(engine) +
                                "\": " + loaded.status().message());
      }
      return Status::invalidArgument("engine \"" + std::string(engine) +
                                     "\" cannot be loaded: " + loaded.status().message());
    }
    auto detector = (*loaded)->createDetector(engine, *query, options, *made);
    refused = !detector;
    if (refused) return detector.status();
    plugin = std::move(*loaded);
    made->detector_ = std::move(*detector);
    made->counts_partials_ = made->detector_->state().has_value();
    return Status::ok();
  };
  if (spec.engine == plugin::kAutoEngine) {
    // Each query of a unit runs its own detector: a set of one pattern.
    const pattern::Query* one = &*query;
    auto choice = plugin::chooseEngine(plugin::shapeOf({&one, 1}), build);
    if (!choice) return error(choice.status().message());
    made->engine_ = choice->engine;
    made->engine_choice_ = choice->reason;
    made->log_.information("%s: engine %s (%s)", label, choice->engine, choice->reason);
  } else if (Status s = build(spec.engine); !s) {
    return error(refused ? "engine \"" + spec.engine + "\" cannot run the query: " + s.message()
                         : s.message());
  }
  // An engine default that changes the matches (the algebra engine's
  // CONTEXT recent) is said where the operator reads the bus log.
  for (const std::string& notice : plugin->notices(made->engine_, *query)) {
    made->log_.notice("%s: %s", label, notice);
  }

  stages::StageConfig stage;
  stage.name = "cep:" + made->endpoint_;
  stage.capacity = config.capacity;
  stage.batch_size = config.batch_size;
  // A detector is single-threaded and needs its events in arrival order:
  // one worker, and one cost class so that costs do not reorder them.
  stage.min_threads = 1;
  stage.max_threads = 1;
  stage.cost_thresholds.clear();
  stage.run_inline_when_idle = *run_inline == "when_idle";
  Query* raw = made.get();
  made->batch_.reserve(stage.batch_size);
  made->stage_ = std::make_unique<stages::Stage>(
      std::move(stage), [raw](std::span<stages::StageItem> items) { return raw->detect(items); });
  return made;
}

Status CepService::Query::start(const std::shared_ptr<Query>& self) {
  if (started_ || stopped_) return Status::ok();
  started_ = true;
  auto entry = context_.registry.add(entry_name_, router::ComponentKind::kService, service_);
  if (!entry) {
    stop();
    return entry.status();
  }
  entry_ = *entry;
  entry_->setMetadata("type", "cep-query");
  entry_->setMetadata("engine", engine_);
  if (!engine_choice_.empty()) entry_->setMetadata("engine_choice", engine_choice_);
  entry_->setMetadata("input", joined(inputs_, ","));
  entry_->setMetadata("output", output_);
  entry_->setMetadata("text", text_);
  entry_->setMetadata("endpoint", endpoint_);
  entry_->setMetadata("matches", "0");
  publishPartials();
  // Matches change on every detection; the registry reads them only when it
  // takes a snapshot, which runs the probe before copying the metadata.
  const std::weak_ptr<Query> weak = self;
  entry_->setProbe([weak](router::LiveNumbers& numbers) {
    const std::shared_ptr<Query> q = weak.lock();
    if (q == nullptr) return;
    numbers.queue_length = q->pending_.load(std::memory_order_acquire);
    q->entry_->setMetadata("matches", std::to_string(q->matches()));
    q->publishPartials();
  });
  stage_->start();
  Status added = context_.broker.addEndpoint(
      endpoint_, [self](const flows::Exchange& exchange) { return self->consume(exchange); },
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
  entry_->setState(router::ComponentState::kStarted);
  log_.debug("query %s started: engine %s, input %s, output %s", endpoint_, engine_,
             joined(inputs_, ","), output_);
  return Status::ok();
}

void CepService::Query::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Removing the endpoint drops its subscriptions and drains the flows'
  // queues into the stage; stopping the stage then runs every queued event.
  // Stopping: there is nothing to do about an endpoint already gone.
  if (endpoint_added_) (void)context_.broker.removeEndpoint(endpoint_);
  if (stage_) stage_->stop();
  if (started_) {
    // The stage's worker is joined; exportModel() may still come.
    std::lock_guard lock(detector_mu_);
    if (Status s = detector_->flush(); !s) detectorFailed("flush", s);
    sampleState();
  }
  if (entry_) {
    entry_->setMetadata("matches", std::to_string(matches()));
    publishPartials();
    entry_->setState(router::ComponentState::kStopped);
    context_.registry.remove(entry_name_);
  }
}

Status CepService::Query::consume(const flows::Exchange& exchange) {
  // Counted before the offer: the worker may detect the event before offer() returns.
  pending_.fetch_add(1, std::memory_order_acq_rel);
  stages::StageItem item;
  item.event = exchange.event;
  item.reliable = exchange.qos == flows::Qos::kReliable;
  if (stage_->offer(std::move(item)) != stages::Admission::kRejected) return Status::ok();
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  const uint64_t n = rejected_.fetch_add(1, std::memory_order_relaxed) + 1;
  entry_->addRejected();
  if (worthLogging(n - 1, n)) {
    log_.warning("query %s: its stage refused an event (%Lu so far): queue full or query stopped",
                 endpoint_, static_cast<Poco::UInt64>(n));
  }
  return Status::rejected("query " + endpoint_ + ": queue full or query stopped");
}

bool CepService::Query::requestFlush() {
  if (!started_ || stopped_) return true;
  pending_.fetch_add(1, std::memory_order_acq_rel);
  stages::StageItem item;
  item.event = flushMarker();
  if (stage_->offer(std::move(item)) != stages::Admission::kRejected) return true;
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  return false;
}

stages::StageBatchResult CepService::Query::detect(std::span<stages::StageItem> items) {
  stages::StageBatchResult result;
  // A flush marker splits the batch: the events before it, then the flush.
  while (!items.empty()) {
    const auto marker = std::find_if(items.begin(), items.end(), [](const stages::StageItem& i) {
      return i.event == flushMarker();
    });
    const auto run = static_cast<size_t>(marker - items.begin());
    if (run > 0) detectEvents(items.first(run), result);
    if (run == items.size()) break;
    {
      std::lock_guard lock(detector_mu_);
      if (Status s = detector_->flush(); !s) detectorFailed("flush", s);
      sampleState();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    items = items.subspan(run + 1);
  }
  return result;
}

void CepService::Query::detectEvents(std::span<stages::StageItem> items,
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
  entry_->addDelivered(n);
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

void CepService::Query::sampleState() {
  if (!counts_partials_) return;
  if (const std::optional<plugin::DetectorState> s = detector_->state()) {
    partials_.store(s->partial_matches, std::memory_order_relaxed);
    peak_partials_.store(s->peak_partial_matches, std::memory_order_relaxed);
  }
}

void CepService::Query::publishPartials() {
  if (!counts_partials_) return;
  entry_->setMetadata("partial_matches", std::to_string(partials_.load(std::memory_order_relaxed)));
  entry_->setMetadata("partial_matches_peak",
                      std::to_string(peak_partials_.load(std::memory_order_relaxed)));
}

void CepService::Query::detectorFailed(const char* call, const Status& status) {
  const uint64_t n = errors_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (entry_) entry_->addFailed();
  if (worthLogging(n - 1, n)) {
    log_.warning("query %s: detector refused %s (%Lu errors so far): %s", endpoint_,
                 std::string(call), static_cast<Poco::UInt64>(n), status.toString());
  }
}

void CepService::Query::onMatch(const plugin::Match& match) {
  matches_.fetch_add(1, std::memory_order_relaxed);
  flows::Exchange exchange;
  exchange.event = match.composite();
  exchange.address = output_symbol_;
  exchange.sender = sender_;
  exchange.qos = output_qos_;
  const flows::SendOutcome out = context_.broker.publish(exchange);
  if (out.status.isOk()) return;
  const uint64_t failures = std::max<uint64_t>(1, out.rejected + out.failed);
  const uint64_t n = publish_failures_.fetch_add(failures, std::memory_order_relaxed) + failures;
  if (worthLogging(n - failures, n)) {
    log_.warning("query %s: composite event to %s refused by %Lu target(s) (%Lu so far): %s",
                 endpoint_, output_, static_cast<Poco::UInt64>(failures),
                 static_cast<Poco::UInt64>(n), out.status.toString());
  }
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
  for (const auto& q : queries_) {
    if (Status s = q->start(q); !s) {
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
  for (const auto& q : stopOrder()) q->stop();
  queries_.clear();
  if (entry_) {
    entry_->setState(router::ComponentState::kStopped);
    context_.registry.remove(config_.name);
    entry_.reset();
  }
}

void CepService::flush() {
  std::lock_guard lock(mu_);
  for (const auto& q : stopOrder()) {
    if (!q->requestFlush()) {
      Poco::Logger::get("cepbus.cep")
          .warning("query %s: stage full, flush deferred to stop", q->name());
    }
  }
}

bool CepService::finished() const {
  std::lock_guard lock(mu_);
  for (const auto& q : queries_) {
    if (!q->idle()) return false;
  }
  return true;
}

Status CepService::addQuery(const descriptor::QuerySpec& spec) {
  std::lock_guard lock(mu_);
  if (stopped_) return Status::unavailable(config_.name + ": stopped; no query can be added");
  for (const auto& q : queries_) {
    if (q->name() == spec.name) {
      return Status::alreadyExists(spec.where
                                       .error(queryLabel(spec) + ": " + config_.name +
                                              " already runs a query \"" + spec.name + "\"")
                                       .toString());
    }
  }
  Result<std::shared_ptr<Query>> query = Status::internal("");
  try {
    query = Query::compile(spec, config_, context_);
  } catch (const std::exception& e) {
    query = Status::internal(spec.where.error(queryLabel(spec) + ": " + e.what()).toString());
  }
  if (!query) return query.status();
  if (started_) {
    if (Status s = (*query)->start(*query); !s) return s;
  }
  queries_.push_back(std::move(*query));
  publishQueryList();
  return Status::ok();
}

Status CepService::removeQuery(std::string_view name) {
  std::lock_guard lock(mu_);
  for (auto it = queries_.begin(); it != queries_.end(); ++it) {
    if ((*it)->name() != name) continue;
    const std::shared_ptr<Query> query = *it;
    queries_.erase(it);
    publishQueryList();
    query->stop();
    return Status::ok();
  }
  return Status::notFound(config_.name + ": no query \"" + std::string(name) + "\"");
}

std::vector<std::string> CepService::queries() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& q : queries_) out.push_back(q->name());
  return out;
}

std::optional<QueryStats> CepService::stats(std::string_view name) const {
  std::lock_guard lock(mu_);
  for (const auto& q : queries_) {
    if (q->name() == name) return q->stats();
  }
  return std::nullopt;
}

uint64_t CepService::matches(std::string_view name) const {
  const std::optional<QueryStats> s = stats(name);
  return s ? s->matches : 0;
}

Result<std::string> CepService::exportModel(std::string_view name, std::string_view format) const {
  std::shared_ptr<Query> query;
  {
    std::lock_guard lock(mu_);
    for (const auto& q : queries_) {
      if (q->name() == name) query = q;
    }
  }
  if (query == nullptr) {
    return Status::notFound("service " + config_.name + " has no query '" + std::string(name) +
                            "'");
  }
  return query->exportModel(format);
}

std::string CepService::endpointName(std::string_view query) const {
  return config_.name + "/" + std::string(query);
}

std::vector<std::shared_ptr<CepService::Query>> CepService::stopOrder() const {
  // Kahn's algorithm over "i's output feeds j"; ties (and cycles, which
  // have no right order) go in the order the queries were added.
  const size_t n = queries_.size();
  std::vector<std::vector<size_t>> feeds(n);
  std::vector<size_t> inputs_pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j && queries_[j]->consumes(queries_[i]->output())) {
        feeds[i].push_back(j);
        ++inputs_pending[j];
      }
    }
  }
  std::vector<bool> done(n, false);
  std::vector<std::shared_ptr<Query>> order;
  while (order.size() < n) {
    size_t pick = n;
    for (size_t i = 0; i < n && pick == n; ++i) {
      if (!done[i] && inputs_pending[i] == 0) pick = i;
    }
    for (size_t i = 0; i < n && pick == n; ++i) {
      if (!done[i]) pick = i;
    }
    done[pick] = true;
    order.push_back(queries_[pick]);
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
  for (descriptor::QuerySpec query : unit.queries) {
    query.base_dir = assembly.base_dir;
    if (Status s = service->addQuery(query); !s) errors.push_back(s.message());
  }
  if (!errors.empty()) return Status::invalidArgument(joined(errors, "\n"));
  return std::unique_ptr<Service>(std::move(service));
}

}  // namespace cepbus::services::cep
