#pragma once

// What a plugin library includes to export the two C entry points of the
// plugin ABI (plugin_abi.h) without writing them by hand:
//
//   void registerFactories(cepbus::plugin::FactoryRegistrar& registrar) {
//     registrar.add("nfa", std::make_unique<PlanDetectorFactory<NfaDetector, compilePlan>>());
//   }
//   CEPBUS_DEFINE_PLUGIN("nfa", "1.0.0", registerFactories)
//
// The generated cepbus_plugin_register() catches every exception the
// registration function throws and reports it to the host as an error
// message, so no exception crosses the boundary.

#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/partitioned_detector.h"
#include "bus/core/plugin/plugin_abi.h"

namespace cepbus::plugin {

// The plugin-side view of the host's registrar. Valid only during registration.
class FactoryRegistrar {
 public:
  explicit FactoryRegistrar(CepbusPluginRegistrar* registrar) : registrar_(registrar) {}

  // Hands `factory` to the host under `engine`. Throws std::runtime_error when
  // the host refuses it (e.g. the engine name is taken).
  void add(std::string_view engine, std::unique_ptr<DetectorFactory> factory) {
    const std::string name(engine);
    if (registrar_->add_factory(registrar_->host, name.c_str(), factory.release()) != 0) {
      throw std::runtime_error("the host refused the factory for engine '" + name + "'");
    }
  }

 private:
  CepbusPluginRegistrar* registrar_;
};

// The factory of an engine whose detectors are built from a compiled plan:
// `Compile(query, options)` returns a Result<Plan> (the query checked against
// what the engine supports) and `EngineDetector(plan, sink)` runs it.
// `options` (static storage) describes the options Compile accepts.
// Stateless; create() is safe to call from any thread.
template <typename EngineDetector, auto Compile>
class PlanDetectorFactory final : public DetectorFactory {
 public:
  // What DetectorFactory::notices() returns for a query.
  using NoticesFn = std::vector<std::string> (*)(const pattern::Query& query);
  // Who runs PARTITION BY: the plan itself, or a PartitionedDetector with one
  // EngineDetector per partition (Compile then never sees the clause).
  enum class Partitions { kInPlan, kPerPartitionDetector };

  PlanDetectorFactory() = default;
  explicit PlanDetectorFactory(std::span<const OptionInfo> options, NoticesFn notices = nullptr,
                               Partitions partitions = Partitions::kInPlan)
      : options_(options), notices_(notices), partitions_(partitions) {}

  std::span<const OptionInfo> options() const override { return options_; }
  std::vector<std::string> notices(const pattern::Query& query) const override {
    return notices_ == nullptr ? std::vector<std::string>{} : notices_(query);
  }
  Result<std::unique_ptr<Detector>> create(const pattern::Query& query,
                                           const DetectorOptions& options,
                                           MatchSink& sink) const override {
    if (partitions_ == Partitions::kPerPartitionDetector && !query.partition_by.empty()) {
      return createPartitioned(*this, query, options, sink);
    }
    auto plan = Compile(query, options);
    if (!plan) return plan.status();
    return std::unique_ptr<Detector>(std::make_unique<EngineDetector>(*plan, sink));
  }

 private:
  std::span<const OptionInfo> options_;
  NoticesFn notices_ = nullptr;
  Partitions partitions_ = Partitions::kInPlan;
};

namespace detail {

inline int runRegistration(CepbusPluginRegistrar* registrar,
                           void (*fn)(FactoryRegistrar& registrar)) noexcept {
  try {
    FactoryRegistrar wrapped(registrar);
    fn(wrapped);
    return 0;
  } catch (const std::exception& e) {
    registrar->set_error(registrar->host, e.what());
  } catch (...) {
    registrar->set_error(registrar->host, "unknown exception during registration");
  }
  return 1;
}

}  // namespace detail
}  // namespace cepbus::plugin

#define CEPBUS_DEFINE_PLUGIN(NAME, VERSION, REGISTER_FN)                                        \
  extern "C" __attribute__((visibility("default"))) const CepbusPluginInfo* cepbus_plugin_info( \
      void) {                                                                                   \
    static const CepbusPluginInfo info = {CEPBUS_PLUGIN_ABI_VERSION, NAME, VERSION,             \
                                          CEPBUS_PLUGIN_BUILD_TAG};                             \
    return &info;                                                                               \
  }                                                                                             \
  extern "C" __attribute__((visibility("default"))) int cepbus_plugin_register(                 \
      CepbusPluginRegistrar* registrar) {                                                       \
    return ::cepbus::plugin::detail::runRegistration(registrar, &(REGISTER_FN));                \
  }
