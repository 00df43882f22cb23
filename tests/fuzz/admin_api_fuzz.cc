// Admin REST handling without sockets: the input is split at its first three
// newlines into method, target (path and query), Authorization header and
// body, and handed to AdminApi::handle() over a started broker with two
// straight-through flows, a route and an endpoint, and a deployer that
// accepts every assembly. Every answer must be a status in 200..599 with,
// for an error, a JSON body {"error": ...}.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "services/deployer.h"
#include "services/http/admin_api.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace cepbus;

// Accepts what it is given and lists it, so that undeploy and the lists see
// runtime assemblies; the parsing and checks under test are the api's own.
class AcceptingDeployer final : public services::Deployer {
 public:
  Status deploy(const descriptor::ServiceAssembly& assembly) override {
    for (const auto& a : assemblies_) {
      if (a.name == assembly.name) return Status::alreadyExists("assembly " + assembly.name);
    }
    if (assemblies_.size() < 16) assemblies_.push_back({assembly.name, {}, true});
    return Status::ok();
  }
  Status undeploy(std::string_view assembly) override {
    for (auto it = assemblies_.begin(); it != assemblies_.end(); ++it) {
      if (it->name == assembly) {
        assemblies_.erase(it);
        return Status::ok();
      }
    }
    return Status::notFound("assembly " + std::string(assembly));
  }
  Result<services::Redeployed> redeploy(const descriptor::ServiceAssembly& assembly) override {
    for (const auto& a : assemblies_) {
      if (a.name == assembly.name) return services::Redeployed{};
    }
    if (Status s = deploy(assembly); !s) return s;
    return services::Redeployed{.deployed = true, .changed = {}, .kept = {}};
  }
  std::shared_ptr<services::Service> findService(std::string_view) const override {
    return nullptr;
  }
  std::vector<services::DeployedServiceInfo> deployedServices() const override { return {}; }
  std::vector<services::AssemblyInfo> assemblies() const override { return assemblies_; }

 private:
  std::vector<services::AssemblyInfo> assemblies_;
};

struct Bus {
  Bus() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    fuzz::check(policy->addFlow(std::make_unique<flows::StFlow>("st")).isOk(), "flow st");
    fuzz::check(policy->addFlow(std::make_unique<flows::StFlow>("st2")).isOk(), "flow st2");
    fuzz::check(policy->addRoute(router::RouteRule{"slow.#", "st2"}).isOk(), "route");
    registry = std::make_shared<router::Registry>();
    broker = std::make_unique<router::Broker>(std::move(policy), registry);
    fuzz::check(broker->start().isOk(), "broker start");
    fuzz::check(broker
                    ->addEndpoint("sink", [](const flows::Exchange&,
                                             flows::DeliveryContext&) { return Status::ok(); })
                    .isOk(),
                "endpoint");
    fuzz::check(broker->subscribe("sink", "stocks.#").isOk(), "subscribe");
    api = std::make_unique<services::http::AdminApi>(*broker, *registry, "s3cret", "CEPBUS_TOKEN",
                                                     &deployer);
  }

  AcceptingDeployer deployer;
  std::shared_ptr<router::Registry> registry;
  std::unique_ptr<router::Broker> broker;
  std::unique_ptr<services::http::AdminApi> api;
};

// The text up to the next '\n' (all of it when there is none), consumed.
std::string_view field(std::string_view& in) {
  const size_t nl = in.find('\n');
  const std::string_view f = in.substr(0, nl);
  in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return -1;
  static Bus* bus = new Bus();  // one bus for the run, as a listener has
  std::string_view in(reinterpret_cast<const char*>(data), size);
  services::http::AdminRequest request;
  request.method = field(in);
  request.target = field(in);
  request.authorization = field(in);
  request.body = in;
  const services::http::AdminResponse response = bus->api->handle(request);
  fuzz::check(response.status >= 200 && response.status <= 599, "bad status");
  if (response.status >= 400 && response.content_type == "application/json") {
    const nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
    fuzz::check(body.is_object() && body.contains("error"),
                "error body is not {\"error\":...}:", response.body);
  }
  if (response.status == 405) fuzz::check(!response.allow.empty(), "405 without Allow");
  return 0;
}
