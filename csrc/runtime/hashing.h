// A stable 64-bit hash (FNV-1a) for cache keys and file checksums: the same in every
// process and on every machine, unlike std::hash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace fuser::runtime {

inline uint64_t fnv1a(const void* data, size_t size, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  return fnv1a(s.data(), s.size(), h);
}

inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace fuser::runtime
