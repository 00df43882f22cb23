#include "services/protocols/amqp/password_hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <charconv>
#include <optional>
#include <vector>

namespace cepbus::services::amqp {
namespace {

constexpr std::string_view kScheme = "pbkdf2-sha256";
constexpr size_t kSaltBytes = 16;
constexpr size_t kKeyBytes = 32;

std::string toHex(const std::vector<unsigned char>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xf];
  }
  return out;
}

std::optional<std::vector<unsigned char>> fromHex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  std::vector<unsigned char> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, out[i], 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
  }
  return out;
}

std::optional<std::vector<unsigned char>> derive(std::string_view password,
                                                 const std::vector<unsigned char>& salt,
                                                 uint32_t iterations, size_t length) {
  std::vector<unsigned char> key(length);
  if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt.data(),
                        static_cast<int>(salt.size()), static_cast<int>(iterations), EVP_sha256(),
                        static_cast<int>(key.size()), key.data()) != 1) {
    return std::nullopt;
  }
  return key;
}

}  // namespace

Result<std::string> hashPassword(std::string_view password, uint32_t iterations) {
  if (iterations < kMinPasswordIterations) {
    return Status::invalidArgument("a password hash needs at least " +
                                   std::to_string(kMinPasswordIterations) + " iterations");
  }
  std::vector<unsigned char> salt(kSaltBytes);
  if (RAND_bytes(salt.data(), static_cast<int>(salt.size())) != 1) {
    return Status::internal("no random bytes for a password salt");
  }
  auto key = derive(password, salt, iterations, kKeyBytes);
  if (!key) return Status::internal("PBKDF2 failed");
  return std::string(kScheme) + ":" + std::to_string(iterations) + ":" + toHex(salt) + ":" +
         toHex(*key);
}

bool verifyPassword(std::string_view password, std::string_view encoded) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t colon = encoded.find(':', at);
    parts.push_back(encoded.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  if (parts.size() != 4 || parts[0] != kScheme) return false;
  uint32_t iterations = 0;
  auto [end, ec] = std::from_chars(parts[1].data(), parts[1].data() + parts[1].size(), iterations);
  if (ec != std::errc() || end != parts[1].data() + parts[1].size() ||
      iterations < kMinPasswordIterations) {
    return false;
  }
  auto salt = fromHex(parts[2]);
  auto expected = fromHex(parts[3]);
  if (!salt || !expected) return false;
  auto key = derive(password, *salt, iterations, expected->size());
  return key && CRYPTO_memcmp(key->data(), expected->data(), key->size()) == 0;
}

}  // namespace cepbus::services::amqp
