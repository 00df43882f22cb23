#pragma once

// writeSelfSignedPair: a TLS certificate and key for the end-to-end tests
// over amqps://, made fresh by the openssl command line so that no
// certificate checked into the tree can expire under the tests.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace cepbus::testing {

// Writes `dir`/cert.pem, a self-signed certificate for CN=localhost valid
// for two days (subjectAltName localhost and 127.0.0.1, so a client may check
// the peer name either way), and `dir`/key.pem, its unencrypted RSA key.
// Fails naming the command and with openssl's output.
inline ::testing::AssertionResult writeSelfSignedPair(const std::filesystem::path& dir) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout '" +
      (dir / "key.pem").string() + "' -out '" + (dir / "cert.pem").string() + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return ::testing::AssertionFailure() << "cannot run: " << command;
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  if (::pclose(pipe) != 0) {
    return ::testing::AssertionFailure() << command << " failed:\n" << output;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace cepbus::testing
