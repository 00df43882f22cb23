#pragma once

// Salted password hashes for the AMQP listener's users (SASL PLAIN).
//
// Format: "pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>" — PBKDF2 with
// HMAC-SHA256 (OpenSSL libcrypto), a random salt of 16 bytes and a 32-byte
// derived key. The same string can be made with the OpenSSL command line:
//
//   salt=$(openssl rand -hex 16)
//   key=$(openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt pass:"$PASSWORD"
//         -kdfopt hexsalt:$salt -kdfopt iter:200000 PBKDF2 | tr -d : | tr A-F a-f)
//   (one line)
//   echo "pbkdf2-sha256:200000:$salt:$key"
//
// or with the `cepbus-amqp-passwd` tool (reads the password from stdin).
//
// Thread safety: pure functions.

#include <cstdint>
#include <string>
#include <string_view>

#include "bus/core/status.h"

namespace cepbus::services::amqp {

inline constexpr uint32_t kDefaultPasswordIterations = 200000;
inline constexpr uint32_t kMinPasswordIterations = 1000;

// A new hash of `password` with a fresh random salt; Internal when the
// system's random generator fails.
Result<std::string> hashPassword(std::string_view password,
                                 uint32_t iterations = kDefaultPasswordIterations);

// True when `password` hashes to `encoded` (compared in constant time); false
// as well when `encoded` is not a well-formed hash.
bool verifyPassword(std::string_view password, std::string_view encoded);

}  // namespace cepbus::services::amqp
