#include "services/cluster/stream_read_back.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace cepbus::services::cluster {
namespace {

// A message-id: kScheme, the run in kRunDigits hex digits, ':', the message.
constexpr std::string_view kScheme = "cepbus:";
constexpr size_t kRunDigits = 16;

std::string runPrefix(uint64_t run) {
  char hex[kRunDigits + 1];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(run));
  return std::string(kScheme) + hex + ":";
}

}  // namespace

StreamReadBack::StreamReadBack(uint64_t run) : prefix_(runPrefix(run)) {}

std::string StreamReadBack::messageId(size_t message) const {
  return prefix_ + std::to_string(message);
}

void StreamReadBack::sent(size_t message, uint32_t partition, WallTime at) {
  unconfirmed_.try_emplace(message, Unconfirmed{partition, at});
}

void StreamReadBack::accepted(size_t message) {
  if (auto it = unconfirmed_.find(message); it != unconfirmed_.end()) it->second.accepted = true;
}

std::vector<StreamReadBack::Read> StreamReadBack::beginRound(std::chrono::milliseconds skew) {
  unseen_.clear();
  delivered_.clear();
  std::map<uint32_t, WallTime> from;
  for (auto& [message, u] : unconfirmed_) {
    u.seen = false;
    ++unseen_[u.partition];
    auto [it, first] = from.try_emplace(u.partition, u.sent);
    if (!first && u.sent < it->second) it->second = u.sent;
  }
  std::vector<Read> reads;
  reads.reserve(from.size());
  for (const auto& [partition, at] : from) reads.push_back(Read{partition, at - skew});
  return reads;
}

bool StreamReadBack::read(uint32_t partition, std::string_view message_id) {
  delivered_[partition] = true;
  auto left = unseen_.find(partition);
  if (left == unseen_.end()) return true;
  if (const std::optional<size_t> message = parse(message_id)) {
    auto it = unconfirmed_.find(*message);
    if (it != unconfirmed_.end() && it->second.partition == partition && !it->second.seen) {
      it->second.seen = true;
      --left->second;
    }
  }
  return left->second == 0;
}

std::vector<uint32_t> StreamReadBack::silent() const {
  std::vector<uint32_t> out;
  for (const auto& [message, u] : unconfirmed_) {
    if (u.accepted && !delivered_.contains(u.partition)) out.push_back(u.partition);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t StreamReadBack::abandonRound() {
  const size_t confirmed =
      std::erase_if(unconfirmed_, [](const auto& entry) { return entry.second.seen; });
  unseen_.clear();
  delivered_.clear();
  return confirmed;
}

StreamReadBack::Outcome StreamReadBack::endRound() {
  Outcome out;
  for (const auto& [message, u] : unconfirmed_) {
    if (u.seen) {
      ++out.confirmed;
      continue;
    }
    out.missing.push_back(Missing{message, u.accepted});
  }
  unconfirmed_.clear();
  unseen_.clear();
  delivered_.clear();
  return out;
}

std::optional<uint64_t> StreamReadBack::runOf(std::string_view message_id) {
  if (!message_id.starts_with(kScheme) || message_id.size() <= kScheme.size() + kRunDigits ||
      message_id[kScheme.size() + kRunDigits] != ':') {
    return std::nullopt;
  }
  const char* first = message_id.data() + kScheme.size();
  uint64_t run = 0;
  auto [end, ec] = std::from_chars(first, first + kRunDigits, run, 16);
  if (ec != std::errc() || end != first + kRunDigits) return std::nullopt;
  return run;
}

std::optional<size_t> StreamReadBack::parse(std::string_view message_id) const {
  if (!message_id.starts_with(prefix_)) return std::nullopt;
  const std::string_view digits = message_id.substr(prefix_.size());
  size_t message = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), message);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return message;
}

}  // namespace cepbus::services::cluster
