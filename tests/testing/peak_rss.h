#pragma once

// peakRssKb: this process's peak resident set (VmHWM of /proc/self/status),
// in kB, for the hostile-client tests to report; 0 when unknown.

#include <cstdint>
#include <fstream>
#include <string>

namespace cepbus::testing {

inline uint64_t peakRssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6));
  }
  return 0;
}

}  // namespace cepbus::testing
