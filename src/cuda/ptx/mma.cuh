// Warp-level tensor-core instructions (sm_80+, fine on sm_90a): ldmatrix, stmatrix, mma.sync
// m16n8k16 (bf16 or fp16 in, fp32 accumulate) and m16n8k8 (tf32 in). Addresses are
// shared-state-space (smem_u32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace gdn {
namespace cuda {

// Four 8x8 b16 matrices from shared memory: lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// The same, each matrix transposed.
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// stmatrix.x4: the inverse of ldmatrix.x4 (lane l gives the address of row l % 8 of matrix l / 8).
__device__ __forceinline__ void stsm_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2),
               "r"(r3)
               : "memory");
}
// The same, each matrix transposed (sm_90).
__device__ __forceinline__ void stsm_x4_t(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
// A warp's 8x8 b16 matrix fragment (lane l: row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1)
// transposed, in the same layout: turns an mma accumulator's A fragments into B fragments.
__device__ __forceinline__ uint32_t movmatrix_t(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}
// Whether the 16-bit tensor-core operand type T (__nv_bfloat16 or __half) is fp16: the wrappers
// below (and in wgmma.cuh) pick the instruction's .f16 or .bf16 operand type from it. Both have the
// same fragment layouts, so only the type string differs.
template <typename T>
constexpr bool kIsF16 = std::is_same<T, __half>::value;

// D = A(16x16 T, row) * B(16x8 T, col) + D (fp32), T = __nv_bfloat16 or __half.
#define GDN_MMA_M16N8K16(TY)                         \
  "mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY \
  ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "     \
  "{%0,%1,%2,%3};\n"
template <typename T>
__device__ __forceinline__ void mma16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (kIsF16<T>)
    asm volatile(GDN_MMA_M16N8K16("f16")
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(GDN_MMA_M16N8K16("bf16")
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#undef GDN_MMA_M16N8K16

// x rounded to tf32 (10 significand bits, to nearest; the low 13 bits of the result are zero), as
// the fp32 bit pattern that the tf32 mma reads.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t y;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(y) : "f"(x));
  return y;
}
// D = A(16x8 tf32, row) * B(8x8 tf32, col) + D (fp32): a[0] (g, t), a[1] (g + 8, t), a[2] (g, t + 4),
// a[3] (g + 8, t + 4); b0 (t, g), b1 (t + 4, g); d as mma16's (g = lane / 4, t = lane % 4).
__device__ __forceinline__ void mma_tf32(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace cuda
}  // namespace gdn
