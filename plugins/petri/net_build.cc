// Building the merged net: adding a pattern (prefix, middle and back joins),
// removing one, and the indexes the firing rule reads.

#include <algorithm>
#include <map>
#include <set>

#include "bus/core/pattern/printer.h"
#include "plugins/petri/net_parts.h"

namespace cepbus::plugins::petri {

PetriNet::PetriNet() = default;
PetriNet::~PetriNet() = default;

Status PetriNet::addPattern(std::string name, const pattern::Query& query,
                            plugin::MatchSink& sink) {
  auto compiled = compilePattern(query, plugin::DetectorOptions());
  if (!compiled) return compiled.status();
  return addPattern(std::move(name), std::move(compiled).value(), sink);
}

Status PetriNet::addPattern(std::string name, CompiledPatternPtr pattern, plugin::MatchSink& sink) {
  for (const auto& p : patterns_) {
    if (p->name == name) return Status::alreadyExists("pattern '" + name + "' already exists");
  }
  // A disjunction runs one chain per alternative, all reporting as `name`.
  std::vector<CompiledPatternPtr> chains = pattern->alternatives;
  if (chains.empty()) chains.push_back(std::move(pattern));
  int group = -1;
  switch (chains.front()->policy) {
    case Policy::kFeedback:
      break;
    case Policy::kConflict:
      group = 0;  // every conflict pattern shares the places (and the events)
      break;
    case Policy::kConcurrency:
      group = next_group_++;  // a copy of every place of its own
      break;
  }
  for (size_t i = 0; i < chains.size(); ++i) {
    auto entry = std::make_unique<PatternEntry>();
    entry->name = name;
    entry->alternative = i;
    entry->sink = &sink;
    entry->since_seq = seq_ + 1;
    entry->composer = std::make_unique<Composer>(chains[i]);
    for (size_t k = 0; k < chains[i]->elements.size(); ++k) {
      entry->ends.push_back(static_cast<uint32_t>(k + 1));
    }
    entry->group = group;
    entry->window = chains[i]->window;
    entry->min_probability = chains[i]->min_probability;
    entry->completion = &chains[i]->elements.back().completion;
    entry->pattern = std::move(chains[i]);
    const size_t split = entry->group < 0 ? chooseSplit(*entry) : 0;
    insert(std::move(entry), split);
  }
  rebuildTypeIndex();
  markLazyPlaces();
  native_ = std::any_of(transitions_.begin(), transitions_.end(), [](const auto& t) {
    return t->strategy != pattern::Strategy::kSkipTillAnyMatch;
  });
  held_ = tokenCount();  // a back join may have rewritten places
  return Status::ok();
}

namespace {

// The key of the chain of elements `from`..end of `p`, as a chain starting at
// the head would have it: equal keys, equal chains (a back join's shared tail).
std::string tailKey(const CompiledPattern& p, size_t from) {
  std::string key;
  for (size_t i = from; i < p.elements.size(); ++i) key += elementKey(p, i, from);
  return key;
}

}  // namespace

size_t PetriNet::chooseSplit(const PatternEntry& e) {
  const CompiledPattern& p = *e.pattern;
  // Inhibitors read the elements on both sides; a conjunction joins its own
  // operands; Kleene tokens bind by element; a strategy's runs are its own.
  if (p.has_negation || p.has_kleene || !p.operand_starts.empty() ||
      p.strategy != pattern::Strategy::kSkipTillAnyMatch) {
    return 0;
  }
  const size_t m = p.elements.size();
  // The prefix join shares elements 0..shared-1.
  std::string key;
  size_t shared = 0;
  for (; shared < m; ++shared) {
    std::string next = key + elementKey(p, shared, 0);
    if (by_key_.find(next) == by_key_.end()) break;
    key = std::move(next);
  }
  if (shared + 2 > m) return 0;  // at most one element of its own: nothing to share
  // A middle join at the first element of its own is insert()'s default.
  if (shared > 0 &&
      by_key_.count(elementKey(p, shared, shared) + elementKey(p, shared + 1, shared)) != 0) {
    return 0;
  }
  const size_t first = std::max<size_t>(shared, 1);
  // Back join onto a tail some pattern already runs as a chain of its own.
  for (size_t j = first; j + 2 <= m; ++j) {
    if (by_key_.count(tailKey(p, j)) != 0) return j;
  }
  // Back join by rewriting a running pattern that ends in the same tail, so
  // that it runs the tail as a chain of its own fed, with its leading place,
  // into a join. Only before events flow: the rewritten pattern's partial
  // matches would be lost.
  if (seq_ != 0) return 0;
  for (size_t j = first; j + 2 <= m; ++j) {
    auto it = tails_.find(tailKey(p, j));
    if (it == tails_.end()) continue;
    for (const auto& [q, from] : it->second) {
      if (q->split != 0) continue;  // it joins elsewhere already
      const PatternEntry* const rewritten = q;
      const size_t at = from;
      auto owned = detach(*rewritten);
      insert(std::move(owned), at);
      return j;
    }
  }
  return 0;
}

std::unique_ptr<PetriNet::PatternEntry> PetriNet::detach(const PatternEntry& entry) {
  auto it = std::find_if(patterns_.begin(), patterns_.end(),
                         [&](const auto& p) { return p.get() == &entry; });
  std::unique_ptr<PatternEntry> owned = std::move(*it);
  patterns_.erase(it);
  PatternEntry* const e = owned.get();
  for (auto t_it = e->chain.rbegin(); t_it != e->chain.rend(); ++t_it) {
    Transition* t = *t_it;
    std::erase(t->users, e);
    std::erase(t->outputs, e);
    rebuildOutputGroups(*t);
    if (t->users.empty()) {
      if (t->input != nullptr && --t->input->consumers == 0) t->input->place.clear();
      if (t->right != nullptr) std::erase(t->right->joins, t);
      if (t->conjunction) {
        std::erase(t->input->joins, t);
        if (--t->right->consumers == 0) t->right->place.clear();
      }
      by_key_.erase(t->key);
      std::erase_if(transitions_, [&](const auto& owned_t) { return owned_t.get() == t; });
    } else {
      t->window = 0;
      t->min_probability = 1;
      for (const PatternEntry* u : t->users) {
        t->window = std::max(t->window, u->pattern->window);
        t->min_probability = std::min(t->min_probability, u->pattern->min_probability);
      }
    }
  }
  e->chain.clear();
  for (const std::string& k : e->tail_keys) {
    auto t = tails_.find(k);
    std::erase_if(t->second, [&](const auto& item) { return item.first == e; });
    if (t->second.empty()) tails_.erase(t);
  }
  e->tail_keys.clear();
  e->split = 0;
  return owned;
}

void PetriNet::insert(std::unique_ptr<PatternEntry> entry, size_t split) {
  PatternEntry* const e = entry.get();
  const CompiledPatternPtr& pattern = e->pattern;
  const CompiledPattern& p = *pattern;
  const size_t m = p.elements.size();

  auto use = [&](Transition* t) {
    if (std::find(t->users.begin(), t->users.end(), e) != t->users.end()) return;
    t->users.push_back(e);
    t->window = std::max(t->window, p.window);
    t->min_probability = std::min(t->min_probability, p.min_probability);
    e->chain.push_back(t);
  };
  // The transition binding element `from + depth` after a chain that starts
  // at element `from` (0: the pattern's own chain).
  auto create = [&](const std::string& key, Transition* input, size_t depth, size_t from) {
    auto created = std::make_unique<Transition>();
    Transition* t = created.get();
    t->key = key;
    t->input = input;
    t->depth = static_cast<int>(depth);
    t->owner = pattern;
    for (size_t d = 0; d <= depth; ++d) t->slots.push_back(p.elements[from + d].slot);
    t->window = p.window;
    t->min_probability = p.min_probability;
    t->group = e->group;
    const CompiledPattern::Element& el = p.elements[from + depth];
    t->type = el.type;
    t->loop = el.kleene;
    if (t->loop) ++t->consumers;  // its own place
    for (size_t d = 0; d <= depth; ++d) {
      t->kleene_at.push_back(static_cast<char>(p.elements[from + d].kleene));
      t->by_element = t->by_element || p.elements[from + d].kleene;
    }
    t->strategy = p.strategy;
    for (size_t g = 0; g < el.guards.size(); ++g) {
      if (el.guard_earliest[g] < from) continue;
      t->guards.push_back(el.guards[g]);
      t->steers.push_back(el.guard_steers[g]);
    }
    for (const CompiledPattern::Negation& n : el.negations) {
      t->inhibitors.push_back(Transition::Inhibitor{&n, {}});
    }
    if (input != nullptr) ++input->consumers;
    by_key_.emplace(key, t);
    transitions_.push_back(std::move(created));
    return t;
  };

  if (!p.operand_starts.empty()) {
    // A conjunction: each operand a chain from the head (prefix joins), the
    // operands joined left to right by conjunction transitions whose guards
    // are the conjuncts naming two operands.
    std::vector<size_t> bounds = {0};
    bounds.insert(bounds.end(), p.operand_starts.begin(), p.operand_starts.end());
    bounds.push_back(m);
    Transition* acc = nullptr;
    std::string acc_key;
    for (size_t o = 0; o + 1 < bounds.size(); ++o) {
      const size_t from = bounds[o];
      const size_t to = bounds[o + 1];
      std::string probe;
      Transition* end = nullptr;
      for (size_t i = from; i < to; ++i) {
        probe += elementKey(p, i, from);
        auto it = by_key_.find(probe);
        Transition* t = it != by_key_.end() ? it->second : create(probe, end, i - from, from);
        use(t);
        end = t;
      }
      if (o == 0) {
        acc = end;
        acc_key = std::move(probe);
        continue;
      }
      std::vector<const pattern::Conjunct*> across;
      std::vector<std::string> texts;
      for (size_t i = from; i < to; ++i) {
        const CompiledPattern::Element& el = p.elements[i];
        for (size_t g = 0; g < el.guards.size(); ++g) {
          if (el.guard_earliest[g] >= from) continue;
          across.push_back(el.guards[g]);
          texts.push_back(pattern::toString(*byPosition(*el.guards[g]->source, p.position, 0)));
        }
      }
      std::sort(texts.begin(), texts.end());
      std::string key = "AND [";
      for (const std::string& text : texts) key.append(text).append(";");
      key.append("] {\n").append(acc_key).append("} {\n").append(probe).append("}\n");
      Transition* j;
      if (auto it = by_key_.find(key); it != by_key_.end()) {
        j = it->second;
      } else {
        j = create(key, acc, to - 1, 0);
        j->type = Symbol();
        j->inhibitors.clear();
        j->right = end;
        j->conjunction = true;
        j->guards = std::move(across);
        ++end->consumers;
        acc->joins.push_back(j);
        if (end != acc) end->joins.push_back(j);
      }
      use(j);
      acc = j;
      acc_key = std::move(key);
    }
    acc->outputs.push_back(e);
    rebuildOutputGroups(*acc);
    patterns_.push_back(std::move(entry));
    return;
  }

  // Keys of consuming patterns never equal a feedback pattern's: their tokens
  // are taken, so sharing a place changes what the others see. Nor do those
  // of a pattern under another strategy: its firings mark the tokens.
  std::string key;
  if (p.strategy != pattern::Strategy::kSkipTillAnyMatch) {
    key = std::string(pattern::strategyName(p.strategy)) + "\n";
  }
  if (e->group == 0) key = "conflict\n";
  if (e->group > 0) key = "concurrency " + std::to_string(e->group) + "\n";
  Transition* prev = nullptr;
  bool joined = false;
  for (size_t k = 0; k < m;) {
    const std::string next = key + elementKey(p, k, 0);
    auto found = by_key_.find(next);
    const bool may_join = e->group < 0 && !p.has_negation && !p.has_kleene &&
                          p.strategy == pattern::Strategy::kSkipTillAnyMatch && prev != nullptr &&
                          !joined;
    if (may_join && (split == k || (split == 0 && found == by_key_.end()))) {
      // The right side of a join: elements k..l as a chain from the head.
      // A middle join takes the longest such chain that runs already (two
      // elements at least); a back join (split == k) runs k..m-1, creating
      // what is missing.
      std::string sub;
      std::string probe;
      Transition* end = nullptr;
      size_t l = k;
      for (size_t i = k; i < m; ++i) {
        probe += elementKey(p, i, k);
        auto it = by_key_.find(probe);
        if (it == by_key_.end()) {
          if (split != k) break;
          create(probe, end, i - k, k);
          it = by_key_.find(probe);
        }
        end = it->second;
        if (i > k || split == k) {
          l = i;
          sub = probe;
        }
      }
      if (end != nullptr && (l > k || split == k)) {
        std::vector<Transition*> shared;
        for (Transition* t = end; t != nullptr; t = t->input) shared.push_back(t);
        for (auto it = shared.rbegin(); it != shared.rend(); ++it) use(*it);
        // The join's guard: the conjuncts of elements k..l that name an
        // element before k (the others are the shared chain's guards).
        std::vector<const pattern::Conjunct*> across;
        std::vector<std::string> texts;
        for (size_t i = k; i <= l; ++i) {
          const CompiledPattern::Element& el = p.elements[i];
          for (size_t g = 0; g < el.guards.size(); ++g) {
            if (el.guard_earliest[g] >= k) continue;
            across.push_back(el.guards[g]);
            texts.push_back(pattern::toString(*byPosition(*el.guards[g]->source, p.position, 0)));
          }
        }
        std::sort(texts.begin(), texts.end());
        // Braces close the shared chain, so that what follows the join can
        // never read as a longer shared chain.
        key += "JOIN [";
        for (const std::string& text : texts) key += text + ";";
        key += "] {\n" + sub + "}\n";
        Transition* j;
        if (auto it = by_key_.find(key); it != by_key_.end()) {
          j = it->second;
        } else {
          j = create(key, prev, l, 0);
          j->type = Symbol();
          j->inhibitors.clear();
          j->right = end;
          j->guards = std::move(across);
          end->joins.push_back(j);
        }
        use(j);
        prev = j;
        joined = true;
        e->split = k;
        k = l + 1;
        continue;
      }
    }
    Transition* t = found != by_key_.end() ? found->second : create(next, prev, k, 0);
    use(t);  // a found transition is a prefix join: its place is shared
    key = next;
    prev = t;
    ++k;
  }
  prev->outputs.push_back(e);
  rebuildOutputGroups(*prev);
  if (e->group < 0 && !p.has_negation && !p.has_kleene) {
    for (size_t j = 1; j + 2 <= m; ++j) {
      e->tail_keys.push_back(tailKey(p, j));
      tails_[e->tail_keys.back()].emplace_back(e, j);
    }
  }
  patterns_.push_back(std::move(entry));
}

Status PetriNet::removePattern(std::string_view name) {
  auto it = std::find_if(patterns_.begin(), patterns_.end(),
                         [&](const auto& p) { return p->name == name; });
  if (it == patterns_.end()) {
    return Status::notFound("no pattern '" + std::string(name) + "' in the net");
  }
  for (size_t i = patterns_.size(); i-- > 0;) {
    if (patterns_[i]->name == name) detach(*patterns_[i]);
  }
  rebuildTypeIndex();
  markLazyPlaces();
  held_ = tokenCount();  // detach() cleared places and dropped transitions
  return Status::ok();
}

void PetriNet::rebuildOutputGroups(Transition& t) {
  t.output_groups.clear();
  for (PatternEntry* p : t.outputs) {
    auto same = std::find_if(t.output_groups.begin(), t.output_groups.end(), [&](const auto& g) {
      return g.front()->pattern->return_key == p->pattern->return_key;
    });
    if (same == t.output_groups.end()) {
      t.output_groups.push_back({p});
    } else {
      same->push_back(p);
    }
  }
}

void PetriNet::rebuildTypeIndex() {
  by_type_.clear();
  inhibitors_.clear();
  for (const auto& t : transitions_) {
    for (size_t i = 0; i < t->inhibitors.size(); ++i) {
      inhibitors_[t->inhibitors[i].spec->type].emplace_back(t.get(), i);
    }
  }
  for (const auto& t : transitions_) {
    if (t->right == nullptr) by_type_[t->type].push_back(t.get());
  }
  // Deeper transitions first: a token the event itself adds to a place can
  // never extend with the same event (ts must increase), so scanning it
  // would be wasted.
  for (auto& [type, list] : by_type_) {
    std::sort(list.begin(), list.end(),
              [](const Transition* a, const Transition* b) { return a->depth > b->depth; });
  }
}

namespace {

// Whether every reference `e` makes to the Kleene variable `var` is b[i] or
// b[i-1]: what a link between two events, or one event of a run, decides.
bool relative(const pattern::Expr& e, const std::string& var) {
  if ((e.kind == pattern::ExprKind::kAttr || e.kind == pattern::ExprKind::kAggregate) &&
      e.ref.var == var && e.ref.index != pattern::IndexKind::kCurrent &&
      e.ref.index != pattern::IndexKind::kPrevious) {
    return false;
  }
  return (!e.lhs || relative(*e.lhs, var)) && (!e.rhs || relative(*e.rhs, var));
}

}  // namespace

bool PetriNet::markLazyRuns(Transition& t, const std::vector<const Transition*>& readers) {
  t.admit.clear();
  t.pair.clear();
  t.across.clear();
  const bool shape = t.loop && t.group < 0 && t.strategy == pattern::Strategy::kSkipTillAnyMatch &&
                     t.inhibitors.empty() && t.outputs.empty() && t.joins.empty() &&
                     !readers.empty() &&
                     std::all_of(readers.begin(), readers.end(), [](const Transition* u) {
                       return !u->loop && u->right == nullptr && !u->conjunction && u->group < 0 &&
                              u->strategy == pattern::Strategy::kSkipTillAnyMatch &&
                              u->inhibitors.empty() && u->consumers == 0 && u->joins.empty();
                     });
  if (!shape) return false;
  const int slot = t.slots[static_cast<size_t>(t.depth)];
  const uint64_t own = slot >= 0 ? uint64_t{1} << slot : 0;
  for (const pattern::Conjunct* g : t.guards) {
    if (g->slot_mask == 0) {
      t.admit.push_back(g);
      continue;
    }
    if (slot < 0 || !g->iteration_slot || static_cast<int>(*g->iteration_slot) != slot ||
        !relative(*g->source, t.owner->layout.nameOf(static_cast<size_t>(slot)))) {
      return false;
    }
    if (g->slot_mask != own) {
      t.across.push_back(g);
    } else if (g->uses_previous) {
      t.pair.push_back(g);
    } else {
      t.admit.push_back(g);
    }
  }
  t.all_links = t.pair.empty();
  // Without links to bound the runs, a predicate tying b[i] to an earlier
  // element (b[i].x = a.x) would be checked only on whole runs, after every
  // subset of the window's events was enumerated: the run tokens it prunes
  // as they grow cost less.
  if (t.all_links && !t.across.empty()) return false;
  // A place holding run tokens keeps them (none is lost), until it is empty.
  return t.lazy_runs || t.place.empty();
}

void PetriNet::markLazyPlaces() {
  // Whose places only feedback extensions read (joins and Kleene loops read
  // whole tokens).
  std::unordered_map<const Transition*, bool> plain_readers;
  std::unordered_map<const Transition*, std::vector<const Transition*>> readers_of;
  for (const auto& u : transitions_) {
    const bool plain = !u->loop && u->right == nullptr && !u->conjunction && u->group < 0;
    if (u->input != nullptr) plain_readers.try_emplace(u->input, true).first->second &= plain;
    if (u->right != nullptr) plain_readers[u->right] = false;
    if (u->input != nullptr) readers_of[u->input].push_back(u.get());
  }
  for (const auto& t : transitions_) {
    const bool lazy_runs = markLazyRuns(*t, readers_of[t.get()]);
    if (t->lazy_runs && !lazy_runs) materializeRuns(*t);
    t->lazy_runs = lazy_runs;
  }
  for (const auto& t : transitions_) {
    const int own_slot = t->slots[static_cast<size_t>(t->depth)];
    const bool own_guards =
        std::all_of(t->guards.begin(), t->guards.end(), [&](const pattern::Conjunct* g) {
          return g->slot_mask == 0 || (own_slot >= 0 && g->slot_mask == uint64_t{1} << own_slot);
        });
    auto readers = plain_readers.find(t.get());
    const bool lazy = t->input != nullptr && !t->loop && !t->by_element && t->right == nullptr &&
                      !t->conjunction && t->group < 0 && t->input->group < 0 &&
                      t->strategy == pattern::Strategy::kSkipTillAnyMatch &&
                      t->inhibitors.empty() && t->outputs.empty() && t->joins.empty() &&
                      readers != plain_readers.end() && readers->second && own_guards;
    if (t->lazy && !lazy) materialize(*t);
    t->lazy = lazy;
  }
}

NetSize PetriNet::size() const {
  return NetSize{by_type_.size() + transitions_.size(), transitions_.size()};
}

NetSize PetriNet::unmergedSize() const {
  NetSize n;
  for (const auto& p : patterns_) {
    std::set<Symbol> types;
    for (const CompiledPattern::Element& e : p->pattern->elements) types.insert(e.type);
    // A conjunction adds one join transition (and its place) per operand after the first.
    n.places += types.size() + p->pattern->elements.size() + p->pattern->operand_starts.size();
    n.transitions += p->pattern->elements.size() + p->pattern->operand_starts.size();
  }
  return n;
}

size_t PetriNet::patternCount() const {
  return static_cast<size_t>(std::count_if(patterns_.begin(), patterns_.end(),
                                           [](const auto& p) { return p->alternative == 0; }));
}

}  // namespace cepbus::plugins::petri
