#include "services/cluster/stream_checkpoint.h"

#include <nlohmann/json.hpp>

namespace cepbus::services::cluster {

std::string leaseTokenBody(uint64_t offset) {
  return "{\"offset\":" + std::to_string(offset) + "}";
}

std::optional<uint64_t> leaseTokenOffset(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find("offset");
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

uint64_t StreamCheckpoint::read(uint64_t offset) {
  const uint64_t skipped = first_read_ && offset > next_ ? offset - next_ : 0;
  first_read_ = false;
  held_.insert(offset);
  if (offset >= next_) next_ = offset + 1;
  return skipped;
}

std::optional<uint64_t> StreamCheckpoint::due() const {
  if (sending_) return std::nullopt;
  const uint64_t at = resumeFrom();
  if (at <= token_) return std::nullopt;
  return at;
}

void StreamCheckpoint::sent(bool accepted) {
  if (accepted && sending_ && *sending_ > token_) token_ = *sending_;
  sending_.reset();
}

}  // namespace cepbus::services::cluster
