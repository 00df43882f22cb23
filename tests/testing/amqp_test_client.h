#pragma once

// AmqpTestClient: the project's own Proton C++ client for the AMQP tests (the
// listener in process, the real `cepbus` end to end, bridges between buses).
//
// It connects to 127.0.0.1:<port> as soon as it is built: SASL ANONYMOUS, or
// PLAIN with a user; over TLS when given a CA (the peer's name is checked as
// "localhost"). The test then drives it from its own thread:
//   - subscribe(pattern, ...): a receiving link that accepts what it gets up
//     to a limit and leaves the rest unsettled (at-least-once tests), durable
//     if asked; with credit 0 it takes only what grant() lets it (a slow or
//     stuck subscriber);
//   - receive(name, address, respond): a receiving link that accepts
//     everything, with a dynamic source when `address` is empty (its address
//     is read back with replyAddress()); with `respond` it answers each
//     request on a sender to the request's reply-to with its correlation-id;
//   - publish(address, messages): a new sending link per call; send(address,
//     messages): one sending link per address, reused;
//   - closeReceiver(), closeConnection().
// Everything the client sees is recorded in the public fields below, under a
// mutex: tests wait for a condition with waitFor() (never for a time) and
// read the fields with read() or inside the condition.
//
// Thread-safety: the public calls may be made from any thread; Proton objects
// are used on the client's container thread only. Ownership: owns its
// container and thread; the destructor closes the connection and joins.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <proton/binary.hpp>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/reconnect_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/ssl.hpp>
#include <proton/target.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::testing {

// How long waitFor() waits by default: generous, since CI boxes are loaded; a
// test only waits that long when the code under test is broken.
inline constexpr std::chrono::seconds kAmqpWait{20};

struct AmqpClientOptions {
  int port = 0;
  std::string user;      // empty: SASL ANONYMOUS
  std::string password;  // with `user`: SASL PLAIN
  std::string ca;        // not empty: TLS, trusting this PEM certificate (peer name "localhost")
  std::string container_id;  // empty: a random one
  bool reconnect = false;    // Proton's reconnect (for a bus restarted under the client)
};

// A message a receiving link got. It is the message itself (read it as one)
// and also holds it as `message`, next to its header's redelivery marks.
struct AmqpReceived : proton::message {
  explicit AmqpReceived(const proton::message& m)
      : proton::message(m),
        message(m),
        delivery_count(m.delivery_count()),
        first_acquirer(m.first_acquirer()) {}
  proton::message message;
  uint32_t delivery_count = 0;
  bool first_acquirer = true;
};

class AmqpTestClient final : public proton::messaging_handler {
 public:
  // Builds the answer to a request; nullopt: no answer.
  using Respond = std::function<std::optional<proton::message>(const proton::message&)>;

  explicit AmqpTestClient(AmqpClientOptions options)
      : options_(std::move(options)),
        container_(*this, options_.container_id.empty()
                              ? "client-" + std::to_string(std::random_device()())
                              : options_.container_id) {
    thread_ = std::thread([this] { container_.run(); });
  }
  // ANONYMOUS, without TLS, as `container_id`.
  AmqpTestClient(int port, std::string container_id)
      : AmqpTestClient(AmqpClientOptions{port, {}, {}, {}, std::move(container_id), false}) {}

  ~AmqpTestClient() override {
    // Closed first: a connection handle still held when the container stops
    // trips Proton's reference count assertion.
    closeConnection();
    // With its only connection gone the container's run() returns by itself.
    if (!waitFor([&] { return transport_closed; })) container_.stop();
    thread_.join();
  }

  bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = kAmqpWait) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, done);
  }
  template <typename T>
  T read(const std::function<T()>& fn) {
    std::lock_guard lock(mu_);
    return fn();
  }
  // Open, or refused (then `error` says why).
  bool waitOpen() {
    return waitFor([&] { return open || static_cast<bool>(error); });
  }

  // A receiving link on `pattern` named `name` (the pattern when empty).
  // `durable`: the source asks for unsettled-state durability and is kept
  // when the link is detached (a durable subscription). The client accepts
  // the first `accept_limit` deliveries (all when negative) and leaves the
  // rest unsettled.
  void subscribe(std::string pattern, std::string name = "", bool durable = false, int credit = 100,
                 int accept_limit = -1) {
    run([this, pattern, name, durable, credit, accept_limit] {
      proton::source_options source;
      source.address(pattern);
      if (durable) {
        source.durability_mode(proton::source::UNSETTLED_STATE)
            .expiry_policy(proton::source::NEVER);
      }
      openReceiver(pattern, name.empty() ? pattern : name, source, credit, accept_limit);
    });
  }

  // A receiving link named `name` on `address`, or with a dynamic source when
  // `address` is empty; it accepts everything. With `respond`, it answers
  // what it gets.
  void receive(std::string name, std::string address, Respond respond = nullptr) {
    run([this, name, address, respond] {
      proton::source_options source;
      if (address.empty()) {
        source.dynamic(true);
      } else {
        source.address(address);
      }
      responders_[name] = respond;
      openReceiver(address, name, source, 100, -1);
    });
  }

  // Sends `messages` unsettled (or pre-settled) on a new sending link to
  // `address`.
  void publish(std::string address, std::vector<proton::message> messages,
               bool presettled = false) {
    run([this, address, messages = std::move(messages), presettled] {
      proton::sender s = connection_.open_sender(address, senderOptions(presettled));
      pending_[s.name()].insert(pending_[s.name()].end(), messages.begin(), messages.end());
    });
  }
  // Sends `messages` unsettled (or pre-settled) on the client's sending link
  // to `address`, opened by the first call.
  void send(std::string address, std::vector<proton::message> messages, bool presettled = false) {
    run([this, address, messages = std::move(messages), presettled] {
      for (const auto& m : messages) queue(address, m, presettled);
    });
  }

  // The address the bus gave the receiving link `name` ("" until attached).
  std::string replyAddress(const std::string& name) {
    return read<std::string>([&] {
      auto it = addresses.find(name);
      return it == addresses.end() ? std::string() : it->second;
    });
  }

  // Gives receiving link `name` `credit` more: for a link subscribed with
  // credit 0, which the client never replenishes by itself.
  void grant(const std::string& name, int credit) {
    run([this, name, credit] {
      for (proton::receiver r : connection_.receivers()) {
        if (r.name() == name) r.add_credit(credit);
      }
    });
  }

  // The timestamps of the events link `name` received, in arrival order (-1
  // for a message that maps to no event).
  std::vector<Timestamp> receivedTs(const std::string& name) {
    std::lock_guard lock(mu_);
    std::vector<Timestamp> out;
    for (const AmqpReceived& m : received[name]) {
      const services::amqp::MappedEvent e = services::amqp::eventFromMessage(m.message);
      out.push_back(e.event ? e.event->ts() : -1);
    }
    return out;
  }

  // Closes a receiving link: `detach` only (durable subscriptions keep their
  // state) or close. By session, as closeSenders().
  void closeReceiver(const std::string& name, bool detach) {
    run([this, name, detach] {
      for (proton::session session : connection_.sessions()) {
        for (proton::receiver r : session.receivers()) {
          if (r.name() != name) continue;
          if (detach) {
            r.detach();
          } else {
            r.close();
          }
        }
      }
    });
  }

  // Blocks the client's container thread until `until` is ready: meanwhile
  // it reads nothing from its socket (a peer that stopped reading). Make it
  // ready before the client is destroyed.
  void freeze(std::shared_future<void> until) {
    run([until] { until.wait(); });
  }

  // Closes the client's sending links to `address`. By session: Proton's
  // connection-wide sender range stops after the connection's first link.
  void closeSenders(const std::string& address) {
    run([this, address] {
      for (proton::session session : connection_.sessions()) {
        for (proton::sender s : session.senders()) {
          if (s.active() && s.target().address() == address) s.close();
        }
      }
      std::erase_if(senders_,
                    [&](const auto& entry) { return entry.second.target().address() == address; });
    });
  }

  void closeConnection() {
    run([this] { connection_.close(); });
  }

  // Guarded by mu_ (use waitFor/read).
  bool open = false;
  bool closed = false;
  bool transport_closed = false;
  proton::error_condition error;                               // the connection's (or transport's)
  std::map<std::string, proton::error_condition> link_errors;  // by link name
  std::map<std::string, int> links_open;                       // by link name
  std::map<std::string, std::string> addresses;                // receiving link name -> its source
  std::map<std::string, uint64_t> max_message_sizes;  // sending link name -> the peer's (0: none)
  std::map<std::string, int>
      max_credit;  // sending link's address -> the most credit it held at once
  std::map<std::string, std::vector<AmqpReceived>> received;  // by receiving link name
  size_t accepted = 0, released = 0, rejected = 0;            // outcomes of what was sent
  std::vector<proton::message_id> accepted_ids;               // the ids of `accepted`, as settled
  std::vector<proton::error_condition> rejections;            // the conditions of `rejected`

 private:
  // Name and description only: a condition's properties may share Proton's
  // own data, and a reference kept to it trips Proton's assertion when the
  // transport is freed.
  static proton::error_condition copyOf(const proton::error_condition& e) {
    return proton::error_condition(e.name(), e.description());
  }
  static proton::sender_options senderOptions(bool presettled) {
    proton::sender_options so;
    if (presettled) so.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    return so;
  }

  // On the connection's work queue, so that what `fn` does is written out at
  // once (container-level work is not followed by I/O in Proton 0.37).
  void run(std::function<void()> fn) {
    proton::work_queue* queue = nullptr;
    {
      std::lock_guard lock(mu_);
      queue = queue_;
    }
    if (queue != nullptr) queue->add(std::move(fn));
  }
  template <typename F>
  void bump(F&& f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }

  void openReceiver(const std::string& address, const std::string& name,
                    proton::source_options source, int credit, int accept_limit) {
    accept_limits_[name] = accept_limit;
    connection_.open_receiver(
        address,
        proton::receiver_options().name(name).credit_window(credit).auto_accept(false).source(
            source));
  }
  void queue(const std::string& address, const proton::message& m, bool presettled) {
    const std::string key = address + (presettled ? "#presettled" : "");
    auto it = senders_.find(key);
    if (it == senders_.end()) {
      it = senders_.emplace(key, connection_.open_sender(address, senderOptions(presettled))).first;
    }
    pending_[it->second.name()].push_back(m);
    on_sendable(it->second);
  }

  void on_container_start(proton::container& c) override {
    proton::connection_options co;
    if (options_.user.empty()) {
      co.sasl_allowed_mechs("ANONYMOUS");
    } else {
      co.user(options_.user).password(options_.password).sasl_allowed_mechs("PLAIN");
      co.sasl_allow_insecure_mechs(true);
    }
    std::string url = "127.0.0.1:" + std::to_string(options_.port);
    if (!options_.ca.empty()) {
      co.ssl_client_options(proton::ssl_client_options(options_.ca, proton::ssl::VERIFY_PEER_NAME));
      co.virtual_host("localhost");
      url = "amqps://" + url;
    }
    if (options_.reconnect) co.reconnect(proton::reconnect_options());
    c.connect(url, co);
  }
  void on_connection_open(proton::connection& c) override {
    connection_ = c;
    bump([&] {
      open = true;
      queue_ = &c.work_queue();
    });
  }
  void on_connection_close(proton::connection& c) override {
    bump([&] {
      closed = true;
      queue_ = nullptr;
      if (c.error()) error = copyOf(c.error());
    });
  }
  void on_transport_error(proton::transport& t) override {
    bump([&] { error = copyOf(t.error()); });
  }
  // Proton frees the connection after this; a handle kept past it trips
  // Proton's reference count assertion.
  void on_transport_close(proton::transport&) override {
    connection_ = proton::connection();
    senders_.clear();
    bump([&] {
      queue_ = nullptr;
      transport_closed = true;
    });
  }
  void on_error(const proton::error_condition& e) override {
    bump([&] {
      if (!error) error = copyOf(e);
    });
  }
  void on_receiver_open(proton::receiver& r) override {
    bump([&] {
      ++links_open[r.name()];
      addresses[r.name()] = r.source().address();
    });
  }
  void on_sender_open(proton::sender& s) override {
    bump([&] {
      ++links_open[s.name()];
      max_message_sizes[s.name()] = services::amqp::remoteMaxMessageSize(s);
    });
  }
  void on_receiver_close(proton::receiver& r) override {
    if (r.error()) bump([&] { link_errors[r.name()] = copyOf(r.error()); });
  }
  void on_sender_close(proton::sender& s) override {
    if (s.error()) bump([&] { link_errors[s.name()] = copyOf(s.error()); });
  }
  void on_receiver_error(proton::receiver& r) override {
    bump([&] { link_errors[r.name()] = copyOf(r.error()); });
  }
  void on_sender_error(proton::sender& s) override {
    bump([&] { link_errors[s.name()] = copyOf(s.error()); });
  }
  void on_message(proton::delivery& d, proton::message& m) override {
    const std::string name = d.receiver().name();
    int& limit = accept_limits_[name];
    if (limit != 0) {
      d.accept();
      if (limit > 0) --limit;
    }
    bump([&] { received[name].emplace_back(m); });
    auto responder = responders_.find(name);
    if (responder == responders_.end() || !responder->second) return;
    std::optional<proton::message> answer = responder->second(m);
    if (!answer) return;
    answer->correlation_id(m.correlation_id());
    queue(m.reply_to(), *answer, false);
  }
  void on_sendable(proton::sender& s) override {
    bump([&] {
      int& most = max_credit[s.target().address()];
      most = std::max(most, s.credit());
    });
    auto it = pending_.find(s.name());
    if (it == pending_.end()) return;
    while (s.credit() > 0 && !it->second.empty()) {
      const uint64_t n = ++next_tag_;
      const proton::binary tag(std::string(reinterpret_cast<const char*>(&n), sizeof n));
      s.send(it->second.front(), tag);
      in_doubt_[tag] = it->second.front().id();
      it->second.pop_front();
    }
  }
  void on_tracker_accept(proton::tracker& t) override {
    const proton::message_id id = settled(t);
    bump([&] {
      ++accepted;
      accepted_ids.push_back(id);
    });
  }
  void on_tracker_release(proton::tracker& t) override {
    settled(t);
    bump([&] { ++released; });
  }
  void on_tracker_reject(proton::tracker& t) override {
    settled(t);
    proton::error_condition c = services::amqp::remoteCondition(t);
    bump([&] {
      ++rejected;
      rejections.emplace_back(c.name(), c.description());
    });
  }

  // The id of the message `t` carried, forgotten now that its outcome came.
  proton::message_id settled(proton::tracker& t) {
    auto it = in_doubt_.find(t.tag());
    if (it == in_doubt_.end()) return {};
    proton::message_id id = it->second;
    in_doubt_.erase(it);
    return id;
  }

  const AmqpClientOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  proton::container container_;
  std::thread thread_;
  proton::work_queue* queue_ = nullptr;  // guarded by mu_; the connection's while it is open
  // Container thread only.
  proton::connection connection_;
  std::map<std::string, proton::sender> senders_;               // send(): by address (+ mode)
  std::map<std::string, std::deque<proton::message>> pending_;  // by sending link name
  std::map<std::string, int> accept_limits_;                    // by receiving link name
  std::map<std::string, Respond> responders_;                   // by receiving link name
  // Unsettled messages sent, by delivery tag (unique in the client).
  std::map<proton::binary, proton::message_id> in_doubt_;
  uint64_t next_tag_ = 0;
};

}  // namespace cepbus::testing
