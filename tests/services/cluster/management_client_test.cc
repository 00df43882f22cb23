// ManagementClient without RabbitMQ: encoding, error messages, and the
// failover and timeouts against small scripted HTTP servers on loopback;
// HTTPS against `openssl s_server` with certificates made for the test.

#include "services/cluster/management_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "services/cluster/cluster_spec.h"
#include "tests/integration/child_process.h"
#include "tests/testing/ports.h"
#include "tests/testing/self_signed_pair.h"

namespace cepbus::services::cluster {
namespace {

TEST(ManagementClientText, PercentEncodesPathSegments) {
  EXPECT_EQ(percentEncode("/"), "%2F");
  EXPECT_EQ(percentEncode("s.p0"), "s.p0");
  EXPECT_EQ(percentEncode("a b->c:1"), "a%20b-%3Ec%3A1");
  EXPECT_EQ(percentEncode("~_-."), "~_-.");
  EXPECT_EQ(percentEncode("\xC3\xA9"), "%C3%A9");
}

TEST(ManagementClientText, BuildsBasicAuthorization) {
  EXPECT_EQ(basicAuthorization("guest", "guest"), "Basic Z3Vlc3Q6Z3Vlc3Q=");
  EXPECT_EQ(basicAuthorization("a", ""), "Basic YTo=");
  EXPECT_EQ(basicAuthorization("ab", "c"), "Basic YWI6Yw==");
}

TEST(ManagementClientText, NamesUrls) {
  EXPECT_EQ(urlOf({"127.0.0.1", 15672}, "/api/queues/%2F"),
            "http://127.0.0.1:15672/api/queues/%2F");
  EXPECT_EQ(urlOf({"::1", 80}, "/api"), "http://[::1]:80/api");
  EXPECT_EQ(urlOf({"127.0.0.1", 15671}, "/api", true), "https://127.0.0.1:15671/api");
}

TEST(ManagementClientText, TakesTheReasonOfAnErrorBody) {
  EXPECT_EQ(errorReason(R"({"error":"bad_request","reason":"inequivalent arg 'type'"})"),
            "inequivalent arg 'type'");
  EXPECT_EQ(errorReason(R"({"error":"Object Not Found"})"), "Object Not Found");
  EXPECT_EQ(errorReason("<html>Bad Gateway</html>\r\nmore"), "<html>Bad Gateway</html>");
  EXPECT_EQ(errorReason(""), "(empty body)");
  EXPECT_EQ(errorReason(std::string(300, 'x')).size(), 203u);
}

TEST(ManagementClientText, DescribesAnAnswer) {
  HttpResponse r{404, R"({"error":"Object Not Found","reason":"Not Found"})",
                 "http://127.0.0.1:1/api/queues/%2F/q"};
  EXPECT_EQ(describeAnswer(HttpMethod::kGet, r),
            "GET http://127.0.0.1:1/api/queues/%2F/q: HTTP 404: Not Found");
}

TEST(ManagementClientText, TakesTheClusterFailoverList) {
  services::cluster::ClusterSpec spec;
  spec.brokers.resize(2);
  spec.brokers[0].management_port = 1001;
  spec.brokers[1].host = "localhost";
  spec.brokers[1].management_port = 1002;
  const auto client = ManagementClient::forCluster(spec, "pw");
  ASSERT_EQ(client.brokers().size(), 2u);
  EXPECT_EQ(client.brokers()[0].host, "127.0.0.1");
  EXPECT_EQ(client.brokers()[0].port, 1001);
  EXPECT_EQ(client.brokers()[1].host, "localhost");
  EXPECT_EQ(client.brokers()[1].port, 1002);
}

// Answers each connection with the next canned response (or, with an empty
// one, reads the request and never answers), recording the requests.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> responses) : responses_(std::move(responses)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    port_ = testing::bindAnyLoopbackPort(fd_);
    ::listen(fd_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return static_cast<uint16_t>(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    for (const auto& response : responses_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0 || stop_) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      if (response.empty()) {
        // Silent: hold the connection until the client gives up.
        while (::read(c, buf, sizeof buf) > 0) {
        }
      } else {
        (void)!::write(c, response.data(), response.size());
      }
      ::close(c);
    }
  }

  std::vector<std::string> responses_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

std::string answer(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

TEST(ManagementClient, SendsCredentialsAndParsesJson) {
  ScriptedServer server({answer(200, R"({"name":"q","type":"quorum"})")});
  ManagementOptions options;
  options.user = "u";
  options.password = "p";
  ManagementClient client({{"127.0.0.1", server.port()}}, options);
  auto j = client.getJson("/api/queues/%2F/q");
  ASSERT_TRUE(j) << j.status().toString();
  EXPECT_EQ((*j)["type"], "quorum");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].rfind("GET /api/queues/%2F/q HTTP/1.1\r\n", 0), 0u) << requests[0];
  EXPECT_NE(requests[0].find("Authorization: Basic dTpw\r\n"), std::string::npos) << requests[0];
}

TEST(ManagementClient, GoesOnPastRefusedAndFailingBrokersAndNamesThemAll) {
  const int refused = testing::reservedPort();  // bound, never listening
  ScriptedServer failing({answer(503, R"({"error":"not running"})")});
  ScriptedServer good({answer(200, "[]")});
  ManagementClient client({{"127.0.0.1", static_cast<uint16_t>(refused)},
                           {"127.0.0.1", failing.port()},
                           {"127.0.0.1", good.port()}},
                          {});
  auto j = client.getJson("/api/connections");
  ASSERT_TRUE(j) << j.status().toString();
  EXPECT_TRUE(j->is_array());

  ManagementClient none({{"127.0.0.1", static_cast<uint16_t>(refused)}}, {});
  auto r = none.getJson("/api/connections");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(r.status().message().find("GET http://127.0.0.1:" + std::to_string(refused) +
                                      "/api/connections: connect:"),
            std::string::npos)
      << r.status().message();
}

TEST(ManagementClient, AClientErrorIsTheClustersAnswerNamingUrlStatusAndReason) {
  ScriptedServer first({answer(400, R"({"error":"bad_request","reason":"inequivalent arg"})")});
  ScriptedServer second({answer(201, "")});
  ManagementClient client({{"127.0.0.1", first.port()}, {"127.0.0.1", second.port()}}, {});
  const Status s = client.sendJson(HttpMethod::kPut, "/api/queues/%2F/q", {{"durable", true}});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "PUT http://127.0.0.1:" + std::to_string(first.port()) +
                             "/api/queues/%2F/q: HTTP 400: inequivalent arg");
  EXPECT_TRUE(second.requests().empty());
  const auto requests = first.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_NE(requests[0].find("{\"durable\":true}"), std::string::npos) << requests[0];
}

TEST(ManagementClient, MapsAnswersToStatuses) {
  ScriptedServer server({answer(404, R"({"error":"Object Not Found","reason":"Not Found"})"),
                         answer(401, R"({"error":"not_authorized","reason":"Login failed"})"),
                         answer(204, "")});
  ManagementClient client({{"127.0.0.1", server.port()}}, {});
  EXPECT_EQ(client.getJson("/api/x").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(client.getJson("/api/x").status().code(), Status::Code::kRejected);
  EXPECT_TRUE(client.remove("/api/connections/a%20b", "because"));
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_NE(requests[2].find("X-Reason: because\r\n"), std::string::npos) << requests[2];
}

TEST(ManagementClient, ABrokerThatDoesNotAnswerTimesOut) {
  ScriptedServer silent({""});
  ScriptedServer good({answer(200, "{}")});
  ManagementOptions options;
  options.timeout = std::chrono::milliseconds(300);
  ManagementClient client({{"127.0.0.1", silent.port()}, {"127.0.0.1", good.port()}}, options);
  const auto t0 = std::chrono::steady_clock::now();
  auto j = client.getJson("/api/overview");
  EXPECT_TRUE(j) << j.status().toString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));

  ScriptedServer silent_alone({""});
  ManagementClient alone({{"127.0.0.1", silent_alone.port()}}, options);
  auto r = alone.getJson("/api/overview");
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("timed out after 300 ms"), std::string::npos)
      << r.status().message();
}

// `openssl s_server -www` on loopback with a fresh self-signed pair (its
// certificate is its own CA, for localhost and 127.0.0.1): it answers a GET
// with an HTTP/1.0 status page.
class TlsServer {
 public:
  TlsServer()
      : dir_(std::filesystem::temp_directory_path() /
             ("cepbus-mgmt-tls-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    paired_ = testing::writeSelfSignedPair(dir_);
    port_ = testing::reservedPort();
    server_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{"/usr/bin/openssl", "s_server", "-accept",
                                 "127.0.0.1:" + std::to_string(port_), "-cert",
                                 (dir_ / "cert.pem").string(), "-key", (dir_ / "key.pem").string(),
                                 "-www", "-quiet"},
        dir_);
  }
  ~TlsServer() {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  ::testing::AssertionResult ready() {
    if (!paired_) return paired_;
    if (!testing::waitListening(port_)) {
      return ::testing::AssertionFailure() << "openssl s_server did not listen: " << server_->err();
    }
    return ::testing::AssertionSuccess();
  }
  uint16_t port() const { return static_cast<uint16_t>(port_); }
  std::filesystem::path ca() const { return dir_ / "cert.pem"; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  ::testing::AssertionResult paired_ = ::testing::AssertionFailure();
  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> server_;
};

ManagementOptions tlsOptions(std::filesystem::path ca, std::string peer_name = "") {
  ManagementOptions options;
  options.tls.emplace();
  options.tls->ca = std::move(ca);
  options.tls->peer_name = std::move(peer_name);
  return options;
}

TEST(ManagementClientTls, VerifiesTheBrokerAgainstTheCaAndItsName) {
  TlsServer server;
  ASSERT_TRUE(server.ready());
  // By IP address (the certificate names 127.0.0.1) and by DNS name.
  for (const std::string peer : {"", "localhost"}) {
    ManagementClient client({{"127.0.0.1", server.port()}}, tlsOptions(server.ca(), peer));
    auto r = client.request(HttpMethod::kGet, "/");
    ASSERT_TRUE(r) << r.status().toString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->url, "https://127.0.0.1:" + std::to_string(server.port()) + "/");
    // The status page names the TLS session: the request went through it.
    EXPECT_NE(r->body.find("Cipher"), std::string::npos) << r->body.substr(0, 300);
  }
}

TEST(ManagementClientTls, RefusesACertificateItsCaDidNotIssueOrForAnotherName) {
  TlsServer server;
  ASSERT_TRUE(server.ready());
  const std::filesystem::path other = server.dir() / "other";
  std::filesystem::create_directories(other);
  ASSERT_TRUE(testing::writeSelfSignedPair(other));

  ManagementClient untrusted({{"127.0.0.1", server.port()}}, tlsOptions(other / "cert.pem"));
  auto r = untrusted.request(HttpMethod::kGet, "/api/overview");
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("GET https://127.0.0.1:" + std::to_string(server.port()) +
                                      "/api/overview: TLS handshake: certificate verify failed"),
            std::string::npos)
      << r.status().message();

  ManagementClient misnamed({{"127.0.0.1", server.port()}},
                            tlsOptions(server.ca(), "rabbit.example"));
  auto m = misnamed.request(HttpMethod::kGet, "/");
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("TLS handshake: certificate verify failed"),
            std::string::npos)
      << m.status().message();
}

TEST(ManagementClientTls, ACaFileThatCannotBeLoadedFailsEveryRequestNamingIt) {
  ManagementClient client({{"127.0.0.1", 1}}, tlsOptions("/nonexistent/ca.pem"));
  auto r = client.request(HttpMethod::kGet, "/");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("TLS: cannot load the CA file /nonexistent/ca.pem"),
            std::string::npos)
      << r.status().message();
}

// The server waits for a request that never comes: the handshake is what
// the timeout ends.
TEST(ManagementClientTls, APlainHttpServerEndsInTheHandshakeWithinTheTimeout) {
  ScriptedServer plain({answer(200, "{}")});
  TlsServer server;  // for a CA file only
  ASSERT_TRUE(server.ready());
  ManagementOptions options = tlsOptions(server.ca());
  options.timeout = std::chrono::milliseconds(2000);
  ManagementClient client({{"127.0.0.1", plain.port()}}, options);
  auto r = client.request(HttpMethod::kGet, "/");
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("TLS handshake:"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace cepbus::services::cluster
