#include "bus/app/event_replay.h"

#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <utility>

namespace cepbus::app {

EventReplay::EventReplay(const std::string& path, BadLines bad)
    : path_(path), bad_(std::move(bad)), in_(path == "-" ? &std::cin : &file_), reader_(*in_) {
  if (path != "-") file_.open(path);
}

Result<std::unique_ptr<EventReplay>> EventReplay::open(const std::string& path, BadLines bad) {
  std::unique_ptr<EventReplay> replay(new EventReplay(path, std::move(bad)));
  if (path != "-" && !replay->file_) {
    return Status::notFound("cannot open events file '" + path + "'");
  }
  return replay;
}

Status EventReplay::read(std::vector<EventPtr>& batch, size_t max) {
  batch.clear();
  while (batch.size() < max) {
    auto event = reader_.next();
    if (!event && event.status().code() == Status::Code::kNotFound) {
      if (!ended_ && skipped_ > 0 && bad_.report != nullptr) {
        *bad_.report << bad_.command << ": " << path_ << ": " << skipped_ << " bad line"
                     << (skipped_ == 1 ? "" : "s") << " skipped\n";
      }
      ended_ = true;
      return Status::ok();
    }
    if (!event && bad_.strict) return event.status();
    if (!event) {
      ++skipped_;
      if (bad_.report != nullptr) {
        *bad_.report << bad_.command << ": " << path_ << ": " << event.status().message()
                     << " (skipped)\n";
      }
      continue;
    }
    if (batch.empty()) first_line_ = reader_.lineNumber();
    last_line_ = reader_.lineNumber();
    batch.push_back(std::move(event).value());
  }
  return Status::ok();
}

std::string EventReplay::where() const {
  if (first_line_ == last_line_) return "line " + std::to_string(first_line_);
  return "lines " + std::to_string(first_line_) + "-" + std::to_string(last_line_);
}

std::string lateLine(const std::string& command, const std::string& path, uint64_t late) {
  return command + ": " + path + ": " + std::to_string(late) + " late event" +
         (late == 1 ? "" : "s") +
         " (more than the maximum delay behind the newest ts; not matched)";
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

}  // namespace cepbus::app
