#include "services/cluster/cluster_publisher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
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
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/source.hpp>
#include <proton/target.hpp>
#include <proton/timestamp.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event_json.h"
#include "services/cluster/cluster_spec.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/partitioner.h"
#include "services/cluster/stream_sequencer.h"
#include "services/protocols/amqp/access_control.h"
#include "services/protocols/amqp/listener_config.h"
#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/password_hash.h"
#include "services/protocols/amqp/sasl_plugin.h"

namespace cepbus::services::cluster {
namespace {

// What the stand-in broker does with a message.
enum class Answer {
  kAccept,
  // Never answer: what RabbitMQ 3.10 does with a message to a stream whose
  // new leader it does not know yet.
  kNone,
  // Accept and drop: what RabbitMQ 3.10 did with messages to a stream just
  // before its leader's node died.
  kAcceptAndLose,
  // Accept and drop, then close the connection (the broker died).
  kAcceptLoseAndDie,
  // Refuse with amqp:internal-error "nodedown", but only once the next
  // message of the partition is stored: what RabbitMQ 3.10 did while a
  // stream's leader changed.
  kRefuseAfterNext,
};

// A broker stand-in on loopback: grants credit, keeps in arrival order the
// messages it stores per partition (a stream: a link from the partition's
// stream address reads them back, from the second of its timestamp offset
// spec on, as RabbitMQ does), and answers each message as its script says.
class ScriptedBroker final : public proton::messaging_handler {
 public:
  // connection: 1 for the first the publisher opened; nth: 1 for the first
  // message of the partition on that connection.
  using Script =
      std::function<Answer(int connection, uint32_t partition, int nth, const proton::message& m)>;

  // `mute_reads`: whether stream reads on that connection deliver nothing
  // (what a RabbitMQ 3.10 broker did after another node died).
  explicit ScriptedBroker(Script script, std::function<bool(int connection)> mute_reads = {})
      : script_(std::move(script)), mute_reads_(std::move(mute_reads)), container_(*this) {
    amqp::installSaslPlugin();
    services::amqp::AmqpListenerConfig config;
    auto hash = amqp::hashPassword("guest", amqp::kMinPasswordIterations);
    EXPECT_TRUE(hash);
    config.users.push_back(services::amqp::AmqpUser{"guest", hash.value(), {}, {}});
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

  // Event ids per partition, in the order they were stored (an end-of-stream
  // marker as 0); an id comes again when the publisher resent it.
  std::map<uint32_t, std::vector<uint64_t>> stored() {
    std::lock_guard lock(mu_);
    std::map<uint32_t, std::vector<uint64_t>> ids;
    for (const auto& [partition, log] : log_) {
      for (const Stored& s : log) {
        if (s.message.subject() == kEndOfStreamSubject) ids[partition].push_back(0);
        for (const EventPtr& e : eventsFromBatchMessage(s.message).events) {
          ids[partition].push_back(e->id());
        }
      }
    }
    return ids;
  }
  // What each partition's node would process: the stored messages put back
  // in their publisher's order (stream_sequencer.h), as event ids (an
  // end-of-stream marker as 0), resent copies dropped.
  std::map<uint32_t, std::vector<uint64_t>> sequenced() {
    std::lock_guard lock(mu_);
    std::map<uint32_t, std::vector<uint64_t>> ids;
    for (const auto& [partition, log] : log_) {
      StreamSequencer sequencer(log.size(), std::chrono::hours(1));
      std::set<uint64_t> seen;
      auto process = [&](uint64_t offset) {
        const proton::message& m = log[offset].message;
        if (m.subject() == kEndOfStreamSubject) ids[partition].push_back(0);
        for (const EventPtr& e : eventsFromBatchMessage(m).events) {
          if (seen.insert(e->id()).second) ids[partition].push_back(e->id());
        }
      };
      for (uint64_t offset = 0; offset < log.size(); ++offset) {
        const proton::message& m = log[offset].message;
        const proton::value place = m.properties().get(kSequenceProperty);
        const StreamSequencer::Offer offer = sequencer.offer(
            offset,
            StreamSequencer::tagOf(proton::get<std::string>(m.id()), proton::get<uint64_t>(place)),
            StreamSequencer::Time());
        if (!offer.held) process(offset);
        for (uint64_t released : offer.then) process(released);
      }
      EXPECT_EQ(sequencer.held(), 0u) << "partition " << partition << " has a gap";
    }
    return ids;
  }
  // The timestamp offset specs the read-back links asked for, in ms.
  std::vector<int64_t> readsFrom() {
    std::lock_guard lock(mu_);
    return reads_from_;
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
    std::unique_lock lock(mu_);
    const int nth = ++received_[{connections_, partition}];
    const Answer answer = script_(connections_, partition, nth, m);
    if (answer == Answer::kNone) {
      unanswered_.push_back(d);
      return;
    }
    if (answer == Answer::kRefuseAfterNext) {
      refuse_after_next_[partition].push_back(d);
      return;
    }
    if (answer == Answer::kAccept) log_[partition].push_back(Stored{m, std::time(nullptr)});
    std::vector<proton::delivery> refused;
    refused.swap(refuse_after_next_[partition]);
    lock.unlock();
    d.accept();
    for (proton::delivery& r : refused) {
      amqp::rejectWithCondition(r, proton::error_condition("amqp:internal-error", "nodedown"));
    }
    if (answer == Answer::kAcceptLoseAndDie) d.connection().close();
  }

  // A read-back link on /amq/queue/<name>.p<K>.log.
  void on_sender_open(proton::sender& s) override {
    const std::string address = s.source().address();
    const uint32_t partition = std::stoul(address.substr(address.rfind(".p") + 2));
    int64_t from_ms = 0;
    const proton::source::filter_map filters = s.source().filters();
    const proton::value spec = filters.get(proton::symbol("rabbitmq:stream-offset-spec"));
    if (spec.type() == proton::TIMESTAMP) {
      from_ms = proton::get<proton::timestamp>(spec).milliseconds();
    }
    bool mute = false;
    {
      std::lock_guard lock(mu_);
      reads_from_.push_back(from_ms);
      mute = mute_reads_ && mute_reads_(connections_);
    }
    s.open();
    if (!mute) readers_[s] = Reader{partition, from_ms / 1000, 0};
  }
  void on_sendable(proton::sender& s) override {
    auto it = readers_.find(s);
    if (it == readers_.end()) return;
    Reader& r = it->second;
    std::lock_guard lock(mu_);
    const std::vector<Stored>& log = log_[r.partition];
    while (s.credit() > 0 && r.next < log.size()) {
      const Stored& stored = log[r.next++];
      if (stored.at >= r.from_s) s.send(stored.message);
    }
  }
  void on_sender_close(proton::sender& s) override { readers_.erase(s); }

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

  struct Stored {
    proton::message message;
    std::time_t at;  // RabbitMQ finds a timestamp's chunk to the second
  };
  struct Reader {
    uint32_t partition;
    std::time_t from_s;
    size_t next;  // into the partition's log
  };

  const Script script_;
  const std::function<bool(int connection)> mute_reads_;
  proton::container container_;
  std::shared_ptr<const amqp::AccessControl> access_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int connections_ = 0;                                                  // guarded by mu_
  std::map<std::pair<int, uint32_t>, int> received_;                     // guarded by mu_
  std::map<uint32_t, std::vector<Stored>> log_;                          // guarded by mu_
  std::vector<int64_t> reads_from_;                                      // guarded by mu_
  std::vector<proton::delivery> unanswered_;                             // guarded by mu_
  std::map<uint32_t, std::vector<proton::delivery>> refuse_after_next_;  // guarded by mu_
  std::map<proton::sender, Reader> readers_;                             // on the container thread
};

services::cluster::ClusterSpec streamCluster(int port) {
  services::cluster::ClusterSpec spec;
  spec.name = "t";
  spec.partitions = 2;
  spec.key = {"k"};
  spec.brokers = {
      services::cluster::ClusterBroker{"127.0.0.1", static_cast<uint16_t>(port), 0, {}}};
  spec.input = services::cluster::ClusterSpec::Input::kStream;
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
    const std::vector<EventPtr>& in, const services::cluster::ClusterSpec& spec) {
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
  ScriptedBroker broker([](int connection, uint32_t partition, int nth, const proton::message&) {
    return connection == 1 && partition == 0 && nth == 1 ? Answer::kNone : Answer::kAccept;
  });
  const services::cluster::ClusterSpec spec = streamCluster(broker.port());
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
  ScriptedBroker broker([](int, uint32_t, int, const proton::message&) { return Answer::kAccept; });
  const services::cluster::ClusterSpec spec = streamCluster(broker.port());
  const std::vector<EventPtr> in = events(500);
  PublishOptions options;
  options.batch = 4;
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->published, in.size());
  EXPECT_EQ(report->reconnects, 0u);
  EXPECT_EQ(broker.stored(), expectedPerPartition(in, spec));
  // One read-back before returning, which found every message.
  EXPECT_EQ(report->read_backs, 1u);
  EXPECT_EQ(report->read_back_confirmed, report->messages);
  EXPECT_EQ(report->resent, 0u);
}

// The broker accepts five messages of partition 0 without storing them,
// then dies. The read-back on the next connection finds what it stored
// (nothing is sent twice) and what it lost (sent again, before anything
// newer of the partition).
TEST(ClusterPublisherTest, MessagesTheBrokerAcceptedAndLostAreFoundMissingAndResentInOrder) {
  ScriptedBroker broker([](int connection, uint32_t partition, int nth, const proton::message&) {
    if (connection != 1 || partition != 0 || nth <= 20) return Answer::kAccept;
    return nth < 25 ? Answer::kAcceptAndLose : Answer::kAcceptLoseAndDie;
  });
  const services::cluster::ClusterSpec spec = streamCluster(broker.port());
  const std::vector<EventPtr> in = events(200);
  PublishOptions options;
  options.batch = 1;
  options.max_in_flight = 8;
  const auto start = std::chrono::system_clock::now();
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->reconnects, 1u);
  EXPECT_EQ(report->resent_accepted, 5u);
  EXPECT_EQ(broker.stored(), expectedPerPartition(in, spec));
  // Each read-back link asked for the stream from a little before the
  // publish began (the first message it looked for).
  ASSERT_FALSE(broker.readsFrom().empty());
  const int64_t start_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(start.time_since_epoch()).count();
  for (int64_t from : broker.readsFrom()) {
    EXPECT_LE(from, start_ms + 60'000);
    EXPECT_GE(from, start_ms - static_cast<int64_t>(options.read_back_skew_ms) - 1000);
  }
}

// A broker may lose what it accepted last, with no failure the publisher
// could see: here the end-of-stream marker of partition 1. The read-back
// before returning finds it missing and sends it again. (A broker that
// loses it every time ends the publish: see the next test.)
TEST(ClusterPublisherTest, ALostLastMessageIsResentBeforeThePublishReturns) {
  ScriptedBroker broker(
      [lost = false](int, uint32_t partition, int, const proton::message& m) mutable {
        if (lost || partition != 1 || m.subject() != kEndOfStreamSubject) return Answer::kAccept;
        lost = true;
        return Answer::kAcceptAndLose;
      });
  const services::cluster::ClusterSpec spec = streamCluster(broker.port());
  const std::vector<EventPtr> in = events(100);
  PublishOptions options;
  options.end_of_stream = true;
  options.read_back_quiet_ms = 300;
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->reconnects, 0u);
  EXPECT_EQ(report->read_backs, 2u);
  EXPECT_EQ(report->resent_accepted, 1u);
  std::map<uint32_t, std::vector<uint64_t>> expected = expectedPerPartition(in, spec);
  for (auto& [partition, ids] : expected) ids.push_back(0);
  EXPECT_EQ(broker.stored(), expected);
}

// The broker refuses a message of partition 0 ("nodedown") after it stored
// the next one, which was already in flight on the same connection: the
// stream holds the resent message after its successor (here also after the
// end-of-stream marker). Every message carries its place in its partition,
// so the node puts the stream back in order.
TEST(ClusterPublisherTest, AMessageRefusedAfterItsSuccessorWasStoredIsPutBackInOrderByItsPlace) {
  ScriptedBroker broker([](int connection, uint32_t partition, int nth, const proton::message&) {
    return connection == 1 && partition == 0 && nth == 10 ? Answer::kRefuseAfterNext
                                                          : Answer::kAccept;
  });
  const services::cluster::ClusterSpec spec = streamCluster(broker.port());
  const std::vector<EventPtr> in = events(100);
  PublishOptions options;
  options.batch = 1;
  options.max_in_flight = 8;
  options.end_of_stream = true;
  options.read_back_quiet_ms = 300;
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->broker_errors, 1u);
  std::map<uint32_t, std::vector<uint64_t>> expected = expectedPerPartition(in, spec);
  for (auto& [partition, ids] : expected) ids.push_back(0);
  // Stored out of order: the refused event after the one that followed it.
  EXPECT_NE(firstCopies(broker.stored()), expected);
  EXPECT_EQ(broker.sequenced(), expected);
}

// A broker that delivers nothing from a stream holding the messages: the
// read-back does not take the silence for a loss (resending everything)
// but reads again through the next broker (here the same stand-in, which
// serves reads on the second connection).
TEST(ClusterPublisherTest, AStreamThatDeliversNothingThroughABrokerIsReadThroughTheNextOne) {
  ScriptedBroker broker([](int, uint32_t, int, const proton::message&) { return Answer::kAccept; },
                        [](int connection) { return connection == 1; });
  services::cluster::ClusterSpec spec = streamCluster(broker.port());
  spec.brokers.push_back(spec.brokers.front());
  const std::vector<EventPtr> in = events(100);
  PublishOptions options;
  options.read_back_quiet_ms = 300;
  Result<PublishReport> report = publishToCluster(spec, "guest", in, options);
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->read_back_switches, 1u);
  EXPECT_EQ(report->reconnects, 1u);
  EXPECT_EQ(report->resent, 0u);
  EXPECT_EQ(report->read_back_confirmed, report->messages);
  EXPECT_EQ(broker.stored(), expectedPerPartition(in, spec));
}

TEST(ClusterPublisherTest, ABrokerThatKeepsLosingWhatItAcceptsFailsThePublishSayingSo) {
  ScriptedBroker broker([](int, uint32_t partition, int, const proton::message& m) {
    return partition == 1 && m.subject() == kEndOfStreamSubject ? Answer::kAcceptAndLose
                                                                : Answer::kAccept;
  });
  const services::cluster::ClusterSpec spec = streamCluster(broker.port());
  PublishOptions options;
  options.end_of_stream = true;
  options.read_back_quiet_ms = 100;
  Result<PublishReport> report = publishToCluster(spec, "guest", events(20), options);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.status().message(),
            "the brokers of cluster \"t\" accepted messages that their streams did not hold, 10 "
            "read-backs in a row (the last missed 1 accepted events or end markers)");
}

}  // namespace
}  // namespace cepbus::services::cluster
