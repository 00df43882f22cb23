#pragma once

// The SASL implementation the AMQP listener plugs into Proton's C core
// (proton/sasl_plugin.h). Proton's built-in SASL (without Cyrus, as in
// Debian) offers ANONYMOUS and EXTERNAL only and cannot check a PLAIN
// password on the server side; this one checks PLAIN against the listener's
// AccessControl and offers ANONYMOUS only when it allows it.
//
// Proton picks a transport's SASL implementation from one process-wide
// default, so installSaslPlugin() replaces it for every transport created
// afterwards, clients included. Client transports behave as Proton's own
// default implementation does (EXTERNAL, PLAIN, ANONYMOUS, in that order of
// preference; PLAIN only over TLS unless insecure mechanisms are allowed).
// A server transport is matched with its listener by the local port it was
// accepted on; one on a port no listener registered offers ANONYMOUS only,
// like Proton's default.
//
// Thread safety: all functions may be called from any thread; Proton calls
// the plugin on the thread processing the transport.

#include <proton/types.h>

#include <memory>
#include <set>
#include <string>

#include "services/protocols/amqp/access_control.h"

namespace cepbus::services::amqp {

// Idempotent.
void installSaslPlugin();

// Connections accepted on `port` authenticate against `access` until
// unregistered. Replaces an earlier registration for the port.
void registerSaslListener(int port, std::shared_ptr<const AccessControl> access);
void unregisterSaslListener(int port);

// The AMQP open of the server-side transport `t` arrived (the listener's
// handler calls it): its handshake is over.
void connectionOpened(pn_transport_t* t);

// The sockets (socketKey(), listener_sockets.h) of the connections accepted
// on `port` whose AMQP open has arrived, each until its transport is freed:
// the handshake deadline no longer applies to them (handshake_watch.h).
std::set<std::string> openedSockets(int port);

}  // namespace cepbus::services::amqp
