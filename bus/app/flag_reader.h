#pragma once

// FlagReader: a command's named arguments one at a time, in both spellings,
// `--flag value` and `--flag=value` (the commands that take them: match,
// join). What each flag means, and whether it may repeat, is the command's.
//
//   FlagReader flags(args);
//   while (flags.next()) {
//     if (flags.flag() == "--events") {
//       Result<std::string> file = flags.value();  // "--events needs a value"
//       ...
//
// Thread-safety: none. Ownership: views `args`, which must outlive it.

#include <span>
#include <string>

#include "bus/core/status.h"

namespace cepbus::app {

class FlagReader {
 public:
  explicit FlagReader(std::span<const std::string> args) : args_(args) {}

  // Moves to the next argument; false when there is none.
  bool next() {
    if (next_ >= args_.size()) return false;
    current_ = next_++;
    flag_ = args_[current_];
    inline_value_.clear();
    has_inline_value_ = false;
    if (const size_t eq = flag_.find('='); flag_.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value_ = flag_.substr(eq + 1);
      flag_.resize(eq);
      has_inline_value_ = true;
    }
    return true;
  }

  // The current flag without its "=value"; the argument as written, for
  // "unknown argument" errors.
  const std::string& flag() const { return flag_; }
  const std::string& argument() const { return args_[current_]; }
  // True for `--flag=value`: a switch (a flag without a value) is then misspelled.
  bool hasInlineValue() const { return has_inline_value_; }

  // The current flag's value: what follows '=', else the next argument
  // (consumed). "FLAG needs a value" when there is neither.
  Result<std::string> value() {
    if (has_inline_value_) return inline_value_;
    if (next_ >= args_.size()) return Status::invalidArgument(flag_ + " needs a value");
    return args_[next_++];
  }

 private:
  std::span<const std::string> args_;
  size_t next_ = 0;     // the argument next() reads
  size_t current_ = 0;  // the one it read last
  std::string flag_;
  std::string inline_value_;
  bool has_inline_value_ = false;
};

}  // namespace cepbus::app
