#pragma once

// FNV-1a 64: the fixed hash of the cluster's contracts (partition of a key,
// rendezvous rank, composite id). Fixed and simple on purpose: a publisher in
// any language can compute a partition, and every node computes the same.

#include <cstdint>
#include <string_view>

namespace cepbus::services::cluster {

class Fnv1a64 {
 public:
  Fnv1a64& add(std::string_view bytes) {
    for (unsigned char c : bytes) addByte(c);
    return *this;
  }
  Fnv1a64& addByte(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ULL;
    return *this;
  }
  // `v` as 8 little-endian bytes.
  Fnv1a64& addU64(uint64_t v) {
    for (int i = 0; i < 8; ++i) addByte(static_cast<unsigned char>(v >> (8 * i)));
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ULL;
};

inline uint64_t fnv1a64(std::string_view bytes) { return Fnv1a64().add(bytes).value(); }

// MurmurHash3's 64-bit finalizer. FNV-1a of strings that differ only in a
// few bytes ("n1/5", "n2/5") differ mostly in their low bits, so comparing
// raw hashes (rendezvous ranking) favours one node; mixed, every bit counts.
inline uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace cepbus::services::cluster
