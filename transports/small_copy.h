// Copies of a few bytes without a call into the C library, for the hot
// paths that move small payloads: the engine's pack and unpack copies and
// the host rings' slots. Each reads every piece before it writes one, so
// `to` and `from` may overlap (or be the same place).
#pragma once

#include <cstdint>
#include <cstring>

namespace carflow {

// 8 to 16 bytes: two overlapping words, branch-free.
[[gnu::always_inline]] inline void copy_8_to_16(char* to, const char* from, uint64_t n) {
  uint64_t head, tail;
  std::memcpy(&head, from, 8);
  std::memcpy(&tail, from + n - 8, 8);
  std::memcpy(to, &head, 8);
  std::memcpy(to + n - 8, &tail, 8);
}

// 0 to 16 bytes: two overlapping words (8-16), two overlapping halves
// (4-7) or bytes.
[[gnu::always_inline]] inline void copy_upto_16(char* to, const char* from, uint32_t n) {
  if (n >= 8) {
    copy_8_to_16(to, from, n);
  } else if (n >= 4) {
    uint32_t head, tail;
    std::memcpy(&head, from, 4);
    std::memcpy(&tail, from + n - 4, 4);
    std::memcpy(to, &head, 4);
    std::memcpy(to + n - 4, &tail, 4);
  } else {
    for (uint32_t i = 0; i < n; ++i) to[i] = from[i];
  }
}

// 17 to 64 bytes: two or four overlapping 16-byte pieces.
inline void copy_17_to_64(char* to, const char* from, uint32_t n) {
  struct Piece {
    char b[16];
  };
  Piece a, b, c, d;
  std::memcpy(&a, from, 16);
  std::memcpy(&b, from + n - 16, 16);
  if (n > 32) {
    std::memcpy(&c, from + 16, 16);
    std::memcpy(&d, from + n - 32, 16);
    std::memcpy(to + 16, &c, 16);
    std::memcpy(to + n - 32, &d, 16);
  }
  std::memcpy(to, &a, 16);
  std::memcpy(to + n - 16, &b, 16);
}

// 0 to 64 bytes; the commonest sizes (up to 16) inline in the caller.
[[gnu::always_inline]] inline void copy_small(char* to, const char* from, uint32_t n) {
  if (n <= 16) return copy_upto_16(to, from, n);
  copy_17_to_64(to, from, n);
}

// A ring slot's payload (host rings, inproc rings): up to 64 bytes without
// a library call, longer ones through memcpy.
[[gnu::always_inline]] inline void copy_slot(char* to, const char* from, uint64_t n) {
  if (n <= 16) return copy_upto_16(to, from, static_cast<uint32_t>(n));  // most small messages
  if (n <= 64) return copy_17_to_64(to, from, static_cast<uint32_t>(n));
  std::memcpy(to, from, n);
}

}  // namespace carflow
