// m16n8k16 operand fragments from shared memory (the lane-address patterns of ldmatrix.x4) and the
// staging of accumulators through shared memory for 16-byte row stores (stmatrix), for the
// mma.sync kernels of the chunked forward; and the warp butterfly sums that those kernels (a row
// split over a quad) share with the CUDA-core stages and the decode kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/spec_math.h"
#include "cuda/ptx/copy.cuh"
#include "cuda/ptx/mma.cuh"

namespace gdn {
namespace cuda {

// Two floats as a bf16 pair (round to nearest), low half first.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// Two floats as one 16-bit pair of T (bf16 or fp16, the tensor-core operand type), low half first.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, __half>::value) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    return pack_bf16(lo, hi);
  }
}
// The low / high 16-bit half of a packed pair of T, as float (bf16: the bits shifted into place).
template <typename T>
__device__ __forceinline__ float lo_f(uint32_t x) {
  if constexpr (std::is_same<T, __half>::value)
    return __half2float(__ushort_as_half(static_cast<unsigned short>(x & 0xFFFFu)));
  else
    return __uint_as_float(x << 16);
}
template <typename T>
__device__ __forceinline__ float hi_f(uint32_t x) {
  if constexpr (std::is_same<T, __half>::value)
    return __half2float(__ushort_as_half(static_cast<unsigned short>(x >> 16)));
  else
    return __uint_as_float(x & 0xFFFF0000u);
}
// A bf16 pair as an fp16 pair: exact within fp16's range (normal from 6.1e-5 to 65504; smaller
// magnitudes keep fp16's subnormal steps of 6e-8, larger ones overflow). fp16 operands for bf16
// inputs (ChunkForwardConfig::fp16_operands).
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t x) {
  return pack2<__half>(lo_f<__nv_bfloat16>(x), hi_f<__nv_bfloat16>(x));
}
// Fragments loaded from rows of EI (the inputs) as operands of E: converted where they differ.
template <typename E, typename EI, int N>
__device__ __forceinline__ void as_operands(uint32_t (&x)[N]) {
  if constexpr (!std::is_same<E, EI>::value) {
    static_assert(std::is_same<E, __half>::value && std::is_same<EI, __nv_bfloat16>::value,
                  "bf16 inputs, fp16 operands");
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = bf16x2_to_f16x2(x[i]);
  }
}
// The same pair as float2 by T's own conversions (bf16: cvt.f32.bf16). Both forms are exact;
// the kernels keep the one they were written with, so the bf16 instructions did not change when
// fp16 operands came (the wgmma chain and its o warpgroup: lo_f / hi_f; the mma.sync kernels this).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t x) {
  if constexpr (std::is_same<T, __half>::value) {
    return __half22float2(*reinterpret_cast<const __half2*>(&x));
  } else {
    const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&x);
    return make_float2(__low2float(h), __high2float(h));
  }
}
// The hi + lo split of a pair (lo, hi): with hi_part = pack2<T>(lo, hi), this is the pair of
// its rounding errors, rounded to T (hi + lo carries about twice T's significand bits: 16 for
// bf16, 22 for fp16; fewer where the errors fall below fp16's normal range, 6.1e-5).
template <typename T>
__device__ __forceinline__ uint32_t residual2(float lo, float hi, uint32_t hi_part) {
  if constexpr (std::is_same<T, __half>::value) {
    const __half2 h = *reinterpret_cast<const __half2*>(&hi_part);
    return pack2<T>(lo - __low2float(h), hi - __high2float(h));
  } else {
    const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&hi_part);
    return pack2<T>(lo - __low2float(h), hi - __high2float(h));
  }
}
// ---- warp butterfly sums ----------------------------------------------------------------------
// One copy of each shuffle order that the kernels sum in. Float addition is not associative, so
// the order is part of the result: the decode kernels' warps each compute the same norms and must
// agree bitwise with one another, and a sum split over lanes must round the same way wherever it is
// computed. Each argument is a float or a float array (all arrays of one length); at each xor
// offset the values are combined in argument order, element e of every argument before e + 1, as
// `x += shfl_xor(x, o)`. Every lane of the warp must call (full mask).
namespace lane_sum_detail {
template <typename T>
struct Len {
  static constexpr int value = 1;
};
template <int N>
struct Len<float[N]> {
  static constexpr int value = N;
};
template <typename T, typename... Rest>
struct First {
  using type = T;
};
__device__ __forceinline__ float& at(float& x, int) { return x; }
template <int N>
__device__ __forceinline__ float& at(float (&x)[N], int e) {
  return x[e];
}
template <typename... T>
__device__ __forceinline__ void add_xor(int o, T&... x) {
  constexpr int n = Len<typename First<T...>::type>::value;
  static_assert(((Len<T>::value == n) && ...), "the arrays of one lane sum have one length");
#pragma unroll
  for (int e = 0; e < n; ++e) ((at(x, e) += __shfl_xor_sync(0xffffffffu, at(x, e), o)), ...);
}
}  // namespace lane_sum_detail
// Sums over each aligned group of kLanes lanes (a power of two, <= 32), offsets kLanes / 2 down to
// 1; every lane of the group gets the sums.
template <int kLanes = 32, typename... T>
__device__ __forceinline__ void warp_sum(T&... x) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "kLanes: a power of two <= 32");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) lane_sum_detail::add_xor(o, x...);
}
// Sums over the lanes that differ only in the lane bits [log2 kFrom, log2 kTo), offsets kFrom up to
// kTo / 2 (the other order of warp_sum: e.g. the rows of an mma fragment's quad, or the lane bits
// above a transpose-sum's).
template <int kFrom, int kTo = 32, typename... T>
__device__ __forceinline__ void warp_sum_ascending(T&... x) {
  static_assert(kFrom >= 1 && kTo <= 32 && (kFrom & (kFrom - 1)) == 0 && (kTo & (kTo - 1)) == 0,
                "kFrom, kTo: powers of two <= 32");
#pragma unroll
  for (int o = kFrom; o < kTo; o <<= 1) lane_sum_detail::add_xor(o, x...);
}

// The inverse l2 norm (SPEC's epsilon) of a row whose sum of squares is split over the four lanes
// of a quad (lanes 4 g .. 4 g + 3, the rows of an mma fragment); every lane gets it.
__device__ __forceinline__ float quad_inv_l2norm(float partial_sum_sq) {
  warp_sum_ascending<1, 4>(partial_sum_sq);
  return rsqrtf(partial_sum_sq + float(spec::kL2NormEps));
}
// A (16x16, row-major) from smem stored [m][k] (stride in elements).
template <typename T>
__device__ __forceinline__ void frag_a(const T* base, int stride, int m0, int k0, uint32_t* a) {
  const int lane = threadIdx.x % 32;
  ldsm_x4(smem_u32(base + (m0 + lane % 16) * stride + k0 + (lane / 16) * 8), a[0], a[1], a[2], a[3]);
}
// A (16x16) from smem stored transposed, [k][m].
template <typename T>
__device__ __forceinline__ void frag_a_t(const T* base, int stride, int m0, int k0, uint32_t* a) {
  const int lane = threadIdx.x % 32, q = lane / 8, r = lane % 8;
  ldsm_x4_t(smem_u32(base + (k0 + r + (q / 2) * 8) * stride + m0 + (q % 2) * 8), a[0], a[1], a[2], a[3]);
}
// B for two n-tiles (n0, n0 + 8), k 16, from smem stored [n][k]: b[0..1] tile n0, b[2..3] tile n0+8.
template <typename T>
__device__ __forceinline__ void frag_b_nk(const T* base, int stride, int n0, int k0, uint32_t* b) {
  const int lane = threadIdx.x % 32;
  ldsm_x4(smem_u32(base + (n0 + lane % 8 + (lane / 16) * 8) * stride + k0 + ((lane / 8) % 2) * 8), b[0], b[1], b[2],
          b[3]);
}
// B for two n-tiles from smem stored [k][n].
template <typename T>
__device__ __forceinline__ void frag_b_kn(const T* base, int stride, int n0, int k0, uint32_t* b) {
  const int lane = threadIdx.x % 32, q = lane / 8, r = lane % 8;
  ldsm_x4_t(smem_u32(base + (k0 + r + (q % 2) * 8) * stride + n0 + (q / 2) * 8), b[0], b[1], b[2], b[3]);
}
// A warp's m16n8 accumulators acc[0..NT) (rows r0..r0 + 15, columns c0 + 8 nt..) times `scale`,
// rounded to T and stored [row][col] into shared memory (stride in elements) by stmatrix, so that
// the rows can leave in 16-byte pieces (stage_rows_out) instead of 4-byte pairs 8 rows apart.
template <typename T, int NT>
__device__ __forceinline__ void stage_acc(T* base, int stride, int r0, int c0, const float (&acc)[NT][4], float scale) {
  static_assert(NT % 2 == 0, "pairs of n-tiles");
  const int lane = threadIdx.x % 32;
  T* row = base + (r0 + lane % 8 + ((lane / 8) % 2) * 8) * stride + c0 + (lane / 16) * 8;
#pragma unroll
  for (int nt = 0; nt < NT; nt += 2)
    stsm_x4(smem_u32(row + 8 * nt), pack2<T>(scale * acc[nt][0], scale * acc[nt][1]),
            pack2<T>(scale * acc[nt][2], scale * acc[nt][3]), pack2<T>(scale * acc[nt + 1][0], scale * acc[nt + 1][1]),
            pack2<T>(scale * acc[nt + 1][2], scale * acc[nt + 1][3]));
}
// The 16 x W tile staged by stage_acc (after __syncwarp), 16 bytes per lane: out(i, c, piece)
// gets row r0 + i (i < rows), columns c0 + c..c0 + c + 7.
template <typename T, int W, typename Out>
__device__ __forceinline__ void stage_rows_out(const T* base, int stride, int r0, int c0, int rows, Out out) {
  static_assert(W % 8 == 0 && 32 % (W / 8) == 0, "whole 16-byte pieces, whole rows per warp step");
  constexpr int PR = W / 8;  // pieces per row
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int e = lane; e < 16 * PR; e += 32) {
    const int i = e / PR, c = 8 * (e % PR);
    if (i < rows) out(i, c, *reinterpret_cast<const uint4*>(base + (r0 + i) * stride + c0 + c));
  }
}

}  // namespace cuda
}  // namespace gdn
