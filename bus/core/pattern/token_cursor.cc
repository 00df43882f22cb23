#include "bus/core/pattern/token_cursor.h"

#include "bus/core/pattern/duration_units.h"

namespace cepbus::pattern::parsing {

void TokenCursor::expected(const std::string& what) const {
  fail(peek().pos, "expected " + what + ", found " + describe(peek()));
}

void TokenCursor::expectKeyword(Keyword k) {
  if (!isKeyword(k)) expected(std::string("keyword ") + keywordName(k));
  take();
}

void TokenCursor::expectWord(const char* word, const char* after) {
  if (!isWord(word)) expected(std::string(word) + " after " + after);
  take();
}

std::string TokenCursor::attributeName() {
  if (peek().kind != TokenKind::kIdent && peek().kind != TokenKind::kKeyword) {
    expected("an attribute name");
  }
  return take().text;
}

int64_t TokenCursor::positiveInt(const char* what) {
  const Token& t = peek();
  if (t.kind != TokenKind::kInt) expected("a positive integer");
  take();
  if (t.int_value <= 0) {
    fail(t.pos, std::string(what) + " must be a positive integer, found " + t.text);
  }
  return t.int_value;
}

int64_t TokenCursor::duration(const char* what, const std::string& written) {
  const Token& number = peek();
  const int64_t n = positiveInt(what);
  if (peek().kind != TokenKind::kIdent || isWord("EVERY") || isWord("GROUP") || isWord("HAVING") ||
      isWord("EMIT") || isWord("AFTER") || isWord("PER")) {
    return n;
  }
  const Token& unit = take();
  return inTsUnits(n, number, unit, written + number.text + " " + unit.text, options_.ts_unit);
}

}  // namespace cepbus::pattern::parsing
