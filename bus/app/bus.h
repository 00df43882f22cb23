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
// Thread-safety: create/start/stop are control-plane calls
// to be made from one thread at a time; drained() and the accessors may be
// called from any thread.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bus/core/descriptor/descriptor.h"
#include "bus/core/plugin/plugin_loader.h"
#include "bus/core/status.h"
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

class Bus {
 public:
  // Builds everything the descriptor declares without starting anything.
  // On failure the status lists every problem found, one per line, each
  // naming the descriptor file and line.
  static Result<std::unique_ptr<Bus>> create(const descriptor::Descriptor& descriptor,
                                             BusOptions options = {});
  ~Bus();  // stop()
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

  const std::string& name() const { return name_; }
  router::Broker& broker() { return *broker_; }
  router::Registry& registry() { return *registry_; }
  const services::ServiceFactoryRegistry& factories() const { return factories_; }

 private:
  struct DeployedService {
    std::string assembly;
    std::unique_ptr<services::Service> service;
  };

  Bus(std::string name, BusOptions options);
  void waitDrained() const;
  uint64_t deliveredTotal() const;  // deliveries to endpoints, from the registry
  void buildPolicy(const descriptor::Descriptor& d, std::vector<std::string>& errors);
  void loadPlugins(const descriptor::Descriptor& d, std::vector<std::string>& errors);
  void buildServices(const descriptor::ServiceAssembly& assembly, std::vector<std::string>& errors);

  const std::string name_;
  const BusOptions options_;
  std::shared_ptr<router::Registry> registry_;
  std::unique_ptr<router::Broker> broker_;
  std::unique_ptr<plugin::PluginLoader> plugins_;
  services::ServiceFactoryRegistry factories_;
  std::unique_ptr<services::ServiceContext> context_;
  std::vector<DeployedService> services_;  // in start order
  std::mutex lifecycle_mu_;
  bool started_ = false;
  bool stopped_ = false;
};

// Registers the service factories cepbus ships (replay-source, replay-sink, cep).
void registerBuiltinServices(services::ServiceFactoryRegistry& registry);

}  // namespace cepbus::app
