#pragma once

// StreamReadBack: which of a publisher's messages the partition streams
// really hold.
//
// With stream input an acceptance is not proof of storage: RabbitMQ 3.10
// was seen to accept messages to a stream and lose them when the node that
// led the stream died (docs/cluster.md, "Stream input"). So the publisher
// reads back what it sent. Every message carries an id made of the publish
// run's nonce and its place in the publish plan (messageId()); after a
// failed connection, and before the publish ends, the publisher reads each
// partition's stream from just before the first message it has not seen
// there yet (a timestamp offset spec) and sends again, in order, what it
// does not find. Reading stops for a partition as soon as every message it
// looks for has been seen, or once the stream has delivered nothing for a
// while (its end). A message read back has been committed by the stream,
// that is replicated to a majority of its members: it survives one broker.
//
// Thread-safety: none; used on the publisher's container thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cepbus::services::cluster {

class StreamReadBack {
 public:
  using WallTime = std::chrono::system_clock::time_point;

  // `run`: this publish's nonce, which tells its messages from those of
  // earlier publishes (and of other publishers) in the same streams.
  explicit StreamReadBack(uint64_t run);

  // The AMQP message-id of plan message `message`: "cepbus:<run>:<message>".
  std::string messageId(size_t message) const;

  // The run of a message-id made by messageId(), of any publish run.
  static std::optional<uint64_t> runOf(std::string_view message_id);

  // Plan message `message` of `partition` went to the broker at `at`. It
  // counts as unconfirmed until a read-back sees it; a message sent again
  // keeps its first time (any stored copy will do).
  void sent(size_t message, uint32_t partition, WallTime at);

  // The broker accepted it: missing later, it was lost by the broker.
  void accepted(size_t message);

  // Messages sent and not yet seen in their stream.
  bool pending() const { return !unconfirmed_.empty(); }

  // Where to read a partition's stream from: `skew` before the first
  // unconfirmed message of it went out (RabbitMQ finds the start by the
  // chunks' timestamps, in whole seconds, on the broker's clock).
  struct Read {
    uint32_t partition;
    WallTime from;
  };
  // Starts a round (dropping what an unfinished one had seen): the
  // partitions to read, in order.
  std::vector<Read> beginRound(std::chrono::milliseconds skew);

  // A message of `partition`'s stream read during the round, by its
  // message-id (other publishes' messages are ignored). True once every
  // unconfirmed message of the partition has been seen: its reading can
  // stop.
  bool read(uint32_t partition, std::string_view message_id);

  // The partitions of the round whose stream delivered no message at all
  // although the broker had accepted one looked for there. RabbitMQ 3.10
  // was seen, after a broker node died, to serve a stream through one
  // broker without ever delivering from it (stream_reader_watch.h): such a
  // round says nothing about what the stream holds.
  std::vector<uint32_t> silent() const;

  // Ends the round. The messages seen are confirmed; those not seen are
  // returned in plan order and are no longer pending (sent() again when
  // they are resent).
  struct Missing {
    size_t message;
    bool accepted;  // by the broker: it lost what it had confirmed
  };
  struct Outcome {
    std::vector<Missing> missing;
    size_t confirmed = 0;
  };
  Outcome endRound();

  // Ends a round that cannot be trusted (silent()): the messages seen are
  // confirmed (returned: how many), the others stay pending for the next.
  size_t abandonRound();

 private:
  struct Unconfirmed {
    uint32_t partition;
    WallTime sent;
    bool accepted = false;
    bool seen = false;
  };

  std::optional<size_t> parse(std::string_view message_id) const;

  const std::string prefix_;                   // "cepbus:<run>:"
  std::map<size_t, Unconfirmed> unconfirmed_;  // by plan message, i.e. in send order
  std::map<uint32_t, size_t> unseen_;          // per partition, during a round
  std::map<uint32_t, bool> delivered_;         // per partition: anything at all, this round
};

}  // namespace cepbus::services::cluster
