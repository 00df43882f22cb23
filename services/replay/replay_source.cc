#include "services/replay/replay_source.h"

#include <Poco/Logger.h>

#include <chrono>
#include <fstream>

#include "bus/core/event_json.h"
#include "bus/host/descriptor/file_checks.h"
#include "flows/source_ends.h"
#include "services/service_factory_registry.h"

namespace cepbus::services::replay {

ReplaySource::ReplaySource(ReplaySourceConfig config, ServiceContext& context)
    : config_(std::move(config)), context_(context) {}

ReplaySource::~ReplaySource() { stop(); }

Status ReplaySource::start() {
  if (!std::filesystem::is_regular_file(config_.file)) {
    return Status::ioError(config_.name + ": cannot read replay file " + config_.file.string());
  }
  auto entry = context_.registry.add(config_.name, router::ComponentKind::kService);
  if (!entry) return entry.status();
  entry_ = *entry;
  entry_->setMetadata("type", "replay-source");
  entry_->setMetadata("file", config_.file.string());
  entry_->setMetadata("address", config_.address);
  entry_->setState(router::ComponentState::kStarted);
  return Status::ok();
}

void ReplaySource::activate() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void ReplaySource::deactivate() {
  stopping_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  finished_.store(true, std::memory_order_release);
}

void ReplaySource::stop() {
  deactivate();
  if (entry_) {
    entry_->setState(router::ComponentState::kStopped);
    context_.registry.remove(config_.name);
    entry_.reset();
  }
}

void ReplaySource::run() {
  Poco::Logger& log = Poco::Logger::get("cepbus.replay");
  std::ifstream in(config_.file);
  EventLineReader reader(in);
  const Symbol address = Symbol::intern(config_.address);
  const Symbol sender = Symbol::intern(config_.name);
  const auto begin = std::chrono::steady_clock::now();
  uint64_t n = 0;
  uint64_t skipped = 0;
  while (!stopping_.load(std::memory_order_acquire)) {
    auto event = reader.next();
    if (!event) {
      if (event.status().code() == Status::Code::kNotFound) break;  // end of file
      log.warning("%s: %s: %s", config_.name, config_.file.string(), event.status().message());
      entry_->addFailed();
      ++skipped;
      continue;
    }
    if (config_.rate > 0) {
      const auto due =
          begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(static_cast<double>(n) / config_.rate));
      std::this_thread::sleep_until(due);
    }
    flows::Exchange exchange;
    exchange.event = std::move(*event);
    exchange.address = address;
    exchange.qos = config_.qos;
    exchange.sender = sender;
    exchange.source = source_;
    const flows::SendOutcome out = context_.broker.publish(exchange);
    ++n;
    published_.fetch_add(1, std::memory_order_relaxed);
    entry_->addDelivered();
    if (out.rejected > 0) {
      entry_->addRejected(out.rejected);
      log.warning("%s: line %z: refused by %u target(s): %s", config_.name, reader.lineNumber(),
                  out.rejected, out.status.message());
    }
  }
  // The skipped lines are named once each above; the closing line counts
  // them too, so that it accounts for the whole file.
  const std::string bad_lines = skipped == 0 ? std::string()
                                             : ", skipped " + std::to_string(skipped) +
                                                   " bad line" + (skipped == 1 ? "" : "s");
  // Stopped early too: nothing more comes from this run.
  flows::sourceEnds().end(source_);
  log.information("%s: replayed %Lu events from %s%s", config_.name, static_cast<Poco::UInt64>(n),
                  config_.file.string(), bad_lines);
  finished_.store(true, std::memory_order_release);
}

Result<std::unique_ptr<Service>> ReplaySourceFactory::create(
    const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit,
    ServiceContext& context) const {
  ReplaySourceConfig config;
  config.name = assembly.name + "." + unit.name;
  auto file = requiredParam(unit, "replay-source", "file");
  if (!file) return file.status();
  config.file = assembly.resolvePath((*file)->value);
  if (auto why = descriptor::unreadableFile(config.file)) {
    return Status::invalidArgument(
        (*file)->where.error("replay-source \"" + unit.name + "\": " + *why).toString());
  }
  auto rate = numberParam(unit, "rate", 0, 0, 1e9);
  if (!rate) return rate.status();
  config.rate = *rate;
  if (const descriptor::Param* qos = unit.param("qos")) {
    if (qos->value == "reliable") {
      config.qos = flows::Qos::kReliable;
    } else if (qos->value != "best-effort") {
      return Status::invalidArgument(
          qos->where
              .error("<param name=\"qos\">: expected best-effort or reliable, got \"" + qos->value +
                     "\"")
              .toString());
    }
  }
  if (Status s = checkParamNames(unit, type(), {"file", "rate", "qos"}); !s) return s;
  if (unit.publications.size() != 1 || !unit.subscriptions.empty() || !unit.queries.empty()) {
    return Status::invalidArgument(
        unit.where
            .error("replay-source \"" + unit.name +
                   "\": expected exactly one <publish> and no <subscribe> or <query>")
            .toString());
  }
  config.address = unit.publications[0].address;
  return std::unique_ptr<Service>(new ReplaySource(std::move(config), context));
}

}  // namespace cepbus::services::replay
