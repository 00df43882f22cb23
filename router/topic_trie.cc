#include "router/topic_trie.h"

#include <algorithm>

#include "router/topic.h"

namespace cepbus::router {

TopicTrie::TopicTrie() : root_(std::make_unique<Node>()) {}
TopicTrie::~TopicTrie() = default;
TopicTrie::TopicTrie(TopicTrie&&) noexcept = default;
TopicTrie& TopicTrie::operator=(TopicTrie&&) noexcept = default;

void TopicTrie::insert(std::span<const std::string_view> segments, SubscriptionId id) {
  Node* node = root_.get();
  for (std::string_view segment : segments) {
    std::unique_ptr<Node>* next;
    if (segment == kStar) {
      next = &node->star;
    } else if (segment == kHash) {
      next = &node->hash;
    } else {
      auto it = node->children.find(segment);
      if (it == node->children.end()) {
        it = node->children.emplace(std::string(segment), nullptr).first;
      }
      next = &it->second;
    }
    if (*next == nullptr) {
      *next = std::make_unique<Node>();
      ++nodes_;
    }
    node = next->get();
  }
  node->ids.push_back(id);
  ++size_;
}

bool TopicTrie::erase(std::span<const std::string_view> segments, SubscriptionId id) {
  if (!eraseFrom(*root_, segments, id)) return false;
  --size_;
  return true;
}

bool TopicTrie::eraseFrom(Node& node, std::span<const std::string_view> segments,
                          SubscriptionId id) {
  if (segments.empty()) {
    auto it = std::find(node.ids.begin(), node.ids.end(), id);
    if (it == node.ids.end()) return false;
    node.ids.erase(it);
    return true;
  }
  const std::string_view segment = segments.front();
  std::unique_ptr<Node>* child = nullptr;
  decltype(node.children)::iterator literal;
  if (segment == kStar) {
    child = &node.star;
  } else if (segment == kHash) {
    child = &node.hash;
  } else {
    literal = node.children.find(segment);
    if (literal == node.children.end()) return false;
    child = &literal->second;
  }
  if (*child == nullptr || !eraseFrom(**child, segments.subspan(1), id)) return false;
  if ((*child)->empty()) {
    --nodes_;
    if (segment == kStar || segment == kHash) {
      child->reset();
    } else {
      node.children.erase(literal);
    }
  }
  return true;
}

void TopicTrie::match(std::span<const std::string_view> segments,
                      std::vector<SubscriptionId>& out) const {
  MatchState state{segments, out, {}};
  visit(*root_, 0, state);
}

void TopicTrie::visit(const Node& node, size_t position, MatchState& state) {
  if (node.hash) visitHash(*node.hash, position, state);
  if (position == state.address.size()) {
    state.out.insert(state.out.end(), node.ids.begin(), node.ids.end());
    return;
  }
  visitChildren(node, position, state);
}

void TopicTrie::visitHash(const Node& node, size_t position, MatchState& state) {
  const size_t none = state.address.size() + 1;
  auto it = std::find_if(state.hash_starts.begin(), state.hash_starts.end(),
                         [&](const auto& entry) { return entry.first == &node; });
  size_t end = none;
  if (it == state.hash_starts.end()) {
    state.hash_starts.emplace_back(&node, position);
  } else {
    // Positions from it->second on were tried by an earlier entry.
    if (position >= it->second) return;
    end = it->second;
    it->second = position;
  }
  // '#' swallows address[position, k); the rest of the pattern continues at k.
  // (The node has no '#' child: patterns are normalized.)
  for (size_t k = position; k < end; ++k) {
    if (k == state.address.size()) {
      state.out.insert(state.out.end(), node.ids.begin(), node.ids.end());
    } else {
      visitChildren(node, k, state);
    }
  }
}

void TopicTrie::visitChildren(const Node& node, size_t position, MatchState& state) {
  if (auto it = node.children.find(state.address[position]); it != node.children.end()) {
    visit(*it->second, position + 1, state);
  }
  if (node.star) visit(*node.star, position + 1, state);
}

}  // namespace cepbus::router
