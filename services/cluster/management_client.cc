#include "services/cluster/management_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <optional>
#include <type_traits>
#include <utility>

namespace cepbus::services::cluster {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

bhttp::verb verbOf(HttpMethod method) {
  switch (method) {
    case HttpMethod::kGet:
      return bhttp::verb::get;
    case HttpMethod::kPut:
      return bhttp::verb::put;
    case HttpMethod::kPost:
      return bhttp::verb::post;
    case HttpMethod::kDelete:
      return bhttp::verb::delete_;
  }
  return bhttp::verb::get;
}

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) |
                       uint32_t(uint8_t(in[i + 2]));
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

// One exchange with one broker on a private io_context: the asynchronous
// operations are what carries Beast's timeouts (tcp_stream::expires_after),
// which its synchronous calls do not honour. Stream is beast::tcp_stream
// for HTTP or ssl_stream<tcp_stream> for HTTPS.
template <class Stream>
class Exchange {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... TlsArgs>
  Exchange(const ManagementEndpoint& broker, const ManagementOptions& options, TlsArgs&... tls_args)
      : broker_(broker), options_(options), resolver_(ioc_), stream_(ioc_, tls_args...) {}

  Result<HttpResponse> run(bhttp::request<bhttp::string_body> request) {
    request_ = std::move(request);
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    tcp().expires_after(options_.timeout);
    resolver_.async_resolve(broker_.host, std::to_string(broker_.port),
                            [this](beast::error_code ec, tcp::resolver::results_type results) {
                              if (fail(ec, "resolve")) return;
                              tcp().async_connect(
                                  results, [this](beast::error_code ec2, const tcp::endpoint&) {
                                    if (fail(ec2, "connect")) return;
                                    onConnected();
                                  });
                            });
    // The resolver has no timeout of its own; run_for bounds it too.
    ioc_.run_for(options_.timeout + std::chrono::milliseconds(100));
    if (!done_) {
      error_ = "timed out after " + std::to_string(options_.timeout.count()) + " ms";
    }
    if (!error_.empty()) return Status::unavailable(error_);
    HttpResponse response;
    response.status = static_cast<int>(parser_->get().result_int());
    response.body = std::move(parser_->get().body());
    return response;
  }

 private:
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  void onConnected() {
    if constexpr (kTls) {
      const std::string& peer =
          options_.tls->peer_name.empty() ? broker_.host : options_.tls->peer_name;
      // SNI, for a broker behind a name-routing proxy; the verification
      // below is what checks the name.
      SSL_set_tlsext_host_name(stream_.native_handle(), peer.c_str());
      stream_.set_verify_callback(asio::ssl::host_name_verification(peer));
      stream_.async_handshake(asio::ssl::stream_base::client, [this](beast::error_code ec) {
        if (fail(ec, "TLS handshake")) return;
        exchange();
      });
    } else {
      exchange();
    }
  }

  void exchange() {
    bhttp::async_write(stream_, request_, [this](beast::error_code ec, size_t) {
      if (fail(ec, "write")) return;
      bhttp::async_read(stream_, buffer_, *parser_, [this](beast::error_code ec2, size_t) {
        if (fail(ec2, "read")) return;
        done_ = true;
        // Connection: close, the answer read: no TLS close_notify to wait for.
        beast::error_code ignored;
        tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    });
  }

  // Records the first failure; true when `ec` is one.
  bool fail(beast::error_code ec, const char* what) {
    if (!ec) return false;
    done_ = true;
    error_ = std::string(what) + ": " +
             (ec == beast::error::timeout
                  ? "timed out after " + std::to_string(options_.timeout.count()) + " ms"
                  : describe(ec));
    return true;
  }

  // OpenSSL's reason ("certificate verify failed") rather than Asio's
  // category text alone.
  static std::string describe(beast::error_code ec) {
    if (ec.category() == asio::error::get_ssl_category()) {
      const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
      if (reason != nullptr) return reason;
    }
    return ec.message();
  }

  const ManagementEndpoint& broker_;
  const ManagementOptions& options_;
  asio::io_context ioc_;
  tcp::resolver resolver_;
  Stream stream_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> request_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  bool done_ = false;
  std::string error_;
};

// The Status of an answer that is not a success.
Status statusOfAnswer(HttpMethod method, const HttpResponse& response) {
  std::string message = describeAnswer(method, response);
  switch (response.status) {
    case 404:
      return Status::notFound(std::move(message));
    case 400:
    case 405:
    case 409:
      return Status::invalidArgument(std::move(message));
    case 401:
    case 403:
      return Status::rejected(std::move(message));
    default:
      return Status::ioError(std::move(message));
  }
}

}  // namespace

const char* methodName(HttpMethod method) {
  switch (method) {
    case HttpMethod::kGet:
      return "GET";
    case HttpMethod::kPut:
      return "PUT";
    case HttpMethod::kPost:
      return "POST";
    case HttpMethod::kDelete:
      return "DELETE";
  }
  return "?";
}

std::string urlOf(const ManagementEndpoint& broker, std::string_view target, bool tls) {
  const bool v6 = broker.host.find(':') != std::string::npos;
  return (tls ? "https://" : "http://") + (v6 ? "[" + broker.host + "]" : broker.host) + ":" +
         std::to_string(broker.port) + std::string(target);
}

std::string percentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string basicAuthorization(std::string_view user, std::string_view password) {
  std::string credentials(user);
  credentials += ':';
  credentials += password;
  return "Basic " + base64(credentials);
}

std::string errorReason(std::string_view body) {
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    for (const char* key : {"reason", "error"}) {
      const auto it = json.find(key);
      if (it != json.end() && it->is_string() && !it->get<std::string>().empty()) {
        return it->get<std::string>();
      }
    }
  }
  std::string line(body.substr(0, body.find_first_of("\r\n")));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line.empty() ? "(empty body)" : line;
}

std::string describeAnswer(HttpMethod method, const HttpResponse& response) {
  return std::string(methodName(method)) + " " + response.url + ": HTTP " +
         std::to_string(response.status) + ": " + errorReason(response.body);
}

// The client side of HTTPS: the cluster's CA, loaded once and shared by
// every request (OpenSSL's SSL_CTX may be used from several threads).
class ManagementClient::TlsContext {
 public:
  explicit TlsContext(const std::filesystem::path& ca) : context_(asio::ssl::context::tls_client) {
    context_.set_verify_mode(asio::ssl::verify_peer);
    beast::error_code ec;
    context_.load_verify_file(ca.string(), ec);
    if (ec) error_ = "TLS: cannot load the CA file " + ca.string() + ": " + ec.message();
  }
  const std::string& error() const { return error_; }
  // Beast's streams take the context by reference and only read it.
  asio::ssl::context& context() const { return context_; }

 private:
  mutable asio::ssl::context context_;
  std::string error_;
};

ManagementClient::ManagementClient(std::vector<ManagementEndpoint> brokers,
                                   ManagementOptions options)
    : brokers_(std::move(brokers)),
      options_(std::move(options)),
      authorization_(basicAuthorization(options_.user, options_.password)),
      tls_(options_.tls ? std::make_shared<const TlsContext>(options_.tls->ca) : nullptr) {}

ManagementClient ManagementClient::forCluster(const ClusterSpec& spec, std::string password) {
  std::vector<ManagementEndpoint> brokers;
  for (const auto& b : spec.brokers) brokers.push_back({b.host, b.management_port});
  ManagementOptions options;
  options.user = spec.user;
  options.password = std::move(password);
  options.tls = spec.tls;
  return ManagementClient(std::move(brokers), std::move(options));
}

Result<HttpResponse> ManagementClient::requestOne(const ManagementEndpoint& broker,
                                                  HttpMethod method, std::string_view target,
                                                  std::string_view json_body,
                                                  std::string_view reason_header) const {
  bhttp::request<bhttp::string_body> request{verbOf(method), std::string(target), 11};
  request.set(bhttp::field::host, broker.host + ":" + std::to_string(broker.port));
  request.set(bhttp::field::authorization, authorization_);
  request.set(bhttp::field::accept, "application/json");
  request.set(bhttp::field::connection, "close");
  request.set(bhttp::field::user_agent, "cepbus");
  if (!reason_header.empty()) request.set("X-Reason", std::string(reason_header));
  if (method == HttpMethod::kPut || method == HttpMethod::kPost) {
    request.set(bhttp::field::content_type, "application/json");
    request.body() = std::string(json_body);
  }
  request.prepare_payload();
  auto response =
      tls_ ? Exchange<beast::ssl_stream<beast::tcp_stream>>(broker, options_, tls_->context())
                 .run(std::move(request))
           : Exchange<beast::tcp_stream>(broker, options_).run(std::move(request));
  if (response) response->url = urlOf(broker, target, tls_ != nullptr);
  return response;
}

Result<HttpResponse> ManagementClient::request(HttpMethod method, std::string_view target,
                                               std::string_view json_body,
                                               std::string_view reason_header) const {
  if (brokers_.empty()) {
    return Status::invalidArgument(std::string(methodName(method)) + " " + std::string(target) +
                                   ": no broker in the failover list");
  }
  // Not a broker's failure: no other broker would do better.
  if (tls_ && !tls_->error().empty()) return Status::invalidArgument(tls_->error());
  std::string failures;
  for (const auto& broker : brokers_) {
    auto response = requestOne(broker, method, target, json_body, reason_header);
    if (response && response->status < 500) return response;
    if (!failures.empty()) failures += "; ";
    failures +=
        std::string(methodName(method)) + " " + urlOf(broker, target, tls_ != nullptr) + ": " +
        (response ? "HTTP " + std::to_string(response->status) + ": " + errorReason(response->body)
                  : response.status().message());
  }
  return Status::unavailable("no broker answered: " + failures);
}

namespace {

// The JSON of a 200 answer, or the error the answer means.
Result<nlohmann::json> answerOf(HttpMethod method, const Result<HttpResponse>& response) {
  if (!response) return response.status();
  if (response->status != 200) return statusOfAnswer(method, *response);
  auto json = nlohmann::json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return Status::ioError(std::string(methodName(method)) + " " + response->url +
                           ": HTTP 200 but the body is not JSON: " + errorReason(response->body));
  }
  return json;
}

}  // namespace

Result<nlohmann::json> ManagementClient::getJson(std::string_view target) const {
  return answerOf(HttpMethod::kGet, request(HttpMethod::kGet, target));
}

Result<nlohmann::json> ManagementClient::postJson(std::string_view target,
                                                  const nlohmann::json& body) const {
  return answerOf(HttpMethod::kPost, request(HttpMethod::kPost, target, body.dump()));
}

Status ManagementClient::sendJson(HttpMethod method, std::string_view target,
                                  const nlohmann::json& body) const {
  auto response = request(method, target, body.dump());
  if (!response) return response.status();
  if (response->status == 200 || response->status == 201 || response->status == 204) {
    return Status::ok();
  }
  return statusOfAnswer(method, *response);
}

Status ManagementClient::remove(std::string_view target, std::string_view reason) const {
  auto response = request(HttpMethod::kDelete, target, {}, reason);
  if (!response) return response.status();
  if (response->status == 200 || response->status == 204) return Status::ok();
  return statusOfAnswer(HttpMethod::kDelete, *response);
}

}  // namespace cepbus::services::cluster
