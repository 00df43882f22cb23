#pragma once

// TokenCursor: the tokens of one query or filter, read front to back by the
// recursive-descent parser (parser.cc, expr_parser.h), with the words every
// grammar rule reads the same way (attribute names, positive integers,
// durations with units) and the limits that keep untrusted text from
// building a tree deep enough to exhaust the stack.
//
// A mistake is thrown as a ParseError naming where it is (parse_error.h).
// Internal to bus/core: no SDK header includes it.
//
// Thread-safety: none (one per parse). Ownership: holds its tokens.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/lexer.h"
#include "bus/core/pattern/parse_error.h"
#include "bus/core/pattern/parser.h"

namespace cepbus::pattern::parsing {

class TokenCursor {
 public:
  // Parsing, checking, printing, evaluating and even destroying a tree
  // recurse over it: parentheses and function forms nest at most
  // kMaxNesting deep, and a tree (a long left-associative chain included)
  // is at most kMaxHeight tall.
  static constexpr int kMaxNesting = 200;
  static constexpr int kMaxHeight = 1000;

  // `tokens` ends with a kEnd token (tokenize() makes it so).
  TokenCursor(std::vector<Token> tokens, ParseOptions options)
      : tokens_(std::move(tokens)), options_(options) {}

  // --- tokens -------------------------------------------------------------

  // The token `ahead` of the current one; the kEnd token past the end.
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(at_ + ahead, tokens_.size() - 1)];
  }
  const Token& take() {
    const Token& t = peek();
    if (at_ < tokens_.size() - 1) ++at_;
    return t;
  }
  bool isKeyword(Keyword k, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kKeyword && peek(ahead).keyword == k;
  }
  // Takes the token if it is a `k`.
  bool accept(TokenKind k) {
    if (peek().kind != k) return false;
    take();
    return true;
  }
  // Fails: "expected <what>, found <the current token>".
  [[noreturn]] void expected(const std::string& what) const;
  const Token& expect(TokenKind k, const char* what) {
    if (peek().kind != k) expected(what);
    return take();
  }
  void expectKeyword(Keyword k);
  const Token& identifier(const char* what) { return expect(TokenKind::kIdent, what); }
  // The words of a window query and of output control (FROM, WINDOW, GROUP,
  // EMIT, ...) are keywords only where they stand, so they remain free as
  // names elsewhere.
  bool isWord(const char* word) const {
    return peek().kind == TokenKind::kIdent && equalsIgnoreCase(peek().text, word);
  }
  void expectWord(const char* word, const char* after);

  // --- words every rule reads alike ---------------------------------------

  // An attribute name: an identifier, or a keyword spelled as written (an
  // event may well have an attribute called `by` or `as`).
  std::string attributeName();
  // A positive integer; `what` names it in the error.
  int64_t positiveInt(const char* what);
  // duration := posint [ unit ]; the value in `ts` units. `what` names the
  // duration in errors, `written` is what precedes it as the query wrote it.
  // The words that may follow a window's duration are not units.
  int64_t duration(const char* what, const std::string& written);

  // --- limits -------------------------------------------------------------

  // Counts one level of nesting for its lifetime; fails past kMaxNesting.
  class NestingGuard {
   public:
    explicit NestingGuard(TokenCursor& in) : in_(in) {
      if (++in_.nesting_ > kMaxNesting) {
        fail(in_.peek().pos, "nesting deeper than " + std::to_string(kMaxNesting) + " levels");
      }
    }
    ~NestingGuard() { --in_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    TokenCursor& in_;
  };

  // Records the height of a node (an Expr or a PatternNode) whose children
  // are set; fails past kMaxHeight.
  template <typename Node>
  std::shared_ptr<Node> grown(std::shared_ptr<Node> n) {
    int h = 0;
    if constexpr (std::is_same_v<Node, Expr>) {
      h = std::max(n->lhs ? heightOf(n->lhs.get()) : 0, n->rhs ? heightOf(n->rhs.get()) : 0);
    } else {
      for (const PatternPtr& c : n->children) h = std::max(h, heightOf(c.get()));
      if (n->predicate) h = std::max(h, heightOf(n->predicate.get()));
    }
    if (h + 1 > kMaxHeight) {
      fail(n->pos, "expression deeper than " + std::to_string(kMaxHeight) + " operators");
    }
    heights_[n.get()] = h + 1;
    return n;
  }

 private:
  int heightOf(const void* node) const {
    auto it = heights_.find(node);
    return it == heights_.end() ? 1 : it->second;  // leaves are not recorded
  }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  const ParseOptions options_;
  int nesting_ = 0;
  std::unordered_map<const void*, int> heights_;
};

}  // namespace cepbus::pattern::parsing
