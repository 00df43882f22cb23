#include "bus/app/bus.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <thread>

#include "bus/host/descriptor/file_checks.h"
#include "bus/host/detection/schema_check.h"
#include "flows/flow_stats.h"
#include "flows/reliable_flow.h"
#include "flows/seda_flow.h"
#include "flows/st_flow.h"
#include "router/route_stats.h"
#include "services/amqp/bridge/amqp_bridge.h"
#include "services/amqp/listener/amqp_listener.h"
#include "services/amqp/listener/amqp_listener_element.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/cep/cep_service.h"
#include "services/cep/cep_stats.h"
#include "services/cluster/cluster_element.h"
#include "services/cluster/cluster_service.h"
#include "services/cluster/cluster_stats.h"
#include "services/http/http_listener.h"
#include "services/http/http_listener_element.h"
#include "services/replay/replay_sink.h"
#include "services/replay/replay_source.h"

namespace cepbus::app {
namespace {

constexpr const char* kStFlow = "st";
constexpr const char* kReliableFlow = "reliable";
constexpr int kMaxFlushRounds = 8;

Status notRunning(const std::string& bus) {
  return Status::unavailable("bus \"" + bus +
                             "\" is not running (starting, stopping or stopped); retry later");
}

std::string sedaFlowName(const std::string& stage) { return "seda:" + stage; }
std::string reliableFlowName(const std::string& stage) {
  return stage.empty() ? kReliableFlow : std::string(kReliableFlow) + ":" + stage;
}

// The descriptor states admission as fractions of the declared capacity:
// reject_at sets the hard limit, degrade_at the static threshold below it.
stages::StageConfig stageConfig(const descriptor::StageSpec& spec) {
  stages::StageConfig c;
  c.name = spec.name;
  c.capacity = std::max<size_t>(
      1, static_cast<size_t>(std::floor(static_cast<double>(spec.capacity) * spec.reject_at)));
  c.min_threads = spec.min_threads;
  c.max_threads = std::max(spec.min_threads, spec.max_threads);
  const double degrade = std::clamp(spec.degrade_at / spec.reject_at, 0.01, 1.0);
  c.admission.static_threshold = degrade;
  c.admission.soft_threshold = std::min(c.admission.soft_threshold, degrade);
  c.admission.saturation_threshold = std::max(c.admission.saturation_threshold, degrade);
  c.run_inline_when_idle = spec.run_inline_when_idle;
  return c;
}

// The journal file of each reliable flow, by its stage ("" for the default
// flow): one file each, since a journal has one writer — the descriptor's
// path for the default flow, "<path>.<stage>" for a reliable route through
// a declared stage. None without a <journal>.
std::vector<std::pair<std::string, std::string>> journalFiles(const descriptor::Descriptor& d) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!d.journal) return files;
  files.emplace_back("", d.journal->path.string());
  for (const auto& r : d.routes.routes) {
    if (r.flow != descriptor::FlowKind::kReliable || r.stage.empty()) continue;
    const std::string path = d.journal->path.string() + "." + r.stage;
    if (std::find(files.begin(), files.end(), std::pair(r.stage, path)) == files.end()) {
      files.emplace_back(r.stage, path);
    }
  }
  return files;
}

// What the run will open that cannot be opened: the journals (and SQLite's
// write-ahead log beside each) and the AMQP listener's certificate and key.
// The services check their own files when they are built.
void checkFiles(const descriptor::Descriptor& d, std::vector<std::string>& errors) {
  for (const auto& [stage, path] : journalFiles(d)) {
    for (const std::string& file : {path, path + "-wal"}) {
      if (auto why = descriptor::unwritableFile(file)) {
        errors.push_back(d.journal->where.error("<journal>: " + *why).toString());
        break;
      }
    }
  }
  // Loaded again when the listener starts.
  if (const auto* amqp = d.element<services::amqp::AmqpListenerConfig>(); amqp && amqp->tls) {
    if (auto tls = services::amqp::loadServerTls(*amqp->tls); !tls) {
      errors.push_back(tls.status().message());
    }
  }
}

// With <schemas>, every query of the bus — the CEP units' and the cluster's —
// names only the event types and attributes the schemas declare.
void checkSchemas(const descriptor::Descriptor& d, std::vector<std::string>& errors) {
  if (d.schemas.empty()) return;
  auto check = [&](const descriptor::QuerySpec& query) {
    for (std::string& e : detection::undeclaredNames(d.schemas, query)) {
      errors.push_back(std::move(e));
    }
  };
  for (const descriptor::ServiceAssembly& assembly : d.assemblies) {
    for (const descriptor::ServiceUnit& unit : assembly.units) {
      for (const descriptor::QuerySpec& query : unit.queries) check(query);
    }
  }
  if (const auto* cluster = d.element<services::cluster::ClusterSpec>()) {
    for (const descriptor::QuerySpec& query : cluster->queries) check(query);
  }
}

// Every family the bus's components may report, declared up front so that
// the first scrape shows them all, with or without samples.
void declareFamilies(const stats::Store& store) {
  for (const stats::Schema* schema :
       {&router::kComponentSchema, &router::kWireNameSchema, &router::kRouteSchema,
        &flows::kFlowSchema, &flows::kJournalSchema, &stages::kStageSchema,
        &services::http::kHttpSchema, &services::amqp::kAmqpSchema,
        &services::amqp::kAmqpLinkSchema, &services::amqp::kAmqpBridgeSchema,
        &services::cep::kQuerySchema, &services::cep::kCepDetectionSchema,
        &services::cluster::kClusterSchema, &services::cluster::kClusterPartitionSchema}) {
    store.declare(*schema);
  }
}

std::string flowNameFor(descriptor::FlowKind kind, const std::string& stage) {
  switch (kind) {
    case descriptor::FlowKind::kSt:
      return kStFlow;
    case descriptor::FlowKind::kSeda:
      return sedaFlowName(stage);
    case descriptor::FlowKind::kReliable:
      return reliableFlowName(stage);
  }
  return kStFlow;
}

}  // namespace

void registerBuiltinServices(services::ServiceFactoryRegistry& registry) {
  // Four distinct types into a registry made for them: a refusal (a type
  // registered twice) is a bug of this function, not an input error.
  auto add = [&](std::unique_ptr<services::ServiceFactory> factory) {
    [[maybe_unused]] const Status added = registry.add(std::move(factory));
    assert(added.isOk());
  };
  add(std::make_unique<services::replay::ReplaySourceFactory>());
  add(std::make_unique<services::replay::ReplaySinkFactory>());
  add(std::make_unique<services::cep::CepServiceFactory>());
  add(std::make_unique<services::amqp::AmqpBridgeFactory>());
}

const descriptor::ElementParsers& builtinElementParsers() {
  static const descriptor::ElementParsers parsers = [] {
    descriptor::ElementParsers made;
    // Three distinct elements into a registry made for them: a refusal is a
    // bug of this function, not an input error.
    auto add = [&](std::unique_ptr<descriptor::ElementParser> parser) {
      [[maybe_unused]] const Status added = made.add(std::move(parser));
      assert(added.isOk());
    };
    add(std::make_unique<services::amqp::AmqpListenerElement>());
    add(std::make_unique<services::http::HttpListenerElement>());
    add(std::make_unique<services::cluster::ClusterElement>());
    return made;
  }();
  return parsers;
}

Bus::Bus(std::string name, BusOptions options)
    : name_(std::move(name)),
      options_(std::move(options)),
      registry_(std::make_shared<router::Registry>()) {
  declareFamilies(registry_->stats());
}

Bus::~Bus() { stop(); }

Result<std::unique_ptr<Bus>> Bus::create(const descriptor::Descriptor& d, BusOptions options) {
  std::unique_ptr<Bus> bus(new Bus(d.name, options));
  std::vector<std::string> errors;

  std::vector<std::string> paths;
  for (const auto& p : d.plugins.search_paths) paths.push_back(p.string());
  paths.insert(paths.end(), options.plugin_paths.begin(), options.plugin_paths.end());
  bus->plugins_ = std::make_unique<plugin::PluginLoader>(std::move(paths));

  bus->buildPolicy(d, errors);
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
    return Status::invalidArgument(all);
  }
  bus->loadPlugins(d, errors);
  registerBuiltinServices(bus->factories_);
  bus->context_.reset(
      new services::ServiceContext{*bus->broker_, *bus->registry_, *bus->plugins_, bus.get(),
                                   d.journal ? d.journal->path.string() : std::string()});
  for (const auto& assembly : d.assemblies) {
    bus->buildServices(assembly, errors, bus->services_);
    bus->assemblies_.push_back({assembly, false});
  }
  // The AMQP listener starts after every service unit, so that a client that
  // connects at once finds the subscriptions of the whole bus in place. It
  // records durable subscriptions in the default reliable flow's journal,
  // which the broker has opened by the time the listener starts.
  if (const auto* amqp = d.element<services::amqp::AmqpListenerConfig>()) {
    bus->services_.push_back(
        {"", "amqp-listener",
         services::amqp::makeAmqpListener(*amqp, *bus->context_,
                                          d.journal ? d.journal->path.string() : std::string())});
  }
  if (const auto* cluster = d.element<services::cluster::ClusterSpec>()) {
    auto node = services::cluster::makeClusterNode(*cluster, *bus->context_);
    if (node) {
      bus->services_.push_back({"", "cluster-node", std::move(*node)});
    } else {
      errors.push_back(node.status().message());
    }
  }
  if (const auto* http = d.element<services::http::HttpListenerConfig>()) {
    bus->services_.push_back(
        {"", "http-listener", services::http::makeHttpListener(*http, *bus->context_)});
  }
  checkFiles(d, errors);
  checkSchemas(d, errors);
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
    return Status::invalidArgument(all);
  }
  return bus;
}

void Bus::buildPolicy(const descriptor::Descriptor& d, std::vector<std::string>& errors) {
  auto policy = std::make_unique<router::DeliveryPolicy>(
      flowNameFor(d.routes.default_flow, d.routes.default_stage));
  auto add = [&](std::unique_ptr<flows::AbstractFlow> flow, const descriptor::Location& where) {
    if (Status s = policy->addFlow(std::move(flow)); !s) {
      errors.push_back(where.error(s.message()).toString());
    }
  };
  const stats::Store& stats = registry_->stats();
  add(std::make_unique<flows::StFlow>(kStFlow, stats), d.where);
  for (const auto& spec : d.stages) {
    flows::SedaFlowConfig seda;
    seda.name = sedaFlowName(spec.name);
    seda.stage = stageConfig(spec);
    seda.stats = stats;
    add(std::make_unique<flows::SedaFlow>(std::move(seda)), spec.where);
  }
  if (d.journal) {
    for (const auto& [stage, path] : journalFiles(d)) {
      flows::ReliableFlowConfig reliable;
      reliable.name = reliableFlowName(stage);
      reliable.stats = stats;
      reliable.journal_path = path;
      if (const auto* spec = d.stage(stage)) reliable.stage = stageConfig(*spec);
      if (d.journal->commit_delay_us) {
        reliable.writer.commit_delay = std::chrono::microseconds(*d.journal->commit_delay_us);
      }
      if (d.journal->retry_delay_ms) {
        reliable.retry_delay = std::chrono::milliseconds(*d.journal->retry_delay_ms);
      }
      if (d.journal->max_retry_delay_ms) {
        reliable.max_retry_delay = std::chrono::milliseconds(*d.journal->max_retry_delay_ms);
      }
      add(std::make_unique<flows::ReliableFlow>(std::move(reliable)), d.journal->where);
    }
  }
  for (const auto& r : d.routes.routes) {
    router::RouteRule rule;
    rule.pattern = r.address;
    rule.flow = flowNameFor(r.flow, r.stage);
    rule.default_qos =
        r.qos == descriptor::Qos::kReliable ? flows::Qos::kReliable : flows::Qos::kBestEffort;
    rule.allow_reliable = d.journal.has_value();
    rule.reliable_flow = reliableFlowName(r.flow == descriptor::FlowKind::kReliable ? r.stage : "");
    if (rule.default_qos == flows::Qos::kReliable && !d.journal) {
      errors.push_back(r.where
                           .error("route \"" + r.address +
                                  "\": reliable QoS needs a <journal> in the descriptor")
                           .toString());
      continue;
    }
    if (Status s = policy->addRoute(std::move(rule)); !s) {
      errors.push_back(r.where.error(s.message()).toString());
    }
  }
  broker_ = std::make_unique<router::Broker>(std::move(policy), registry_);
}

void Bus::loadPlugins(const descriptor::Descriptor& d, std::vector<std::string>& errors) {
  for (const auto& spec : d.plugins.plugins) {
    auto loaded = plugins_->load(spec.library.empty() ? spec.name : spec.library.string());
    if (!loaded) {
      errors.push_back(
          spec.where.error("plugin \"" + spec.name + "\": " + loaded.status().message())
              .toString());
      continue;
    }
    auto entry = registry_->add("plugin:" + spec.name, router::ComponentKind::kService);
    if (entry) {
      (*entry)->setMetadata("path", (*loaded)->path());
      (*entry)->setMetadata("version", (*loaded)->version());
      std::string engines;
      for (const auto& e : (*loaded)->engines()) engines += (engines.empty() ? "" : ",") + e;
      (*entry)->setMetadata("engines", engines);
      (*entry)->setState(router::ComponentState::kStarted);
    }
  }
}

void Bus::buildServices(const descriptor::ServiceAssembly& assembly,
                        std::vector<std::string>& errors, std::vector<DeployedService>& out) {
  for (const auto& unit : assembly.units) {
    const services::ServiceFactory* factory = factories_.find(unit.type);
    if (factory == nullptr) {
      std::string known;
      for (const auto& t : factories_.types()) known += (known.empty() ? "" : ", ") + t;
      errors.push_back(unit.where
                           .error("service unit \"" + unit.name + "\": unknown type \"" +
                                  unit.type + "\" (known: " + known + ")")
                           .toString());
      continue;
    }
    auto service = factory->create(assembly, unit, *context_);
    if (!service) {
      errors.push_back(service.status().message());
      continue;
    }
    out.push_back({assembly.name, unit.type, std::move(*service)});
  }
}

Status Bus::start() {
  std::lock_guard lock(lifecycle_mu_);
  if (started_) return Status::ok();
  Poco::Logger& log = Poco::Logger::get("cepbus.bus");
  if (Status s = broker_->start(); !s) return s;
  for (size_t i = 0; i < services_.size(); ++i) {
    if (Status s = services_[i].service->start(); !s) {
      log.error("service %s failed to start: %s", services_[i].service->name(), s.message());
      for (size_t j = i; j-- > 0;) services_[j].service->stop();
      broker_->stop();
      return s;
    }
    log.debug("service %s started", services_[i].service->name());
  }
  for (auto& s : services_) s.service->activate();
  started_ = true;
  log.information("bus \"%s\" started: %z services", name_, services_.size());
  return Status::ok();
}

void Bus::stop() {
  std::lock_guard lock(lifecycle_mu_);
  if (stopped_) return;
  stopped_ = true;  // from here on deploy()/undeploy() answer Unavailable
  if (started_) {
    // Producers first, then everything in flight, then what services held
    // back; endpoints stay attached throughout, so nothing accepted is lost
    // to the order in which services were declared (see services/service.h).
    for (auto it = services_.rbegin(); it != services_.rend(); ++it) it->service->deactivate();
    waitDrained();
    // A flush may publish events that another service holds back in turn
    // (a query consuming a query): flush again while flushing moves events.
    for (int round = 0; round < kMaxFlushRounds; ++round) {
      const uint64_t before = deliveredTotal();
      for (auto& s : services_) s.service->flush();
      waitDrained();
      if (deliveredTotal() == before) break;
    }
  }
  if (broker_) broker_->stop();  // flows drain what is left and flush the journal
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) it->service->stop();
  if (started_) Poco::Logger::get("cepbus.bus").information("bus \"%s\" stopped", name_);
}

void Bus::waitDrained() const {
  const auto deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
  while (!drained()) {
    if (std::chrono::steady_clock::now() > deadline) {
      Poco::Logger::get("cepbus.bus")
          .warning(
              "bus \"%s\": queues not drained after %Ld ms; stopping anyway (reliable "
              "events stay journaled)",
              name_, static_cast<Poco::Int64>(options_.drain_timeout.count()));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

uint64_t Bus::deliveredTotal() const {
  uint64_t total = 0;
  for (const auto& c : registry_->snapshot()) {
    if (c.kind == router::ComponentKind::kEndpoint) total += c.delivered;
  }
  return total;
}

bool Bus::drained() const {
  {
    std::lock_guard lock(services_mu_);
    for (const auto& s : services_) {
      if (!s.service->finished()) return false;
    }
  }
  for (const auto& c : registry_->snapshot()) {
    if (c.kind == router::ComponentKind::kEndpoint && c.queue_length > 0) return false;
  }
  return true;
}

}  // namespace cepbus::app

namespace cepbus::app {

Status Bus::deploy(const descriptor::ServiceAssembly& assembly) {
  std::unique_lock lifecycle(lifecycle_mu_, std::try_to_lock);
  if (!lifecycle.owns_lock() || !started_ || stopped_) return notRunning(name_);
  return deployRunning(assembly);
}

Status Bus::deployRunning(const descriptor::ServiceAssembly& assembly) {
  {
    std::lock_guard lock(services_mu_);
    for (const Assembly& a : assemblies_) {
      if (a.descriptor.name == assembly.name) {
        return Status::alreadyExists("service assembly \"" + assembly.name +
                                     "\" is already deployed; undeploy it first");
      }
    }
  }
  std::vector<std::string> errors;
  std::vector<DeployedService> built;
  buildServices(assembly, errors, built);
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
    return Status::invalidArgument(all);
  }
  Poco::Logger& log = Poco::Logger::get("cepbus.bus");
  for (size_t i = 0; i < built.size(); ++i) {
    if (Status s = built[i].service->start(); !s) {
      log.error("service %s failed to start: %s", built[i].service->name(), s.message());
      for (size_t j = i; j-- > 0;) built[j].service->stop();
      return s;
    }
  }
  {
    std::lock_guard lock(services_mu_);
    for (const DeployedService& d : built) services_.push_back(d);
    assemblies_.push_back({assembly, true});
  }
  for (auto& d : built) d.service->activate();
  log.information("service assembly \"%s\" deployed: %z services", assembly.name, built.size());
  return Status::ok();
}

Status Bus::undeploy(std::string_view assembly) {
  std::unique_lock lifecycle(lifecycle_mu_, std::try_to_lock);
  if (!lifecycle.owns_lock() || !started_ || stopped_) return notRunning(name_);
  std::vector<std::shared_ptr<services::Service>> targets;
  {
    std::lock_guard lock(services_mu_);
    if (std::none_of(assemblies_.begin(), assemblies_.end(),
                     [&](const Assembly& a) { return a.descriptor.name == assembly; })) {
      return Status::notFound("no service assembly named \"" + std::string(assembly) + "\"");
    }
    for (const DeployedService& d : services_) {
      if (d.assembly == assembly) targets.push_back(d.service);
    }
  }
  // As stop() does for the whole bus: producers stop originating, the
  // services finish what they hold, flush what they held back, and only then
  // stop (a CEP unit's stop() unsubscribes and runs its queued events first),
  // so nothing the assembly accepted is lost. Events the assembly published
  // are already with their consumers, which keep running.
  for (auto it = targets.rbegin(); it != targets.rend(); ++it) (*it)->deactivate();
  waitFinished(targets);
  for (auto& service : targets) service->flush();
  waitFinished(targets);
  for (auto it = targets.rbegin(); it != targets.rend(); ++it) (*it)->stop();
  {
    std::lock_guard lock(services_mu_);
    std::erase_if(services_, [&](const DeployedService& d) { return d.assembly == assembly; });
    std::erase_if(assemblies_, [&](const Assembly& a) { return a.descriptor.name == assembly; });
  }
  Poco::Logger::get("cepbus.bus")
      .information("service assembly \"%s\" undeployed: %z services stopped", std::string(assembly),
                   targets.size());
  return Status::ok();
}

Result<services::Redeployed> Bus::redeploy(const descriptor::ServiceAssembly& assembly) {
  std::unique_lock lifecycle(lifecycle_mu_, std::try_to_lock);
  if (!lifecycle.owns_lock() || !started_ || stopped_) return notRunning(name_);
  std::optional<descriptor::ServiceAssembly> deployed;
  std::vector<std::shared_ptr<services::Service>> units;
  {
    std::lock_guard lock(services_mu_);
    for (const Assembly& a : assemblies_) {
      if (a.descriptor.name == assembly.name) deployed = a.descriptor;
    }
    for (const DeployedService& d : services_) {
      if (d.assembly == assembly.name) units.push_back(d.service);
    }
  }
  if (!deployed) {
    if (Status s = deployRunning(assembly); !s) return s;
    return services::Redeployed{.deployed = true, .changed = {}, .kept = {}};
  }
  const auto host_of = [&units](std::string_view name) -> const services::QueryHost* {
    for (const auto& service : units) {
      if (service->name() == name) return service->queryHost();
    }
    return nullptr;
  };
  // A body given without a folder (the admin API's) resolves its relative
  // paths where the assembly it redeploys does.
  descriptor::ServiceAssembly next = assembly;
  if (next.base_dir.empty()) next.base_dir = deployed->base_dir;
  Result<services::RedeployPlan> plan = services::planRedeploy(*deployed, next, host_of);
  if (!plan) return plan.status();
  Result<services::Redeployed> done = applyRedeploy(*plan);
  {
    // The units' queries are compared as they run, so the stored
    // descriptor only has to stay right for the rest, which did not change.
    std::lock_guard lock(services_mu_);
    for (Assembly& a : assemblies_) {
      if (a.descriptor.name == next.name) a.descriptor = next;
    }
  }
  return done;
}

Result<services::Redeployed> Bus::applyRedeploy(const services::RedeployPlan& plan) {
  Poco::Logger& log = Poco::Logger::get("cepbus.bus");
  services::Redeployed out;
  out.kept = plan.kept;
  std::string applied;
  for (const services::QueryStep& step : plan.steps) {
    const std::shared_ptr<services::Service> service = findService(step.service);
    services::QueryHost* host = service != nullptr ? service->queryHost() : nullptr;
    const std::string label = step.service + "/" + step.spec.name;
    Status status =
        host != nullptr ? Status::ok() : Status::notFound("service " + step.service + " stopped");
    std::optional<services::QueryEdit> edit;
    if (status) {
      switch (step.kind) {
        case services::QueryStep::Kind::kRemove:
          status = host->removeQuery(step.spec.name);
          break;
        case services::QueryStep::Kind::kReplace:
          if (Result<services::QueryEdit> e = host->replaceQuery(step.spec); e) {
            edit = std::move(e).value();
          } else {
            status = e.status();
          }
          break;
        case services::QueryStep::Kind::kAdd:
          status = host->addQuery(step.spec);
          break;
      }
    }
    const std::string_view change = services::queryStepName(step.kind);
    if (!status) {
      // The host's message names the query and what is wrong with it.
      if (applied.empty()) return status;
      return Status::rejected("redeploy stopped at query " + label + " (not " +
                              std::string(change) + "): " + status.message() +
                              "; already applied, and kept: " + applied);
    }
    log.information("redeploy: query %s %s", label, std::string(change));
    applied += (applied.empty() ? "" : ", ") + label + " " + std::string(change);
    out.changed.push_back({step.service, step.spec.name, step.kind, std::move(edit)});
  }
  return out;
}

void Bus::waitFinished(const std::vector<std::shared_ptr<services::Service>>& services) const {
  const auto deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
  auto finished = [&] {
    return std::all_of(services.begin(), services.end(),
                       [](const auto& s) { return s->finished(); });
  };
  while (!finished()) {
    if (std::chrono::steady_clock::now() > deadline) {
      Poco::Logger::get("cepbus.bus")
          .warning("bus \"%s\": services not finished after %Ld ms; stopping them anyway", name_,
                   static_cast<Poco::Int64>(options_.drain_timeout.count()));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::shared_ptr<services::Service> Bus::findService(std::string_view name) const {
  std::lock_guard lock(services_mu_);
  for (const DeployedService& d : services_) {
    if (d.service->name() == name) return d.service;
  }
  return nullptr;
}

std::vector<services::DeployedServiceInfo> Bus::deployedServices() const {
  std::lock_guard lock(services_mu_);
  std::vector<services::DeployedServiceInfo> out;
  for (const DeployedService& d : services_) {
    out.push_back({d.service->name(), d.assembly, d.type, d.service->finished()});
  }
  return out;
}

std::vector<services::AssemblyInfo> Bus::assemblies() const {
  std::lock_guard lock(services_mu_);
  std::vector<services::AssemblyInfo> out;
  for (const Assembly& a : assemblies_) {
    services::AssemblyInfo info{a.descriptor.name, {}, a.runtime};
    for (const DeployedService& d : services_) {
      if (d.assembly == a.descriptor.name) info.services.push_back(d.service->name());
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace cepbus::app
