#pragma once

// AmqpTestClient: the project's own Proton C++ client for end-to-end tests of
// the AMQP listener. It connects (ANONYMOUS, or PLAIN with a user; optionally
// over TLS trusting a given certificate), then the test drives it: subscribe,
// publish, close. Everything it sees is recorded under a mutex; tests wait
// for conditions with waitFor() (never for a time).
//
// Thread-safety: the public calls may be made from any thread; Proton objects
// are only used on the client's container thread.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/duration.hpp>
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
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace cepbus::testing {

inline constexpr std::chrono::seconds kAmqpWait{5};

struct AmqpClientOptions {
  int port = 0;
  std::string user;      // empty: SASL ANONYMOUS
  std::string password;  // with `user`: SASL PLAIN
  std::string ca;        // not empty: TLS, trusting this PEM certificate (peer name "localhost")
  std::string container_id;
  bool reconnect = false;  // Proton's reconnect (for a bus restarted under the client)
};

struct AmqpReceived {
  proton::message message;
  uint32_t delivery_count = 0;
  bool first_acquirer = true;
};

class AmqpTestClient final : public proton::messaging_handler {
 public:
  explicit AmqpTestClient(AmqpClientOptions options)
      : options_(std::move(options)),
        container_(*this, options_.container_id.empty()
                              ? "client-" + std::to_string(std::random_device()())
                              : options_.container_id) {
    thread_ = std::thread([this] { container_.run(); });
  }
  ~AmqpTestClient() override {
    // Closed first: a connection handle still held when the container stops
    // trips Proton's reference count assertion.
    closeConnection();
    // With its only connection gone the container's run() returns by itself.
    if (!waitFor([&] { return transport_closed; })) container_.stop();
    thread_.join();
  }

  bool waitFor(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kAmqpWait, done);
  }
  template <typename T>
  T read(const std::function<T()>& fn) {
    std::lock_guard lock(mu_);
    return fn();
  }
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
      proton::receiver_options ro;
      ro.name(name.empty() ? pattern : name)
          .credit_window(credit)
          .auto_accept(false)
          .source(source);
      proton::receiver r = connection_.open_receiver(pattern, ro);
      accept_limits_[r.name()] = accept_limit;
    });
  }

  // Sends `messages` unsettled (or pre-settled) on a sending link to `address`.
  void publish(std::string address, std::vector<proton::message> messages,
               bool presettled = false) {
    run([this, address, messages = std::move(messages), presettled] {
      proton::sender_options so;
      if (presettled) so.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
      proton::sender s = connection_.open_sender(address, so);
      pending_[s.name()] = std::deque<proton::message>(messages.begin(), messages.end());
    });
  }

  // Closes a receiving link: `detach` only (durable subscriptions keep their
  // state) or close.
  void closeReceiver(const std::string& name, bool detach) {
    run([this, name, detach] {
      for (proton::receiver r : connection_.receivers()) {
        if (r.name() != name) continue;
        if (detach) {
          r.detach();
        } else {
          r.close();
        }
      }
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
  std::map<std::string, std::vector<AmqpReceived>> received;   // by link name
  size_t accepted = 0, released = 0, rejected = 0;             // outcomes of what was sent
  std::vector<proton::error_condition> rejections;

 private:
  // On the connection's work queue, so that what `fn` does is written out at
  // once (container-level work is not followed by I/O in Proton 0.37).
  // Name and description only: a condition's properties may share Proton's
  // own data, and a reference kept to it trips Proton's assertion when the
  // transport is freed.
  static proton::error_condition copyOf(const proton::error_condition& e) {
    return proton::error_condition(e.name(), e.description());
  }

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
    bump([&] { ++links_open[r.name()]; });
  }
  void on_sender_open(proton::sender& s) override {
    bump([&] { ++links_open[s.name()]; });
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
    bump([&] { received[name].push_back({m, m.delivery_count(), m.first_acquirer()}); });
  }
  void on_sendable(proton::sender& s) override {
    auto it = pending_.find(s.name());
    if (it == pending_.end()) return;
    while (s.credit() > 0 && !it->second.empty()) {
      s.send(it->second.front());
      it->second.pop_front();
    }
  }
  void on_tracker_accept(proton::tracker&) override {
    bump([&] { ++accepted; });
  }
  void on_tracker_release(proton::tracker&) override {
    bump([&] { ++released; });
  }
  void on_tracker_reject(proton::tracker&) override {
    bump([&] { ++rejected; });
  }

  const AmqpClientOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  proton::container container_;
  std::thread thread_;
  proton::work_queue* queue_ = nullptr;  // guarded by mu_; the connection's while it is open
  // Container thread only.
  proton::connection connection_;
  std::map<std::string, std::deque<proton::message>> pending_;
  std::map<std::string, int> accept_limits_;
};

}  // namespace cepbus::testing
