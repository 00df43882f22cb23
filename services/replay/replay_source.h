#pragma once

// ReplaySource: publishes the events of a JSON-lines file to one address,
// at full speed or paced to a rate — the producer of the quickstart and of
// integration tests, and a way to replay a recorded stream into a live bus.
//
// Descriptor: <service-unit type="replay-source"> with params `file`
// (required; relative to the descriptor), `rate` (events/s, 0 = full speed,
// the default), `qos` (best-effort | reliable) and exactly one <publish>.
// A malformed line is logged with file:line, counted as failed in the
// registry and skipped; the rest of the file is still replayed. Targets that
// refuse an event (admission) are counted as rejected and logged. Each run
// of the file is a source of its own (Exchange::source), which ends with the
// file, so a query it fed stops waiting for it then.
//
// Thread-safety: the life-cycle calls come from the Bus's thread; the replay
// runs on a thread of its own, which stop() ends and joins.

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "flows/exchange.h"
#include "router/component_entry.h"
#include "services/service.h"

namespace cepbus::services::replay {

struct ReplaySourceConfig {
  std::string name;  // the registry name: "<assembly>.<unit>"
  std::filesystem::path file;
  std::string address;
  double rate = 0;  // events per second; 0 = as fast as the bus takes them
  flows::Qos qos = flows::Qos::kBestEffort;
};

class ReplaySource final : public Service {
 public:
  ReplaySource(ReplaySourceConfig config, ServiceContext& context);
  ~ReplaySource() override;

  const std::string& name() const override { return config_.name; }
  Status start() override;
  void activate() override;
  void deactivate() override;
  void stop() override;
  bool finished() const override { return finished_.load(std::memory_order_acquire); }

  uint64_t published() const { return published_.load(std::memory_order_relaxed); }

 private:
  void run();

  const ReplaySourceConfig config_;
  ServiceContext& context_;
  std::shared_ptr<router::ComponentEntry> entry_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> published_{0};
  // What its events carry as Exchange::source.
  const uint64_t source_ = flows::newSource();
};

class ReplaySourceFactory final : public ServiceFactory {
 public:
  std::string_view type() const override { return "replay-source"; }
  Result<std::unique_ptr<Service>> create(const descriptor::ServiceAssembly& assembly,
                                          const descriptor::ServiceUnit& unit,
                                          ServiceContext& context) const override;
};

}  // namespace cepbus::services::replay
