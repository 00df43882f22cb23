#pragma once

// CliRun: a program (the real `cepbus publish`, `cepbus subscribe`, a
// Python client) run for an end-to-end test in a folder of its own under
// `dir`, so that several run side by side without sharing their captured
// stdout and stderr.
//
//   CliRun publish(dir, "publish", {CEPBUS_BINARY, "publish", "ticks", ...});
//   ASSERT_EQ(publish.wait(), 0) << publish.err();
//
// Thread-safety: none; one test thread drives it. Ownership: owns the child
// (killed by the destructor if it still runs).

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"

namespace cepbus::testing {

class CliRun {
 public:
  // Starts `argv` in `dir`/`name`, standard input from `input`.
  CliRun(const std::filesystem::path& dir, const std::string& name, std::vector<std::string> argv,
         const std::filesystem::path& input = "/dev/null")
      : folder_((std::filesystem::create_directories(dir / name), dir / name)),
        child_(std::move(argv), folder_, input) {}
  CliRun(const CliRun&) = delete;
  CliRun& operator=(const CliRun&) = delete;

  bool started() const { return child_.started(); }
  // The exit code, or -1 when it still runs after `timeout`.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return child_.wait(timeout);
  }
  void signal(int sig) { child_.signal(sig); }
  std::string out() const { return child_.out(); }
  std::string err() const { return child_.err(); }
  // stdout's non-empty lines.
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(child_.out());
    for (std::string l; std::getline(in, l);) {
      if (!l.empty()) out.push_back(l);
    }
    return out;
  }

 private:
  std::filesystem::path folder_;
  ChildProcess child_;
};

}  // namespace cepbus::testing
