#include "bus/app/engine_comparison.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <tuple>
#include <utility>

namespace cepbus::app {

bool streamOrder(const RecordedMatch& a, const RecordedMatch& b) {
  const Timestamp a_end = a.ts.empty() ? 0 : a.ts.back();
  const Timestamp b_end = b.ts.empty() ? 0 : b.ts.back();
  return std::tie(a_end, a.ts, a.pattern) < std::tie(b_end, b.ts, b.pattern);
}

void MatchRecorder::onMatch(size_t pattern, const plugin::Match& match) {
  RecordedMatch m;
  m.pattern = pattern;
  m.ts.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) m.ts.push_back(match.ts(i));
  matches_.push_back(std::move(m));
}

std::vector<RecordedMatch> MatchRecorder::takeSorted() {
  std::sort(matches_.begin(), matches_.end(), streamOrder);
  return std::exchange(matches_, {});
}

std::optional<MatchDifference> firstDifference(const std::vector<RecordedMatch>& reference,
                                               const std::vector<RecordedMatch>& other) {
  size_t r = 0;
  size_t o = 0;
  while (r < reference.size() || o < other.size()) {
    // The smaller of the two heads, and how often each side has it.
    const RecordedMatch& head = o == other.size()                     ? reference[r]
                                : r == reference.size()               ? other[o]
                                : streamOrder(other[o], reference[r]) ? other[o]
                                                                      : reference[r];
    const RecordedMatch current = head;
    size_t in_reference = 0;
    size_t in_other = 0;
    for (; r < reference.size() && reference[r] == current; ++r) ++in_reference;
    for (; o < other.size() && other[o] == current; ++o) ++in_other;
    if (in_reference != in_other) return MatchDifference{current, in_reference, in_other};
  }
  return std::nullopt;
}

namespace {

// The progress counter runInChild() shares with its child: one anonymous
// shared mapping, which both processes see after the fork.
class SharedCounter {
 public:
  SharedCounter() {
    void* p = ::mmap(nullptr, sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) counter_ = new (p) std::atomic<uint64_t>(0);
  }
  ~SharedCounter() {
    if (counter_ != nullptr) ::munmap(counter_, sizeof(std::atomic<uint64_t>));
  }
  SharedCounter(const SharedCounter&) = delete;
  SharedCounter& operator=(const SharedCounter&) = delete;

  std::atomic<uint64_t>* get() const { return counter_; }

 private:
  std::atomic<uint64_t>* counter_ = nullptr;
};

std::string errnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The child's side: runs the work, writes its text to `fd`, never returns.
[[noreturn]] void childMain(const std::function<std::string(std::atomic<uint64_t>&)>& work,
                            std::atomic<uint64_t>& progress, int fd) {
  std::string text;
  try {
    text = work(progress);
  } catch (...) {
    ::_exit(3);
  }
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(2);
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::_exit(0);
}

// Milliseconds until `deadline`, rounded up so a wait does not end early.
int millisecondsUntil(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::duration<double, std::milli>(deadline - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::ceil(left.count()));
}

}  // namespace

Result<ChildOutcome> runInChild(const std::function<std::string(std::atomic<uint64_t>&)>& work,
                                double timeout_seconds) {
  SharedCounter counter;
  if (counter.get() == nullptr) return Status::internal(errnoText("cannot map a shared counter"));
  int fds[2];
  if (::pipe(fds) != 0) return Status::internal(errnoText("cannot make a pipe"));
  // What is buffered now would otherwise be written by both processes.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const Status failed = Status::internal(errnoText("cannot fork"));
    ::close(fds[0]);
    ::close(fds[1]);
    return failed;
  }
  if (pid == 0) {
    ::close(fds[0]);
    childMain(work, *counter.get(), fds[1]);
  }
  ::close(fds[1]);

  ChildOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  Status failed;
  char buffer[1 << 16];
  // The pipe is drained while waiting: a child whose result outgrows the
  // pipe's buffer would otherwise block on it and look timed out.
  while (true) {
    const int wait_ms = timeout_seconds > 0 ? millisecondsUntil(deadline) : -1;
    if (wait_ms == 0) {
      outcome.timed_out = true;
      break;
    }
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = ::poll(&readable, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      failed = Status::internal(errnoText("cannot wait for the run"));
      break;
    }
    if (ready == 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failed = Status::internal(errnoText("cannot read the run's result"));
      break;
    }
    if (n == 0) break;
    outcome.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (outcome.timed_out || !failed) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  outcome.progress = counter.get()->load(std::memory_order_acquire);
  if (!failed) return failed;
  if (outcome.timed_out) {
    outcome.output.clear();
    return outcome;
  }
  if (WIFSIGNALED(status)) {
    return Status::internal("the run died of signal " + std::to_string(WTERMSIG(status)) + " (" +
                            strsignal(WTERMSIG(status)) + ")");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::internal("the run ended with exit status " +
                            std::to_string(WEXITSTATUS(status)) + " before returning its result");
  }
  return outcome;
}

}  // namespace cepbus::app
