#pragma once

// Where a partition's stream resumes after a takeover, and when to say so.
//
// With input="stream" (ClusterSpec::Input) a partition's events
// live in the stream "<name>.p<i>.log", which keeps them whether or not they
// were settled, so the window a query may hold is bounded by the stream's
// retention, not by how many messages a consumer may keep unsettled. What
// the broker must still be told is how far back a successor has to read to
// rebuild every window and partial match: the offset of the oldest message
// the partition's ledger still holds (partition_ledger.h), or, when it holds
// none, the offset after the last one read.
//
// That offset travels in the partition's lease: the quorum queue
// "<name>.p<i>" with single active consumer holds one token, which its
// active consumer keeps unsettled. Owning the partition is holding the
// token; a node that dies or ends the partition's session gives the token
// back, and the broker hands it, with the offset it carries, to the next
// consumer in line. To move the offset forward the owner publishes a new
// token to the lease queue and, once the broker accepted it, settles the
// tokens it held; the new one comes back to it (it is the active
// consumer). A node that dies between the two leaves two tokens: the next
// owner resumes from either (both are valid, the older reads more) and
// settles the extra one with its next checkpoint. A token never moves
// backwards and is never settled before its successor is accepted, so a
// lease queue is never empty once `cepbus cluster init` put a token in it.
//
// Thread-safety: none; one per active partition, on the node's container
// thread.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace cepbus::services::cluster {

// What a lease token says: where a successor resumes, and how far its
// writer had read when it wrote it (what a successor reads again below that
// is a replay; messages read within the last heartbeat are not counted).
struct LeaseMark {
  uint64_t resume_from = 0;
  uint64_t read_to = 0;
};

// The body of a lease token: {"offset":N,"read":M}.
std::string leaseTokenBody(const LeaseMark& mark);
// The mark of a token body ("read" may be absent: the first token's); nullopt
// when it is not a token.
std::optional<LeaseMark> parseLeaseToken(std::string_view body);

class StreamCheckpoint {
 public:
  // `resume_from`: the offset of the token this node took the partition with.
  explicit StreamCheckpoint(uint64_t resume_from) : next_(resume_from), token_(resume_from) {}

  // The message at `offset` was read and is held until done(offset).
  // Returns how many offsets before it were never read: more than zero only
  // for the first message when the stream's retention dropped part of what
  // the token said to replay.
  uint64_t read(uint64_t offset);
  // The message at `offset` needs nothing any more.
  void done(uint64_t offset) { held_.erase(offset); }

  // Where a successor would have to resume now.
  uint64_t resumeFrom() const { return held_.empty() ? next_ : *held_.begin(); }
  // One past the highest offset read.
  uint64_t readTo() const { return next_; }
  // The offset the lease carries (the last accepted token's).
  uint64_t token() const { return token_; }

  // The offset a new token should carry: resumeFrom() when it is past the
  // lease's offset and no token is on its way.
  std::optional<uint64_t> due() const;
  // A token carrying `offset` was sent.
  void sending(uint64_t offset) { sending_ = offset; }
  // The broker's answer to it: accepted, the lease carries it now; else
  // due() offers it again.
  void sent(bool accepted);

  size_t held() const { return held_.size(); }

 private:
  uint64_t next_;   // one past the highest offset read
  uint64_t token_;  // what the lease carries
  std::optional<uint64_t> sending_;
  bool first_read_ = true;
  std::set<uint64_t> held_;
};

}  // namespace cepbus::services::cluster
