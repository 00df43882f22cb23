#include "services/cluster/cluster_publisher.h"

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/target.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event_json.h"
#include "services/amqp/access_control.h"
#include "services/amqp/password_hash.h"
#include "services/amqp/sasl_plugin.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/partitioner.h"

namespace cepbus::services::cluster {
namespace {

// A broker stand-in on loopback: grants credit, records in arrival order
// the events it accepts per partition (what a stream would hold), and
// answers each message as its script says: accept, or never answer (what
// RabbitMQ 3.10 does with a message to a stream whose new leader it does
// not know yet).
class ScriptedBroker final : public proton::messaging_handler {
 public:
  // connection: 1 for the first the publisher opened; nth: 1 for the first
  // message of the partition on that connection.
  using Script = std::function<bool(int connection, uint32_t partition, int nth)>;

  explicit ScriptedBroker(Script accept) : accept_(std::move(accept)), container_(*this) {
    amqp::installSaslPlugin();
    descriptor::AmqpListener config;
    auto hash = amqp::hashPassword("guest", amqp::kMinPasswordIterations);
    EXPECT_TRUE(hash);
    config.users.push_back(descriptor::AmqpUser{"guest", hash.value(), {}, {}});
    access_ = std::make_shared<amqp::AccessControl>(config);
    std::promise<int> port;
    auto listening = port.get_future();
    thread_ = std::thread([this, p = std::move(port)]() mutable {
      Listen listen(*this, std::move(p));
      container_.listen("127.0.0.1:0", listen);
      container_.run();
    });
    port_ = listening.get();
  }

  ~ScriptedBroker() override {
    container_.stop();
    thread_.join();
    amqp::unregisterSaslListener(port_);
  }

  int port() const { return port_; }

  // Event ids per partition, in the order they were accepted; an id comes
  // again when the publisher resent it.
  std::map<uint32_t, std::vector<uint64_t>> stored() {
    std::lock_guard lock(mu_);
    return stored_;
  }
  int connections() {
    std::lock_guard lock(mu_);
    return connections_;
  }

  void on_connection_open(proton::connection& c) override {
    {
      std::lock_guard lock(mu_);
      ++connections_;
    }
    c.open();
  }
  // The publisher closes a connection with an error when it gives up on it.
  void on_error(const proton::error_condition&) override {}
  void on_receiver_open(proton::receiver& r) override {
    r.open(proton::receiver_options().auto_accept(false).credit_window(100));
  }
  void on_message(proton::delivery& d, proton::message& m) override {
    // The publisher's target is /exchange/<name>.in/p<K>.
    const std::string address = d.receiver().target().address();
    const uint32_t partition = std::stoul(address.substr(address.rfind("/p") + 2));
    std::lock_guard lock(mu_);
    const int nth = ++received_[{connections_, partition}];
    if (!accept_(connections_, partition, nth)) {
      unanswered_.push_back(d);
      return;
    }
    for (const EventPtr& e : eventsFromBatchMessage(m).events) {
      stored_[partition].push_back(e->id());
    }
    d.accept();
  }

 private:
  struct Listen final : public proton::listen_handler {
    Listen(ScriptedBroker& broker, std::promise<int> port)
        : broker(broker), port(std::move(port)) {}
    void on_open(proton::listener& l) override {
      amqp::registerSaslListener(l.port(), broker.access_);
      port.set_value(l.port());
    }
    ScriptedBroker& broker;
    std::promise<int> port;
  };

  const Script accept_;
  proton::container container_;
  std::shared_ptr<const amqp::AccessControl> access_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int connections_ = 0;                               // guarded by mu_
  std::map<std::pair<int, uint32_t>, int> received_;  // guarded by mu_
  std::map<uint32_t, std::vector<uint64_t>> stored_;  // guarded by mu_
  std::vector<proton::delivery> unanswered_;          // guarded by mu_
};

descriptor::ClusterSpec streamCluster(int port) {
  descriptor::ClusterSpec spec;
  spec.name = "t";
  spec.partitions = 2;
  spec.key = {"k"};
  spec.brokers = {descriptor::ClusterBroker{"127.0.0.1", static_cast<uint16_t>(port), 0, {}}};
  spec.input = descriptor::ClusterSpec::Input::kStream;
  return spec;
}

// Events 1..n with keys that spread over both partitions.
std::vector<EventPtr> events(int n) {
  std::vector<EventPtr> out;
  for (int i = 1; i <= n; ++i) {
    out.push_back(decodeEvent(R"({"type":"T","ts":)" + std::to_string(i) + R"(,"id":)" +
                              std::to_string(i) + R"(,"attrs":{"k":)" + std::to_string(i % 7) +
                              "}}")
                      .value());
  }
  return out;
}

// What each partition's node would read: the ids in stored order, a resent
// copy of one already there dropped.
std::map<uint32_t, std::vector<uint64_t>> firstCopies(
    const std::map<uint32_t, std::vector<uint64_t>>& stored) {
  std::map<uint32_t, std::vector<uint64_t>> out;
  for (const auto& [partition, ids] : stored) {
    std::set<uint64_t> seen;
    for (uint64_t id : ids) {
      if (seen.insert(id).second) out[partition].push_back(id);
    }
  }
  return out;
}

std::map<uint32_t, std::vector<uint64_t>> expectedPerPartition(
    const std::vector<EventPtr>& in, const descriptor::ClusterSpec& spec) {
  const std::vector<Symbol> key{Symbol::intern("k")};
  std::map<uint32_t, std::vector<uint64_t>> out;
  for (const EventPtr& e : in) {
    out[partitionOfKey(partitionKeyText(*e, key).value(), spec.partitions)].push_back(e->id());
  }
  return out;
}

// After a failover the first message of a partition may go unanswered while
// the broker stores the ones after it: the publisher must not send those
// before the first is accepted, or its resend lands behind them and the
// partition's node gets it late.
TEST(ClusterPublisherTest, AnUnansweredFirstMessageHoldsItsPartitionUntilAccepted) {
  ScriptedBroker broker([](int connection, uint32_t partition, int nth) {
    return !(connection == 1 && partition == 0 && nth == 1);
  });
  const descriptor::ClusterSpec spec = streamCluster(broker.port());
  const std::vector<EventPtr> in = events(60);
  PublishOptions options;
  options.batch = 1;
  options.confirm_timeout_ms = 1000;
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->confirm_timeouts, 1u);
  EXPECT_EQ(report->reconnects, 1u);
  EXPECT_EQ(broker.connections(), 2);
  EXPECT_EQ(firstCopies(broker.stored()), expectedPerPartition(in, spec));
}

// With nothing going wrong one connection carries everything, in order,
// each event once.
TEST(ClusterPublisherTest, WithoutFailuresEveryEventIsStoredOnceInOrder) {
  ScriptedBroker broker([](int, uint32_t, int) { return true; });
  const descriptor::ClusterSpec spec = streamCluster(broker.port());
  const std::vector<EventPtr> in = events(500);
  PublishOptions options;
  options.batch = 4;
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->published, in.size());
  EXPECT_EQ(report->reconnects, 0u);
  EXPECT_EQ(broker.stored(), expectedPerPartition(in, spec));
}

}  // namespace
}  // namespace cepbus::services::cluster
