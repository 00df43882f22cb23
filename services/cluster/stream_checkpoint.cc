#include "services/cluster/stream_checkpoint.h"

#include <nlohmann/json.hpp>

namespace cepbus::services::cluster {

std::string leaseTokenBody(const LeaseMark& mark) {
  return "{\"offset\":" + std::to_string(mark.resume_from) +
         ",\"read\":" + std::to_string(mark.read_to) + "}";
}

std::optional<LeaseMark> parseLeaseToken(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto offset = j.find("offset");
  if (offset == j.end() || !offset->is_number_unsigned()) return std::nullopt;
  LeaseMark mark{offset->get<uint64_t>(), offset->get<uint64_t>()};
  if (const auto read = j.find("read"); read != j.end()) {
    if (!read->is_number_unsigned() || read->get<uint64_t>() < mark.resume_from) {
      return std::nullopt;
    }
    mark.read_to = read->get<uint64_t>();
  }
  return mark;
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
