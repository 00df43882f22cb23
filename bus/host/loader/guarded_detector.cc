#include "bus/host/loader/guarded_detector.h"

#include <exception>

namespace cepbus::plugin {

GuardedDetector::GuardedDetector(std::string label, std::shared_ptr<const void> keep_alive,
                                 std::unique_ptr<Detector> inner)
    : label_(std::move(label)), keep_alive_(std::move(keep_alive)), inner_(std::move(inner)) {}

Status GuardedDetector::caught(const char* call, const char* what) const noexcept {
  exceptions_.fetch_add(1, std::memory_order_relaxed);
  try {
    return Status::internal(label_ + " threw from " + call + ": " + what);
  } catch (...) {
    return Status::internal("");  // out of memory while describing the failure
  }
}

Status GuardedDetector::onEvent(const EventPtr& event) noexcept {
  try {
    return inner_->onEvent(event);
  } catch (const std::exception& e) {
    return caught("onEvent", e.what());
  } catch (...) {
    return caught("onEvent", "unknown exception");
  }
}

Status GuardedDetector::caughtInBatch(std::span<const EventPtr> events,
                                      const char* what) const noexcept {
  exceptions_.fetch_add(1, std::memory_order_relaxed);
  try {
    std::string batch = std::to_string(events.size()) + " events";
    if (!events.empty()) {
      batch += " (ts " + std::to_string(events.front()->ts()) + " to " +
               std::to_string(events.back()->ts()) + ")";
    }
    return Status::internal(label_ + " threw from onEvents on a batch of " + batch + ": " + what +
                            "; the batch was consumed only in part (the events before the one "
                            "it threw on were, the later ones were not offered)");
  } catch (...) {
    return Status::internal("");  // out of memory while describing the failure
  }
}

Status GuardedDetector::onEvents(std::span<const EventPtr> events) noexcept {
  try {
    return inner_->onEvents(events);
  } catch (const std::exception& e) {
    return caughtInBatch(events, e.what());
  } catch (...) {
    return caughtInBatch(events, "unknown exception");
  }
}

Status GuardedDetector::flush() noexcept {
  try {
    return inner_->flush();
  } catch (const std::exception& e) {
    return caught("flush", e.what());
  } catch (...) {
    return caught("flush", "unknown exception");
  }
}

Status GuardedDetector::onWatermark(Timestamp t) noexcept {
  try {
    return inner_->onWatermark(t);
  } catch (const std::exception& e) {
    return caught("onWatermark", e.what());
  } catch (...) {
    return caught("onWatermark", "unknown exception");
  }
}

Result<std::string> GuardedDetector::exportModel(std::string_view format) const noexcept {
  try {
    return inner_->exportModel(format);
  } catch (const std::exception& e) {
    return caught("exportModel", e.what());
  } catch (...) {
    return caught("exportModel", "unknown exception");
  }
}

std::optional<DetectorState> GuardedDetector::state() const noexcept {
  try {
    return inner_->state();
  } catch (...) {
    exceptions_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
}

uint32_t GuardedDetector::snapshotVersion() const noexcept {
  try {
    return inner_->snapshotVersion();
  } catch (...) {
    exceptions_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
}

Status GuardedDetector::labelled(Status status) const {
  if (status) return status;
  return Status::invalidArgument(label_ + ": " + status.message());
}

Status GuardedDetector::snapshot(SnapshotWriter& out) const noexcept {
  try {
    return labelled(inner_->snapshot(out));
  } catch (const std::exception& e) {
    return caught("snapshot", e.what());
  } catch (...) {
    return caught("snapshot", "unknown exception");
  }
}

Status GuardedDetector::restore(SnapshotReader& in) noexcept {
  try {
    return labelled(inner_->restore(in));
  } catch (const std::exception& e) {
    return caught("restore", e.what());
  } catch (...) {
    return caught("restore", "unknown exception");
  }
}

}  // namespace cepbus::plugin
