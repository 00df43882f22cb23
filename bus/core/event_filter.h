#pragma once

// EventFilter: a compiled boolean condition over one event's attributes, such
// as a subscription's content filter `price > 10 AND symbol = 'IBM'`.
//
// Filters are compiled once at set-up (see bus/core/pattern/) and shared
// read-only; matches() is const, allocation-free and safe from any thread.

#include <memory>
#include <string>

#include "bus/core/api.h"
#include "bus/core/event.h"

namespace cepbus {

class CEPBUS_API EventFilter {
 public:
  virtual ~EventFilter() = default;
  virtual bool matches(const Event& event) const = 0;
  // The filter as its author wrote it, for logs and the admin API.
  virtual const std::string& text() const = 0;
};

using EventFilterPtr = std::shared_ptr<const EventFilter>;

}  // namespace cepbus
