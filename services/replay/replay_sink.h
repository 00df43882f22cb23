#pragma once

// ReplaySink: a subscriber that writes every event it receives as one JSON
// line to a file or to stdout — the consumer of the quickstart and of
// integration tests, and a recorder for later replay.
//
// Descriptor: <service-unit type="replay-sink"> with params `file` (required;
// '-' is stdout, other paths are relative to the descriptor), `format`
// (compact | full, default compact) and one or more <subscribe address=...
// filter=...>. Each line is flushed as it is written, so a reader of the file
// (or a person at the terminal) sees events as they are delivered.
//
// Thread-safety: deliveries may arrive from several threads at once; lines
// are written whole, one at a time.

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/event_filter.h"
#include "bus/core/event_json.h"
#include "router/component_entry.h"
#include "router/subscription_table.h"
#include "services/service.h"

namespace cepbus::services::replay {

struct ReplaySinkConfig {
  struct Subscription {
    std::string address;
    EventFilterPtr filter;  // null: every event
  };
  std::string name;  // the registry name: "<assembly>.<unit>"
  std::string file;  // "-" for stdout
  EventFormat format = EventFormat::kCompact;
  std::vector<Subscription> subscriptions;
};

class ReplaySink final : public Service {
 public:
  ReplaySink(ReplaySinkConfig config, ServiceContext& context);
  ~ReplaySink() override;

  const std::string& name() const override { return config_.name; }
  Status start() override;
  void stop() override;

  // The endpoint subscribers deliver to: "<name>:in".
  std::string endpointName() const { return config_.name + ":in"; }
  uint64_t received() const;

 private:
  Status write(const flows::Exchange& exchange) EXCLUDES(mu_);

  const ReplaySinkConfig config_;
  ServiceContext& context_;
  bool started_ = false;
  std::vector<router::SubscriptionId> subscriptions_;

  mutable Mutex mu_;
  std::ofstream file_ GUARDED_BY(mu_);
  std::ostream* out_ GUARDED_BY(mu_) = nullptr;  // &file_ or &std::cout
  uint64_t received_ GUARDED_BY(mu_) = 0;
};

class ReplaySinkFactory final : public ServiceFactory {
 public:
  std::string_view type() const override { return "replay-sink"; }
  Result<std::unique_ptr<Service>> create(const descriptor::ServiceAssembly& assembly,
                                          const descriptor::ServiceUnit& unit,
                                          ServiceContext& context) const override;
};

}  // namespace cepbus::services::replay
