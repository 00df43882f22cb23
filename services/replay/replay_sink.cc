#include "services/replay/replay_sink.h"

#include <iostream>

#include "bus/core/pattern/filter.h"
#include "bus/host/descriptor/file_checks.h"
#include "services/service_factory_registry.h"

namespace cepbus::services::replay {

ReplaySink::ReplaySink(ReplaySinkConfig config, ServiceContext& context)
    : config_(std::move(config)), context_(context) {}

ReplaySink::~ReplaySink() { stop(); }

Status ReplaySink::start() {
  {
    MutexLock lock(mu_);
    if (config_.file == "-") {
      out_ = &std::cout;
    } else {
      file_.open(config_.file, std::ios::out | std::ios::trunc);
      if (!file_) return Status::ioError(config_.name + ": cannot write " + config_.file);
      out_ = &file_;
    }
  }
  Status added = context_.broker.addEndpoint(
      endpointName(),
      [this](const flows::Exchange& ex, flows::DeliveryContext&) { return write(ex); },
      config_.name);
  if (!added) return added;
  started_ = true;
  for (const auto& s : config_.subscriptions) {
    auto id = context_.broker.subscribe(endpointName(), s.address, s.filter);
    if (!id) {
      stop();
      return id.status();
    }
    subscriptions_.push_back(*id);
  }
  return Status::ok();
}

void ReplaySink::stop() {
  if (!started_) return;
  started_ = false;
  // Removing the endpoint drains its queues, so every event accepted for this
  // sink is written before the file is closed.
  // Stopping: NotFound (nothing registered) is no error here.
  (void)context_.broker.removeEndpoint(endpointName());
  subscriptions_.clear();
  MutexLock lock(mu_);
  if (out_ != nullptr) out_->flush();
  if (file_.is_open()) file_.close();
  out_ = nullptr;
}

uint64_t ReplaySink::received() const {
  MutexLock lock(mu_);
  return received_;
}

Status ReplaySink::write(const flows::Exchange& exchange) {
  std::string line = encodeEvent(*exchange.event, config_.format);
  line.push_back('\n');
  MutexLock lock(mu_);
  if (out_ == nullptr) return Status::unavailable(config_.name + ": stopped");
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  out_->flush();
  if (!*out_) return Status::ioError(config_.name + ": write to " + config_.file + " failed");
  ++received_;
  return Status::ok();
}

Result<std::unique_ptr<Service>> ReplaySinkFactory::create(
    const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit,
    ServiceContext& context) const {
  ReplaySinkConfig config;
  config.name = assembly.name + "." + unit.name;
  auto file = requiredParam(unit, "replay-sink", "file");
  if (!file) return file.status();
  config.file = (*file)->value == "-" ? "-" : assembly.resolvePath((*file)->value).string();
  if (auto why = config.file == "-" ? std::nullopt : descriptor::unwritableFile(config.file)) {
    return Status::invalidArgument(
        (*file)->where.error("replay-sink \"" + unit.name + "\": " + *why).toString());
  }
  if (const descriptor::Param* format = unit.param("format")) {
    if (format->value == "full") {
      config.format = EventFormat::kFull;
    } else if (format->value != "compact") {
      return Status::invalidArgument(
          format->where
              .error("<param name=\"format\">: expected compact or full, got \"" + format->value +
                     "\"")
              .toString());
    }
  }
  if (Status s = checkParamNames(unit, type(), {"file", "format"}); !s) return s;
  if (unit.subscriptions.empty() || !unit.publications.empty() || !unit.queries.empty()) {
    return Status::invalidArgument(
        unit.where
            .error("replay-sink \"" + unit.name +
                   "\": expected one or more <subscribe> and no <publish> or <query>")
            .toString());
  }
  for (const auto& s : unit.subscriptions) {
    ReplaySinkConfig::Subscription sub{s.address, nullptr};
    if (!s.filter.empty()) {
      auto filter = pattern::compileFilter(s.filter);
      if (!filter) {
        return Status::invalidArgument(
            s.filter_where.error("filter \"" + s.filter + "\": " + filter.status().message())
                .toString());
      }
      sub.filter = *filter;
    }
    config.subscriptions.push_back(std::move(sub));
  }
  return std::unique_ptr<Service>(new ReplaySink(std::move(config), context));
}

}  // namespace cepbus::services::replay
