#pragma once

// Tokens of the cepbus pattern language.
//
// Keywords are case-insensitive and reserved (PATTERN, WHERE, WITHIN,
// PROBABILITY, PARTITION, BY, STRATEGY, CONTEXT, RETURN, AS, SEQ, AND, OR, NOT, AGG, TRUE,
// FALSE); identifiers are case-sensitive. `--` starts a comment that runs to
// the end of the line. Strings are '...' or "..." with backslash escapes
// (\\ \' \" \n \t).
//
// Thread safety: pure functions, safe from any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::pattern {

enum class TokenKind : uint8_t {
  kEnd,
  kIdent,
  kKeyword,
  kInt,
  kDouble,
  kString,
  kLParen,     // (
  kRParen,     // )
  kLBracket,   // [
  kRBracket,   // ]
  kComma,      // ,
  kDot,        // .
  kSemicolon,  // ;
  kPlus,       // +
  kMinus,      // -
  kStar,       // *
  kSlash,      // /
  kPercent,    // %
  kTilde,      // ~
  kBar,        // |
  kBarBar,     // ||
  kEq,         // =
  kNe,         // !=
  kLt,         // <
  kLe,         // <=
  kGt,         // >
  kGe,         // >=
};

enum class Keyword : uint8_t {
  kNone,
  kPattern,
  kWhere,
  kWithin,
  kProbability,
  kPartition,
  kBy,
  kStrategy,
  kContext,
  kReturn,
  kAs,
  kSeq,
  kAnd,
  kOr,
  kNot,
  kAgg,
  kTrue,
  kFalse,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  Keyword keyword = Keyword::kNone;  // kKeyword only
  // The source text of the token; for kString, the decoded contents.
  std::string text;
  int64_t int_value = 0;    // kInt
  double double_value = 0;  // kDouble
  SourcePos pos;
};

// The tokens of `text`, ending with one kEnd token. Errors name line and
// column: an unexpected character, an unterminated string, a bad escape, an
// integer out of range.
Result<std::vector<Token>> tokenize(std::string_view text);

// The token as an error message names it: "'('", "identifier 'price'",
// "keyword WHERE", "integer 7", "string 'IBM'", "end of input".
std::string describe(const Token& token);

// Upper-case spelling of a keyword: "PATTERN".
const char* keywordName(Keyword k);

// ASCII letters compared without case: keywords, strategy and context names,
// function names and time units are all read that way.
bool equalsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace cepbus::pattern
