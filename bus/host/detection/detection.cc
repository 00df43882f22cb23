#include "bus/host/detection/detection.h"

#include <utility>

#include "bus/host/detection/output_control.h"
#include "bus/host/detection/planner.h"

namespace cepbus::detection {
namespace {

// The counters have one writer at a time (the event path, which the host
// serializes) and readers on any thread: a plain store, no locked add.
void add(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

Result<std::unique_ptr<Detection>> Detection::create(DetectionGroup& group, DetectionSink& sink,
                                                     plugin::EventTime time) {
  std::optional<MadeDetector> made = std::exchange(group.made, std::nullopt);
  if (!made) {
    auto fresh = group.recipe.make();
    if (!fresh) return fresh.status();
    made = std::move(fresh).value();
  }
  return std::unique_ptr<Detection>(new Detection(std::move(*made), group.recipe.maxDelay(), time,
                                                  group.engine, group.members.size(), sink));
}

Result<std::unique_ptr<Detection>> Detection::create(const DetectorRecipe& recipe,
                                                     DetectionSink& sink) {
  auto made = recipe.make();
  if (!made) return made.status();
  return std::unique_ptr<Detection>(new Detection(std::move(made).value(), recipe.maxDelay(),
                                                  plugin::EventTime::kNewestEvent, recipe.engine(),
                                                  recipe.queries(), sink));
}

Detection::Detection(MadeDetector made, Timestamp max_delay, plugin::EventTime time,
                     std::string engine, size_t members, DetectionSink& sink)
    : sink_(sink),
      engine_(std::move(engine)),
      members_(members),
      relay_(std::move(made.relay)),
      ordered_(std::make_unique<plugin::ReorderingDetector>(
          std::move(made.detector), max_delay, static_cast<plugin::LateSink*>(this), time)),
      trial_(made.trial),
      output_control_(made.output_control),
      counts_partials_(ordered_->state().has_value()),
      muted_(std::make_unique<bool[]>(members)),
      matches_(std::make_unique<std::atomic<uint64_t>[]>(members)) {
  relay_->attach(*this);
  if (made.trial != nullptr) {
    made.trial->onDecided(
        [this](const plugin::TrialOutcome& outcome) { sink_.onTrialDecided(outcome); });
  }
}

Detection::~Detection() = default;

Status Detection::counted(Status status) {
  if (!status) add(errors_, 1);
  watermark_.store(ordered_->watermark(), std::memory_order_relaxed);
  if (counts_partials_) {
    if (const std::optional<plugin::DetectorState> s = ordered_->state()) {
      partials_.store(s->partial_matches, std::memory_order_relaxed);
      peak_partials_.store(s->peak_partial_matches, std::memory_order_relaxed);
      evicted_.store(s->evicted, std::memory_order_relaxed);
      state_bytes_.store(s->bytes, std::memory_order_relaxed);
    }
  }
  return status;
}

Status Detection::onEvents(std::span<const EventPtr> events) {
  Status status = ordered_->onEvents(events);
  // Once the call returned: a reader that sees them consumed sees their matches out.
  add(consumed_, events.size());
  return counted(std::move(status));
}

Status Detection::onEventsKeepingTime(std::span<const EventPtr> events) {
  Status status = ordered_->onEventsKeepingTime(events);
  add(consumed_, events.size());
  return counted(std::move(status));
}

Status Detection::onEvent(const EventPtr& event) {
  Status status = ordered_->onEvent(event);
  add(consumed_, 1);
  return counted(std::move(status));
}

Status Detection::flush() { return counted(ordered_->flush()); }

Status Detection::flushReleased() { return counted(ordered_->flushReleased()); }

Status Detection::advanceTo(Timestamp event_time) {
  return counted(ordered_->advanceTo(event_time));
}

void Detection::mute(size_t member) { muted_[member] = true; }

void Detection::onMatch(size_t member, const plugin::Match& match) {
  // A muted member's pattern still runs for the others; its matches go nowhere.
  if (member >= members_ || muted_[member]) return;
  add(matches_[member], 1);
  sink_.onMatch(member, match);
}

void Detection::onLate(const EventPtr& event, Timestamp newest) {
  add(late_, 1);
  sink_.onLate(event, newest);
}

Result<std::string> Detection::exportModel(std::string_view format) const {
  return ordered_->exportModel(format);
}

DetectionStats Detection::stats() const {
  DetectionStats s;
  s.consumed = consumed_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.late = late_.load(std::memory_order_relaxed);
  s.watermark = watermark_.load(std::memory_order_relaxed);
  for (size_t m = 0; m < members_; ++m) s.suppressed += suppressed(m);
  if (counts_partials_) {
    s.partial_matches = plugin::DetectorState{
        partials_.load(std::memory_order_relaxed), peak_partials_.load(std::memory_order_relaxed),
        evicted_.load(std::memory_order_relaxed), state_bytes_.load(std::memory_order_relaxed)};
  }
  return s;
}

uint64_t Detection::matches(size_t member) const {
  return member < members_ ? matches_[member].load(std::memory_order_relaxed) : 0;
}

uint64_t Detection::suppressed(size_t member) const {
  return output_control_ != nullptr ? output_control_->suppressed(member) : 0;
}

std::string Detection::engine() const { return trial_ != nullptr ? trial_->running() : engine_; }

std::optional<plugin::TrialOutcome> Detection::trialOutcome() const {
  return trial_ != nullptr ? trial_->outcome() : std::nullopt;
}

}  // namespace cepbus::detection
