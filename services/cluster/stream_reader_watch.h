#pragma once

// StreamReaderWatch: what to do about a partition's stream reader that has
// gone silent.
//
// A silent stream is usually an idle one. But RabbitMQ 3.10 was seen, after
// a broker node died, to leave a stream reader attached without ever
// delivering to it: first a reader that attached during the stream's leader
// election (a new link helps), then every reader through one surviving
// broker while the stream held events past them (a new link through the
// same broker does not). The watch tells the two apart by asking the
// stream itself: a probe link reading from "last" gets the stream's last
// chunk, whose offset says whether there is more to read.
//
// - Every `silence` without a message, the reader is reopened from the
//   first offset not read (kReopen).
// - From the second silence in a row, a probe is opened with it
//   (kReopenAndProbe). If the probe's offset is at or past what the reader
//   must read next and the reader still has not read past it a `grace`
//   later, or if the probe itself gets nothing for a whole silence while
//   the stream is known to hold events, this broker cannot serve the stream
//   (kSwitchBroker: the node reconnects through the next broker).
//
// An idle stream costs a link per silence and a one-message probe per
// silence from the second on.
//
// Thread-safety: none; one per active partition, on the node's container
// thread.

#include <chrono>
#include <cstdint>
#include <optional>

namespace cepbus::services::cluster {

class StreamReaderWatch {
 public:
  using Time = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  enum class Action { kNone, kReopen, kReopenAndProbe, kSwitchBroker };

  StreamReaderWatch(Duration silence, Duration grace, Time now)
      : silence_(silence), grace_(grace), quiet_since_(now) {}

  // The reader delivered a message.
  void read(Time now);

  // On every timer tick. `read_to`: one past the highest offset read (0
  // when the partition has read nothing, so the stream may be empty).
  Action tick(Time now, uint64_t read_to);

  // The probe delivered the first message of the stream's last chunk, at
  // `offset`; the probe link is done.
  void probed(uint64_t offset, Time now);

  bool probing() const { return probe_opened_.has_value(); }

 private:
  const Duration silence_;
  const Duration grace_;
  Time quiet_since_;       // the last read, or the last reopen
  uint32_t silences_ = 0;  // reopens since the last read
  std::optional<Time> probe_opened_;
  std::optional<uint64_t> tail_;  // what the probe found, to be read within grace_
  Time tail_at_;
};

}  // namespace cepbus::services::cluster
