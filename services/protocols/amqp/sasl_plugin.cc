#include "services/protocols/amqp/sasl_plugin.h"

#include <proton/netaddr.h>
#include <proton/sasl_plugin.h>

#include <charconv>
#include <cstring>
#include <map>
#include <mutex>  // std::call_once
#include <set>
#include <string>
#include <string_view>

#include "bus/base/mutex.h"
#include "services/protocols/amqp/listener_sockets.h"

namespace cepbus::services::amqp {
namespace {

constexpr char kAnonymous[] = "ANONYMOUS";
constexpr char kPlain[] = "PLAIN";
constexpr char kExternal[] = "EXTERNAL";

struct Registry {
  Mutex mu;
  std::map<int, std::shared_ptr<const AccessControl>> listeners GUARDED_BY(mu);
  // By port: the sockets of the transports whose AMQP open arrived
  // (socketKey()).
  std::map<int, std::set<std::string>> opened GUARDED_BY(mu);
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: transports may outlive statics
  return *r;
}

// Per transport, owned by Proton through the plugin context.
struct Context {
  std::shared_ptr<const AccessControl> access;  // server side; null: unregistered port
  std::string mechanisms;                       // what the server offered
  std::string user;                             // must outlive the transport's use of it
  std::string initial_response;                 // client side
  int port = -1;                                // server side, once opened:
  std::string socket;                           // its entry in Registry::opened
};

Context& context(pn_transport_t* t) {
  auto* c = static_cast<Context*>(pnx_sasl_get_context(t));
  if (c == nullptr) {
    c = new Context();
    pnx_sasl_set_context(t, c);
  }
  return *c;
}

int localPort(pn_transport_t* t) {
  const pn_netaddr_t* addr = pn_transport_local_addr(t);
  if (addr == nullptr) return -1;
  char host[256];
  char port[32];
  if (pn_netaddr_host_port(addr, host, sizeof host, port, sizeof port) != 0) return -1;
  int value = -1;
  std::from_chars(port, port + std::strlen(port), value);
  return value;
}

bool offered(std::string_view list, std::string_view mech) {
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(' ', at), list.size());
    if (list.substr(at, end - at) == mech) return true;
    at = end + 1;
  }
  return false;
}

// The socket of an accepted transport (listener_sockets.h); "" if unknown.
std::string socketOf(pn_transport_t* t) {
  const pn_netaddr_t* local = pn_transport_local_addr(t);
  const pn_netaddr_t* peer = pn_transport_remote_addr(t);
  if (local == nullptr || peer == nullptr) return {};
  return socketKey(pn_netaddr_sockaddr(local), static_cast<socklen_t>(pn_netaddr_socklen(local)),
                   pn_netaddr_sockaddr(peer), static_cast<socklen_t>(pn_netaddr_socklen(peer)));
}

void freeContext(pn_transport_t* t) {
  auto* c = static_cast<Context*>(pnx_sasl_get_context(t));
  if (c != nullptr && !c->socket.empty()) {
    Registry& r = registry();
    MutexLock lock(r.mu);
    auto it = r.opened.find(c->port);
    if (it != r.opened.end()) it->second.erase(c->socket);
  }
  delete c;
}

const char* listMechanisms(pn_transport_t* t) {
  Context& c = context(t);
  if (c.access) {
    c.mechanisms = c.access->mechanisms(pnx_sasl_is_transport_encrypted(t));
  } else {
    c.mechanisms = kAnonymous;
  }
  return c.mechanisms.c_str();
}

bool initServer(pn_transport_t* t) {
  Context& c = context(t);
  {
    Registry& r = registry();
    MutexLock lock(r.mu);
    auto it = r.listeners.find(localPort(t));
    if (it != r.listeners.end()) c.access = it->second;
  }
  pnx_sasl_set_desired_state(t, SASL_POSTED_MECHANISMS);
  return true;
}

bool initClient(pn_transport_t*) { return true; }

void prepareWrite(pn_transport_t*) {}

void processInit(pn_transport_t* t, const char* mechanism, const pn_bytes_t* recv) {
  Context& c = context(t);
  const std::string_view mech = mechanism;
  bool ok = false;
  if (offered(c.mechanisms, mech)) {
    if (mech == kAnonymous) {
      c.user = "anonymous";
      ok = true;
    } else if (mech == kPlain && c.access && recv != nullptr) {
      // authzid NUL authcid NUL password (RFC 4616); an authzid other than
      // the user itself is not supported.
      const std::string_view msg(recv->start, recv->size);
      const size_t first = msg.find('\0');
      const size_t second = first == std::string_view::npos ? first : msg.find('\0', first + 1);
      if (second != std::string_view::npos) {
        const std::string_view authzid = msg.substr(0, first);
        const std::string_view user = msg.substr(first + 1, second - first - 1);
        const std::string_view password = msg.substr(second + 1);
        if ((authzid.empty() || authzid == user) && c.access->authenticate(user, password)) {
          c.user = std::string(user);
          ok = true;
        }
      }
    }
  }
  if (ok) {
    pnx_sasl_set_succeeded(t, c.user.c_str(), nullptr);
  } else {
    pnx_sasl_set_failed(t);
  }
  pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
}

void processResponse(pn_transport_t*, const pn_bytes_t*) {}

bool hasMech(const char* mechs, std::string_view mech) { return offered(mechs, mech); }

bool processMechanisms(pn_transport_t* t, const char* mechs) {
  Context& c = context(t);
  const char* username = pnx_sasl_get_username(t);
  const char* password = pnx_sasl_get_password(t);
  if (hasMech(mechs, kExternal)) {
    pnx_sasl_set_selected_mechanism(t, kExternal);
    c.initial_response = username ? username : "";
  } else if (hasMech(mechs, kPlain) && username && password &&
             (pnx_sasl_is_transport_encrypted(t) || pnx_sasl_get_allow_insecure_mechanisms(t))) {
    pnx_sasl_set_selected_mechanism(t, kPlain);
    c.initial_response = std::string(1, '\0') + username + '\0' + password;
    pnx_sasl_clear_password(t);
  } else if (hasMech(mechs, kAnonymous)) {
    pnx_sasl_set_selected_mechanism(t, kAnonymous);
    c.initial_response = username ? username : "anonymous";
  } else {
    return false;
  }
  pnx_sasl_set_bytes_out(t, pn_bytes(c.initial_response.size(), c.initial_response.data()));
  pnx_sasl_set_desired_state(t, SASL_POSTED_INIT);
  return true;
}

void processChallenge(pn_transport_t*, const pn_bytes_t*) {}
void processOutcome(pn_transport_t*, const pn_bytes_t*) {}
bool canEncrypt(pn_transport_t*) { return false; }
ssize_t maxEncryptSize(pn_transport_t*) { return 0; }
ssize_t encode(pn_transport_t*, pn_bytes_t, pn_bytes_t*) { return 0; }
ssize_t decode(pn_transport_t*, pn_bytes_t, pn_bytes_t*) { return 0; }

const pnx_sasl_implementation kImplementation = {
    freeContext,      listMechanisms, initServer,      initClient,
    prepareWrite,     processInit,    processResponse, processMechanisms,
    processChallenge, processOutcome, canEncrypt,      maxEncryptSize,
    encode,           decode};

}  // namespace

void installSaslPlugin() {
  static std::once_flag once;
  std::call_once(once, [] { pnx_sasl_set_default_implementation(&kImplementation); });
}

void registerSaslListener(int port, std::shared_ptr<const AccessControl> access) {
  Registry& r = registry();
  MutexLock lock(r.mu);
  r.listeners[port] = std::move(access);
}

void unregisterSaslListener(int port) {
  Registry& r = registry();
  MutexLock lock(r.mu);
  r.listeners.erase(port);
}

void connectionOpened(pn_transport_t* t) {
  // A transport without a context has not been through this plugin: its
  // connection skipped SASL, and the listener refuses it at this open.
  auto* c = static_cast<Context*>(pnx_sasl_get_context(t));
  if (c == nullptr || !c->socket.empty()) return;
  c->port = localPort(t);
  c->socket = socketOf(t);
  if (c->socket.empty()) return;
  Registry& r = registry();
  MutexLock lock(r.mu);
  r.opened[c->port].insert(c->socket);
}

std::set<std::string> openedSockets(int port) {
  Registry& r = registry();
  MutexLock lock(r.mu);
  auto it = r.opened.find(port);
  return it == r.opened.end() ? std::set<std::string>() : it->second;
}

}  // namespace cepbus::services::amqp
