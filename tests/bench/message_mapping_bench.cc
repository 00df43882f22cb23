// message_mapping_bench: the AMQP <-> event mapping the AMQP thread pays for
// every message (services/protocols/amqp/message_mapping.h), on the benchmark's
// ~100-byte message (subject, "ts", "n", "sent_ns", a 24-character "pad").
//
//   encode_fresh   event -> new proton::message -> bytes (one message per event)
//   encode_reused  event -> the same proton::message, cleared -> bytes (what
//                  the listener and the bridge do)
//   decode         bytes -> proton::message (Proton alone, for scale)
//   decode_map     bytes -> proton::message -> event
//   size_received  a received proton::message -> bytes again, into a reused
//                  buffer (what the listener pays to check max-message-size
//                  for the first message of a burst; the others it sizes from
//                  the bytes Proton read for them)
//
// Prints one JSON object per measurement; ns_per_message is the mean over
// --messages (default 500000) after a warm-up pass.
//
// Usage: message_mapping_bench [--messages N]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <proton/message.hpp>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "services/protocols/amqp/message_mapping.h"

namespace {

using namespace cepbus;
using Clock = std::chrono::steady_clock;

double nsPerMessage(size_t n, const std::function<void()>& one) {
  for (size_t i = 0; i < n / 10; ++i) one();  // warm-up
  const auto start = Clock::now();
  for (size_t i = 0; i < n; ++i) one();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
         static_cast<double>(n);
}

void report(const char* method, size_t n, double ns) {
  std::printf(
      "{\"bench\":\"amqp_message_mapping\",\"params\":{\"method\":\"%s\",\"messages\":%zu},"
      "\"ns_per_message\":%.0f,\"events_per_s\":%.0f}\n",
      method, n, ns, 1e9 / ns);
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 500000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--messages") == 0) {
      n = std::strtoul(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--messages N]\n", argv[0]);
      return 2;
    }
  }
  const EventPtr event = EventBuilder("Tick")
                             .at(1'700'000'000'000)
                             .set("n", int64_t{123456})
                             .set("sent_ns", int64_t{1'700'000'000'123'456'789})
                             .set("pad", std::string(24, 'x'))
                             .build();
  std::vector<char> wire;
  proton::message reused;
  services::amqp::messageFromEvent(*event, reused);
  reused.encode(wire);
  const std::vector<char> encoded = wire;

  report("encode_fresh", n, nsPerMessage(n, [&] {
           proton::message m = services::amqp::messageFromEvent(*event);
           m.encode(wire);
         }));
  report("encode_reused", n, nsPerMessage(n, [&] {
           services::amqp::messageFromEvent(*event, reused);
           reused.encode(wire);
         }));
  proton::message in;
  report("decode", n, nsPerMessage(n, [&] { in.decode(encoded); }));
  size_t mapped = 0;
  report("decode_map", n, nsPerMessage(n, [&] {
           in.decode(encoded);
           if (services::amqp::eventFromMessage(in).event) ++mapped;
         }));
  in.decode(encoded);
  std::vector<char> sized;
  report("size_received", n, nsPerMessage(n, [&] { in.encode(sized); }));
  return mapped > 0 && sized.size() == encoded.size() ? 0 : 1;
}
