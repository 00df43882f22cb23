#pragma once

// DepartedNames: the names of the targets that left a flow for good lately
// (subscribers that ended their subscription), so that a delivery to one
// that comes back from a retry after it left is dropped instead of being
// kept for a return that will not come.
//
// Bounded: it remembers the newest `capacity` departures. A retry comes back
// within the flow's retry delays, so only a delivery that is still out after
// `capacity` later departures is missed; it is kept as for a target that is
// away, as every delivery was before.
//
// It keeps the names as text, not as symbols: a client's name is given back
// once its target and deliveries are gone (wire_names.h), and the memory of
// its departure must neither hold it nor be fooled by its id's reuse.
//
// Thread-safety: none (ReliableFlow guards it with its mutex).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace cepbus::flows {

class DepartedNames {
 public:
  explicit DepartedNames(size_t capacity) : capacity_(capacity) {}

  // `name` left for good; the oldest departure is forgotten beyond capacity.
  void add(std::string_view name);
  // `name` is attached again: it is no longer departed.
  void remove(std::string_view name) { generations_.erase(std::string(name)); }
  bool contains(std::string_view name) const { return generations_.contains(std::string(name)); }
  size_t size() const { return generations_.size(); }

 private:
  const size_t capacity_;
  // Each departed name's latest departure, told apart from an earlier one of
  // the same name (removed and added again) by its generation.
  std::unordered_map<std::string, uint64_t> generations_;
  std::deque<std::pair<std::string, uint64_t>> order_;  // oldest first; some removed since
  uint64_t next_generation_ = 0;
};

}  // namespace cepbus::flows
