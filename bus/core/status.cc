#include "bus/core/status.h"

namespace cepbus {

const char* codeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "InvalidArgument";
    case Status::Code::kNotFound:
      return "NotFound";
    case Status::Code::kAlreadyExists:
      return "AlreadyExists";
    case Status::Code::kRejected:
      return "Rejected";
    case Status::Code::kUnavailable:
      return "Unavailable";
    case Status::Code::kTimeout:
      return "Timeout";
    case Status::Code::kIoError:
      return "IoError";
    case Status::Code::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::toString() const {
  if (isOk()) return "OK";
  return std::string(codeName(code_)) + ": " + message_;
}

}  // namespace cepbus
