// An ordinary AMQP 1.0 producer for a cepbus node's cluster ingress, in C++:
// ingress_producer.py's job (the same arguments and output) at a cost per
// message low enough that the producer is not what bounds the ingress's
// figures (docs/cluster.md, "Through a node's ingress").
//
// Sends every event of a JSON-lines file as one message (the plain event
// mapping of docs/amqp.md, message-id = the line number as a ulong) to
// ADDRESS on HOST:PORT, as fast as the node gives credit, and exits once
// every message is settled. Prints {"sent":N,"accepted":N,"released":N,"rejected":N};
// exits 1 unless every message was accepted.
//
//     ingress_producer --url 127.0.0.1:5690 --address demo.in --events FILE

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "services/protocols/amqp/message_mapping.h"

namespace {

class Producer final : public proton::messaging_handler {
 public:
  Producer(std::string url, std::string address, std::vector<proton::message> messages)
      : url_(std::move(url)), address_(std::move(address)), messages_(std::move(messages)) {}

  void on_container_start(proton::container& c) override {
    c.open_sender(url_ + "/" + address_,
                  proton::connection_options().sasl_allowed_mechs("ANONYMOUS"));
  }
  void on_sendable(proton::sender& s) override {
    while (s.credit() > 0 && sent < messages_.size()) s.send(messages_[sent++]);
  }
  void on_tracker_accept(proton::tracker& t) override { settled(t, accepted); }
  void on_tracker_release(proton::tracker& t) override { settled(t, released); }
  void on_tracker_reject(proton::tracker& t) override { settled(t, rejected); }

  size_t sent = 0, accepted = 0, released = 0, rejected = 0;

 private:
  void settled(proton::tracker& t, size_t& outcome) {
    ++outcome;
    if (accepted + released + rejected == messages_.size()) t.connection().close();
  }

  const std::string url_, address_;
  const std::vector<proton::message> messages_;
};

int usage() {
  std::cerr << "usage: ingress_producer --url HOST:PORT --address ADDRESS --events FILE\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url, address, events;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--url") {
      url = argv[i + 1];
    } else if (flag == "--address") {
      address = argv[i + 1];
    } else if (flag == "--events") {
      events = argv[i + 1];
    } else {
      return usage();
    }
  }
  if (url.empty() || address.empty() || events.empty()) return usage();
  std::ifstream in(events);
  if (!in) {
    std::cerr << "ingress_producer: cannot read " << events << "\n";
    return 1;
  }
  // Encoded before the clock starts: the benchmark measures the sending.
  std::vector<proton::message> messages;
  cepbus::EventLineReader reader(in);
  for (;;) {
    cepbus::Result<cepbus::EventPtr> event = reader.next();
    if (!event) {
      if (event.status().code() == cepbus::Status::Code::kNotFound) break;
      std::cerr << "ingress_producer: " << events << ": " << event.status().message() << "\n";
      return 1;
    }
    proton::message& m = messages.emplace_back();
    cepbus::services::amqp::messageFromEvent(**event, m);
    m.id(proton::message_id(static_cast<uint64_t>(messages.size())));
  }
  Producer producer(url, address, std::move(messages));
  proton::container(producer).run();
  std::printf("{\"sent\":%zu,\"accepted\":%zu,\"released\":%zu,\"rejected\":%zu}\n", producer.sent,
              producer.accepted, producer.released, producer.rejected);
  return producer.released + producer.rejected == 0 && producer.accepted == producer.sent ? 0 : 1;
}
