#pragma once

// Deployer: what a service may ask of the container about deployment — the
// admin API deploys and undeploys service assemblies, lists what runs, and
// finds a service (a CEP unit to add a query to) by name. The Bus implements
// it (bus/app/bus.h); ServiceContext::deployer points at it.
//
// Thread-safety: every call may be made from any thread. deploy() and
// undeploy() are serialized with each other and with the container's own
// start and stop: while the container is starting or stopping they return
// Unavailable at once rather than wait (a caller on a thread the stop joins
// must not block on it). Ownership: a service found with findService() stays
// alive as long as the caller holds it, even if its assembly is undeployed
// meanwhile (it is then stopped).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "services/query_host.h"
#include "services/redeploy_plan.h"

namespace cepbus::services {

class Service;

struct DeployedServiceInfo {
  std::string name;      // the service's name, e.g. "<assembly>.<unit>"
  std::string assembly;  // "" for the container's own listeners
  std::string type;      // the service unit's type ("cep", "replay-source"...)
  bool finished = false;
};

struct AssemblyInfo {
  std::string name;
  std::vector<std::string> services;  // in start order
  bool runtime = false;               // deployed through deploy(), not by the descriptor
};

// A query a redeploy changed.
struct RedeployedQuery {
  std::string service;
  std::string query;
  QueryStep::Kind change;
  std::optional<QueryEdit> edit;  // for a replacement: what it carried over
};

struct Redeployed {
  bool deployed = false;  // no assembly of that name ran: it was deployed
  std::vector<RedeployedQuery> changed;
  std::vector<std::string> kept;  // "<service>/<query>" of each unchanged query
};

class Deployer {
 public:
  virtual ~Deployer() = default;
  // Builds every unit of the assembly, starts them, then activates them.
  // InvalidArgument naming file:line for a bad unit (nothing is started);
  // AlreadyExists when an assembly of that name runs; Unavailable when the
  // container is not running. If a unit fails to start, the ones started
  // are stopped again and nothing stays deployed.
  virtual Status deploy(const descriptor::ServiceAssembly& assembly) = 0;
  // Winds the assembly's services down in the order that loses nothing:
  // deactivates the producers, waits for the services to finish their work,
  // flushes them, then stops them in reverse order. NotFound for an unknown
  // assembly; Unavailable when the container is not running.
  virtual Status undeploy(std::string_view assembly) = 0;
  // Changes a running assembly into `assembly` without stopping its units:
  // its queries are kept, replaced, added or removed (redeploy_plan.h). When
  // no assembly of that name runs it is deployed as by deploy(). Rejected,
  // naming the unit, when anything but queries differs, and nothing is
  // changed. When a query change fails, the query host's status is returned
  // if it was the first; after others, Rejected listing those, which stay
  // applied. Unavailable when the container is not running.
  virtual Result<Redeployed> redeploy(const descriptor::ServiceAssembly& assembly) = 0;
  // nullptr when no running service has that name.
  virtual std::shared_ptr<Service> findService(std::string_view name) const = 0;
  virtual std::vector<DeployedServiceInfo> deployedServices() const = 0;
  virtual std::vector<AssemblyInfo> assemblies() const = 0;
};

}  // namespace cepbus::services
