#pragma once

// The host's side of every call into a detector: exceptions stop here.
//
// A plugin's detector should never throw, but a bug in it (or in a sink it
// calls) must not take the host down: a plugin that fails to load or throws
// leaves the bus running (docs/plugins.md). GuardedDetector turns every exception
// into an Internal status naming the detector and the exception, and counts
// them for the metrics. It also keeps the plugin library loaded for as long
// as the detector it wraps is alive.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bus/core/plugin/detector.h"

namespace cepbus::plugin {

// Owns the inner detector; not thread-safe except exceptionCount(), which
// may be read from any thread.
class GuardedDetector final : public Detector {
 public:
  // `label` names the detector in error messages (e.g. "nfa detector");
  // `keep_alive` is held until the inner detector is destroyed (the plugin
  // library whose code the detector runs).
  GuardedDetector(std::string label, std::shared_ptr<const void> keep_alive,
                  std::unique_ptr<Detector> inner);

  Status onEvent(const EventPtr& event) noexcept override;
  // One guard for the whole batch. An exception ends the call: the Internal
  // status names the batch (its size and first and last ts) and says that it
  // was consumed only in part (see Detector::onEvents: the events before the
  // one that threw were consumed, that one is in doubt, the rest were not
  // offered). A caller that must know the failing event feeds one at a time.
  Status onEvents(std::span<const EventPtr> events) noexcept override;
  Status flush() noexcept override;
  Status onWatermark(Timestamp t) noexcept override;
  Result<std::string> exportModel(std::string_view format) const noexcept override;
  // The inner detector's; std::nullopt (and an exception counted) when it throws.
  std::optional<DetectorState> state() const noexcept override;
  // The inner detector's; 0 (and an exception counted) when it throws.
  uint32_t snapshotVersion() const noexcept override;
  // The inner detector's, an error prefixed with the label: "nfa detector:
  // ...", so that a refusal names the engine.
  Status snapshot(SnapshotWriter& out) const noexcept override;
  Status restore(SnapshotReader& in) noexcept override;

  // How many calls ended in an exception.
  uint64_t exceptionCount() const { return exceptions_.load(std::memory_order_relaxed); }
  const std::string& label() const { return label_; }

 private:
  Status caught(const char* call, const char* what) const noexcept;
  // `status` with the label before its message when it is an error (all
  // snapshot errors are InvalidArgument).
  Status labelled(Status status) const;
  Status caughtInBatch(std::span<const EventPtr> events, const char* what) const noexcept;

  const std::string label_;
  std::shared_ptr<const void> keep_alive_;  // declared before inner_: outlives it
  std::unique_ptr<Detector> inner_;
  mutable std::atomic<uint64_t> exceptions_{0};
};

}  // namespace cepbus::plugin
