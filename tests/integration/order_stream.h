#pragma once

// What the kill -9 tests share (crash_restart_test.cc, checkpoint_crash_test.cc):
// the stream of orders they publish, the query pairing them, the AMQP
// clients they connect and the seed of their random schedule.

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "tests/testing/amqp_test_client.h"

namespace cepbus::testing {

// The seed of a test's random moments: CEPBUS_CRASH_SEED when set, else a
// fresh one; printed, so that a run can be repeated.
inline uint32_t crashSeed(const std::string& test) {
  const char* fixed = std::getenv("CEPBUS_CRASH_SEED");
  const uint32_t seed = fixed != nullptr ? static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10))
                                         : std::random_device()();
  std::cout << test << " seed: " << seed << " (CEPBUS_CRASH_SEED=" << seed << " repeats this run)"
            << std::endl;
  return seed;
}

// Message `n`: an Open (even n) or a Close (odd n) of pair n/2, so that the
// CEP query holds a partial match between the two; its id and ts are n.
inline proton::message order(uint64_t n) {
  proton::message m;
  m.subject(n % 2 == 0 ? "Open" : "Close");
  m.id(proton::message_id(n));
  m.properties().put("ts", static_cast<int64_t>(n));
  m.properties().put("pair", static_cast<int64_t>(n / 2));
  return m;
}

inline std::vector<proton::message> orders(uint64_t first, uint64_t count) {
  std::vector<proton::message> out;
  for (uint64_t n = first; n < first + count; ++n) out.push_back(order(n));
  return out;
}

// Pairs each Open with its Close: Pair(p) at the Close's ts, 2p + 1.
inline constexpr char kPairsQuery[] =
    "PATTERN SEQ(Open a, Close b) WHERE a.pair = b.pair WITHIN 1000 "
    "STRATEGY skip_till_next_match RETURN Pair(a.pair)";

inline AmqpClientOptions client(int port, const std::string& container_id = "") {
  AmqpClientOptions o;
  o.port = port;
  o.container_id = container_id;
  return o;
}

}  // namespace cepbus::testing
