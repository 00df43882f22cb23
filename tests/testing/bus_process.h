#pragma once

// BusProcess: one real `cepbus run` for an end-to-end test, in a temporary
// folder of its own that holds its descriptor, its captured stdout/stderr and
// whatever files the test puts next to them (journals, certificates,
// scripts).
//
// A suite makes one (per suite or per test), writes any files it needs into
// dir(), then start()s the bus with a descriptor and the ports to wait for.
// stop() sends SIGTERM and checks a clean exit, kill() sends SIGKILL (a
// crash); start() after either runs the bus again in the same folder (a
// restart, or a new descriptor). The
// destructor stops a bus still running (a test that failed half-way, or one
// that does not judge the exit) without checking how it exits, killing it if
// SIGTERM is not enough, and removes the folder.
//
// Thread-safety: none; one test thread drives it. Ownership: owns the folder
// and the child process.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus::testing {

class BusProcess {
 public:
  // `binary` is the `cepbus` to run (the tests' CEPBUS_BINARY); the folder is
  // `<name>-<random>` under the system's temporary directory, so that runs of
  // the same suite at once do not share files.
  BusProcess(std::string binary, const std::string& name) : binary_(std::move(binary)) {
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
  }
  ~BusProcess() {
    if (running()) {
      process_->signal(SIGTERM);
      process_->wait(std::chrono::seconds(60));
    }
    process_.reset();  // SIGKILL if it is still there
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  BusProcess(const BusProcess&) = delete;
  BusProcess& operator=(const BusProcess&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  // Writes `descriptor` to dir()/bus.xml and runs `cepbus run bus.xml` in
  // dir(); succeeds once the process started and something accepts
  // connections on each of `ports` (the bus's listeners). `options` follow
  // "bus.xml" on the command line (say, "--wire-name-budget", "100"). A
  // failure carries the bus's stderr.
  ::testing::AssertionResult start(const std::string& descriptor,
                                   std::initializer_list<int> ports = {},
                                   const std::vector<std::string>& options = {}) {
    if (running()) return ::testing::AssertionFailure() << "the bus is already running";
    std::ofstream(dir_ / "bus.xml") << descriptor;
    std::vector<std::string> command{binary_, "run", "bus.xml"};
    command.insert(command.end(), options.begin(), options.end());
    process_ = std::make_unique<ChildProcess>(std::move(command), dir_);
    if (!process_->started()) {
      process_.reset();  // nothing to stop; a ChildProcess without a pid must not be waited for
      return ::testing::AssertionFailure() << "cannot run " << binary_;
    }
    for (int port : ports) {
      // Generous (a loaded CI box starts the bus slowly); a bus that exits at
      // once (say, a bad descriptor) ends the wait early.
      bool exited = false;
      const bool listening = waitUntil(
          [&] {
            if (canConnect(port)) return true;
            exited = !running();
            return exited;
          },
          std::chrono::seconds(20), std::chrono::milliseconds(10));
      if (exited) {
        return ::testing::AssertionFailure()
               << "the bus exited before listening on port " << port << "; stderr:\n"
               << err();
      }
      if (!listening) {
        return ::testing::AssertionFailure() << "nothing listens on port " << port << "; stderr:\n"
                                             << err();
      }
    }
    return ::testing::AssertionSuccess();
  }

  // The port of the bus's admin listener (<http port="0"/> picks one), read
  // from the line the bus logs when it listens; 0 when the bus exits or
  // `limit` passes without that line.
  int adminPort(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    static const std::regex kListening("admin listening on http://127\\.0\\.0\\.1:([0-9]+)/");
    int port = 0;
    waitUntil(
        [&] {
          std::smatch m;
          const std::string log = err();
          if (std::regex_search(log, m, kListening)) port = std::stoi(m[1].str());
          return port != 0 || !running();
        },
        limit, std::chrono::milliseconds(10));
    return port;
  }

  // The bus's peak resident set so far (VmHWM of /proc/<pid>/status), in
  // kB; 0 when it is not running.
  uint64_t peakRssKb() {
    if (!running()) return 0;
    std::ifstream status("/proc/" + std::to_string(process_->pid()) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6));
    }
    return 0;
  }

  // The bus's process id; -1 when it is not running.
  pid_t pid() { return running() ? process_->pid() : -1; }

  // True from start() until the bus exits.
  bool running() { return process_ != nullptr && process_->wait(std::chrono::milliseconds(0)) < 0; }

  // SIGTERM, then succeeds when the bus exits with 0 within `limit`; a
  // failure carries the exit code and the bus's stderr. Succeeds at once when
  // the bus was never started; a bus that already exited is judged by its
  // exit code.
  ::testing::AssertionResult stop(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    if (process_ == nullptr) return ::testing::AssertionSuccess();
    if (running()) process_->signal(SIGTERM);
    const int code = process_->wait(limit);
    if (code == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << (code < 0 ? "still running after SIGTERM" : "exit code " + std::to_string(code))
           << "; stderr:\n"
           << err();
  }

  // SIGKILL, as a crash would: nothing is flushed or closed; returns once
  // the process is gone. start() afterwards runs the bus again on the same
  // files (its journal among them).
  void kill() {
    if (process_ == nullptr) return;
    process_->signal(SIGKILL);
    process_->wait(std::chrono::seconds(30));
  }

  // The bus's stderr (its log) since the last start(); "" before.
  std::string err() const { return process_ != nullptr ? process_->err() : std::string(); }

 private:
  std::string binary_;
  std::filesystem::path dir_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace cepbus::testing
