#include "bus/host/detection/planner.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "bus/host/detection/engine_choice.h"
#include "bus/host/time/reorder.h"

namespace cepbus::detection {
namespace {

using OptionValues = std::map<std::string, std::string, std::less<>>;

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

// A request read: its options apart, before it has a detector.
struct Prepared {
  size_t index = 0;  // in the requests
  const QueryRequest* request = nullptr;
  plugin::DetectorOptions engine_options;  // the host's and the service's taken out
  Timestamp max_delay = 0;
  // What must be the same for two queries to share: the options but the
  // service's per-query ones, and the inputs sorted.
  OptionValues sharing;
  std::vector<std::string> sorted_inputs;
  bool isAuto() const { return request->engine == plugin::kAutoEngine; }
};
using Members = std::vector<Prepared*>;

// A group of queries and what was made for it.
struct Built {
  std::string engine;
  Members members;
  std::optional<DetectorRecipe> recipe;
  std::optional<MadeDetector> made;
  std::string rule;  // engine auto's reason, without the trial's
};

class Planner {
 public:
  Planner(const PlanOptions& options, plugin::PluginLoader& loader)
      : options_(options), loader_(loader) {}

  Result<Plan> plan(std::span<const QueryRequest> requests);

 private:
  void prepare(size_t index, const QueryRequest& request);
  static bool canShare(const Prepared& a, const Prepared& b);
  // Loads `engine` and makes its detector for `members` into `out` when it
  // accepts; on trial against the other engine when `may_trial` and the
  // options allow it. `refused` tells the engine's refusal apart from a
  // plugin that failed to load.
  Status build(std::string_view engine, const Members& members, Built& out, bool* refused = nullptr,
               bool may_trial = false);
  // The engine's refusal of `members`, as this plan's errors say it.
  std::string refusal(const Members& members, const std::string& message) const;
  void planNamed(const std::string& engine, const Members& members, std::vector<Built>& built);
  void planAuto(const Members& members, std::vector<Built>& built);
  // `p` on a detector of its own: its named engine, or auto's choice for it alone.
  void alone(Prepared& p, std::vector<Built>& built);
  void planOne(const Members& members, std::vector<Built>& built);
  void fail(const Prepared& p, const std::string& message);
  void failAll(const std::string& message);
  static std::vector<std::string> namesOf(const Members& members);

  const PlanOptions& options_;
  plugin::PluginLoader& loader_;
  std::vector<std::unique_ptr<Prepared>> prepared_;
  std::vector<std::pair<size_t, std::string>> errors_;  // request index, message
  std::vector<std::string> warnings_;
};

Result<Plan> Planner::plan(std::span<const QueryRequest> requests) {
  for (size_t i = 0; i < requests.size(); ++i) prepare(i, requests[i]);
  std::vector<Built> built;
  if (errors_.empty() && options_.one_detector) {
    Members all;
    for (const auto& p : prepared_) all.push_back(p.get());
    planOne(all, built);
  } else if (errors_.empty()) {
    // Groups of queries that may share, each in the order of the requests.
    std::vector<Members> groups;
    for (const auto& p : prepared_) {
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&p](const Members& g) { return canShare(*g.front(), *p); });
      if (same == groups.end()) {
        groups.push_back({p.get()});
      } else {
        same->push_back(p.get());
      }
    }
    for (const Members& group : groups) {
      Members autos;
      std::vector<std::pair<std::string, Members>> named;  // by engine, in order of appearance
      for (Prepared* p : group) {
        if (p->isAuto()) {
          autos.push_back(p);
          continue;
        }
        auto it = std::find_if(named.begin(), named.end(),
                               [p](const auto& n) { return n.first == p->request->engine; });
        if (it == named.end()) {
          named.emplace_back(p->request->engine, Members{p});
        } else {
          it->second.push_back(p);
        }
      }
      std::vector<Built> made;
      // Auto first, so that the queries naming the engine it chose can join it.
      if (!autos.empty()) planAuto(autos, made);
      for (const auto& [engine, members] : named) planNamed(engine, members, made);
      for (Built& b : made) built.push_back(std::move(b));
    }
  }
  if (!errors_.empty()) {
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> messages;
    for (auto& [index, message] : errors_) messages.push_back(std::move(message));
    return Status::invalidArgument(joined(messages, "\n"));
  }
  Plan plan;
  plan.warnings = std::move(warnings_);
  for (Built& b : built) {
    DetectorRecipe& recipe = *b.recipe;
    std::string reason = b.rule;
    if (recipe.onTrial()) reason += "; " + recipe.describeTrial();
    std::vector<size_t> members;
    for (const Prepared* p : b.members) members.push_back(p->index);
    plan.groups.push_back(DetectionGroup{std::move(b.engine), std::move(reason), std::move(members),
                                         std::move(recipe), std::move(b.made)});
  }
  return plan;
}

void Planner::prepare(size_t index, const QueryRequest& request) {
  auto p = std::make_unique<Prepared>();
  p->index = index;
  p->request = &request;
  OptionValues engine_values = request.options.values();
  p->sharing = engine_values;
  for (const ServiceOption& option : options_.service_options) {
    engine_values.erase(std::string(option.name));
    if (option.per_query) p->sharing.erase(std::string(option.name));
  }
  if (engine_values.count(plugin::kMaxDelayOption) != 0 &&
      engine_values.count(plugin::kSlackOption) != 0) {
    return fail(*p, "options max_delay and slack: give one (slack is a synonym of max_delay)");
  }
  for (std::string_view name : {plugin::kMaxDelayOption, plugin::kSlackOption}) {
    auto delay = engine_values.find(name);
    if (delay == engine_values.end()) continue;
    auto parsed = plugin::parseMaxDelay(name, delay->second);
    if (!parsed) return fail(*p, parsed.status().message());
    p->max_delay = *parsed;
    engine_values.erase(delay);
    // Either name shares with the other.
    p->sharing.erase(std::string(plugin::kSlackOption));
    p->sharing[std::string(plugin::kMaxDelayOption)] = std::to_string(*parsed);
  }
  p->engine_options =
      plugin::DetectorOptions(std::move(engine_values)).withBaseDir(request.options.baseDir());
  p->sorted_inputs = request.inputs;
  std::sort(p->sorted_inputs.begin(), p->sorted_inputs.end());
  prepared_.push_back(std::move(p));
}

bool Planner::canShare(const Prepared& a, const Prepared& b) {
  return a.request->share && b.request->share && a.sorted_inputs == b.sorted_inputs &&
         a.sharing == b.sharing && a.request->options.baseDir() == b.request->options.baseDir();
}

std::vector<std::string> Planner::namesOf(const Members& members) {
  std::vector<std::string> names;
  for (const Prepared* p : members) names.push_back(p->request->name);
  return names;
}

std::string Planner::refusal(const Members& members, const std::string& message) const {
  // Several queries on their own detectors each get their own error; in one
  // detector the engine's message is put at the query it names.
  if (!options_.one_detector) return message;
  if (!options_.named_patterns && members.size() == 1) {
    const std::string& where = members.front()->request->where;
    return where.empty() ? message : where + ": " + message;
  }
  for (const Prepared* p : members) {
    const std::string prefix = "query '" + p->request->name + "': ";
    if (message.starts_with(prefix)) {
      return p->request->where + ": " + message.substr(prefix.size());
    }
  }
  return message;
}

Status Planner::build(std::string_view engine, const Members& members, Built& out, bool* refused,
                      bool may_trial) {
  if (refused != nullptr) *refused = false;
  auto loaded = loader_.load(engine);
  if (!loaded) {
    if (options_.one_detector) return loaded.status();
    if (loaded.status().code() == Status::Code::kNotFound) {
      return Status::notFound("unknown engine \"" + std::string(engine) +
                              "\": " + loaded.status().message());
    }
    return Status::invalidArgument("engine \"" + std::string(engine) +
                                   "\" cannot be loaded: " + loaded.status().message());
  }
  const Prepared& first = *members.front();
  auto queries = std::make_shared<std::vector<plugin::NamedQuery>>();
  for (const Prepared* p : members) queries->push_back({p->request->name, p->request->query});
  DetectorRecipe recipe(EngineRef{*loaded, std::string(engine)}, std::move(queries),
                        first.engine_options, options_.named_patterns, first.max_delay);
  std::optional<MadeDetector> made;
  const std::vector<std::string_view> challengers = plugin::trialChallengers(engine);
  if (may_trial && options_.trial && !challengers.empty()) {
    std::vector<EngineRef> against;
    for (std::string_view challenger : challengers) {
      // A challenger that cannot be loaded is no challenger.
      if (auto plugin = loader_.load(challenger)) {
        against.push_back(EngineRef{*plugin, std::string(challenger)});
      }
    }
    auto trial = recipe.putOnTrial(against, options_.trial_limits);
    if (!trial) {
      if (refused != nullptr) *refused = true;
      return Status::invalidArgument(refusal(members, trial.status().message()));
    }
    made = std::move(*trial);
  }
  if (!made) {
    auto alone = recipe.make();
    if (!alone) {
      if (refused != nullptr) *refused = true;
      return Status::invalidArgument(refusal(members, alone.status().message()));
    }
    made = std::move(alone).value();
  }
  out = Built{std::string(engine), members, std::move(recipe), std::move(made), ""};
  return Status::ok();
}

void Planner::planOne(const Members& members, std::vector<Built>& built) {
  Built one;
  const std::string& engine = members.front()->request->engine;
  if (engine != plugin::kAutoEngine) {
    if (Status s = build(engine, members, one); !s) return failAll(s.message());
  } else {
    std::vector<const pattern::Query*> queries;
    for (const Prepared* p : members) queries.push_back(&p->request->query);
    auto choice = plugin::chooseEngine(plugin::shapeOf(queries), [&](std::string_view candidate) {
      return build(candidate, members, one, nullptr, true);
    });
    if (!choice) return failAll(choice.status().message());
    one.rule = choice->reason;
  }
  built.push_back(std::move(one));
}

void Planner::planNamed(const std::string& engine, const Members& members,
                        std::vector<Built>& built) {
  // Auto's queries that went to this engine share with them.
  for (Built& chosen : built) {
    if (chosen.engine != engine) continue;
    Members both = chosen.members;
    both.insert(both.end(), members.begin(), members.end());
    std::sort(both.begin(), both.end(),
              [](const Prepared* a, const Prepared* b) { return a->index < b->index; });
    Built merged;
    if (Status s = build(engine, both, merged); s) {
      merged.rule = chosen.rule;
      chosen = std::move(merged);
      return;
    }
    break;
  }
  Built own;
  bool refused = false;
  const Status s = build(engine, members, own, &refused);
  if (s) {
    built.push_back(std::move(own));
    return;
  }
  if (members.size() == 1) {
    fail(*members.front(),
         refused ? "engine \"" + engine + "\" cannot run the query: " + s.message() : s.message());
    return;
  }
  // One by one, so that each error names its query and a query the engine
  // runs still runs.
  const size_t errors = errors_.size();
  for (Prepared* p : members) alone(*p, built);
  if (errors_.size() == errors) {
    warnings_.push_back("queries " + detection::namesOf(namesOf(members)) + ": engine " + engine +
                        " runs each but cannot share a detector between them (" + s.message() +
                        "); each gets its own");
  }
}

void Planner::planAuto(const Members& members, std::vector<Built>& built) {
  if (members.size() == 1) return alone(*members.front(), built);
  std::vector<const pattern::Query*> queries;
  for (const Prepared* p : members) queries.push_back(&p->request->query);
  const plugin::PatternSetShape shape = plugin::shapeOf(queries);
  const std::vector<std::string_view> order = plugin::autoCandidates(shape);
  Built set;
  auto choice = plugin::chooseEngine(
      shape, [&](std::string_view engine) { return build(engine, members, set, nullptr, true); });
  if (choice && choice->engine == order.front()) {
    set.rule = choice->reason;
    built.push_back(std::move(set));
    return;
  }
  // The preferred engine refuses some of them. The set splits at the first
  // engine that runs some of them alone: those are decided again as a set,
  // the others as a set of their own, so that no query goes to a later
  // engine (algebra reads a query without CONTEXT differently) only because
  // another query needs it.
  for (std::string_view engine : order) {
    Members accepted;
    Members refused;
    for (Prepared* p : members) {
      Built probe;
      (build(engine, {p}, probe) ? accepted : refused).push_back(p);
    }
    if (accepted.empty()) continue;
    if (!refused.empty()) {
      planAuto(accepted, built);
      planAuto(refused, built);
      return;
    }
    if (choice && choice->engine == engine) {
      set.rule = choice->reason;
      built.push_back(std::move(set));
      return;
    }
    warnings_.push_back("queries " + detection::namesOf(namesOf(members)) + ": engine " +
                        std::string(engine) + " runs each but not all in one detector (" +
                        (choice ? choice->reason : choice.status().message()) +
                        "); each gets its own");
    break;
  }
  // Each alone: no engine runs any of them (each error then says why), or
  // the shared detector could not be built.
  for (Prepared* p : members) alone(*p, built);
}

void Planner::alone(Prepared& p, std::vector<Built>& built) {
  Built own;
  const std::string& engine = p.request->engine;
  if (!p.isAuto()) {
    bool refused = false;
    if (Status s = build(engine, {&p}, own, &refused); !s) {
      return fail(p, refused ? "engine \"" + engine + "\" cannot run the query: " + s.message()
                             : s.message());
    }
  } else {
    const pattern::Query* one = &p.request->query;
    auto choice = plugin::chooseEngine(plugin::shapeOf({&one, 1}), [&](std::string_view candidate) {
      return build(candidate, {&p}, own, nullptr, true);
    });
    if (!choice) return fail(p, choice.status().message());
    own.rule = choice->reason;
  }
  built.push_back(std::move(own));
}

void Planner::fail(const Prepared& p, const std::string& message) {
  const std::string& where = p.request->where;
  errors_.emplace_back(p.index, where.empty() ? message : where + ": " + message);
}

void Planner::failAll(const std::string& message) { errors_.emplace_back(0, message); }

}  // namespace

std::string namesOf(const std::vector<std::string>& names) {
  if (names.size() <= 3) return joined(names, ", ");
  return names.front() + ".." + names.back() + " (" + std::to_string(names.size()) + ")";
}

Result<Plan> plan(std::span<const QueryRequest> requests, const PlanOptions& options,
                  plugin::PluginLoader& loader) {
  if (requests.empty()) return Status::invalidArgument("no query to plan");
  return Planner(options, loader).plan(requests);
}

}  // namespace cepbus::detection
