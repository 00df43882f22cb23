#pragma once

// StreamSequencer: puts a partition's stream back into the order its
// publisher sent it.
//
// A stream stores messages in the order its broker takes them, which is not
// always the order they were sent. RabbitMQ 3.10 was seen, while a stream's
// leader changed, to refuse one message ("nodedown") and store the ones sent
// after it; the publisher's read-back sends the refused one again, so the
// stream holds it after its successors, possibly after the partition's
// end-of-stream marker. Read in stream order, that message would be late
// and its composites lost.
//
// So `cepbus cluster publish` numbers the messages of each partition within
// a publish run (Tag: the run's nonce, the message's place among its
// partition's messages, from 0), and a node offers every stream message to
// its partition's sequencer before processing it. A message of a run comes
// out once all messages of that run before it did; one that arrives ahead
// of a gap is held until the gap fills. A gap is given up (the held
// messages go on, counted in gaps()) when its oldest held message has waited
// `max_wait`, or when more than `max_held` messages are held: a publisher
// that died before resending must not stall the partition for good.
//
// The first message seen of a run starts it: a node that takes a partition
// over mid-stream starts where its replay starts. Messages of an earlier
// place than expected (copies, or what a predecessor already passed) come
// out at once; the node drops copies by event id. Messages without a tag
// (other publishers) are never held.
//
// Messages are known by their stream offsets; the caller keeps the held
// messages themselves.
//
// Thread-safety: none; one per active partition, on the node's container
// thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

namespace cepbus::services::cluster {

// The application property that carries a stream message's place among its
// partition's messages of one publish run (a ulong, from 0). The run is the
// nonce in the message-id, "cepbus:<run>:<message>" (stream_read_back.h).
inline constexpr char kSequenceProperty[] = "cepbus.seq";

class StreamSequencer {
 public:
  using Time = std::chrono::steady_clock::time_point;

  struct Tag {
    uint64_t run;
    uint64_t seq;
  };

  // The tag of a stream message, from its message-id and kSequenceProperty
  // (absent: nullopt). Nullopt when the id is not a publisher's run id.
  static std::optional<Tag> tagOf(std::string_view message_id, std::optional<uint64_t> seq);

  StreamSequencer(size_t max_held, std::chrono::milliseconds max_wait);

  // What becomes of an offered message: `held` (the caller keeps it until
  // its offset is released), and the offsets of held messages that come out
  // now, in order (after the offered one when it is not held).
  struct Offer {
    bool held = false;
    std::vector<uint64_t> then;
  };
  Offer offer(uint64_t offset, std::optional<Tag> tag, Time now);

  // Held messages whose gap was given up at `now`, in order (each run's
  // in its order). Also forgets runs that ended long ago.
  std::vector<uint64_t> expire(Time now);

  // Messages of a run that never came before the sequencer gave up on them.
  uint64_t gaps() const { return gaps_; }
  size_t held() const { return held_count_; }

 private:
  struct Held {
    std::vector<uint64_t> offsets;  // of the message and of its copies
    Time since;
  };
  struct Run {
    uint64_t next = 0;              // the place expected next
    std::map<uint64_t, Held> held;  // by place
    Time last;                      // its last message came then
  };
  // A run with nothing held is forgotten after this many max_waits of quiet.
  static constexpr int kForgetAfter = 10;

  // Releases the run's held messages from `next` on while they follow on.
  void drain(Run& run, std::vector<uint64_t>& out);
  // Gives up the gap before the run's first held message.
  void skipGap(Run& run, std::vector<uint64_t>& out);

  const size_t max_held_;
  const std::chrono::milliseconds max_wait_;
  std::map<uint64_t, Run> runs_;  // by nonce
  size_t held_count_ = 0;
  uint64_t gaps_ = 0;
};

}  // namespace cepbus::services::cluster
