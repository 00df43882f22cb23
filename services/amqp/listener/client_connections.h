#pragma once

// ClientConnections: the AMQP listener's open client connections and their
// sessions (services/amqp/listener/amqp_listener.h) — who is behind each connection
// once SASL succeeded, the number AmqpAdmission counts it by, and the work
// queue through which other threads reach it. Links are not kept here.
//
// Thread-safety: not thread-safe; the listener guards it with its control
// lock, and touches a connection's record (and the Proton handles it holds)
// only from that connection's own events. A Waker alone may be used from
// any thread.
// Ownership: holds Proton handles (not owning), the admission shared with
// the listener's registry entry, and each connection's Waker, shared with
// the outboxes and callbacks that wake it.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <proton/connection.hpp>
#include <proton/session.hpp>
#include <proton/work_queue.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/status.h"
#include "services/amqp/listener/admission.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/work_coalescer.h"

namespace cepbus::services::amqp {

// A connection's work queue for other threads, usable until close(), which
// the container thread calls before the connection goes away: work added
// later is refused rather than queued on a freed connection. Work added
// while the connection has not run the last wake yet rides along with it
// (services/amqp/listener/work_coalescer.h): one post to its proton::work_queue per
// batch, not per event.
class Waker {
 public:
  explicit Waker(proton::work_queue* queue);
  // False when the work will not run (closed, or the queue refused it).
  // `hold`: the caller's, when it may put this wake off (flows/wake_hold.h).
  bool add(std::function<void()> fn, flows::WakeHold* hold = nullptr) {
    return work_.add(std::move(fn), hold);
  }
  void close();

 private:
  // Shared with the coalescer's posts: a held wake may be posted after the
  // Waker is gone, and then finds the queue closed.
  struct Target {
    Mutex mu;
    proton::work_queue* queue GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<Target> target_ = std::make_shared<Target>();
  WorkCoalescer work_;
};

// Who a client is after SASL: the user ("" for the anonymous client), from
// the mechanism the SASL plugin accepted (services/protocols/amqp/sasl_plugin.h, which
// refuses what AccessControl refuses). Anything else is refused with a
// description for amqp:unauthorized-access.
Result<std::string> authenticatedUser(const std::string& mechanism, const std::string& user,
                                      bool allow_anonymous);

struct ClientConnection {
  uint64_t id = 0;           // the listener's number for it (AmqpAdmission's key)
  std::string user;          // empty for the anonymous client
  std::string container_id;  // the client's
  std::shared_ptr<Waker> waker;
  // What new names it creates are charged to (AmqpAdmission::names()).
  std::shared_ptr<WireNameQuota> names;
  // What its user's connections hold unsettled together (null: anonymous).
  std::shared_ptr<UserUnsettledBudget> user_unsettled;
  // Whose durable subscriptions it opens count against max-durable.
  std::string owner() const { return user.empty() ? container_id : user; }
};

// What becomes of a session's begin.
struct SessionAdmission {
  enum class Verdict {
    kAdmitted,
    kRefused,            // beyond max-sessions: end it with `refusal`
    kUnknownConnection,  // its connection was refused: leave the session be
  };
  Verdict verdict = Verdict::kAdmitted;
  std::string refusal;
};

class ClientConnections {
 public:
  ClientConnections(std::shared_ptr<AmqpAdmission> admission,
                    std::shared_ptr<ListenerCounters> counters);

  // Admits connection `c` of `user` numbered `id`: nullopt, or the refusal
  // (beyond max-connections) to close it with.
  std::optional<std::string> open(const proton::connection& c, uint64_t id, std::string user);
  // The admitted connection `c`; null when it is not (or no longer) open.
  const ClientConnection* find(const proton::connection& c) const;
  // Its Waker; null when `c` is not open.
  std::shared_ptr<Waker> wakerOf(const proton::connection& c) const;

  SessionAdmission openSession(const proton::session& s);
  void sessionClosed(const proton::session& s);

  // Forgets `c` with its sessions and what the admission counted for it, and
  // closes its Waker. Its number, for the caller to forget its links; nullopt
  // when it was not open.
  std::optional<uint64_t> close(const proton::connection& c);
  std::vector<proton::connection> all() const;
  // After the container thread ended: forgets everything.
  void clear();

 private:
  const std::shared_ptr<AmqpAdmission> admission_;
  const std::shared_ptr<ListenerCounters> counters_;
  std::map<proton::connection, ClientConnection> connections_;
  std::map<proton::session, uint64_t> sessions_;  // admitted, to their connection number
};

}  // namespace cepbus::services::amqp
