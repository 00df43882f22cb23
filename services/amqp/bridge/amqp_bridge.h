#pragma once

// AmqpBridge: the bus as an AMQP 1.0 client of another peer (another cepbus,
// a broker), bridging events out to an address there or in from one.
//
//   <service-unit name="to-hq" type="amqp-bridge">
//     <param name="url" value="amqps://hq.example.org:5671"/>
//     <param name="remote-address" value="plant3.alarms"/>
//     <param name="direction" value="out"/>
//     <param name="user" value="plant3"/>            <!-- SASL PLAIN; else ANONYMOUS -->
//     <param name="password-env" value="HQ_PASSWORD"/> <!-- never the password itself -->
//     <param name="ca" value="hq-ca.pem"/>           <!-- trusted CA for amqps -->
//     <param name="peer-name" value="hq.example.org"/> <!-- the name its certificate
//                                                        must carry; default: the url's host -->
//     <param name="reconnect-delay-ms" value="1000"/>
//     <subscribe address="alarms.#"/>                <!-- out: what goes out -->
//   </service-unit>
//
// - direction="out": the unit subscribes on the bus with its <subscribe>
//   patterns and sends each event, unsettled, to `remote-address` on the
//   peer. A journaled (reliable-route) event is acknowledged to its flow only
//   when the peer accepts it; one the peer releases is sent again (marked as
//   a redelivery). At most `buffer` events wait for the peer (beyond that the
//   endpoint answers Rejected, which a reliable flow retries).
// - direction="in": the unit attaches a receiver to `remote-address` (which
//   may be a pattern on a cepbus peer) and publishes each message, mapped as
//   by the listener, to its <publish> address, asking for reliable QoS; it
//   accepts the message once the bus took it, releases it when the bus
//   refused it, rejects it when it cannot be mapped.
// - The connection is re-established after `reconnect-delay-ms` whenever it
//   fails or drops, and when the peer refuses or closes the bridge's link;
//   what was sent but not settled is sent again.
// - Credentials: the password comes from the environment variable that
//   `password-env` names, never from the descriptor. It is sent (SASL
//   PLAIN) only over amqps:// or to a loopback host: a user with amqp:// to
//   any other host is a configuration error.
// - Failures (peer unreachable, TLS or SASL refused, link refused as
//   amqp:unauthorized-access, an out event rejected by the peer) are counted
//   in `errors`/`rejected` and logged as warnings naming the bridge, the url
//   and the peer's error condition; the same error is not logged again
//   until the bridge's link was attached in between. While it is not, the
//   bridge's registry entry is `failed` with the last error as reason.
// - Out events while the peer is away or refuses the bridge: the bus hands
//   them over and they wait in memory (`waiting`) up to `buffer`; beyond that
//   the endpoint answers Rejected (an AMQP publisher on the bus sees its
//   unsettled message released). They go out once the bridge connects. At
//   stop(), journaled ones go back to their flow (kept journaled); the
//   others are dropped, counted and logged.
// - Statistics: every counter of stats() is in the stats scope
//   "amqp_bridge" {name}; the registry entry `name` (kind service) has
//   type, url, direction and remote-address as metadata.
//
// Thread-safety: the Service calls are made by one thread; connected() and
// stats() from any.
// Ownership: owns its Proton container and thread and its endpoint.

#include <cstdint>
#include <memory>
#include <string>

#include "bus/base/stats/store.h"
#include "services/service.h"

namespace cepbus::services::amqp {

struct AmqpBridgeConfig {
  std::string name;  // "<assembly>.<unit>"; also the Proton container id
  std::string url;   // "host:port", "amqp://host:port" or "amqps://host:port"
  std::string remote_address;
  bool outgoing = true;
  std::string local_address;  // out: the subscription pattern; in: the topic published to
  std::string user;           // empty: SASL ANONYMOUS
  std::string password;
  std::string ca;  // PEM of the trusted CA for amqps; empty: the system's defaults
  // amqps: the name the peer's certificate must carry (Proton checks DNS
  // names only, so an IP address in `url` needs one); empty: the url's host.
  std::string peer_name;
  int reconnect_delay_ms = 1000;
  size_t buffer = 10000;         // out: events waiting for the peer
  uint32_t credit_window = 100;  // in: credit given to the peer
};

// The families of the scope "amqp_bridge" {name}: AmqpBridgeStats.
namespace amqp_bridge_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kConnects =
    MetricSpec::counter("connects", "Connections to the peer opened (reconnects included).");
inline constexpr MetricSpec kErrors = MetricSpec::counter(
    "errors", "Connections that failed or ended (the peer went away or refused).");
inline constexpr MetricSpec kWaiting =
    MetricSpec::gauge("waiting", "Out: events held for the peer (unsettled ones included).");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Out: events the peer rejected (final, not sent again).");
inline constexpr MetricSpec kDropped =
    MetricSpec::counter("dropped", "Out: events not journaled and still waiting at stop.");
inline constexpr MetricSpec kSent =
    MetricSpec::counter("sent", "Out: messages sent (resends included).");
inline constexpr MetricSpec kAccepted =
    MetricSpec::counter("accepted", "Out: messages the peer accepted.");
inline constexpr MetricSpec kResent =
    MetricSpec::counter("resent", "Out: messages sent again after a release or a reconnect.");
inline constexpr MetricSpec kReceived = MetricSpec::counter("received", "In: messages received.");
inline constexpr MetricSpec kPublished =
    MetricSpec::counter("published", "In: messages published on the bus and accepted.");
inline constexpr MetricSpec kRefused = MetricSpec::counter(
    "refused", "In: messages released (the bus refused them) or rejected (malformed).");
inline constexpr MetricSpec kAll[] = {kConnects, kErrors, kWaiting,  kRejected,  kDropped, kSent,
                                      kAccepted, kResent, kReceived, kPublished, kRefused};
}  // namespace amqp_bridge_stats
inline constexpr stats::Schema kAmqpBridgeSchema{"amqp_bridge", amqp_bridge_stats::kAll};

struct AmqpBridgeStats {
  uint64_t connects = 0;   // connections opened (reconnects included)
  uint64_t errors = 0;     // connections that failed or ended (the peer went away or refused)
  uint64_t waiting = 0;    // out: events held for the peer (now; unsettled ones included)
  uint64_t rejected = 0;   // out: rejected by the peer (final, not sent again)
  uint64_t dropped = 0;    // out: not journaled and still waiting at stop()
  uint64_t sent = 0;       // out: messages sent (resends included)
  uint64_t accepted = 0;   // out: accepted by the peer
  uint64_t resent = 0;     // out: sent again after a release or a reconnect
  uint64_t received = 0;   // in: messages received
  uint64_t published = 0;  // in: published on the bus and accepted
  uint64_t refused = 0;    // in: released (the bus refused) or rejected (malformed)
};

class AmqpBridge final : public Service {
 public:
  AmqpBridge(AmqpBridgeConfig config, ServiceContext& context);
  ~AmqpBridge() override;

  const std::string& name() const override;
  // Registers the endpoint (out) and starts connecting; a peer that is not
  // there yet is retried, not an error.
  Status start() override;
  void stop() override;
  // True while the bridge's link to the peer is attached.
  bool connected() const;
  AmqpBridgeStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class AmqpBridgeFactory final : public ServiceFactory {
 public:
  std::string_view type() const override { return "amqp-bridge"; }
  Result<std::unique_ptr<Service>> create(const descriptor::ServiceAssembly& assembly,
                                          const descriptor::ServiceUnit& unit,
                                          ServiceContext& context) const override;
};

}  // namespace cepbus::services::amqp
