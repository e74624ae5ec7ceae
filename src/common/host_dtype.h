// Host-side scalar conversions for the storage dtypes (bf16/fp16 as raw 16-bit patterns).
#pragma once

#include <cstdint>
#include <cstring>

#include "gdn/gdn.h"

namespace gdn {

inline float bf16_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_float(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

inline uint16_t float_to_fp16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

// Element `i` of an array of `dtype`, as float.
inline float load_as_float(const void* base, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DType::kBFloat16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    default:
      return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

inline void store_from_float(void* base, int64_t i, DType dtype, float x) {
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(base)[i] = x;
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = float_to_bf16(x);
      break;
    default:
      static_cast<uint16_t*>(base)[i] = float_to_fp16(x);
      break;
  }
}

}  // namespace gdn
