#include "services/cep/cep_service.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <charconv>
#include <exception>

#include "bus/host/detection/checkpoint.h"
#include "bus/host/detection/detection.h"
#include "bus/host/detection/engine_choice.h"
#include "bus/host/detection/planner.h"
#include "services/cep/cep_detection.h"
#include "services/cep/cep_query.h"
#include "services/service_factory_registry.h"

namespace cepbus::services::cep {
namespace {

constexpr size_t kMaxCapacity = size_t{1} << 30;
// Each worker holds a batch's slots for good: a bound that keeps that small.
constexpr size_t kMaxBatchSize = size_t{1} << 16;

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

// What a checkpoint of `group`'s detection is for: its queries, by the
// names `names` gives them, and their options but checkpoint_interval
// (storing the state more or less often does not change it).
detection::CheckpointIdentity identityOf(const detection::DetectionGroup& group,
                                         const std::vector<detection::QueryRequest>& requests,
                                         const std::vector<std::string>& names) {
  std::vector<detection::CheckpointedQuery> queries;
  for (size_t i = 0; i < group.members.size(); ++i) {
    queries.push_back({names[i], requests[group.members[i]].query});
  }
  auto values = requests[group.members.front()].options.values();
  values.erase(std::string(kCheckpointIntervalOption));
  return detection::checkpointIdentity(group.engine, queries, plugin::DetectorOptions(values));
}

// InvalidArgument naming `spec`'s descriptor line when it asks for
// checkpoints (query_checkpoints.h) its detection cannot give.
Status checkCheckpoints(const descriptor::QuerySpec& spec, const QuerySettings& settings,
                        const detection::Detection& detection) {
  if (settings.checkpoint_interval.count() == 0) return Status::ok();
  auto refuse = [&spec](const std::string& why) {
    return Status::invalidArgument(
        spec.where.error(queryLabel(spec) + ": option checkpoint_interval: " + why).toString());
  };
  // A delivering thread running the detection would wait for the worker,
  // which waits for the journal's thread, which may be that thread.
  if (settings.run_inline) return refuse("cannot be combined with run_inline=when_idle");
  if (Status s = detection::checkCheckpointable(detection); !s) return refuse(s.message());
  return Status::ok();
}

// Another detection of `group`, reporting to `sink` (CepDetection::run()):
// a copy of the group without the detector the planner made (taken).
CepDetection::MakeDetection remakeOf(const detection::DetectionGroup& group, CepDetection& sink) {
  return [sink = &sink, engine = group.engine, members = group.members, recipe = group.recipe] {
    detection::DetectionGroup again{engine, {}, members, recipe, std::nullopt};
    return detection::Detection::create(again, *sink, plugin::EventTime::kOwner);
  };
}

// The reason of engine auto, said for the queries that asked for it.
std::string choiceOf(const descriptor::QuerySpec& spec, const detection::DetectionGroup& group) {
  return spec.engine == plugin::kAutoEngine ? group.reason : std::string();
}

}  // namespace

Result<CepService::Planned> CepService::planQueries(
    std::span<const descriptor::QuerySpec> specs) const {
  Planned out;
  out.settings.resize(specs.size());
  std::vector<detection::QueryRequest>& requests = out.requests;
  std::vector<QuerySettings>& settings = out.settings;
  std::vector<std::string> errors;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto request = readQuery(specs[i], settings[i]);
    if (!request) {
      errors.push_back(request.status().message());
      continue;
    }
    if (settings[i].checkpoint_interval.count() > 0 && context_.journal_path.empty()) {
      errors.push_back(specs[i]
                           .where
                           .error(queryLabel(specs[i]) +
                                  ": option checkpoint_interval needs a <journal> in the "
                                  "descriptor (checkpoints are kept in it)")
                           .toString());
      continue;
    }
    requests.push_back(std::move(request).value());
  }
  if (!errors.empty()) return Status::invalidArgument(joined(errors, "\n"));
  detection::PlanOptions options;
  options.service_options = serviceOptions();
  auto plan = detection::plan(requests, options, context_.plugins);
  if (!plan) return plan.status();
  for (const std::string& warning : plan->warnings) {
    Poco::Logger::get("cepbus.cep").warning(warning);
  }
  out.plan = std::move(plan).value();
  return out;
}

Status CepService::build(std::span<const descriptor::QuerySpec> specs,
                         std::vector<std::shared_ptr<CepQuery>>& queries,
                         std::vector<std::shared_ptr<CepDetection>>& detections) {
  Result<Planned> planned = planQueries(specs);
  if (!planned) return planned.status();
  const std::vector<detection::QueryRequest>& requests = planned->requests;
  const std::vector<QuerySettings>& settings = planned->settings;
  Poco::Logger& log = Poco::Logger::get("cepbus.cep");

  for (size_t i = 0; i < specs.size(); ++i) {
    queries.push_back(std::make_shared<CepQuery>(specs[i], requests[i].query, config_.name,
                                                 settings[i], context_));
  }
  for (detection::DetectionGroup& group : planned->plan.groups) {
    const size_t first = group.members.front();
    std::vector<std::shared_ptr<CepQuery>> members;
    std::vector<std::string> names;
    for (size_t m : group.members) {
      members.push_back(queries[m]);
      names.push_back(specs[m].name);
    }
    auto made = std::make_shared<CepDetection>(members, specs[first].inputs, settings[first],
                                               config_, context_);
    auto running = detection::Detection::create(group, *made, plugin::EventTime::kOwner);
    if (!running) return running.status();
    if (Status s = checkCheckpoints(specs[first], settings[first], **running); !s) return s;
    made->identify(identityOf(group, requests, names));
    made->run(std::move(running).value(), remakeOf(group, *made));
    std::string reason;
    for (size_t m : group.members) {
      if (reason.empty()) reason = choiceOf(specs[m], group);
    }
    if (group.members.size() == 1) {
      made->open(config_.name + "/" + names.front());
      if (!reason.empty()) {
        log.information("%s: engine %s (%s)", queryLabel(specs[first]), group.engine, reason);
      }
    } else {
      made->open(config_.name + "/shared-" + std::to_string(++shared_made_) + ":" + names.front() +
                 ".." + names.back());
      log.information("queries %s: engine %s%s, one detector on %s (endpoint %s)",
                      detection::namesOf(names), group.engine,
                      reason.empty() ? std::string() : " (" + reason + ")",
                      joined(specs[first].inputs, ","), made->endpoint());
    }
    for (size_t i = 0; i < group.members.size(); ++i) {
      const size_t m = group.members[i];
      queries[m]->assign(made.get(), i, group.engine, choiceOf(specs[m], group));
      // An engine default that changes the matches (the algebra engine's
      // CONTEXT recent) is said where the operator reads the bus log.
      for (const std::string& notice : group.recipe.notices(i)) {
        log.notice("%s: %s", queryLabel(specs[m]), notice);
      }
    }
    detections.push_back(std::move(made));
  }
  return Status::ok();
}

CepService::CepService(CepServiceConfig config, ServiceContext& context)
    : config_(std::move(config)),
      context_(context),
      ticker_(kTickPeriod, [this](std::chrono::steady_clock::time_point) { return tick(); }) {}

CepService::~CepService() { stop(); }

Status CepService::start() {
  MutexLock lock(mu_);
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
  ticker_.start();
  return Status::ok();
}

void CepService::activate() {
  MutexLock lock(mu_);
  activated_ = true;
  for (const auto& d : detections_) d->activate();
}

void CepService::stop() {
  ticker_.stop();
  MutexLock lock(mu_);
  stopLocked();
}

bool CepService::tick() {
  MutexLock lock(mu_);
  for (const auto& d : detections_) d->requestTick();
  return true;
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
  MutexLock lock(mu_);
  for (const auto& d : stopOrder()) {
    if (!d->requestFlush()) {
      Poco::Logger::get("cepbus.cep").warning("%s: stage full, flush deferred to stop", d->label());
    }
  }
}

bool CepService::finished() const {
  MutexLock lock(mu_);
  for (const auto& d : detections_) {
    if (!d->idle()) return false;
  }
  return true;
}

Status CepService::addQuery(const descriptor::QuerySpec& spec) {
  return addQueries(std::span(&spec, 1));
}

Status CepService::addQueries(std::span<const descriptor::QuerySpec> specs) {
  MutexLock lock(mu_);
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
  std::vector<std::shared_ptr<CepQuery>> queries;
  std::vector<std::shared_ptr<CepDetection>> detections;
  Status built = Status::ok();
  try {
    built = build(specs, queries, detections);
  } catch (const std::exception& e) {
    const std::string where =
        specs.size() == 1 ? specs[0].where.error(queryLabel(specs[0]) + ": " + e.what()).toString()
                          : config_.name + ": " + e.what();
    built = Status::internal(where);
  }
  if (!built) return built;
  if (started_) {
    for (size_t i = 0; i < detections.size(); ++i) {
      const auto& d = detections[i];
      if (Status s = d->start(d); !s) {
        for (size_t j = 0; j <= i; ++j) detections[j]->stop();
        return s;
      }
      if (activated_) d->activate();
    }
  }
  for (auto& d : detections) detections_.push_back(std::move(d));
  for (auto& q : queries) queries_.push_back(std::move(q));
  publishQueryList();
  return Status::ok();
}

Status CepService::removeQuery(std::string_view name) {
  MutexLock lock(mu_);
  const auto it = std::find_if(queries_.begin(), queries_.end(),
                               [name](const auto& q) { return q->name() == name; });
  if (it == queries_.end()) {
    return Status::notFound(config_.name + ": no query \"" + std::string(name) + "\"");
  }
  const std::shared_ptr<CepQuery> query = *it;
  queries_.erase(it);
  publishQueryList();
  CepDetection& detection = query->detection();
  if (detection.live() > 1) {
    detection.detach(query->member());
    query->leave();
    return Status::ok();
  }
  const auto d = std::find_if(detections_.begin(), detections_.end(),
                              [&detection](const auto& p) { return p.get() == &detection; });
  const std::shared_ptr<CepDetection> last = *d;
  detections_.erase(d);
  last->stop();
  return Status::ok();
}

Result<QueryEdit> CepService::replaceQuery(const descriptor::QuerySpec& spec) {
  MutexLock lock(mu_);
  if (stopped_) return Status::unavailable(config_.name + ": stopped; no query can be edited");
  const auto it = std::find_if(queries_.begin(), queries_.end(),
                               [&spec](const auto& q) { return q->name() == spec.name; });
  if (it == queries_.end()) {
    return Status::notFound(config_.name + ": no query \"" + spec.name + "\" to replace");
  }
  const std::shared_ptr<CepQuery> old = *it;
  CepDetection& detection = old->detection();
  Result<Planned> planned = [&]() -> Result<Planned> {
    try {
      return planQueries(std::span(&spec, 1));
    } catch (const std::exception& e) {
      return Status::internal(spec.where.error(queryLabel(spec) + ": " + e.what()).toString());
    }
  }();
  if (!planned) return planned.status();
  const QuerySettings& settings = planned->settings.front();
  if (std::string why = detection.whyNotReplaceable(spec.inputs, settings); !why.empty()) {
    return Status::rejected(queryLabel(spec) + ": cannot replace the running query: " + why +
                            "; remove it and add the edited one instead");
  }
  detection::DetectionGroup& group = planned->plan.groups.front();
  auto query = std::make_shared<CepQuery>(spec, planned->requests.front().query, config_.name,
                                          settings, context_);
  auto running = detection::Detection::create(group, detection, plugin::EventTime::kOwner);
  if (!running) return running.status();
  query->assign(&detection, 0, group.engine, choiceOf(spec, group));
  for (const std::string& notice : group.recipe.notices(0)) {
    Poco::Logger::get("cepbus.cep").notice("%s: %s", queryLabel(spec), notice);
  }
  CepDetection::Edit edit{query, std::move(running).value(), remakeOf(group, detection),
                          identityOf(group, planned->requests, {spec.name})};
  // The registry entry and the stats scope go to the edited query now;
  // its detection is swapped when the worker gets to the edit.
  if (started_) {
    const auto holder = std::find_if(detections_.begin(), detections_.end(),
                                     [&detection](const auto& d) { return d.get() == &detection; });
    old->leave();
    if (Status s = query->enter(query, *holder); !s) {
      (void)old->enter(old, *holder);
      return s;
    }
  }
  *it = query;
  return detection.replace(std::move(edit));
}

std::shared_ptr<CepQuery> CepService::findQuery(std::string_view name) const {
  for (const auto& q : queries_) {
    if (q->name() == name) return q;
  }
  return nullptr;
}

std::vector<std::string> CepService::queries() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& q : queries_) out.push_back(q->name());
  return out;
}

std::vector<descriptor::QuerySpec> CepService::querySpecs() const {
  MutexLock lock(mu_);
  std::vector<descriptor::QuerySpec> out;
  for (const auto& q : queries_) out.push_back(q->spec());
  return out;
}

std::vector<descriptor::QuerySpec> CepService::unitQueries(
    const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit) const {
  std::vector<descriptor::QuerySpec> queries = unit.queries;
  // The unit's checkpoint_interval is the default of its queries' option.
  const descriptor::Param* interval = unit.param(kCheckpointIntervalOption);
  for (descriptor::QuerySpec& query : queries) {
    query.base_dir = assembly.base_dir;
    if (interval != nullptr && query.option(kCheckpointIntervalOption) == nullptr) {
      query.options.push_back(*interval);
    }
  }
  return queries;
}

std::optional<QueryStats> CepService::stats(std::string_view name) const {
  MutexLock lock(mu_);
  const std::shared_ptr<CepQuery> q = findQuery(name);
  if (q == nullptr) return std::nullopt;
  return q->stats();
}

uint64_t CepService::matches(std::string_view name) const {
  const std::optional<QueryStats> s = stats(name);
  return s ? s->matches : 0;
}

Result<std::string> CepService::exportModel(std::string_view name, std::string_view format) const {
  std::shared_ptr<CepDetection> detection;
  {
    MutexLock lock(mu_);
    if (const std::shared_ptr<CepQuery> q = findQuery(name)) {
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
  MutexLock lock(mu_);
  if (const std::shared_ptr<CepQuery> q = findQuery(query)) return q->detection().endpoint();
  return config_.name + "/" + std::string(query);
}

std::vector<std::shared_ptr<CepDetection>> CepService::stopOrder() const {
  // Kahn's algorithm over "i's output feeds j"; ties (and cycles, which
  // have no right order) go in the order the detectors were made.
  const size_t n = detections_.size();
  std::vector<std::vector<size_t>> feeds(n);
  std::vector<size_t> inputs_pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const auto& outputs = detections_[i]->outputs();
      const CepDetection& consumer = *detections_[j];
      if (std::any_of(outputs.begin(), outputs.end(),
                      [&consumer](const std::string& o) { return consumer.consumes(o); })) {
        feeds[i].push_back(j);
        ++inputs_pending[j];
      }
    }
  }
  std::vector<bool> done(n, false);
  std::vector<std::shared_ptr<CepDetection>> order;
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
  if (Status s = checkParamNames(unit, type(), {"capacity", "batch_size", "checkpoint_interval"});
      !s)
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
  // One call, so that the unit's queries share detectors.
  if (Status s = service->addQueries(service->unitQueries(assembly, unit)); !s) {
    return Status::invalidArgument(s.message());
  }
  return std::unique_ptr<Service>(std::move(service));
}

}  // namespace cepbus::services::cep
