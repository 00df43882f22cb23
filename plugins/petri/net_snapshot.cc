// PetriNet's snapshots: the marking written to bytes and read back into a
// net built from the same patterns. Tokens are shared (a token is the parent
// of the tokens extending it, in other places, and a join's right operand),
// so they are written once, in a table where each comes after the tokens it
// points to, and the places list them by index. The net's shape is not
// written, only checked: it is rebuilt from the patterns, and each
// transition's key must match.

#include <string>
#include <vector>

#include "plugins/petri/net_parts.h"

namespace cepbus::plugins::petri {
void PetriNet::snapshot(plugin::SnapshotWriter& out) const {
  out.section("petri", kSnapshotVersion);
  out.varint(seq_);
  out.signedVarint(now_);
  out.varint(peak_held_);
  out.varint(evicted_);
  out.varint(taken_.size());
  for (uint64_t seq : taken_) out.varint(seq);

  plugin::SnapshotTable<Token> table;
  auto pointees = [](const Token& tok, const auto& visit) {
    visit(tok.parent.get());
    visit(tok.right.get());
  };
  for (const auto& t : transitions_) {
    for (const auto& tok : t->place) table.add(tok.get(), pointees);
  }
  out.varint(table.order().size());
  for (const Token* tok : table.order()) {
    out.event(tok->event);
    out.varint(table.ref(tok->parent.get()));
    out.varint(table.ref(tok->right.get()));
    out.signedVarint(tok->first_ts);
    out.signedVarint(tok->last_ts);
    out.varint(tok->first_seq);
    out.real(tok->prob);
    out.varint(static_cast<uint64_t>(tok->element));
    out.flag(tok->lazy);
    out.u8(tok->took);
  }

  out.varint(transitions_.size());
  for (const auto& t : transitions_) {
    out.string(t->key);
    out.varint(t->place.size());
    for (const auto& tok : t->place) out.varint(table.ref(tok.get()) - 1);
    out.varint(t->inhibitors.size());
    for (const Transition::Inhibitor& inh : t->inhibitors) {
      out.varint(inh.place.size());
      for (const EventPtr& e : inh.place) out.event(e);
    }
    out.varint(t->runs.first);
    out.varint(t->runs.entries.size());
    for (const KleenePlace::Entry& entry : t->runs.entries) {
      out.event(entry.token.event);
      out.varint(entry.token.first_seq);
      out.real(entry.token.prob);
      out.varint(entry.earlier);
      out.varint(entry.links.size());
      for (uint64_t link : entry.links) out.varint(link);
    }
  }
}

std::shared_ptr<const PetriNet::Token> PetriNet::restoreToken(
    plugin::SnapshotReader& in, const std::vector<std::shared_ptr<const Token>>& table,
    std::vector<TokenShape>& shapes) const {
  auto tok = std::make_shared<Token>();
  tok->event = in.event();
  const uint64_t parent = in.varint();
  const uint64_t right = in.varint();
  tok->first_ts = in.signedVarint();
  tok->last_ts = in.signedVarint();
  tok->first_seq = in.varint();
  tok->prob = in.real();
  const uint64_t element = in.varint();
  tok->lazy = in.flag();
  tok->took = in.u8();
  if (!in.ok()) return nullptr;
  const std::string what = "token " + std::to_string(table.size());
  int deepest = 0;
  for (const auto& t : transitions_) deepest = std::max(deepest, t->depth);
  if (parent > table.size() || right > table.size()) {
    in.fail(what + " points to a token not before it");
    return nullptr;
  }
  // An extension holds an event (a lazy one nothing else), a join two tokens.
  const bool formed = tok->event ? right == 0 && (!tok->lazy || parent == 0)
                                 : !tok->lazy && parent > 0 && right > 0;
  if (!formed || element > static_cast<uint64_t>(deepest)) {
    in.fail(what + " is neither an extension nor a join of this net (element " +
            std::to_string(element) + ", deepest " + std::to_string(deepest) + ")");
    return nullptr;
  }
  tok->element = static_cast<int>(element);
  TokenShape shape{tok->event ? 1u : 0u, tok->element};
  if (parent > 0) {
    tok->parent = table[parent - 1];
    shape.events += shapes[parent - 1].events;
    shape.max_element = std::max(shape.max_element, shapes[parent - 1].max_element);
  }
  if (right > 0) {
    tok->right = table[right - 1];
    shape.events += shapes[right - 1].events;
  }
  shapes.push_back(shape);
  return tok;
}

void PetriNet::restorePlaces(Transition& t, plugin::SnapshotReader& in,
                             const std::vector<std::shared_ptr<const Token>>& table,
                             const std::vector<TokenShape>& shapes) {
  const std::string what = "transition '" + t.key + "'";
  const uint64_t tokens = in.count();
  for (uint64_t i = 0; i < tokens && in.ok(); ++i) {
    const uint64_t at = in.varint();
    if (!in.ok()) break;
    // Its readers bind the token's events by position (by element past a
    // Kleene one): no more than the elements up to t's.
    const auto depth = static_cast<uint64_t>(t.depth);
    if (at >= table.size() || (table[at]->lazy && !t.lazy) ||
        static_cast<uint64_t>(shapes[at].max_element) > depth ||
        (!t.by_element && shapes[at].events > depth + 1)) {
      in.fail(what + " holds token " + std::to_string(at) + " of " + std::to_string(table.size()) +
              ", which does not fit its place");
      break;
    }
    t.place.push_back(table[at]);
  }
  if (const uint64_t n = in.count(); in.ok() && n != t.inhibitors.size()) {
    in.fail(what + ": " + std::to_string(n) + " inhibitor places for " +
            std::to_string(t.inhibitors.size()));
  }
  for (Transition::Inhibitor& inh : t.inhibitors) {
    const uint64_t events = in.count();
    for (uint64_t i = 0; i < events && in.ok(); ++i) {
      inh.place.push_back(in.event());
      if (!inh.place.back()) in.fail(what + ": an inhibitor place without its event");
    }
  }
  KleenePlace& runs = t.runs;
  runs.first = in.varint();
  const uint64_t entries = in.count();
  if (in.ok() && entries > 0 && !t.lazy_runs) {
    in.fail(what + " holds Kleene entries but keeps its runs as tokens");
  }
  for (uint64_t i = 0; i < entries && in.ok(); ++i) {
    KleenePlace::Entry& entry = runs.entries.emplace_back();
    const uint64_t number = runs.first + i;
    entry.token.event = in.event();
    entry.token.first_seq = in.varint();
    entry.token.prob = in.real();
    entry.earlier = in.varint();
    const uint64_t links = in.count();
    for (uint64_t l = 0; l < links && in.ok(); ++l) {
      entry.links.push_back(in.varint());
      // Ascending, and before the entries of the event's own ts.
      if (entry.links.back() >= entry.earlier || (l > 0 && entry.links[l - 1] >= entry.links[l])) {
        in.fail(what + ": a Kleene entry's link out of order or range");
      }
    }
    if (!in.ok()) break;
    if (!entry.token.event || entry.earlier > number ||
        (i > 0 && runs.entries[i - 1].token.last_ts > entry.token.event->ts())) {
      in.fail(what + ": Kleene entry " + std::to_string(number) +
              " without its event, out of ts order or after its own ts's first");
      break;
    }
    entry.token.first_ts = entry.token.event->ts();
    entry.token.last_ts = entry.token.first_ts;
    entry.token.element = t.depth;
  }
  held_ += t.held();
}

Status PetriNet::restore(plugin::SnapshotReader& in) {
  if (!in.section("petri", kSnapshotVersion)) return in.status();
  seq_ = in.varint();
  now_ = in.signedVarint();
  peak_held_ = in.varint();
  evicted_ = in.varint();
  const uint64_t groups = in.count();
  for (uint64_t i = 0; i < groups && in.ok(); ++i) taken_.push_back(in.varint());

  std::vector<std::shared_ptr<const Token>> table;
  std::vector<TokenShape> shapes;
  const uint64_t tokens = in.count(16);
  for (uint64_t i = 0; i < tokens && in.ok(); ++i) {
    if (auto tok = restoreToken(in, table, shapes)) table.push_back(std::move(tok));
  }
  if (const uint64_t n = in.count(); in.ok() && n != transitions_.size()) {
    in.fail("the marking of " + std::to_string(n) + " transitions for a net of " +
            std::to_string(transitions_.size()));
  }
  held_ = 0;
  for (size_t i = 0; i < transitions_.size() && in.ok(); ++i) {
    Transition& t = *transitions_[i];
    if (const std::string key = in.string(); in.ok() && key != t.key) {
      in.fail("transition " + std::to_string(i) + " is '" + key + "' in the snapshot, '" + t.key +
              "' in this net");
    }
    if (in.ok()) restorePlaces(t, in, table, shapes);
  }
  return in.status();
}

}  // namespace cepbus::plugins::petri
