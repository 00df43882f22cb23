#pragma once

// Detector snapshots as bytes, for the tests of engines and host stages that
// snapshot: a detector's state as the file a checkpoint would write, read
// back into another detector, and copies of it with one byte changed and the
// checksum made right again, so that a test reaches what restore() checks
// rather than the checksum.
//
//   auto bytes = snapshotBytes(*detector);
//   ASSERT_TRUE(restoreBytes(*fresh, *bytes));
//   EXPECT_GT(refusedCorruptions(*bytes, 0x01, [&](const std::string& bad) { ... }), 0u);
//
// Thread-safety: none; the functions touch only their arguments.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"

namespace cepbus::testing {

// The file a checkpoint of `d` alone would be, as engine `engine`.
inline Result<std::string> snapshotBytes(const plugin::Detector& d,
                                         const std::string& engine = "test") {
  plugin::SnapshotWriter out;
  if (Status s = d.snapshot(out); !s) return s;
  return out.finish({.engine = engine, .engine_version = d.snapshotVersion()});
}

// Reads `bytes` into `d`, which must read all of it.
inline Status restoreBytes(plugin::Detector& d, const std::string& bytes) {
  auto in = plugin::SnapshotReader::open(bytes);
  if (!in) return in.status();
  if (Status s = d.restore(*in); !s) return s;
  return in->atEnd() ? Status::ok() : Status::invalidArgument("state left unread");
}

// Calls `try_restore` with each copy of `bytes` that has one byte after the
// magic and the format version XORed with `mask` and a checksum that fits;
// `try_restore` says whether the copy was accepted. How many were refused.
inline size_t refusedCorruptions(const std::string& bytes, uint8_t mask,
                                 const std::function<bool(const std::string&)>& try_restore) {
  constexpr size_t kHeader = 12, kChecksum = 4;
  size_t refused = 0;
  for (size_t i = kHeader; i + kChecksum < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ mask);
    const size_t body = bad.size() - kChecksum;
    const uint32_t crc = plugin::crc32(
        std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(bad.data()), body));
    for (size_t k = 0; k < kChecksum; ++k) bad[body + k] = static_cast<char>(crc >> (8 * k));
    refused += try_restore(bad) ? 0 : 1;
  }
  return refused;
}

}  // namespace cepbus::testing
