#pragma once

// TopicTrie: wildcard subscription patterns in a trie of segments, so that
// matching an address costs about the number of trie paths the address can
// follow, not the number of patterns (10,000 wildcard patterns that share
// prefixes are matched by walking a handful of nodes).
//
// Each node has literal children (hashed by segment), a "*" child and a "#"
// child. A "#" node is entered at the position where it may start swallowing
// segments and tries every end position; it remembers the lowest start it was
// entered at during one match, because a later entry from a higher start can
// only reach positions already tried. That keeps patterns like "#.a.#.b"
// polynomial and makes every matching pattern id come out exactly once.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cepbus::router {

using SubscriptionId = uint64_t;

// Thread-safety: none; the owner serializes writers and readers.
class TopicTrie {
 public:
  TopicTrie();
  ~TopicTrie();
  TopicTrie(TopicTrie&&) noexcept;
  TopicTrie& operator=(TopicTrie&&) noexcept;

  // `segments` is a normalized pattern (see normalizedPattern()).
  void insert(std::span<const std::string_view> segments, SubscriptionId id);
  // False when (segments, id) was not there. Prunes nodes left empty.
  bool erase(std::span<const std::string_view> segments, SubscriptionId id);
  // Appends the id of every pattern matching the address `segments`, each once.
  void match(std::span<const std::string_view> segments, std::vector<SubscriptionId>& out) const;
  size_t size() const { return size_; }
  size_t nodeCount() const { return nodes_; }

 private:
  struct Node;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  struct Node {
    std::unordered_map<std::string, std::unique_ptr<Node>, StringHash, std::equal_to<>> children;
    std::unique_ptr<Node> star;
    std::unique_ptr<Node> hash;
    std::vector<SubscriptionId> ids;
    bool empty() const { return children.empty() && !star && !hash && ids.empty(); }
  };
  struct MatchState {
    std::span<const std::string_view> address;
    std::vector<SubscriptionId>& out;
    std::vector<std::pair<const Node*, size_t>> hash_starts;  // lowest start per '#' node
  };

  static void visit(const Node& node, size_t position, MatchState& state);
  static void visitHash(const Node& node, size_t position, MatchState& state);
  static void visitChildren(const Node& node, size_t position, MatchState& state);
  bool eraseFrom(Node& node, std::span<const std::string_view> segments, SubscriptionId id);

  std::unique_ptr<Node> root_;
  size_t size_ = 0;
  size_t nodes_ = 1;
};

}  // namespace cepbus::router
