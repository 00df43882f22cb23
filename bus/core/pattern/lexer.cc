#include "bus/core/pattern/lexer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <utility>

namespace cepbus::pattern {
namespace {

constexpr std::array<std::pair<Keyword, const char*>, 17> kKeywords = {{
    {Keyword::kPattern, "PATTERN"},
    {Keyword::kWhere, "WHERE"},
    {Keyword::kWithin, "WITHIN"},
    {Keyword::kProbability, "PROBABILITY"},
    {Keyword::kPartition, "PARTITION"},
    {Keyword::kBy, "BY"},
    {Keyword::kStrategy, "STRATEGY"},
    {Keyword::kContext, "CONTEXT"},
    {Keyword::kReturn, "RETURN"},
    {Keyword::kAs, "AS"},
    {Keyword::kSeq, "SEQ"},
    {Keyword::kAnd, "AND"},
    {Keyword::kOr, "OR"},
    {Keyword::kNot, "NOT"},
    {Keyword::kAgg, "AGG"},
    {Keyword::kTrue, "TRUE"},
    {Keyword::kFalse, "FALSE"},
}};

Keyword keywordOf(std::string_view word) {
  for (const auto& [k, name] : kKeywords) {
    if (equalsIgnoreCase(word, name)) return k;
  }
  return Keyword::kNone;
}

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Result<std::vector<Token>> run() {
    std::vector<Token> out;
    while (true) {
      skipSpaceAndComments();
      Token t;
      t.pos = pos();
      if (at_ >= text_.size()) {
        out.push_back(std::move(t));
        return out;
      }
      Status s = next(t);
      if (!s.isOk()) return s;
      out.push_back(std::move(t));
    }
  }

 private:
  SourcePos pos() const { return {line_, static_cast<int>(at_ - line_start_) + 1}; }

  char peek(size_t ahead = 0) const {
    return at_ + ahead < text_.size() ? text_[at_ + ahead] : '\0';
  }

  void advance() {
    if (text_[at_] == '\n') {
      ++line_;
      line_start_ = at_ + 1;
    }
    ++at_;
  }

  void skipSpaceAndComments() {
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else if (c == '-' && peek(1) == '-') {
        while (at_ < text_.size() && text_[at_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  static Status error(SourcePos p, const std::string& msg) {
    return Status::invalidArgument("line " + std::to_string(p.line) + ", column " +
                                   std::to_string(p.column) + ": " + msg);
  }

  Status next(Token& t) {
    const size_t begin = at_;
    const char c = peek();
    if (isIdentStart(c)) {
      while (isIdentChar(peek())) advance();
      t.text = std::string(text_.substr(begin, at_ - begin));
      t.keyword = keywordOf(t.text);
      t.kind = t.keyword == Keyword::kNone ? TokenKind::kIdent : TokenKind::kKeyword;
      return Status::ok();
    }
    if (isDigit(c)) return number(t);
    if (c == '\'' || c == '"') return string(t);
    advance();
    auto one = [&](TokenKind k) {
      t.kind = k;
      t.text = std::string(text_.substr(begin, at_ - begin));
      return Status::ok();
    };
    auto two = [&](char second, TokenKind pair, TokenKind single) {
      if (peek() == second) {
        advance();
        return one(pair);
      }
      return one(single);
    };
    switch (c) {
      case '(':
        return one(TokenKind::kLParen);
      case ')':
        return one(TokenKind::kRParen);
      case '[':
        return one(TokenKind::kLBracket);
      case ']':
        return one(TokenKind::kRBracket);
      case ',':
        return one(TokenKind::kComma);
      case '.':
        return one(TokenKind::kDot);
      case ';':
        return one(TokenKind::kSemicolon);
      case '+':
        return one(TokenKind::kPlus);
      case '-':
        return one(TokenKind::kMinus);
      case '*':
        return one(TokenKind::kStar);
      case '/':
        return one(TokenKind::kSlash);
      case '%':
        return one(TokenKind::kPercent);
      case '~':
        return one(TokenKind::kTilde);
      case '=':
        return one(TokenKind::kEq);
      case '|':
        return two('|', TokenKind::kBarBar, TokenKind::kBar);
      case '<':
        return two('=', TokenKind::kLe, TokenKind::kLt);
      case '>':
        return two('=', TokenKind::kGe, TokenKind::kGt);
      case '!':
        if (peek() == '=') {
          advance();
          return one(TokenKind::kNe);
        }
        return error(t.pos, "unexpected character '!' (did you mean '!=' or NOT?)");
      default:
        break;
    }
    if (std::isprint(static_cast<unsigned char>(c))) {
      return error(t.pos, std::string("unexpected character '") + c + "'");
    }
    return error(t.pos, "unexpected byte " + std::to_string(static_cast<unsigned char>(c)));
  }

  Status number(Token& t) {
    const size_t begin = at_;
    bool is_double = false;
    while (isDigit(peek())) advance();
    if (peek() == '.' && isDigit(peek(1))) {
      is_double = true;
      advance();
      while (isDigit(peek())) advance();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
      is_double = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      while (isDigit(peek())) advance();
    }
    if (isIdentChar(peek())) {
      return error(pos(), std::string("unexpected character '") + peek() + "' in a number");
    }
    t.text = std::string(text_.substr(begin, at_ - begin));
    if (is_double) {
      t.kind = TokenKind::kDouble;
      const auto [end, ec] =
          std::from_chars(t.text.data(), t.text.data() + t.text.size(), t.double_value);
      if (ec != std::errc() || end != t.text.data() + t.text.size()) {
        return error(t.pos, "number '" + t.text + "' is out of range");
      }
      return Status::ok();
    }
    t.kind = TokenKind::kInt;
    const auto [end, ec] =
        std::from_chars(t.text.data(), t.text.data() + t.text.size(), t.int_value);
    if (ec != std::errc() || end != t.text.data() + t.text.size()) {
      return error(t.pos, "integer '" + t.text + "' is out of range");
    }
    return Status::ok();
  }

  Status string(Token& t) {
    const char quote = peek();
    advance();
    t.kind = TokenKind::kString;
    while (true) {
      if (at_ >= text_.size()) return error(t.pos, "unterminated string literal");
      const char c = peek();
      if (c == quote) {
        advance();
        return Status::ok();
      }
      if (c == '\n') return error(t.pos, "unterminated string literal");
      if (c == '\\') {
        const SourcePos esc = pos();
        advance();
        switch (peek()) {
          case '\\':
            t.text += '\\';
            break;
          case '\'':
            t.text += '\'';
            break;
          case '"':
            t.text += '"';
            break;
          case 'n':
            t.text += '\n';
            break;
          case 't':
            t.text += '\t';
            break;
          default:
            return error(esc, "unknown escape sequence in string literal");
        }
        advance();
        continue;
      }
      t.text += c;
      advance();
    }
  }

  std::string_view text_;
  size_t at_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view text) { return Lexer(text).run(); }

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const char* keywordName(Keyword k) {
  for (const auto& [kw, name] : kKeywords) {
    if (kw == k) return name;
  }
  return "";
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd:
      return "end of input";
    case TokenKind::kIdent:
      return "identifier '" + token.text + "'";
    case TokenKind::kKeyword:
      return std::string("keyword ") + keywordName(token.keyword);
    case TokenKind::kInt:
      return "integer " + token.text;
    case TokenKind::kDouble:
      return "number " + token.text;
    case TokenKind::kString:
      return "string '" + token.text + "'";
    default:
      return "'" + token.text + "'";
  }
}

}  // namespace cepbus::pattern
