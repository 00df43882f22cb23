#pragma once

// The queries of `cepbus match`: one from --query, or one per line of a
// --patterns file, each optionally named ("name: PATTERN ..."), with where
// it came from for messages. Lines that are empty or start with '#' are
// skipped; a duplicate name is refused naming both lines.

#include <string>
#include <vector>

#include "bus/core/status.h"

namespace cepbus::app {

struct PatternLine {
  std::string name;
  std::string text;
  std::string where;  // "--query" or "FILE:LINE", for messages

  // `where`, and the pattern's name under --patterns.
  std::string label() const { return name.empty() ? where : where + " (pattern '" + name + "')"; }
};

// Reads `file`'s queries into `out`; an error names the file (and line).
Status readPatterns(const std::string& file, std::vector<PatternLine>& out);

}  // namespace cepbus::app
