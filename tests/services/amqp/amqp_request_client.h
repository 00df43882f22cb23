#pragma once

// AmqpRequestClient: a Proton C++ client for the request/response tests of
// the AMQP listener. It connects ANONYMOUS to 127.0.0.1:<port>; the test then
// opens receivers (named, or dynamic: the bus names the address, read back
// with replyAddress()), sends messages on senders, and may make a receiver
// a provider: each message it gets there is answered by `respond` on a
// sender to the message's reply-to, with its correlation-id.
//
// Thread-safety: the public calls may be made from any thread; Proton
// objects are only used on the client's container thread. What the client
// saw is recorded under a mutex; tests wait for conditions, never for times.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
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
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <string>
#include <thread>
#include <vector>

#include "services/amqp/message_mapping.h"

namespace cepbus::testing {

class AmqpRequestClient final : public proton::messaging_handler {
 public:
  // Builds the answer to a request; nullopt: no answer.
  using Respond = std::function<std::optional<proton::message>(const proton::message&)>;
  static constexpr std::chrono::seconds kWait{20};

  AmqpRequestClient(int port, std::string id) : port_(port), container_(*this, std::move(id)) {
    thread_ = std::thread([this] { container_.run(); });
  }
  ~AmqpRequestClient() override {
    run([this] { connection_.close(); });
    if (!waitFor([&] { return transport_closed; })) container_.stop();
    thread_.join();
  }

  bool waitFor(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, done);
  }
  template <typename T>
  T read(const std::function<T()>& fn) {
    std::lock_guard lock(mu_);
    return fn();
  }
  bool waitOpen() {
    return waitFor([&] { return open; });
  }

  // A receiver named `name` on `address`, or with a dynamic source when
  // `address` is empty. With `respond`, it answers what it gets.
  void receive(std::string name, std::string address, Respond respond = nullptr) {
    run([this, name, address, respond] {
      proton::source_options source;
      if (address.empty()) {
        source.dynamic(true);
      } else {
        source.address(address);
      }
      responders_[name] = respond;
      connection_.open_receiver(
          address, proton::receiver_options().name(name).credit_window(100).source(source));
    });
  }
  // Sends `messages` on a sender to `address` (unsettled unless `presettled`).
  void send(std::string address, std::vector<proton::message> messages, bool presettled = false) {
    run([this, address, messages = std::move(messages), presettled] {
      for (const auto& m : messages) queue(address, m, presettled);
    });
  }

  // The address the bus gave the dynamic receiver `name` ("" until attached).
  std::string replyAddress(const std::string& name) {
    return read<std::string>([&] {
      auto it = addresses.find(name);
      return it == addresses.end() ? std::string() : it->second;
    });
  }

  // Guarded by mu_ (use waitFor/read).
  bool open = false;
  bool transport_closed = false;
  std::map<std::string, std::string> addresses;                  // receiver name -> source address
  std::map<std::string, std::vector<proton::message>> received;  // by receiver name
  size_t accepted = 0, released = 0, rejected = 0;               // outcomes of what was sent
  std::vector<proton::error_condition> rejections;               // name + description

 private:
  void run(std::function<void()> fn) {
    proton::work_queue* q = nullptr;
    {
      std::lock_guard lock(mu_);
      q = queue_;
    }
    if (q != nullptr) q->add(std::move(fn));
  }
  template <typename F>
  void bump(F&& f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }
  void queue(const std::string& address, const proton::message& m, bool presettled) {
    const std::string key = address + (presettled ? "#presettled" : "");
    auto it = senders_.find(key);
    if (it == senders_.end()) {
      proton::sender_options so;
      if (presettled) so.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
      proton::sender s = connection_.open_sender(address, so);
      it = senders_.emplace(key, s).first;
    }
    pending_[it->second.name()].push_back(m);
    on_sendable(it->second);
  }

  void on_container_start(proton::container& c) override {
    c.connect("127.0.0.1:" + std::to_string(port_),
              proton::connection_options().sasl_allowed_mechs("ANONYMOUS"));
  }
  void on_connection_open(proton::connection& c) override {
    connection_ = c;
    bump([&] {
      open = true;
      queue_ = &c.work_queue();
    });
  }
  void on_transport_close(proton::transport&) override {
    connection_ = proton::connection();
    senders_.clear();
    bump([&] {
      queue_ = nullptr;
      transport_closed = true;
    });
  }
  void on_error(const proton::error_condition&) override {}
  void on_receiver_open(proton::receiver& r) override {
    bump([&] { addresses[r.name()] = r.source().address(); });
  }
  void on_message(proton::delivery& d, proton::message& m) override {
    const std::string name = d.receiver().name();
    bump([&] { received[name].push_back(m); });
    auto responder = responders_.find(name);
    if (responder == responders_.end() || !responder->second) return;
    std::optional<proton::message> answer = responder->second(m);
    if (!answer) return;
    answer->correlation_id(m.correlation_id());
    queue(m.reply_to(), *answer, false);
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
  void on_tracker_reject(proton::tracker& t) override {
    proton::error_condition c = services::amqp::remoteCondition(t);
    bump([&] {
      ++rejected;
      rejections.emplace_back(c.name(), c.description());
    });
  }

  const int port_;
  std::mutex mu_;
  std::condition_variable cv_;
  proton::container container_;
  std::thread thread_;
  proton::work_queue* queue_ = nullptr;  // guarded by mu_
  // Container thread only.
  proton::connection connection_;
  std::map<std::string, proton::sender> senders_;               // by address (+ "#presettled")
  std::map<std::string, std::deque<proton::message>> pending_;  // by sender name
  std::map<std::string, Respond> responders_;                   // by receiver name
};

}  // namespace cepbus::testing
