#pragma once

// Service: a component plugged onto the normalized router — a binding
// component that speaks a protocol (AMQP, HTTP, file replay) or a service
// engine that does work (CEP) — built from one service unit of a deployment
// descriptor by the ServiceFactory registered for the unit's type.
//
// Life cycle (driven by the Bus, never concurrently for one service):
//
//   create -> start() -> activate() -> ... -> deactivate() -> flush()* -> stop()
//
// The Bus starts every service (endpoints and subscriptions in place) before
// it activates any, so a producer that begins in activate() cannot publish
// before its consumers are listening. Shutting down mirrors it: every
// producer is deactivated, the bus waits for the queues to drain, services
// flush what they held back (as often as that still moves events on), and
// only then are services stopped, so no event accepted by the bus is lost to
// the order in which services happen to be declared. stop() is idempotent and
// must release every endpoint and thread the service owns.

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "bus/host/loader/plugin_loader.h"
#include "router/broker.h"
#include "router/registry.h"
#include "services/deployer.h"

namespace cepbus::services {

class ClusterMember;
class QueryHost;

// What a service may use of the bus. Outlives every service built with it.
struct ServiceContext {
  router::Broker& broker;
  router::Registry& registry;
  // Loads detector plugins by name (the descriptor's <plugins> are loaded
  // before any service is created, so a service finds them already there).
  plugin::PluginLoader& plugins;
  // The container's deployment side (the Bus); nullptr where services run
  // outside a bus (tests, benchmarks), and then the admin API refuses to
  // deploy.
  Deployer* deployer = nullptr;
  // The descriptor's <journal path>, empty without one: where the reliable
  // flow journals and checkpointed CEP queries keep their state.
  std::string journal_path{};
};

class Service {
 public:
  virtual ~Service() = default;

  // The service unit's name, unique within its assembly.
  virtual const std::string& name() const = 0;
  // Control plane: registers endpoints and subscriptions, starts threads.
  // An error names the descriptor location of what is wrong.
  virtual Status start() = 0;
  // Called once every service of the bus has started: a service that
  // produces events on its own (a replay source) begins here.
  virtual void activate() {}
  // Stops originating events (the counterpart of activate()); endpoints stay,
  // so events already in flight are still delivered to the service.
  virtual void deactivate() {}
  // The input has ended for now: hand on anything held back (a CEP engine's
  // pending batched matches). Asynchronous; finished() turns true when done.
  // May be called more than once, and events may still arrive afterwards.
  virtual void flush() {}
  virtual void stop() = 0;
  // True once the service has no work of its own left (a replay source that
  // reached the end of its file). Services driven only by incoming events are
  // always finished; `cepbus run --exit-when-drained` waits for every service
  // to be finished and every queue to be empty.
  virtual bool finished() const { return true; }
  // The queries this service runs, for the admin API; nullptr for a service
  // that runs none. Valid as long as the service is.
  virtual QueryHost* queryHost() { return nullptr; }
  // What this service reports as a node of a cluster, for the admin API;
  // nullptr for a service that is none. Valid as long as the service is.
  virtual const ClusterMember* clusterMember() const { return nullptr; }
};

// Builds services of one type from service units.
// Thread-safety: create() may be called from any thread; a factory is immutable.
class ServiceFactory {
 public:
  virtual ~ServiceFactory() = default;
  // The `type` attribute of the service units this factory builds.
  virtual std::string_view type() const = 0;
  // Validates the unit's params, subscriptions and publications and builds
  // the service (not started). InvalidArgument naming file:line on bad input.
  virtual Result<std::unique_ptr<Service>> create(const descriptor::ServiceAssembly& assembly,
                                                  const descriptor::ServiceUnit& unit,
                                                  ServiceContext& context) const = 0;
};

}  // namespace cepbus::services
