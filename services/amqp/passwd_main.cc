// cepbus-amqp-passwd: prints the salted hash of a password read from stdin
// (one line), for <amqp><user password-hash="...">.
//
//   $ cepbus-amqp-passwd [iterations] <<< 's3cret'
//   pbkdf2-sha256:200000:5f0c...:9a1e...

#include <charconv>
#include <cstring>
#include <iostream>
#include <string>

#include "services/protocols/amqp/password_hash.h"

int main(int argc, char** argv) {
  uint32_t iterations = cepbus::services::amqp::kDefaultPasswordIterations;
  if (argc > 2 ||
      (argc == 2 &&
       std::from_chars(argv[1], argv[1] + std::strlen(argv[1]), iterations).ec != std::errc())) {
    std::cerr << "usage: " << argv[0] << " [iterations] < password\n";
    return 2;
  }
  std::string password;
  if (!std::getline(std::cin, password) || password.empty()) {
    std::cerr << argv[0] << ": no password on stdin\n";
    return 2;
  }
  auto hash = cepbus::services::amqp::hashPassword(password, iterations);
  if (!hash) {
    std::cerr << argv[0] << ": " << hash.status().toString() << "\n";
    return 1;
  }
  std::cout << *hash << "\n";
  return 0;
}
