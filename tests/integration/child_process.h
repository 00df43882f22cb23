#pragma once

// ChildProcess: runs a program for an end-to-end test, with its stdout and
// stderr captured in files, and lets the test signal and reap it.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cepbus::testing {

class ChildProcess {
 public:
  // Runs `argv` in `dir`, its standard input read from `input`.
  ChildProcess(std::vector<std::string> argv, const std::filesystem::path& dir,
               const std::filesystem::path& input = "/dev/null")
      : out_(dir / "stdout.txt"), err_(dir / "stderr.txt") {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, input.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
    // Nothing else the test holds (its clients' sockets) goes to the child:
    // a bus would start with descriptors of earlier scenarios.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      wait(std::chrono::seconds(10));
    }
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // No effect when the program did not start: kill(-1) would signal every
  // process the user owns.
  void signal(int sig) {
    if (started() && !exited_) ::kill(pid_, sig);
  }

  // The exit code (128 + signal when killed), or -1 if it is still running
  // after `timeout` or never started.
  int wait(std::chrono::milliseconds timeout) {
    if (!started()) return code_;  // waitpid(-1) would reap someone else's child
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exited_) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return code_;
  }

  std::string out() const { return slurp(out_); }
  std::string err() const { return slurp(err_); }

 private:
  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::filesystem::path out_, err_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

// Runs to completion (or `timeout`) and returns the exit code.
inline int runToEnd(ChildProcess& p, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  return p.wait(timeout);
}

}  // namespace cepbus::testing
