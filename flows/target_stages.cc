#include "flows/target_stages.h"

#include <stdexcept>
#include <utility>

#include "flows/kept_name.h"

namespace cepbus::flows {

namespace {

stages::StageConfig named(stages::StageConfig config, const std::string& name) {
  config.name = name;
  return config;
}

}  // namespace

TargetStages::TargetStages(const std::string& flow_name, const stats::Scope& flow_scope,
                           stages::StageConfig base, HandlerFactory factory)
    : flow_scope_(flow_scope),
      base_(named(std::move(base), flow_name)),
      factory_(std::move(factory)) {}

TargetStages::~TargetStages() { stop(); }

std::unique_ptr<stages::Stage> TargetStages::makeStage(DeliveryTarget& target,
                                                       const Attachment& attachment) const {
  stages::StageConfig config = base_;
  config.name = base_.name + "/" + target.name();
  stats::ScopePtr scope = flow_scope_.child(stages::kStageSchema, {{"stage", config.name}});
  return std::make_unique<stages::Stage>(std::move(config), factory_(target, attachment),
                                         std::move(scope));
}

Result<Attachment> TargetStages::attach(DeliveryTarget& target) {
  MutexLock control(control_mu_);
  {
    ReaderMutexLock lock(map_mu_);
    if (entries_.contains(&target)) {
      return Status::alreadyExists("target " + target.name() + " is already attached to " +
                                   base_.name);
    }
  }
  Entry entry;
  entry.target = &target;
  entry.attachment = Attachment{next_id_++, keepName(target.name())};
  try {
    entry.stage = makeStage(target, entry.attachment);
  } catch (const std::exception& e) {
    return Status::invalidArgument(std::string("stage for target ") + target.name() + ": " +
                                   e.what());
  }
  if (running_) entry.stage->start();
  Attachment attachment = entry.attachment;
  WriterMutexLock lock(map_mu_);
  entries_.emplace(&target, std::move(entry));
  return attachment;
}

void TargetStages::detach(DeliveryTarget& target) {
  MutexLock control(control_mu_);
  std::unique_ptr<stages::Stage> stage;
  {
    WriterMutexLock lock(map_mu_);
    auto it = entries_.find(&target);
    if (it == entries_.end()) return;
    stage = std::move(it->second.stage);
    entries_.erase(it);
  }
  // Outside the map lock: the handler may still be delivering, and a delivery
  // may publish again through with().
  stage->stop();
}

void TargetStages::start() {
  MutexLock control(control_mu_);
  if (running_) return;
  running_ = true;
  WriterMutexLock lock(map_mu_);
  for (auto& [target, entry] : entries_) {
    if (entry.stopped) {
      // A stopped stage cannot restart; its replacement keeps the attachment.
      entry.stage = makeStage(*entry.target, entry.attachment);
      entry.stopped = false;
    }
    entry.stage->start();
  }
}

void TargetStages::stop() {
  MutexLock control(control_mu_);
  if (!running_) return;
  running_ = false;
  std::vector<stages::Stage*> stages;
  {
    WriterMutexLock lock(map_mu_);
    for (auto& [target, entry] : entries_) {
      entry.stopped = true;
      stages.push_back(entry.stage.get());
    }
  }
  // Stages stay in the map (control_mu_ keeps them alive) and drain outside the
  // map lock, so deliveries that publish again can still reach with().
  for (stages::Stage* stage : stages) stage->stop();
}

size_t TargetStages::queueLength(const DeliveryTarget& target) const {
  size_t length = 0;
  with(target,
       [&](const stages::Stage& stage, const Attachment&) { length = stage.queueLength(); });
  return length;
}

std::vector<stages::StageMetricsSnapshot> TargetStages::metrics() const {
  std::vector<stages::StageMetricsSnapshot> out;
  ReaderMutexLock lock(map_mu_);
  out.reserve(entries_.size());
  for (const auto& [target, entry] : entries_) out.push_back(entry.stage->metrics());
  return out;
}

std::vector<std::pair<DeliveryTarget*, Attachment>> TargetStages::attached() const {
  std::vector<std::pair<DeliveryTarget*, Attachment>> out;
  ReaderMutexLock lock(map_mu_);
  out.reserve(entries_.size());
  for (const auto& [target, entry] : entries_) out.emplace_back(entry.target, entry.attachment);
  return out;
}

}  // namespace cepbus::flows
