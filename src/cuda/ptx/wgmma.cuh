// Warpgroup tensor-core instructions (wgmma, sm_90a) and what they need around them: the
// shared-memory matrix descriptor with its 128-byte swizzle, fence / commit / wait, the proxy fence
// that makes cp.async writes visible to wgmma, and a register pin for ordering around them.
#pragma once

#include <cstdint>

#include "cuda/ptx/mma.cuh"  // kIsF16

namespace gdn {
namespace cuda {

// Byte offset of 16-byte chunk `ch` (0..7) of row `row` in a region of 128-byte rows with the
// 128-byte swizzle (the pattern wgmma's SW128 mode applies to address bits [4, 7) ^ [7, 10)).
__device__ __forceinline__ uint32_t sw128(int row, int ch) {
  return static_cast<uint32_t>(row * 128 + ((ch ^ (row & 7)) << 4));
}

// The bytes from dynamic shared memory's base to the next 1024-byte boundary, where wgmma's 128-byte
// swizzle atoms must sit: the kernel aligns its base at run time (the launch adds 1 KB of slack;
// not __align__(1024) on the declaration, which would let the compiler drop the adjustment on trust).
__device__ __forceinline__ uint32_t align_1024_offset(const void* smem) {
  return (1024u - (smem_u32(smem) & 1023u)) & 1023u;
}

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4,
// 14 bits), base offset 0 (atoms 1024-aligned), layout type 1 = 128-byte swizzle (bits 62-63).
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr >> 4) & 0x3FFF) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (static_cast<uint64_t>(1) << 62);
}
// The descriptors of one operand tile's k-steps, built once: k-step `bytes` past the tile's start
// (a multiple of 16) is the tile's descriptor plus bytes >> 4 in its low word. Shared-memory
// addresses stay below 2^18, so the 14-bit start field never carries into the leading byte offset:
// at(bytes) equals wg_desc(addr + bytes, lbo, sbo) for a 16-byte aligned addr, in one add instead
// of wg_desc's shift, mask and merges per wgmma.
struct WgTile {
  uint32_t lo, hi;
  __device__ __forceinline__ uint64_t at(uint32_t bytes) const {
    return (static_cast<uint64_t>(hi) << 32) | (lo + (bytes >> 4));
  }
};
__device__ __forceinline__ WgTile wg_tile(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  const uint64_t d = wg_desc(addr, lbo, sbo);
  return {static_cast<uint32_t>(d), static_cast<uint32_t>(d >> 32)};
}

// Orders this warpgroup's register accesses before the wgmma instructions that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the group of wgmma instructions issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins a register value at this point of the instruction stream (the compiler may not move its
// reads or writes across the wgmma fence / wait statements, which name no registers).
__device__ __forceinline__ void pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void pin(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
// The block index, read where it is used: what derives from it cannot be hoisted out of a loop
// (where it would hold a register across every iteration of a chain running at 255).
__device__ __forceinline__ uint32_t block_index_here() {
  uint32_t x;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(x));
  return x;
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The accumulator operands of an m64n64 (32 floats) and an m64n128 (64 floats) wgmma ("+f" d[0] ..),
// and their placeholders.
#define GDN_WG_ACC32(d)                                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GDN_WG_ACC64(d)                                                                                       \
  GDN_WG_ACC32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
      "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), \
      "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), \
      "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
      "+f"(d[63])
#define GDN_WG_D32                                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
#define GDN_WG_D64                                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "  \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
// One asm statement per operand type: the instruction's "f32.TY.TY" with TY = f16 or bf16 from T
// (kIsF16, mma.cuh); the variadic part is the statement's ": outputs : inputs", the same for both.
#define GDN_WGMMA_BY_TYPE(T, TEXT, ...)    \
  if constexpr (kIsF16<T>)                 \
    asm volatile(TEXT("f16") __VA_ARGS__); \
  else                                     \
    asm volatile(TEXT("bf16") __VA_ARGS__)

// D[64x64] (+)= (+-A[64x16]) B[16x64]: A (T) from registers, B K-major in shared memory; kNegA:
// scale-a -1; accumulate = false overwrites D (scale-d 0).
#define GDN_WG_TEXT(TY)                                                  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                           \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " GDN_WG_D32 \
  ", {%32, %33, %34, %35}, %36, p, %38, 1, 0;\n}\n"
template <typename T, bool kNegA>
__device__ __forceinline__ void wgmma_m64n64_rs(float (&d)[32], const uint32_t* a, uint64_t desc, bool accumulate) {
  GDN_WGMMA_BY_TYPE(T, GDN_WG_TEXT,
                    : GDN_WG_ACC32(d)
                    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(int(accumulate)), "n"(kNegA ? -1 : 1));
}
#undef GDN_WG_TEXT

// D[64x32] (+)= A[64x16] B[16x32]: A (T) from registers, B K-major in shared memory; d: 16
// accumulators. accumulate = false overwrites D.
#define GDN_WG_TEXT(TY)                                                     \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"                              \
  "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY                   \
  " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}" \
  ", {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
template <typename T>
__device__ __forceinline__ void wgmma_m64n32_rs(float* d, const uint32_t* a, uint64_t desc, bool accumulate) {
  GDN_WGMMA_BY_TYPE(T, GDN_WG_TEXT,
                    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                      "+f"(d[15])
                    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(int(accumulate)));
}
#undef GDN_WG_TEXT

// D[64x128] += A[64x16] B[16x128]: A (T) from registers, B MN-major in shared memory (trans-b).
#define GDN_WG_TEXT(TY)                                                   \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                            \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " GDN_WG_D64 \
  ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
template <typename T>
__device__ __forceinline__ void wgmma_m64n128_tb(float (&d)[64], const uint32_t* a, uint64_t desc) {
  GDN_WGMMA_BY_TYPE(T, GDN_WG_TEXT, : GDN_WG_ACC64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
#undef GDN_WG_TEXT

// D[64x128] += A[64x16] B[16x128], both T from shared memory: A K-major, B MN-major (trans-b).
#define GDN_WG_TEXT(TY) \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " GDN_WG_D64 ", %64, %65, 1, 1, 1, 0, 1;\n"
template <typename T>
__device__ __forceinline__ void wgmma_m64n128_ss_tb(float (&d)[64], uint64_t a_desc, uint64_t b_desc) {
  GDN_WGMMA_BY_TYPE(T, GDN_WG_TEXT, : GDN_WG_ACC64(d) : "l"(a_desc), "l"(b_desc));
}
#undef GDN_WG_TEXT

// D[64x64] (+)= A[64x16] B[16x64], both T from shared memory, A K-major; B K-major (kTransB = 0)
// or MN-major (kTransB = 1). accumulate = false overwrites D (scale-d 0).
#define GDN_WG_TEXT(TY)                        \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " GDN_WG_D32 ", %32, %33, p, 1, 1, 0, %35;\n}\n"
template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_m64n64_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  GDN_WGMMA_BY_TYPE(T, GDN_WG_TEXT, : GDN_WG_ACC32(d) : "l"(a_desc), "l"(b_desc), "r"(int(accumulate)), "n"(kTransB));
}
#undef GDN_WG_TEXT

// D[64x64] += A[64x16] B[16x64]: A (T) from registers, B MN-major in shared memory (trans-b).
#define GDN_WG_TEXT(TY)                                                  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                           \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " GDN_WG_D32 \
  ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
template <typename T>
__device__ __forceinline__ void wgmma_m64n64_tb(float (&d)[32], const uint32_t* a, uint64_t b_desc) {
  GDN_WGMMA_BY_TYPE(T, GDN_WG_TEXT,
                    : GDN_WG_ACC32(d)
                    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}
#undef GDN_WG_TEXT
#undef GDN_WGMMA_BY_TYPE

}  // namespace cuda
}  // namespace gdn
