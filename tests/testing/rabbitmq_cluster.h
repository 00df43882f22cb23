#pragma once

// RabbitMqCluster: the 3-node RabbitMQ cluster of scripts/rabbitmq-cluster.sh
// for the tests that need a real broker (label `rabbitmq`).
//
// Starting a cluster takes one to two minutes on a loaded box, so a test
// process starts it once, on the first RabbitMqCluster::shared().start(),
// and stops it when the process exits. A test begins with
//
//   auto& rmq = cepbus::testing::RabbitMqCluster::shared();
//   ASSERT_TRUE(rmq.start());
//
// A cluster that cannot start fails every test that asks for it, with the
// script's output; nothing is skipped. The first failure is remembered, so
// the later tests fail at once instead of trying again for minutes.
//
// The cluster's folder is fixed per build tree and test program, under the
// temporary directory: start() first stops whatever a previous run of the
// same program left there (a run killed by a timeout), and the script's
// watchdog stops the cluster if this process dies without stopping it.
//
// Thread-safety: none; the test thread drives it. Ownership: the singleton
// owns the cluster's processes and folder.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "bus/host/descriptor/descriptor.h"
#include "services/cluster/cluster_spec.h"
#include "tests/integration/child_process.h"

namespace cepbus::testing {

class RabbitMqCluster {
 public:
  static constexpr int kNodes = 3;

  static RabbitMqCluster& shared() {
    static RabbitMqCluster cluster;
    return cluster;
  }

  RabbitMqCluster(const RabbitMqCluster&) = delete;
  RabbitMqCluster& operator=(const RabbitMqCluster&) = delete;
  ~RabbitMqCluster() { stop(); }

  // Starts the cluster unless it runs (or failed to start before).
  ::testing::AssertionResult start() {
    if (running_) return ::testing::AssertionSuccess();
    if (!failure_.empty()) return ::testing::AssertionFailure() << failure_;
    attempted_ = true;
    // Leftovers of a run of this program that was killed.
    runScript({"stop"}, std::chrono::seconds(120));
    setenv("CEPBUS_RMQ_OWNER_PID", std::to_string(::getpid()).c_str(), 1);
    const auto t0 = std::chrono::steady_clock::now();
    std::string out;
    const int code = runScript({"start"}, std::chrono::seconds(900), &out);
    unsetenv("CEPBUS_RMQ_OWNER_PID");
    if (code != 0 || !readEnv()) {
      failure_ = "the RabbitMQ cluster did not start (scripts/rabbitmq-cluster.sh start " +
                 dir_.string() + " exited " + std::to_string(code) + "):\n" + out;
      return ::testing::AssertionFailure() << failure_;
    }
    running_ = true;
    start_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - t0);
    return ::testing::AssertionSuccess();
  }

  // Stops every node and removes the folder; idempotent.
  void stop() {
    if (!running_ && !attempted_) return;
    running_ = attempted_ = false;
    runScript({"stop"}, std::chrono::seconds(120));
    std::error_code ignored;
    std::filesystem::remove_all(script_dir_, ignored);
  }

  // SIGKILLs node `n` (1..kNodes), as a crash would.
  ::testing::AssertionResult kill(int n) { return nodeCommand("kill", n); }
  // Starts node `n` again; returns once cluster_status shows it running.
  ::testing::AssertionResult restart(int n) { return nodeCommand("restart", n); }

  // `rabbitmq-streams stream_status STREAM` as node `n` sees it: each
  // member's role and offsets (for a failure message).
  std::string streamStatus(int n, const std::string& stream) {
    std::string out;
    runScript({"streams", std::to_string(n)}, std::chrono::seconds(60), &out,
              {"stream_status", stream});
    return out;
  }

  int amqpPort(int n) const { return amqp_ports_.at(n - 1); }
  int managementPort(int n) const { return management_ports_.at(n - 1); }
  const std::vector<int>& amqpPorts() const { return amqp_ports_; }
  const std::vector<int>& managementPorts() const { return management_ports_; }
  // The same brokers over TLS (AMQP, management HTTPS), their certificate
  // issued by tlsCa() for localhost and 127.0.0.1.
  int amqpsPort(int n) const { return amqps_ports_.at(n - 1); }
  int managementTlsPort(int n) const { return management_tls_ports_.at(n - 1); }
  const std::filesystem::path& tlsCa() const { return tls_ca_; }
  const std::string& nodeName(int n) const { return node_names_.at(n - 1); }
  const std::vector<std::string>& nodeNames() const { return node_names_; }
  // The failover list of a <cluster>: node 1, 2, 3 in that order.
  std::vector<services::cluster::ClusterBroker> brokers() const {
    std::vector<services::cluster::ClusterBroker> out;
    for (int n = 1; n <= kNodes; ++n) {
      services::cluster::ClusterBroker b;
      b.port = static_cast<uint16_t>(amqpPort(n));
      b.management_port = static_cast<uint16_t>(managementPort(n));
      out.push_back(b);
    }
    return out;
  }
  const std::filesystem::path& dir() const { return dir_; }
  bool running() const { return running_; }
  std::chrono::milliseconds startTime() const { return start_time_; }

 private:
  RabbitMqCluster() {
    const char* own = std::getenv("CEPBUS_RMQ_DIR");
    if (own && *own) {
      dir_ = own;
    } else {
      // One folder per build tree and program: runs from two worktrees, or
      // two programs, never share one.
      const std::string key = std::string(CEPBUS_TEST_BUILD_DIR) + "|" + programName();
      std::ostringstream hex;
      hex << std::hex << std::hash<std::string>{}(key);
      dir_ = std::filesystem::temp_directory_path() / ("cepbus-rmq-" + hex.str());
    }
    script_dir_ = dir_.string() + ".script";
    std::filesystem::create_directories(script_dir_);
  }

  static std::string programName() {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("test") : exe.filename().string();
  }

  // Runs the script with `args` + the folder (+ "--" `passed` when given);
  // the exit code (-1 on timeout), its stdout and stderr in `out`.
  int runScript(std::vector<std::string> args, std::chrono::seconds timeout,
                std::string* out = nullptr, std::vector<std::string> passed = {}) {
    std::vector<std::string> argv = {
        "/bin/bash", std::string(CEPBUS_TEST_SOURCE_DIR) + "/scripts/rabbitmq-cluster.sh"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(dir_.string());
    if (!passed.empty()) {
      argv.push_back("--");
      argv.insert(argv.end(), passed.begin(), passed.end());
    }
    ChildProcess script(argv, script_dir_);
    if (!script.started()) {
      if (out) *out = "cannot run " + argv[1];
      return -1;
    }
    const int code = script.wait(timeout);
    if (out) *out = script.out() + script.err();
    return code;
  }

  ::testing::AssertionResult nodeCommand(const char* command, int n) {
    if (!running_) return ::testing::AssertionFailure() << "the cluster is not running";
    if (n < 1 || n > kNodes) return ::testing::AssertionFailure() << "no node " << n;
    std::string out;
    const int code = runScript({command, std::to_string(n)}, std::chrono::seconds(600), &out);
    if (code != 0 || !readEnv()) {
      return ::testing::AssertionFailure()
             << "rabbitmq-cluster.sh " << command << " " << n << " exited " << code << ":\n"
             << out;
    }
    return ::testing::AssertionSuccess();
  }

  // Reads the folder's cluster.env (KEY=VALUE or KEY='VALUE' lines).
  bool readEnv() {
    std::ifstream in(dir_ / "cluster.env");
    if (!in) return false;
    std::map<std::string, std::string> env;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);  // "RMQ_USER=guest RMQ_PASSWORD=guest" is two
      for (std::string word; words >> word;) {
        const auto eq = word.find('=');
        if (eq == std::string::npos) continue;
        std::string value = word.substr(eq + 1);
        if (!value.empty() && value.front() == '\'') {
          // A quoted value may hold spaces: take the rest of it from the line.
          std::string rest;
          while (value.size() < 2 || value.back() != '\'') {
            if (!(words >> rest)) break;
            value += " " + rest;
          }
          value = value.substr(1, value.size() >= 2 ? value.size() - 2 : 0);
        }
        env[word.substr(0, eq)] = value;
      }
    }
    auto ints = [&](const char* key) {
      std::vector<int> v;
      std::istringstream s(env[key]);
      for (int p; s >> p;) v.push_back(p);
      return v;
    };
    amqp_ports_ = ints("RMQ_AMQP_PORTS");
    management_ports_ = ints("RMQ_MGMT_PORTS");
    amqps_ports_ = ints("RMQ_AMQPS_PORTS");
    management_tls_ports_ = ints("RMQ_MGMTS_PORTS");
    tls_ca_ = env["RMQ_TLS_CA"];
    node_names_.clear();
    std::istringstream names(env["RMQ_NODES"]);
    for (std::string name; names >> name;) node_names_.push_back(name);
    return amqp_ports_.size() == kNodes && management_ports_.size() == kNodes &&
           amqps_ports_.size() == kNodes && management_tls_ports_.size() == kNodes &&
           !tls_ca_.empty() && node_names_.size() == kNodes;
  }

  std::filesystem::path dir_;
  std::filesystem::path script_dir_;
  bool running_ = false;
  bool attempted_ = false;  // a start that failed half-way may have left nodes
  std::string failure_;
  std::chrono::milliseconds start_time_{0};
  std::vector<int> amqp_ports_, management_ports_, amqps_ports_, management_tls_ports_;
  std::filesystem::path tls_ca_;
  std::vector<std::string> node_names_;
};

}  // namespace cepbus::testing
