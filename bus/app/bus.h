#pragma once

// Bus: the container that turns a deployment descriptor into a running bus.
//
// It builds, in dependency order, the registry (shared state), the flows of
// the delivery policy (one straight-through flow, a SEDA flow per declared
// stage, reliable flows over the descriptor's journal), the routes, the
// broker, the plugins and — through the service factories registered by
// service type — one service per service unit. start() starts the broker,
// then the services in descriptor order, then activates them; stop() winds
// down in the order that loses nothing (see its comment).
//
// Run-time deployment (services::Deployer, used by the admin API): deploy()
// builds, starts and activates an assembly; undeploy() winds one down as
// stop() does for the whole bus, but only for that assembly's services.
//
// Thread-safety: create/start/stop are control-plane calls
// to be made from one thread at a time; drained(), the Deployer calls and the
// accessors may be called from any thread. deploy()/undeploy() share
// start()/stop()'s lock but never wait for it: while the bus starts or
// stops they answer Unavailable, so the admin listener's thread (which stop()
// joins) never blocks on a stop in progress.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "bus/host/descriptor/element_parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "router/broker.h"
#include "router/registry.h"
#include "services/service.h"
#include "services/service_factory_registry.h"

namespace cepbus::app {

struct BusOptions {
  // Searched after the descriptor's own <search-path>s.
  std::vector<std::string> plugin_paths = plugin::PluginLoader::defaultSearchPaths();
  // How long stop() waits for the queues to drain before it stops anyway;
  // what a reliable flow has not delivered by then stays journaled.
  std::chrono::milliseconds drain_timeout{30'000};
};

class Bus final : public services::Deployer {
 public:
  // Builds everything the descriptor declares without starting anything.
  // On failure the status lists every problem found, one per line, each
  // naming the descriptor file and line.
  static Result<std::unique_ptr<Bus>> create(const descriptor::Descriptor& descriptor,
                                             BusOptions options = {});
  ~Bus() override;  // stop()
  Bus(const Bus&) = delete;
  Bus& operator=(const Bus&) = delete;

  // Starts the broker, then the services in descriptor order. If one fails,
  // what was started is stopped again and the failure returned.
  Status start();
  // Idempotent. Deactivates the producers, waits for every queue to drain,
  // lets services flush what they held back, stops the broker (its flows
  // drain and flush the journal), then stops the services in reverse order.
  void stop();

  // True when every service is finished and no flow holds queued work.
  bool drained() const;

  // services::Deployer
  Status deploy(const descriptor::ServiceAssembly& assembly) override;
  Status undeploy(std::string_view assembly) override;
  Result<services::Redeployed> redeploy(const descriptor::ServiceAssembly& assembly) override;
  std::shared_ptr<services::Service> findService(std::string_view name) const override;
  std::vector<services::DeployedServiceInfo> deployedServices() const override;
  std::vector<services::AssemblyInfo> assemblies() const override;

  const std::string& name() const { return name_; }
  router::Broker& broker() { return *broker_; }
  router::Registry& registry() { return *registry_; }
  const services::ServiceFactoryRegistry& factories() const { return factories_; }

 private:
  struct DeployedService {
    std::string assembly;
    std::string type;
    std::shared_ptr<services::Service> service;
  };
  struct Assembly {
    descriptor::ServiceAssembly descriptor;  // as deployed; redeploy() compares with it
    bool runtime = false;
  };

  Bus(std::string name, BusOptions options);
  // deploy() once lifecycle_mu_ is held and the bus runs.
  Status deployRunning(const descriptor::ServiceAssembly& assembly);
  // Applies a redeploy's query changes to the running services.
  Result<services::Redeployed> applyRedeploy(const services::RedeployPlan& plan);
  void waitDrained() const;
  uint64_t deliveredTotal() const;  // deliveries to endpoints, from the registry
  void buildPolicy(const descriptor::Descriptor& d, std::vector<std::string>& errors);
  void loadPlugins(const descriptor::Descriptor& d, std::vector<std::string>& errors);
  // Appends to `out` one service per unit of the assembly.
  void buildServices(const descriptor::ServiceAssembly& assembly, std::vector<std::string>& errors,
                     std::vector<DeployedService>& out);
  // Waits, at most drain_timeout, until every one of `services` is finished.
  void waitFinished(const std::vector<std::shared_ptr<services::Service>>& services) const;

  const std::string name_;
  const BusOptions options_;
  std::shared_ptr<router::Registry> registry_;
  std::unique_ptr<router::Broker> broker_;
  std::unique_ptr<plugin::PluginLoader> plugins_;
  services::ServiceFactoryRegistry factories_;
  std::unique_ptr<services::ServiceContext> context_;
  // Serializes start, stop, deploy and undeploy; guards the flags.
  std::mutex lifecycle_mu_;
  bool started_ = false;
  bool stopped_ = false;
  // Changed only under lifecycle_mu_ and services_mu_ both, so the lifecycle
  // calls read them with the former and any thread with the latter.
  mutable std::mutex services_mu_;
  std::vector<DeployedService> services_;  // in start order
  std::vector<Assembly> assemblies_;       // in deployment order
};

// Registers the service factories cepbus ships (replay-source, replay-sink, cep).
void registerBuiltinServices(services::ServiceFactoryRegistry& registry);

// The parsers of the descriptor elements the bus's own services own: the
// AMQP listener's <listeners><amqp>, the admin listener's <listeners><http>
// and the cluster node's <cluster>. Give them to the descriptor parser.
const descriptor::ElementParsers& builtinElementParsers();

}  // namespace cepbus::app
