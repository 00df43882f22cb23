#pragma once

// Counts calls to the global operator new, for benchmarks that claim a path
// allocates nothing. Linking alloc_counter.cc replaces operator new/delete
// for the whole program (kept in its own file so that the compiler does not
// inline the replacements into callers).

#include <cstdint>

namespace cepbus::bench {

// operator new calls since the program started; thread-safe.
uint64_t allocationCount();
// The bytes those calls asked for; thread-safe.
uint64_t allocatedBytes();

}  // namespace cepbus::bench
