#include "bus/core/pattern/lexer.h"

#include <gtest/gtest.h>

namespace cepbus::pattern {
namespace {

std::vector<TokenKind> kinds(std::string_view text) {
  Result<std::vector<Token>> r = tokenize(text);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  std::vector<TokenKind> out;
  if (r.isOk()) {
    for (const Token& t : *r) out.push_back(t.kind);
  }
  return out;
}

std::string errorOf(std::string_view text) {
  Result<std::vector<Token>> r = tokenize(text);
  return r.isOk() ? "OK" : r.status().message();
}

using K = TokenKind;

TEST(LexerTest, Punctuation) {
  EXPECT_EQ(kinds("( ) [ ] , . ; + - * / % ~"),
            (std::vector<K>{K::kLParen, K::kRParen, K::kLBracket, K::kRBracket, K::kComma, K::kDot,
                            K::kSemicolon, K::kPlus, K::kMinus, K::kStar, K::kSlash, K::kPercent,
                            K::kTilde, K::kEnd}));
}

TEST(LexerTest, LongestMatchForTwoCharacterOperators) {
  EXPECT_EQ(kinds("| || ||| = != < <= > >="),
            (std::vector<K>{K::kBar, K::kBarBar, K::kBarBar, K::kBar, K::kEq, K::kNe, K::kLt,
                            K::kLe, K::kGt, K::kGe, K::kEnd}));
  EXPECT_EQ(kinds("a<=b"), (std::vector<K>{K::kIdent, K::kLe, K::kIdent, K::kEnd}));
}

TEST(LexerTest, KeywordsAreCaseInsensitiveIdentifiersAreNot) {
  Result<std::vector<Token>> r = tokenize("pattern Pattern PATTERN seq Stock stock within_x");
  ASSERT_TRUE(r.isOk());
  const auto& t = *r;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t[i].kind, K::kKeyword);
    EXPECT_EQ(t[i].keyword, Keyword::kPattern);
  }
  EXPECT_EQ(t[3].keyword, Keyword::kSeq);
  EXPECT_EQ(t[4].kind, K::kIdent);
  EXPECT_EQ(t[4].text, "Stock");
  EXPECT_EQ(t[5].text, "stock");
  EXPECT_EQ(t[6].kind, K::kIdent);  // a keyword prefix does not make a keyword
  EXPECT_EQ(t[6].text, "within_x");
}

TEST(LexerTest, Numbers) {
  Result<std::vector<Token>> r = tokenize("42 0 10.5 1e3 2.5E-2 9223372036854775807");
  ASSERT_TRUE(r.isOk());
  const auto& t = *r;
  EXPECT_EQ(t[0].kind, K::kInt);
  EXPECT_EQ(t[0].int_value, 42);
  EXPECT_EQ(t[1].int_value, 0);
  EXPECT_EQ(t[2].kind, K::kDouble);
  EXPECT_DOUBLE_EQ(t[2].double_value, 10.5);
  EXPECT_EQ(t[3].kind, K::kDouble);
  EXPECT_DOUBLE_EQ(t[3].double_value, 1000);
  EXPECT_DOUBLE_EQ(t[4].double_value, 0.025);
  EXPECT_EQ(t[5].int_value, INT64_MAX);
}

TEST(LexerTest, DotAfterIntegerIsNotADecimalPoint) {
  // b[1].price: the '.' belongs to the attribute reference.
  EXPECT_EQ(kinds("b[1].price"), (std::vector<K>{K::kIdent, K::kLBracket, K::kInt, K::kRBracket,
                                                 K::kDot, K::kIdent, K::kEnd}));
}

TEST(LexerTest, StringsInBothQuotesWithEscapes) {
  Result<std::vector<Token>> r = tokenize(R"('IBM' "MS FT" 'it\'s' "a\\b\n" 'say "hi"')");
  ASSERT_TRUE(r.isOk());
  const auto& t = *r;
  EXPECT_EQ(t[0].kind, K::kString);
  EXPECT_EQ(t[0].text, "IBM");
  EXPECT_EQ(t[1].text, "MS FT");
  EXPECT_EQ(t[2].text, "it's");
  EXPECT_EQ(t[3].text, "a\\b\n");
  EXPECT_EQ(t[4].text, "say \"hi\"");
}

TEST(LexerTest, CommentsRunToEndOfLine) {
  EXPECT_EQ(kinds("a -- b c\n d -- e"), (std::vector<K>{K::kIdent, K::kIdent, K::kEnd}));
  // A single minus is an operator, not a comment.
  EXPECT_EQ(kinds("a - b"), (std::vector<K>{K::kIdent, K::kMinus, K::kIdent, K::kEnd}));
}

TEST(LexerTest, PositionsAreOneBasedLineAndColumn) {
  Result<std::vector<Token>> r = tokenize("PATTERN A\n  -- note\n   WHERE x");
  ASSERT_TRUE(r.isOk());
  const auto& t = *r;
  EXPECT_EQ(t[0].pos.line, 1);
  EXPECT_EQ(t[0].pos.column, 1);
  EXPECT_EQ(t[1].pos.column, 9);
  EXPECT_EQ(t[2].pos.line, 3);
  EXPECT_EQ(t[2].pos.column, 4);
  EXPECT_EQ(t[3].pos.column, 10);
  EXPECT_EQ(t[4].kind, K::kEnd);
  EXPECT_EQ(t[4].pos.line, 3);
  EXPECT_EQ(t[4].pos.column, 11);
}

TEST(LexerTest, Errors) {
  EXPECT_EQ(errorOf("a # b"), "line 1, column 3: unexpected character '#'");
  EXPECT_EQ(errorOf("a ! b"),
            "line 1, column 3: unexpected character '!' (did you mean '!=' or NOT?)");
  EXPECT_EQ(errorOf("x = 'abc"), "line 1, column 5: unterminated string literal");
  EXPECT_EQ(errorOf("x = 'ab\nc'"), "line 1, column 5: unterminated string literal");
  EXPECT_EQ(errorOf("\n  'a\\qb'"), "line 2, column 5: unknown escape sequence in string literal");
  EXPECT_EQ(errorOf("9223372036854775808"),
            "line 1, column 1: integer '9223372036854775808' is out of range");
  EXPECT_EQ(errorOf("x > 12abc"), "line 1, column 7: unexpected character 'a' in a number");
  EXPECT_EQ(errorOf("1e999"), "line 1, column 1: number '1e999' is out of range");
}

TEST(LexerTest, DescribeNamesTokensForErrorMessages) {
  Result<std::vector<Token>> r = tokenize("( price WHERE 7 1.5 'IBM'");
  ASSERT_TRUE(r.isOk());
  const auto& t = *r;
  EXPECT_EQ(describe(t[0]), "'('");
  EXPECT_EQ(describe(t[1]), "identifier 'price'");
  EXPECT_EQ(describe(t[2]), "keyword WHERE");
  EXPECT_EQ(describe(t[3]), "integer 7");
  EXPECT_EQ(describe(t[4]), "number 1.5");
  EXPECT_EQ(describe(t[5]), "string 'IBM'");
  EXPECT_EQ(describe(t[6]), "end of input");
}

}  // namespace
}  // namespace cepbus::pattern
