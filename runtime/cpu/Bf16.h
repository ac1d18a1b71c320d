//===- Bf16.h - bfloat16 <-> float conversion on the host -------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_BF16_H
#define LOOM_RUNTIME_CPU_BF16_H

#include <cstdint>
#include <cstring>

namespace loom::rt {

/// bfloat16 is the top half of an IEEE f32. Rounds to nearest even; NaN
/// stays NaN (a quiet bit is forced so truncation cannot make it infinite).
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float bf16ToFloat(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace loom::rt

#endif
