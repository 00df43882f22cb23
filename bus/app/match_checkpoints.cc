#include "bus/app/match_checkpoints.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

namespace cepbus::app {
namespace {

// Wall-clock milliseconds since `start` as "0.18", for what the command reports.
std::string millisecondsSince(std::chrono::steady_clock::time_point start) {
  char text[32];
  std::snprintf(
      text, sizeof text, "%.2f",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return text;
}

// The end of the input: the time a checkpoint at its last event held back
// (one run passes it at the end of its last batch), then the end of the stream.
Status endOfEvents(detection::Detection& detection) {
  Status held = detection.passHeldTime();
  Status end = detection.flush();
  return held ? end : held;
}

}  // namespace

MatchCheckpoints::MatchCheckpoints(const MatchCommandOptions& options,
                                   detection::CheckpointIdentity identity)
    : options_(options),
      identity_(std::move(identity)),
      stop_at_(options.stop_after.value_or(UINT64_MAX)) {}

Status MatchCheckpoints::start(detection::Detection& detection, std::ostream& err) {
  if (!options_.checkpoint_file.empty()) {
    if (Status s = detection::checkCheckpointable(detection); !s) {
      return Status::invalidArgument("--checkpoint: " + s.message());
    }
  }
  if (!options_.resume_file.empty()) {
    const auto started = std::chrono::steady_clock::now();
    auto restored = detection::restoreCheckpoint(options_.resume_file, detection, identity_);
    if (!restored) return Status::invalidArgument("--resume: " + restored.status().message());
    resume_at_ = restored->position;
    std::error_code size_error;  // the file was just read: its size is there
    err << "cepbus match: resumed from checkpoint '" << options_.resume_file << "' after "
        << resume_at_ << " events (" << std::filesystem::file_size(options_.resume_file, size_error)
        << " bytes, " << millisecondsSince(started) << " ms)"
        << (restored->carried_over ? ", its state carried over to the edited query" : "") << '\n';
  }
  if (stop_at_ < resume_at_) {
    return Status::invalidArgument("--stop-after " + std::to_string(stop_at_) +
                                   " is before the checkpoint's position, " +
                                   std::to_string(resume_at_) + " events");
  }
  return Status::ok();
}

Status MatchCheckpoints::finish(detection::Detection& detection, uint64_t position,
                                std::ostream& err) {
  if (position < resume_at_) {
    return Status::invalidArgument("--resume: checkpoint '" + options_.resume_file +
                                   "' was written after " + std::to_string(resume_at_) +
                                   " events; " + options_.events_file + " has " +
                                   std::to_string(position));
  }
  if (options_.checkpoint_file.empty()) {
    if (Status s = endOfEvents(detection); !s) {
      return Status::invalidArgument(options_.events_file + ": at end of events: " + s.message());
    }
    return Status::ok();
  }
  // Not the end of the stream: what is pending stays in the state.
  size_t bytes = 0;
  const auto started = std::chrono::steady_clock::now();
  if (Status s = detection::writeCheckpoint(options_.checkpoint_file, detection, identity_,
                                            position, &bytes);
      !s) {
    return Status::invalidArgument("--checkpoint: " + s.message());
  }
  err << "cepbus match: checkpoint '" << options_.checkpoint_file << "' written after " << position
      << " events (" << bytes << " bytes, " << millisecondsSince(started) << " ms)\n";
  return Status::ok();
}

}  // namespace cepbus::app
