#include "services/http/http_listener.h"

#include <Poco/Logger.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "bus/base/mutex.h"
#include "bus/core/event_json.h"
#include "router/registry.h"
#include "router/topic.h"
#include "services/http/admin_api.h"

namespace cepbus::services::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;

namespace {

constexpr std::string_view kFeedPath = "/ws";
// How long, and for how many bytes, a closing connection keeps reading.
constexpr std::chrono::seconds kLingerTime{2};
constexpr size_t kLingerBytes = size_t{1024} * 1024;
// How long the listener waits before accepting again after accept failed.
constexpr std::chrono::milliseconds kAcceptRetry{100};

std::string_view view(beast::string_view s) { return {s.data(), s.size()}; }

// The value of `key` in a query string, percent-decoded ('+' is a space, as
// in forms); nullopt when absent or malformed.
std::optional<std::string> queryParam(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) != key || eq == std::string_view::npos) continue;
    std::string raw(pair.substr(eq + 1));
    for (char& c : raw) {
      if (c == '+') c = ' ';
    }
    return percentDecode(raw);
  }
  return std::nullopt;
}

// What a feed's endpoint consumer shares with its connection.
struct Feed {
  Mutex mu;
  std::deque<std::string> pending GUARDED_BY(mu);
  bool closed GUARDED_BY(mu) = false;      // no more events are taken
  bool overflowed GUARDED_BY(mu) = false;  // closed because the client fell behind
};

// The listener's numbers (scope "http" {name}): written on the io thread,
// read by stats() and the stats store.
struct Counters {
  explicit Counters(stats::ScopePtr listener_scope)
      : scope(std::move(listener_scope)),
        connections(scope->counter(http_stats::kConnections)),
        open_connections(scope->gauge(http_stats::kOpenConnections)),
        ws_clients(scope->gauge(http_stats::kWsClients)),
        connections_refused(scope->counter(http_stats::kConnectionsRefused)),
        ws_refused(scope->counter(http_stats::kWsRefused)),
        request_timeouts(scope->counter(http_stats::kRequestTimeouts)) {}

  HttpListenerStats stats() const {
    HttpListenerStats s;
    s.connections = connections.value();
    s.open_connections = static_cast<uint64_t>(open_connections.value());
    s.ws_clients = static_cast<uint64_t>(ws_clients.value());
    s.connections_refused = connections_refused.value();
    s.ws_refused = ws_refused.value();
    s.request_timeouts = request_timeouts.value();
    return s;
  }

  const stats::ScopePtr scope;
  stats::Counter& connections;
  stats::Gauge& open_connections;
  stats::Gauge& ws_clients;
  stats::Counter& connections_refused;
  stats::Counter& ws_refused;
  stats::Counter& request_timeouts;
};

}  // namespace

struct HttpListenerService::Impl {
  Impl(HttpListenerConfig listener, HttpListenerOptions opts, ServiceContext& ctx)
      : config(std::move(listener)),
        options(std::move(opts)),
        context(ctx),
        log(Poco::Logger::get("cepbus.http")),
        counters(ctx.registry.stats().scope(kHttpSchema, {{"name", options.name}})) {}

  void accept();
  // Registers a feed (io thread only, while running).
  void addFeed(const std::string& endpoint, std::shared_ptr<Feed> feed) {
    feeds.emplace(endpoint, std::move(feed));
    counters.ws_clients.set(static_cast<int64_t>(feeds.size()));
  }
  // Answers 503 and closes at once, without reading: a flood of connections
  // costs a socket for no longer than the accept.
  void refuseConnection(tcp::socket socket);
  // Closes a feed and removes its endpoint (if still there). By value:
  // stop() passes the name held by the map entry this erases.
  void removeFeed(std::string endpoint);
  // Adds the listener's registry entry (lifecycle thread, once listening).
  void report();
  // What every feed's endpoint name begins with; the rest counts the
  // process's feeds from 1.
  std::string feedPrefix() const { return options.name + ":ws/"; }
  // A feed's name is not used again in this process, but a restart counts
  // again: what the flows kept for the feeds of before it is not for the
  // feeds to come, and none of those feeds comes back. Before accepting.
  void forgetFormerFeeds() {
    for (const std::string& feed : context.broker.awayEndpoints(feedPrefix())) {
      context.broker.forgetAway(feed);
    }
  }

  const HttpListenerConfig config;
  const HttpListenerOptions options;
  ServiceContext& context;
  Poco::Logger& log;

  std::unique_ptr<AdminApi> api;
  std::optional<asio::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;
  std::thread thread;
  std::atomic<int> port{0};
  bool running = false;
  bool stopped = false;
  uint64_t next_feed = 0;  // io thread only
  // Open feeds by endpoint name: touched on the io thread while it runs and
  // by stop() once it has been joined.
  std::map<std::string, std::shared_ptr<Feed>> feeds;

  Counters counters;
  std::shared_ptr<router::ComponentEntry> entry;  // the listener's registry entry
};

namespace {

using Impl = HttpListenerService::Impl;

// One open connection, counted while its holder (an HTTP session, then the
// feed it became) lives.
class ConnectionSlot {
 public:
  explicit ConnectionSlot(Impl& impl) : impl_(&impl) { impl.counters.open_connections.inc(); }
  ConnectionSlot(ConnectionSlot&& other) noexcept : impl_(std::exchange(other.impl_, nullptr)) {}
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ~ConnectionSlot() {
    if (impl_ != nullptr) impl_->counters.open_connections.dec();
  }

 private:
  Impl* impl_;
};

// One WebSocket feed connection. Its endpoint subscribes before the
// handshake is answered, so a client that has its handshake back misses no
// event published afterwards; events wait in the feed until the handshake
// is done.
class FeedSession : public std::enable_shared_from_this<FeedSession> {
 public:
  FeedSession(Impl& impl, std::string pattern, ConnectionSlot slot)
      : impl_(impl), pattern_(std::move(pattern)), slot_(std::move(slot)) {}

  // Adds the endpoint and subscribes it (io thread).
  Status subscribe() {
    endpoint_ = impl_.feedPrefix() + std::to_string(++impl_.next_feed);
    feed_ = std::make_shared<Feed>();
    std::weak_ptr<FeedSession> weak = weak_from_this();
    auto executor = impl_.ioc->get_executor();
    const size_t capacity = impl_.options.ws_buffer;
    // Any flow thread. The feed is closed before the io_context goes away,
    // so posting while it is open is safe.
    auto consumer = [feed = feed_, weak, executor, capacity](const flows::Exchange& ex,
                                                             flows::DeliveryContext&) {
      std::string line = encodeEvent(*ex.event);
      MutexLock lock(feed->mu);
      if (feed->closed) return Status::unavailable("websocket feed closed");
      const bool overflow = feed->pending.size() >= capacity;
      if (overflow) {
        feed->closed = true;
        feed->overflowed = true;
        feed->pending.clear();
      } else {
        feed->pending.push_back(std::move(line));
      }
      if (overflow || feed->pending.size() == 1) {
        asio::post(executor, [weak] {
          if (auto self = weak.lock()) self->drain();
        });
      }
      return overflow ? Status::unavailable("websocket client too slow") : Status::ok();
    };
    router::Broker& broker = impl_.context.broker;
    if (Status added = broker.addEndpoint(endpoint_, std::move(consumer), impl_.options.name);
        !added) {
      return added;
    }
    Result<router::SubscriptionId> subscribed = broker.subscribe(endpoint_, pattern_);
    if (!subscribed) {
      (void)broker.removeEndpoint(endpoint_);  // undoing; the subscribe error is the one
      return subscribed.status();
    }
    impl_.addFeed(endpoint_, feed_);
    return Status::ok();
  }

  void run(beast::tcp_stream stream, const bhttp::request<bhttp::string_body>& request) {
    ws_.emplace(std::move(stream));
    beast::get_lowest_layer(*ws_).expires_never();
    ws_->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_->async_accept(request, [self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        self->finish();
        return;
      }
      self->accepted_ = true;
      self->read();
      self->drain();
    });
  }

  // Io thread: sends what is pending, one frame at a time.
  void drain() {
    if (!accepted_ || writing_ || done_) return;
    bool overflowed = false;
    {
      MutexLock lock(feed_->mu);
      overflowed = feed_->overflowed;
      if (!overflowed) {
        if (feed_->pending.empty()) return;
        current_ = std::move(feed_->pending.front());
        feed_->pending.pop_front();
      }
    }
    if (overflowed) {
      closeTooSlow();
      return;
    }
    writing_ = true;
    ws_->text(true);
    ws_->async_write(asio::buffer(current_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec) {
                         self->finish();
                         return;
                       }
                       self->drain();
                     });
  }

 private:
  // Reads (and ignores) what the client sends, to see its close frame.
  void read() {
    ws_->async_read(incoming_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->finish();
        return;
      }
      self->incoming_.clear();
      self->read();
    });
  }

  // Once no write is in flight.
  void closeTooSlow() {
    const std::string reason =
        "client too slow: more than " + std::to_string(impl_.options.ws_buffer) + " events waiting";
    impl_.log.warning("%s: closing websocket feed %s: %s", impl_.options.name, endpoint_, reason);
    finish();  // unsubscribes now rather than after the close handshake
    ws_->async_close(websocket::close_reason(websocket::close_code::try_again_later, reason),
                     [self = shared_from_this()](beast::error_code) {});
  }

  // The connection is over: the endpoint goes, and with it the subscription.
  void finish() {
    done_ = true;
    if (!removed_) {
      removed_ = true;
      impl_.removeFeed(endpoint_);
    }
  }

  Impl& impl_;
  const std::string pattern_;
  ConnectionSlot slot_;
  std::optional<websocket::stream<beast::tcp_stream>> ws_;
  std::string endpoint_;
  std::shared_ptr<Feed> feed_;
  beast::flat_buffer incoming_;
  std::string current_;  // the frame being written
  bool accepted_ = false;
  bool writing_ = false;
  bool done_ = false;     // nothing more is written
  bool removed_ = false;  // the endpoint is gone
};

bool isParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category();
}

// One HTTP connection: requests answered in turn.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, Impl& impl)
      : stream_(std::move(socket)), impl_(impl), slot_(impl), deadline_(stream_.get_executor()) {}

  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(impl_.options.max_header_bytes));
    parser_->body_limit(impl_.options.max_body_bytes);
    stream_.expires_after(impl_.options.idle_timeout);
    reading_ = true;
    deadline_.expires_after(impl_.options.request_timeout);
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->reading_) return;
      // The read ends with operation_aborted; onRead answers 408.
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->onRead(ec); });
  }

 private:
  void onRead(beast::error_code ec) {
    reading_ = false;
    deadline_.cancel();
    if (timed_out_) {
      impl_.counters.request_timeouts.inc();
      respond(adminError(408, "request not read within request-timeout=" +
                                  std::to_string(impl_.options.request_timeout.count()) + " ms"),
              false, 11);
      return;
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message) {
      close();
      return;
    }
    if (ec && isParseError(ec)) {
      int status = 400;
      if (ec == bhttp::error::body_limit) status = 413;
      if (ec == bhttp::error::header_limit) status = 431;
      respond(adminError(status, "malformed request: " + ec.message()), false, 11);
      return;
    }
    if (ec) return;  // timeout or a reset: the stream is closed with the session
    bhttp::request<bhttp::string_body>& request = parser_->get();
    const std::string_view target = view(request.target());
    if (target.substr(0, target.find('?')) == kFeedPath) {
      openFeed(parser_->release());
      return;
    }
    AdminResponse response;
    try {
      response = impl_.api->handle(AdminRequest{view(request.method_string()), target,
                                                view(request[bhttp::field::authorization]),
                                                request.body()});
    } catch (const std::exception& e) {
      response = adminError(500, std::string("internal error: ") + e.what());
    }
    respond(std::move(response), request.keep_alive(), request.version());
  }

  void openFeed(const bhttp::request<bhttp::string_body>& request) {
    const bool keep_alive = request.keep_alive();
    const unsigned version = request.version();
    if (request.method() != bhttp::verb::get) {
      AdminResponse refused = adminError(405, "the feed takes GET (a WebSocket upgrade)");
      refused.allow = "GET";
      respond(std::move(refused), keep_alive, version);
      return;
    }
    if (!websocket::is_upgrade(request)) {
      respond(adminError(400, "/ws is a WebSocket feed: send an Upgrade: websocket request"),
              keep_alive, version);
      return;
    }
    const std::string_view target = view(request.target());
    const size_t question = target.find('?');
    std::optional<std::string> pattern = question == std::string_view::npos
                                             ? std::nullopt
                                             : queryParam(target.substr(question + 1), "address");
    if (!pattern) {
      respond(adminError(400, "/ws needs ?address=PATTERN"), false, version);
      return;
    }
    if (Status valid = router::validatePattern(*pattern); !valid) {
      respond(adminError(400, valid.message()), false, version);
      return;
    }
    if (impl_.feeds.size() >= impl_.options.max_ws_clients) {
      impl_.counters.ws_refused.inc();
      respond(adminError(503, "too many WebSocket clients: max-ws-clients=" +
                                  std::to_string(impl_.options.max_ws_clients)),
              false, version);
      return;
    }
    auto feed = std::make_shared<FeedSession>(impl_, std::move(*pattern), std::move(slot_));
    if (Status subscribed = feed->subscribe(); !subscribed) {
      respond(adminError(500, "cannot open the feed: " + subscribed.message()), false, version);
      return;
    }
    feed->run(std::move(stream_), request);
  }

  void respond(AdminResponse response, bool keep_alive, unsigned version) {
    response_.emplace(static_cast<bhttp::status>(response.status), version);
    response_->set(bhttp::field::server, "cepbus");
    response_->set(bhttp::field::content_type, response.content_type);
    if (!response.allow.empty()) response_->set(bhttp::field::allow, response.allow);
    if (response.bearer_challenge) {
      response_->set(bhttp::field::www_authenticate, "Bearer realm=\"cepbus\"");
    }
    response_->body() = std::move(response.body);
    response_->keep_alive(keep_alive);
    response_->prepare_payload();
    bhttp::async_write(stream_, *response_,
                       [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                         if (ec) return;
                         if (keep_alive) {
                           self->read();
                         } else {
                           self->close();
                         }
                       });
  }

  // Half-closes, then reads what the client still sends (a refused body, the
  // rest of an oversized header) until it closes too: closing a socket with
  // unread data would reset the connection and could destroy the response
  // before the client has read it.
  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    linger();
  }

  void linger() {
    stream_.async_read_some(asio::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->lingered_ += n;
                              if (!ec && self->lingered_ <= kLingerBytes) self->linger();
                            });
  }

  beast::tcp_stream stream_;
  Impl& impl_;
  ConnectionSlot slot_;
  asio::steady_timer deadline_;  // request_timeout for the request being read
  bool reading_ = false;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::string_body>> response_;
  std::array<char, 4096> discard_;
  size_t lingered_ = 0;
};

}  // namespace

void Impl::accept() {
  acceptor->async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;  // stopping
    if (!ec) {
      counters.connections.inc();
      if (counters.open_connections.value() >= static_cast<int64_t>(options.max_connections)) {
        refuseConnection(std::move(socket));
      } else {
        std::make_shared<HttpSession>(std::move(socket), *this)->read();
      }
      accept();
      return;
    }
    // Out of descriptors, typically: accepting again at once would spin.
    log.warning("%s: accept failed: %s", options.name, ec.message());
    accept_retry->expires_after(kAcceptRetry);
    accept_retry->async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) accept();
    });
  });
}

void Impl::refuseConnection(tcp::socket socket) {
  counters.connections_refused.inc();
  const std::string body = adminError(503, "too many connections: max-connections=" +
                                               std::to_string(options.max_connections))
                               .body;
  const std::string response =
      "HTTP/1.1 503 Service Unavailable\r\nServer: cepbus\r\nContent-Type: "
      "application/json\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  // Never blocks the io thread: what does not fit in the socket's buffer is lost.
  beast::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(asio::buffer(response), ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the caller's may be the erased key
void Impl::removeFeed(std::string endpoint) {
  auto it = feeds.find(endpoint);
  if (it == feeds.end()) return;
  {
    MutexLock lock(it->second->mu);
    it->second->closed = true;
    it->second->pending.clear();
  }
  feeds.erase(it);
  counters.ws_clients.set(static_cast<int64_t>(feeds.size()));
  // Closing: gone is fine. A feed's name is never used again.
  (void)context.broker.removeEndpoint(endpoint, router::EndpointExit::kForGood);
}

void Impl::report() {
  auto added = context.registry.add(options.name, router::ComponentKind::kService);
  if (!added) {
    log.warning("%s: no registry entry: %s", options.name, added.status().message());
    return;
  }
  entry = *added;
  entry->setMetadata("type", "http-listener");
  entry->setMetadata("address", config.host + ":" + std::to_string(port.load()));
  entry->setState(router::ComponentState::kStarted);
}

HttpListenerService::HttpListenerService(HttpListenerConfig listener, HttpListenerOptions options,
                                         ServiceContext& context)
    : impl_(std::make_unique<Impl>(std::move(listener), std::move(options), context)) {}

HttpListenerService::~HttpListenerService() { stop(); }

const std::string& HttpListenerService::name() const { return impl_->options.name; }

Status HttpListenerService::start() {
  Impl& impl = *impl_;
  if (impl.running) return Status::ok();
  if (impl.stopped) {
    return Status::unavailable(impl.options.name + ": a stopped listener cannot be restarted");
  }
  std::string token;
  if (!impl.config.token_env.empty()) {
    if (const char* value = std::getenv(impl.config.token_env.c_str())) token = value;
  }
  impl.api = std::make_unique<AdminApi>(
      impl.context.broker, impl.context.registry, std::move(token), impl.config.token_env,
      impl.context.deployer, &impl.context.plugins, impl.options.max_names);
  impl.ioc.emplace(1);
  const std::string address = impl.config.host + ":" + std::to_string(impl.config.port);
  const auto refuse = [&](const beast::error_code& ec) {
    impl.acceptor.reset();
    impl.ioc.reset();
    return Status::invalidArgument(impl.config.where.toString() + ": <http> cannot listen on " +
                                   address + ": " + ec.message());
  };
  beast::error_code ec;
  tcp::resolver resolver(*impl.ioc);
  const tcp::resolver::results_type found =
      resolver.resolve(impl.config.host, std::to_string(impl.config.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) return refuse(ec);
  if (found.empty()) return refuse(asio::error::host_not_found);
  const tcp::endpoint endpoint = found.begin()->endpoint();
  impl.acceptor.emplace(*impl.ioc);
  impl.acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl.acceptor->bind(endpoint, ec);
  if (!ec) impl.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return refuse(ec);
  impl.port = impl.acceptor->local_endpoint().port();
  impl.accept_retry.emplace(*impl.ioc);
  impl.forgetFormerFeeds();
  impl.accept();
  impl.thread = std::thread([&impl] { impl.ioc->run(); });
  impl.running = true;
  impl.report();
  const bool ipv6 = impl.config.host.find(':') != std::string::npos;
  const std::string url = "http://" + (ipv6 ? "[" + impl.config.host + "]" : impl.config.host) +
                          ":" + std::to_string(impl.port.load()) + "/";
  // Notice: shown at the default log level, and by operators who lower it.
  impl.log.notice("admin listening on %s - dashboard: %s  REST API: %sapi/  metrics: %smetrics",
                  url, url, url, url);
  return Status::ok();
}

void HttpListenerService::stop() {
  Impl& impl = *impl_;
  if (!impl.running) return;
  impl.running = false;
  impl.stopped = true;
  impl.ioc->stop();
  impl.thread.join();
  // The io thread is gone: close the feeds before the io_context they post to.
  while (!impl.feeds.empty()) impl.removeFeed(impl.feeds.begin()->first);
  impl.accept_retry.reset();
  impl.acceptor.reset();
  impl.ioc.reset();  // destroys the pending handlers and with them the connections
  if (impl.entry) {
    impl.entry->setState(router::ComponentState::kStopped);
    impl.context.registry.remove(impl.options.name);
    impl.entry.reset();
  }
  impl.log.information("admin listener stopped");
}

int HttpListenerService::port() const { return impl_->port.load(); }

HttpListenerStats HttpListenerService::stats() const { return impl_->counters.stats(); }

std::unique_ptr<Service> makeHttpListener(const HttpListenerConfig& listener,
                                          ServiceContext& context) {
  HttpListenerOptions options;
  options.name = "http-listener";
  options.max_connections =
      static_cast<size_t>(listener.max_connections.value_or(options.max_connections));
  options.max_ws_clients =
      static_cast<size_t>(listener.max_ws_clients.value_or(options.max_ws_clients));
  options.max_names = static_cast<uint32_t>(listener.max_names.value_or(options.max_names));
  if (listener.request_timeout_ms) {
    options.request_timeout = std::chrono::milliseconds(*listener.request_timeout_ms);
  }
  return std::make_unique<HttpListenerService>(listener, std::move(options), context);
}

}  // namespace cepbus::services::http
