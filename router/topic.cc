#include "router/topic.h"

#include <string>

namespace cepbus::router {

namespace {

Status checkSegments(std::string_view text, std::string_view what, bool wildcards_allowed) {
  if (text.empty()) return Status::invalidArgument(std::string(what) + " is empty");
  size_t index = 0;
  for (std::string_view segment : splitTopic(text)) {
    ++index;
    const std::string where =
        std::string(what) + " '" + std::string(text) + "': segment " + std::to_string(index);
    if (segment.empty()) return Status::invalidArgument(where + " is empty");
    const bool wildcard = segment == kStar || segment == kHash;
    if (wildcard && wildcards_allowed) continue;
    if (segment.find_first_of("*#") != std::string_view::npos) {
      return Status::invalidArgument(
          where + " ('" + std::string(segment) + "') " +
          (wildcards_allowed ? "mixes a wildcard with other characters; '*' and '#' must be "
                               "whole segments"
                             : "contains a wildcard; an address names one topic"));
    }
  }
  return Status::ok();
}

}  // namespace

Status validateAddress(std::string_view address) {
  return checkSegments(address, "address", false);
}

Status validatePattern(std::string_view pattern) { return checkSegments(pattern, "pattern", true); }

bool hasWildcard(std::string_view pattern) {
  for (std::string_view segment : splitTopic(pattern)) {
    if (segment == kStar || segment == kHash) return true;
  }
  return false;
}

std::vector<std::string_view> splitTopic(std::string_view topic) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (true) {
    const size_t dot = topic.find('.', start);
    if (dot == std::string_view::npos) {
      segments.push_back(topic.substr(start));
      return segments;
    }
    segments.push_back(topic.substr(start, dot - start));
    start = dot + 1;
  }
}

std::vector<std::string_view> normalizedPattern(std::string_view pattern) {
  std::vector<std::string_view> segments;
  for (std::string_view segment : splitTopic(pattern)) {
    if (segment == kHash && !segments.empty() && segments.back() == kHash) continue;
    segments.push_back(segment);
  }
  return segments;
}

bool topicMatches(std::string_view pattern, std::string_view address) {
  const std::vector<std::string_view> p = splitTopic(pattern);
  const std::vector<std::string_view> a = splitTopic(address);
  // row[j]: the first i pattern segments match the first j address segments.
  std::vector<char> row(a.size() + 1, 0), next(a.size() + 1, 0);
  row[0] = 1;
  for (std::string_view segment : p) {
    if (segment == kHash) {
      // '#' extends any prefix match by zero or more segments.
      next[0] = row[0];
      for (size_t j = 1; j <= a.size(); ++j) next[j] = row[j] || next[j - 1];
    } else {
      next[0] = 0;
      for (size_t j = 1; j <= a.size(); ++j) {
        next[j] = row[j - 1] && (segment == kStar || segment == a[j - 1]);
      }
    }
    row.swap(next);
  }
  return row[a.size()] != 0;
}

}  // namespace cepbus::router
