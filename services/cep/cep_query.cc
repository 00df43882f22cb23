#include "services/cep/cep_query.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <map>

#include "bus/core/pattern/parser.h"
#include "router/relays.h"
#include "router/topic.h"
#include "services/cep/cep_detection.h"
#include "services/cep/cep_stats.h"
#include "services/cep/query_checkpoints.h"

namespace cepbus::services::cep {
namespace {

// CepQuery::horizon() of `query`.
std::optional<int64_t> horizonOf(const pattern::Query& query) {
  if (query.window) {
    if (query.window->kind == pattern::WindowKind::kSession) return std::nullopt;
    return query.window->length;
  }
  return query.within;
}

// The query options the service implements itself (see cep_service.h).
constexpr std::string_view kFlushWhenIdle = "flush_when_idle";
constexpr std::string_view kOutputQos = "output_qos";
constexpr std::string_view kRunInline = "run_inline";
constexpr std::string_view kShareDetector = "share_detector";
constexpr std::string_view kLateOutput = "late_output";

using OptionValues = std::map<std::string, std::string, std::less<>>;

// The value of the service option `name` in `options`, one of `allowed`
// (the first is the default), written back so that an option left out and
// its default are the same to the planner; InvalidArgument, saying what it
// must be, for any other value.
Result<std::string> serviceOption(OptionValues& options, std::string_view name,
                                  std::initializer_list<std::string_view> allowed) {
  auto it = options.find(name);
  if (it == options.end()) it = options.emplace(std::string(name), *allowed.begin()).first;
  std::string expected;
  for (std::string_view a : allowed) {
    if (a == it->second) return it->second;
    expected += (expected.empty() ? "" : " or ") + std::string(a);
  }
  return Status::invalidArgument("option " + std::string(name) + " must be " + expected +
                                 ", not \"" + it->second + "\"");
}

// The option idle_timeout: a positive number of milliseconds, written back
// (the default when left out) so that the planner compares the same text.
Result<std::chrono::milliseconds> idleTimeout(OptionValues& options) {
  auto it = options.find(plugin::kIdleTimeoutOption);
  if (it == options.end()) {
    it = options
             .emplace(std::string(plugin::kIdleTimeoutOption),
                      std::to_string(plugin::kDefaultIdleTimeout.count()))
             .first;
  }
  const std::string& text = it->second;
  int64_t ms = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || end != text.data() + text.size() || ms <= 0) {
    return Status::invalidArgument("option idle_timeout=" + text +
                                   ": expected a positive number of milliseconds");
  }
  return std::chrono::milliseconds(ms);
}

// The option checkpoint_interval: milliseconds between checkpoints, 0 (the
// default) for none.
Result<std::chrono::milliseconds> checkpointInterval(const OptionValues& options) {
  auto it = options.find(kCheckpointIntervalOption);
  if (it == options.end()) return std::chrono::milliseconds(0);
  const std::string& text = it->second;
  int64_t ms = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || end != text.data() + text.size() || ms < 0) {
    return Status::invalidArgument("option checkpoint_interval=" + text +
                                   ": expected a number of milliseconds (0: no checkpoints)");
  }
  return std::chrono::milliseconds(ms);
}

// parseQuery() reports "line L, column C: what"; L counts lines of the query
// text, whose first line is text_where.line of the descriptor.
std::string textError(const descriptor::QuerySpec& spec, std::string_view message) {
  const descriptor::Location& at = spec.text_where.file.empty() ? spec.where : spec.text_where;
  int line = 0;
  int column = 0;
  std::string_view rest = message;
  auto number = [&rest](std::string_view prefix, int& out) {
    if (!rest.starts_with(prefix)) return false;
    rest.remove_prefix(prefix.size());
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), out);
    if (ec != std::errc()) return false;
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    return true;
  };
  if (number("line ", line) && number(", column ", column) && rest.starts_with(": ")) {
    rest.remove_prefix(2);
    descriptor::Location mapped = at;
    if (mapped.line > 0) mapped.line += line - 1;
    return mapped
        .error(queryLabel(spec) + ": " + std::string(rest) + " (line " + std::to_string(line) +
               ", column " + std::to_string(column) + " of the query text)")
        .toString();
  }
  return at.error(queryLabel(spec) + ": " + std::string(message)).toString();
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

std::vector<detection::ServiceOption> serviceOptions() {
  // Queries share a detector when its stage runs them alike; each has its
  // own output, and share_detector says whether it shares at all.
  return {{kFlushWhenIdle, false},
          {kRunInline, false},
          {plugin::kIdleTimeoutOption, false},
          {kOutputQos, true},
          {kShareDetector, true},
          {kLateOutput, true},
          {kCheckpointIntervalOption, false}};
}

std::string queryLabel(const descriptor::QuerySpec& spec) {
  return "<query name=\"" + spec.name + "\">";
}

Result<detection::QueryRequest> readQuery(const descriptor::QuerySpec& spec,
                                          QuerySettings& settings) {
  auto error = [&spec](const std::string& message) {
    return Status::invalidArgument(spec.where.error(queryLabel(spec) + ": " + message).toString());
  };
  if (spec.inputs.empty()) return error("no input address");
  if (Status s = router::validateAddress(spec.output); !s) return error("output: " + s.message());
  for (const std::string& input : spec.inputs) {
    if (Status s = router::validatePattern(input); !s) return error("input: " + s.message());
  }
  // The loader takes a name with a '/' for a library path; an engine is a name.
  if (spec.engine.empty() || spec.engine.find('/') != std::string::npos) {
    return error("engine \"" + spec.engine + "\" is not an engine name");
  }
  auto query = pattern::parseQuery(spec.text, {.ts_unit = spec.ts_unit});
  if (!query) return Status::invalidArgument(textError(spec, query.status().message()));

  OptionValues values;
  for (const descriptor::Param& option : spec.options) values[option.name] = option.value;
  auto flush_when_idle = serviceOption(values, kFlushWhenIdle, {"true", "false"});
  if (!flush_when_idle) return error(flush_when_idle.status().message());
  auto output_qos = serviceOption(values, kOutputQos, {"best_effort", "reliable"});
  if (!output_qos) return error(output_qos.status().message());
  auto run_inline = serviceOption(values, kRunInline, {"never", "when_idle"});
  if (!run_inline) return error(run_inline.status().message());
  auto share = serviceOption(values, kShareDetector, {"true", "false"});
  if (!share) return error(share.status().message());
  settings.flush_when_idle = *flush_when_idle == "true";
  settings.run_inline = *run_inline == "when_idle";
  settings.output_qos = *output_qos == "reliable" ? flows::Qos::kReliable : flows::Qos::kBestEffort;
  auto idle = idleTimeout(values);
  if (!idle) return error(idle.status().message());
  settings.idle_timeout = *idle;
  settings.ts_unit = spec.ts_unit;
  auto interval = checkpointInterval(values);
  if (!interval) return error(interval.status().message());
  settings.checkpoint_interval = *interval;
  auto late = values.find(kLateOutput);
  settings.late_output = late != values.end() ? late->second : spec.name + ".late";
  if (Status s = router::validateAddress(settings.late_output); !s) {
    return error("option late_output: " + s.message());
  }

  detection::QueryRequest request;
  request.name = spec.name;
  request.query = std::move(query).value();
  request.engine = spec.engine;
  request.options = plugin::DetectorOptions(std::move(values)).withBaseDir(spec.base_dir);
  request.inputs = spec.inputs;
  request.where = spec.where.error(queryLabel(spec)).toString();
  request.share = *share == "true";
  return request;
}

CepQuery::CepQuery(const descriptor::QuerySpec& spec, const pattern::Query& query,
                   const std::string& service, const QuerySettings& settings,
                   ServiceContext& context)
    : spec_(spec),
      service_(service),
      entry_name_(service + "/" + spec.name + ":detector"),
      output_symbol_(Symbol::intern(spec.output)),
      late_output_(settings.late_output),
      late_symbol_(Symbol::intern(settings.late_output)),
      sender_(Symbol::intern(service + "/" + spec.name)),
      output_qos_(settings.output_qos),
      horizon_(horizonOf(query)),
      context_(context),
      log_(Poco::Logger::get("cepbus.cep")),
      names_(query, spec.text) {}

void CepQuery::assign(CepDetection* detection, size_t member, std::string engine,
                      std::string engine_choice) {
  detection_ = detection;
  member_ = member;
  engine_ = std::move(engine);
  engine_choice_ = std::move(engine_choice);
}

Status CepQuery::enter(const std::shared_ptr<CepQuery>& self,
                       const std::shared_ptr<CepDetection>& detection) {
  auto entry = context_.registry.add(entry_name_, router::ComponentKind::kService, service_);
  if (!entry) return entry.status();
  entered_ = true;
  entry_ = *entry;
  entry_->setMetadata("type", "cep-query");
  entry_->setMetadata("engine", engine_);
  if (!engine_choice_.empty()) entry_->setMetadata("engine_choice", engine_choice_);
  // A relay: publishers of its input are paced by its output's subscribers.
  entry_->setMetadata(std::string(router::kRelayInputs), joined(spec_.inputs));
  entry_->setMetadata(std::string(router::kRelayOutput), spec_.output);
  entry_->setMetadata("text", spec_.text);
  entry_->setMetadata("endpoint", detection->endpoint());
  if (detection->sharedBy() > 1) {
    entry_->setMetadata("shared_by", std::to_string(detection->sharedBy()));
  }
  reportStats();
  // The detector's numbers change on every detection; the registry reads
  // them, and the engine a trial kept, only when it takes a snapshot, which
  // runs the probe before copying the metadata.
  const std::weak_ptr<CepQuery> weak = self;
  const std::weak_ptr<CepDetection> weak_detection = detection;
  entry_->setProbe([weak, weak_detection](router::LiveNumbers& numbers) {
    const std::shared_ptr<CepQuery> q = weak.lock();
    const std::shared_ptr<CepDetection> d = weak_detection.lock();
    if (q == nullptr || d == nullptr) return;
    const QueryStats s = d->stats();
    numbers.queue_length = s.queued;
    numbers.delivered = s.consumed;
    numbers.failed = s.errors;
    numbers.rejected = s.rejected;
    q->publishEngine();
  });
  entry_->setState(router::ComponentState::kStarted);
  return Status::ok();
}

void CepQuery::leave() {
  if (!entered_) return;
  entered_ = false;
  scope_.reset();
  publishEngine();
  entry_->setState(router::ComponentState::kStopped);
  context_.registry.remove(entry_name_);
}

void CepQuery::reportStats() {
  namespace q = query_stats;
  scope_ = context_.registry.stats().scope(kQuerySchema, {{"name", entry_name_}});
  scope_->counter(q::kMatches, [this] { return matches(); });
  scope_->counter(q::kPublishFailures,
                  [this] { return publish_failures_.load(std::memory_order_relaxed); });
  // Whether the engine counts what it holds is known when the detection is made.
  if (detection_->partialMatches()) {
    scope_->gauge(q::kPartialMatches, [this] {
      return static_cast<double>(detection_->partialMatches()->partial_matches);
    });
    scope_->gauge(q::kPartialMatchesPeak, [this] {
      return static_cast<double>(detection_->partialMatches()->peak_partial_matches);
    });
    scope_->counter(q::kStateEvictions, [this] { return detection_->partialMatches()->evicted; });
    scope_->gauge(q::kStateBytes,
                  [this] { return static_cast<double>(detection_->partialMatches()->bytes); });
  }
  if (detection_->checkpoints() != nullptr) {
    auto read = [this](auto field) {
      return [this, field] {
        return detection_->checkpointStats().value_or(CheckpointStats{}).*field;
      };
    };
    scope_->counter(q::kCheckpoints, read(&CheckpointStats::written));
    scope_->counter(q::kCheckpointFailures, read(&CheckpointStats::failed));
    scope_->gauge(q::kCheckpointBytes, [this] {
      return static_cast<double>(detection_->checkpointStats()->last_bytes);
    });
    scope_->gauge(q::kCheckpointMs, [this] { return detection_->checkpointStats()->last_ms; });
    scope_->gauge(q::kRestoreBytes, [this] {
      return static_cast<double>(detection_->checkpointStats()->restored_bytes);
    });
    scope_->gauge(q::kRestoreMs, [this] { return detection_->checkpointStats()->restore_ms; });
    scope_->counter(q::kRestoreRefused, read(&CheckpointStats::restore_refused));
    scope_->counter(q::kDuplicatesDropped, read(&CheckpointStats::duplicates_dropped));
  }
  // The engine's own counters that have a family, when it has them; asked
  // once here, waiting for the worker if need be (the control plane).
  const Result<std::string> model = detection_->exportModel(plugin::kCountersFormat);
  const Result<plugin::EngineCounters> counters =
      model.isOk() ? plugin::parseEngineCounters(*model)
                   : Result<plugin::EngineCounters>(model.status());
  for (const stats::MetricSpec& spec : q::kEngineCounters) {
    const bool reported =
        counters.isOk() && std::any_of(counters->begin(), counters->end(),
                                       [&](const auto& c) { return c.first == spec.name; });
    if (!reported) continue;
    auto read = [this, name = std::string(spec.name)] {
      for (const auto& [counter, value] : detection_->engineCounters()) {
        if (counter == name) return value;
      }
      return uint64_t{0};
    };
    if (spec.kind == stats::MetricKind::kGauge) {
      scope_->gauge(spec, [read] { return static_cast<double>(read()); });
    } else {
      scope_->counter(spec, read);
    }
  }
  scope_->gauge(q::kOutputHeld, [this] { return static_cast<double>(detection_->outputHeld()); });
  scope_->counter(q::kMissingAttribute, [this] {
    return names_.missingAttribute() + missing_before_.load(std::memory_order_relaxed);
  });
  scope_->counter(q::kLate, [this] { return detection_->late(); });
  scope_->counter(q::kSuppressed, [this] { return detection_->suppressed(member_); });
}

void CepQuery::watch(std::span<const EventPtr> events) {
  for (const std::string& warning : names_.onEvents(events)) {
    log_.warning("query %s/%s: %s (in the query text)", service_, spec_.name, warning);
  }
}

void CepQuery::publishEngine() {
  if (const std::optional<plugin::TrialOutcome> outcome = detection_->trialOutcome()) {
    entry_->setMetadata("engine", outcome->kept);
    entry_->setMetadata("engine_choice", engine_choice_ + "; by trial: " + outcome->describe());
  }
}

uint64_t CepQuery::matches() const { return detection_->matches(member_); }

QueryStats CepQuery::stats() const {
  QueryStats s = detection_->stats();
  s.checkpoints = detection_->checkpointStats();
  s.matches = matches();
  s.suppressed = detection_->suppressed(member_);
  s.publish_failures = publish_failures_.load(std::memory_order_relaxed);
  s.missing_attribute = names_.missingAttribute() + missing_before_.load(std::memory_order_relaxed);
  s.engine_counters = detection_->engineCounters();
  MutexLock lock(edit_mu_);
  s.edited = edit_;
  return s;
}

void CepQuery::continueCountsOf(const CepQuery& replaced) {
  publish_failures_.fetch_add(replaced.publish_failures_.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  missing_before_.store(
      replaced.names_.missingAttribute() + replaced.missing_before_.load(std::memory_order_relaxed),
      std::memory_order_relaxed);
}

void CepQuery::noteEdit(QueryEdit edit) {
  MutexLock lock(edit_mu_);
  edit_ = std::move(edit);
}

void CepQuery::publish(const plugin::Match& match) {
  if (QueryCheckpoints* checkpoints = detection_->checkpoints()) {
    std::vector<EventId> constituents;
    constituents.reserve(match.size());
    for (size_t i = 0; i < match.size(); ++i) constituents.push_back(match.event(i)->id());
    checkpoints->hold(*this, match.composite(), constituents);
    return;
  }
  send(match.composite(), false);
}

void CepQuery::send(EventPtr composite, bool redelivery) {
  flows::Exchange exchange;
  exchange.event = std::move(composite);
  exchange.address = output_symbol_;
  exchange.sender = sender_;
  exchange.qos = output_qos_;
  exchange.redelivery = redelivery;
  if (output_qos_ == flows::Qos::kReliable) {
    exchange.degrade_under_load = false;  // held by the backlog instead
    detection_->publishReliably(std::move(exchange));
    return;
  }
  const flows::SendOutcome out = context_.broker.publish(exchange);
  if (!out.status.isOk()) lost(out);
}

void CepQuery::publishLate(const EventPtr& event) {
  flows::Exchange exchange;
  exchange.event = event;
  exchange.address = late_symbol_;
  exchange.sender = sender_;
  const flows::SendOutcome out = context_.broker.publish(exchange);
  if (!out.status.isOk()) lost(out, "late event", late_output_);
}

void CepQuery::lost(const flows::SendOutcome& out) { lost(out, "composite event", spec_.output); }

void CepQuery::lost(const flows::SendOutcome& out, const char* what, const std::string& address) {
  const uint64_t failures = std::max<uint64_t>(1, out.rejected + out.failed);
  const uint64_t n = publish_failures_.fetch_add(failures, std::memory_order_relaxed) + failures;
  if (worthLogging(n - failures, n)) {
    log_.warning("query %s/%s: %s to %s refused by %Lu target(s) (%Lu so far): %s", service_,
                 spec_.name, std::string(what), address, static_cast<Poco::UInt64>(failures),
                 static_cast<Poco::UInt64>(n), out.status.toString());
  }
}

}  // namespace cepbus::services::cep
