#pragma once

// Status and Result<T>: errors as cheap values on the data plane.
//
// The data plane (router, stages, flows, detectors) never throws; it returns a
// Status, or a Result<T> carrying either a value or the Status that explains
// why there is none. Copying an OK Status costs one enum and an empty string.

#include <cassert>
#include <optional>
#include <string>
#include <utility>

#include "bus/core/api.h"

namespace cepbus {

class [[nodiscard]] CEPBUS_API Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,  // bad input: a malformed event, query, descriptor
    kNotFound,
    kAlreadyExists,
    kRejected,     // admission refused the work; the caller may retry later
    kUnavailable,  // the component is stopped or saturated
    kTimeout,
    kIoError,
    kInternal,
  };

  Status() = default;
  static Status ok() { return Status(); }
  static Status invalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status notFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status alreadyExists(std::string msg) { return {Code::kAlreadyExists, std::move(msg)}; }
  static Status rejected(std::string msg) { return {Code::kRejected, std::move(msg)}; }
  static Status unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status timeout(std::string msg) { return {Code::kTimeout, std::move(msg)}; }
  static Status ioError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool isOk() const { return code_ == Code::kOk; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: line 3: expected '}'"; "OK" for success.
  std::string toString() const;

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_; }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

CEPBUS_API const char* codeName(Status::Code code);

// Either a T or the Status explaining its absence. Never holds an OK status
// without a value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.isOk());
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(isOk());
    return *value_;
  }
  const T& value() const& {
    assert(isOk());
    return *value_;
  }
  T&& value() && {
    assert(isOk());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace cepbus
