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
  Producer(std::string url, std::string address, std::vector<cepbus::EventPtr> events)
      : url_(std::move(url)), address_(std::move(address)), events_(std::move(events)) {}

  void on_container_start(proton::container& c) override {
    c.open_sender(url_ + "/" + address_,
                  proton::connection_options().sasl_allowed_mechs("ANONYMOUS"));
  }
  void on_sendable(proton::sender& s) override {
    while (s.credit() > 0 && sent < events_.size()) {
      cepbus::services::amqp::messageFromEvent(*events_[sent], message_);
      message_.id(proton::message_id(static_cast<uint64_t>(++sent)));
      s.send(message_);
    }
  }
  void on_tracker_accept(proton::tracker& t) override { settled(t, accepted); }
  void on_tracker_release(proton::tracker& t) override { settled(t, released); }
  void on_tracker_reject(proton::tracker& t) override { settled(t, rejected); }

  size_t sent = 0, accepted = 0, released = 0, rejected = 0;

 private:
  void settled(proton::tracker& t, size_t& outcome) {
    ++outcome;
    if (accepted + released + rejected == events_.size()) t.connection().close();
  }

  const std::string url_, address_;
  const std::vector<cepbus::EventPtr> events_;
  proton::message message_;  // reused: each event is mapped as it goes
};

int usage() {
  std::cerr << "usage: ingress_producer --url HOST:PORT --address ADDRESS --events FILE\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url, address, file;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--url") {
      url = argv[i + 1];
    } else if (flag == "--address") {
      address = argv[i + 1];
    } else if (flag == "--events") {
      file = argv[i + 1];
    } else {
      return usage();
    }
  }
  if (url.empty() || address.empty() || file.empty()) return usage();
  std::ifstream in(file);
  if (!in) {
    std::cerr << "ingress_producer: cannot read " << file << "\n";
    return 1;
  }
  std::vector<cepbus::EventPtr> events;
  cepbus::EventLineReader reader(in);
  for (;;) {
    cepbus::Result<cepbus::EventPtr> event = reader.next();
    if (!event) {
      if (event.status().code() == cepbus::Status::Code::kNotFound) break;
      std::cerr << "ingress_producer: " << file << ": " << event.status().message() << "\n";
      return 1;
    }
    events.push_back(std::move(event).value());
  }
  Producer producer(url, address, std::move(events));
  proton::container(producer).run();
  std::printf("{\"sent\":%zu,\"accepted\":%zu,\"released\":%zu,\"rejected\":%zu}\n", producer.sent,
              producer.accepted, producer.released, producer.rejected);
  return producer.released + producer.rejected == 0 && producer.accepted == producer.sent ? 0 : 1;
}
