#include "bus/app/pattern_lines.h"

#include <cctype>
#include <fstream>
#include <string_view>

namespace cepbus::app {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// `name: query` when the text before the first ':' is a single word that is
// not the start of a query (queries begin with PATTERN).
void splitName(const std::string& line, std::string& name, std::string& text) {
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    const std::string head = trim(std::string_view(line).substr(0, colon));
    bool word = !head.empty();
    for (char c : head) {
      word &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    }
    if (word) {
      name = head;
      text = trim(std::string_view(line).substr(colon + 1));
      return;
    }
  }
  text = trim(line);
}

}  // namespace

Status readPatterns(const std::string& file, std::vector<PatternLine>& out) {
  std::ifstream in(file);
  if (!in) return Status::ioError("cannot open patterns file '" + file + "'");
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    PatternLine q;
    splitName(t, q.name, q.text);
    if (q.name.empty()) q.name = std::to_string(out.size() + 1);
    q.where = file + ":" + std::to_string(line_no);
    for (const PatternLine& other : out) {
      if (other.name == q.name) {
        return Status::invalidArgument(q.where + ": duplicate pattern name '" + q.name +
                                       "' (first at " + other.where + ")");
      }
    }
    out.push_back(std::move(q));
  }
  if (out.empty()) return Status::invalidArgument("patterns file '" + file + "' has no query");
  return Status::ok();
}

}  // namespace cepbus::app
