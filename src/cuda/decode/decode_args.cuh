// The decode kernels' arguments (DecodeArgs) and how both kernels read them: inputs loaded ahead as
// raw bits and converted at the use, gates by the spec formulas, and the device-side clamping of
// cu_seqlens and state pool rows. Included by recurrent.cu only.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/spec_math.h"
#include "common/token_slots.h"
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {
namespace decode {

struct DecodeArgs {
  const void* q;  // [T, H, K]
  int64_t q_st, q_sh;
  const void* k;  // [T, H, K]
  int64_t k_st, k_sh;
  const void* v;  // [T, HV, V]
  int64_t v_st, v_sh;
  void* o;  // [T, HV, V]
  int64_t o_st, o_sh;
  DType dt;        // v
  DType qk_dt;     // q and k (Problem::qk_dtype: the dtype of v unless set)
  DType o_dt;      // o (Problem::o_dtype: the dtype of v unless set)
  int K, V;        // head sizes (the general kernel; the others are instantiated for theirs)
  GateArgs gates;  // g, beta: [T, HV]; A_log, dt_bias: [HV] (fused gates)
  const void* cu;  // [N + 1] or null
  IndexType cu_type;
  int64_t T, N;
  int64_t len;  // T / N: tokens per sequence when cu is null
  int H, HV;
  int group;  // HV / H
  float scale;
  bool l2norm;
  StateRef init, fin;  // pools [num_slots, row_stride] holding [HV, K, V] or [HV, V, K], of the kernel's TS
  TokenStates ts;      // per-token states: pool like init's, rows by the slot map (common/token_slots.h)
};

// ---- state pools of element type TS (float, __nv_bfloat16 or __half) ----------------------------
// Four consecutive state elements are one 16-byte (fp32) or 8-byte (bf16 / fp16) access in the
// rows and tiles kernels: they run only on pools whose rows start on such pieces
// (decode_pools_in_pieces, recurrent.cuh; other pools take the general kernel's element accesses),
// and the offsets they use within a row are multiples of 4 elements. The state is fp32 in the
// kernels; a 16-bit pool's elements are rounded once, when the final state is stored.
template <typename TS>
struct StatePair;  // two 16-bit elements and their fp32 conversions
template <>
struct StatePair<__nv_bfloat16> {
  using T = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_f2(T x) { return __bfloat1622float2(x); }
  static __device__ __forceinline__ T from_f2(float2 x) { return __float22bfloat162_rn(x); }
};
template <>
struct StatePair<__half> {
  using T = __half2;
  static __device__ __forceinline__ float2 to_f2(T x) { return __half22float2(x); }
  static __device__ __forceinline__ T from_f2(float2 x) { return __float22half2_rn(x); }
};

// Four 16-bit elements (as loaded: a uint2) to fp32, and back with round-to-nearest-even.
template <typename TS>
__device__ __forceinline__ float4 state4_to_f(uint2 r) {
  using P = StatePair<TS>;
  const float2 lo = P::to_f2(*reinterpret_cast<const typename P::T*>(&r.x));
  const float2 hi = P::to_f2(*reinterpret_cast<const typename P::T*>(&r.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
template <typename TS>
__device__ __forceinline__ uint2 state4_from_f(float4 x) {
  using P = StatePair<TS>;
  const typename P::T lo = P::from_f2(make_float2(x.x, x.y)), hi = P::from_f2(make_float2(x.z, x.w));
  return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}
// Streaming load / store (each state element is read once and written once per call).
template <typename TS>
__device__ __forceinline__ float4 ld_state4(const TS* p) {
  if constexpr (std::is_same_v<TS, float>)
    return __ldcs(reinterpret_cast<const float4*>(p));
  else
    return state4_to_f<TS>(__ldcs(reinterpret_cast<const uint2*>(p)));
}
template <typename TS>
__device__ __forceinline__ void st_state4(TS* p, float4 x) {
  if constexpr (std::is_same_v<TS, float>)
    __stcs(reinterpret_cast<float4*>(p), x);
  else
    __stcs(reinterpret_cast<uint2*>(p), state4_from_f<TS>(x));
}

// ---- decode_rows_kernel's pieces: 4 consecutive state elements as the pool holds them ---------
// fp32 pools: the float4 itself; 16-bit pools: the 8 bytes as loaded (two bf16x2 / half2 words),
// kept packed in registers and converted element by element where the kernel uses them.
template <typename TS>
using Piece = std::conditional_t<std::is_same_v<TS, float>, float4, uint2>;
template <typename TS>
__device__ __forceinline__ Piece<TS> ld_piece(const TS* p) {
  return __ldcs(reinterpret_cast<const Piece<TS>*>(p));
}
template <typename TS>
__device__ __forceinline__ void st_piece(TS* p, Piece<TS> x) {
  __stcs(reinterpret_cast<Piece<TS>*>(p), x);
}
// Element e (a compile-time index after unrolling) of a piece, in fp32.
template <typename TS>
__device__ __forceinline__ float piece_get(const Piece<TS>& x, int e) {
  if constexpr (std::is_same_v<TS, float>) {
    return e == 0 ? x.x : (e == 1 ? x.y : (e == 2 ? x.z : x.w));
  } else {
    using P = StatePair<TS>;
    const uint32_t w = e < 2 ? x.x : x.y;
    const float2 f = P::to_f2(*reinterpret_cast<const typename P::T*>(&w));
    return e % 2 ? f.y : f.x;
  }
}
// Elements [e0, e0 + C) of a piece (C = 1, 2 or 4; e0 a multiple of C) set to x rounded to TS
// (round to nearest even: the one rounding of a 16-bit pool's state).
template <typename TS, int C>
__device__ __forceinline__ void piece_put(Piece<TS>& x, int e0, const float (&v)[C]) {
  if constexpr (std::is_same_v<TS, float>) {
#pragma unroll
    for (int c = 0; c < C; ++c) (e0 + c == 0 ? x.x : (e0 + c == 1 ? x.y : (e0 + c == 2 ? x.z : x.w))) = v[c];
  } else {
    using P = StatePair<TS>;
    auto word = [&](int i) -> uint32_t& { return i == 0 ? x.x : x.y; };
    if constexpr (C >= 2) {
#pragma unroll
      for (int j = 0; j < C / 2; ++j) {
        const typename P::T pr = P::from_f2(make_float2(v[2 * j], v[2 * j + 1]));
        word(e0 / 2 + j) = *reinterpret_cast<const uint32_t*>(&pr);
      }
    } else {
      const typename P::T pr = P::from_f2(make_float2(v[0], v[0]));
      const uint32_t h = *reinterpret_cast<const uint32_t*>(&pr) & 0xffffu;
      uint32_t& w = word(e0 / 2);
      w = e0 % 2 ? (w & 0xffffu) | (h << 16) : (w & 0xffff0000u) | h;
    }
  }
}
// C consecutive elements (C = 1, 2 or 4, aligned to C) loaded to fp32 / stored rounded to TS,
// global or shared memory: the parts of a piece that the rows kernel reloads (EAGLE parents),
// stores (token states) or keeps in shared memory (its staged shapes).
template <typename TS, int C>
__device__ __forceinline__ void ld_elems(const TS* p, float (&x)[C]) {
  if constexpr (std::is_same_v<TS, float>) {
#pragma unroll
    for (int c = 0; c < C; ++c) x[c] = p[c];
  } else {
    using P = StatePair<TS>;
    if constexpr (C == 4) {
      const float4 f = state4_to_f<TS>(*reinterpret_cast<const uint2*>(p));
      x[0] = f.x, x[1] = f.y, x[2] = f.z, x[3] = f.w;
    } else if constexpr (C == 2) {
      const float2 f = P::to_f2(*reinterpret_cast<const typename P::T*>(p));
      x[0] = f.x, x[1] = f.y;
    } else {
      const uint32_t w = *reinterpret_cast<const unsigned short*>(p);
      x[0] = P::to_f2(*reinterpret_cast<const typename P::T*>(&w)).x;  // the high half is 0
    }
  }
}
template <typename TS, int C>
__device__ __forceinline__ void st_elems(TS* p, const float (&x)[C]) {
  if constexpr (std::is_same_v<TS, float>) {
#pragma unroll
    for (int c = 0; c < C; ++c) p[c] = x[c];
  } else {
    using P = StatePair<TS>;
    if constexpr (C == 4) {
      *reinterpret_cast<uint2*>(p) = state4_from_f<TS>(make_float4(x[0], x[1], x[2], x[3]));
    } else {
      const typename P::T pr = P::from_f2(make_float2(x[0], x[C - 1]));
      if constexpr (C == 2)
        *reinterpret_cast<typename P::T*>(p) = pr;
      else
        *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(*reinterpret_cast<const uint32_t*>(&pr));
    }
  }
}

// One token's inputs of one persistent-warp item, as raw bits: lane holds q[lane + 32 m],
// k[lane + 32 m], v[v0 + lane] and the gates.
template <int K>
struct Tok {
  uint32_t q[K / 32], k[K / 32];
  uint32_t v;
  GateBits gate;
};

template <int K>
__device__ __forceinline__ Tok<K> load_tok(const DecodeArgs& a, int64_t t, int hv, int v0, int lane) {
  Tok<K> x;
  const int hk = hv / a.group;
  const int64_t qo = t * a.q_st + hk * a.q_sh + lane, ko = t * a.k_st + hk * a.k_sh + lane;
#pragma unroll
  for (int m = 0; m < K / 32; ++m) {
    x.q[m] = ld_raw(a.q, a.qk_dt, qo + 32 * m);
    x.k[m] = ld_raw(a.k, a.qk_dt, ko + 32 * m);
  }
  x.v = ld_raw(a.v, a.dt, t * a.v_st + hv * a.v_sh + v0 + lane);
  x.gate = load_gate_bits(a.gates, t, hv);
  return x;
}

// 1 / |x| of the qk l2-norm from the sum of squares (or 1 without the norm).
__device__ __forceinline__ float l2norm_scale(bool l2norm, float sum_sq) {
  return l2norm ? rsqrtf(sum_sq + float(spec::kL2NormEps)) : 1.f;
}

// state_row of common.cuh in two halves: the raw index is loaded ahead, and checked at the use.
__device__ __forceinline__ int64_t row_raw(const StateRef& s, int64_t n) {
  if (s.data == nullptr || (s.present && s.present[n] == 0)) return -1;
  return s.indices ? load_index(s.indices, s.index_type, n) : n;
}
__device__ __forceinline__ int64_t row_checked(const StateRef& s, int64_t r) {
  return (r >= 0 && r < s.num_slots && r != s.null_slot) ? r : -1;
}

// The initial state's row in the same two halves: a token_states row through num_accepted (vLLM's
// speculative decoding, checked by the slot map), or initial_state's row. read_pool: its pool.
__device__ __forceinline__ int64_t read_raw(const DecodeArgs& a, int64_t n) {
  if (a.ts.num_accepted == nullptr) return row_raw(a.init, n);
  const int64_t c = slots::read_column(a.ts, a.ts.num_accepted, n);
  return c < 0 ? -1 : slots::token_row(a.ts, a.ts.pool.indices, n, c);
}
__device__ __forceinline__ int64_t read_checked(const DecodeArgs& a, int64_t r) {
  return a.ts.num_accepted ? r : row_checked(a.init, r);
}
__device__ __forceinline__ const StateRef& read_pool(const DecodeArgs& a) {
  return a.ts.num_accepted ? a.ts.pool : a.init;
}
// Row of token_states that takes the state after token t (0-based in its sequence) of sequence n,
// or -1 (none: also when the call has no token states).
__device__ __forceinline__ int64_t token_row(const DecodeArgs& a, int64_t n, int64_t t) {
  return a.ts.pool.data ? slots::token_row(a.ts, a.ts.pool.indices, n, t) : -1;
}

// EAGLE trees: the row of token_states that token t (>= 1) of sequence n continues from, or -1
// (keep the state in hand).
__device__ __forceinline__ int64_t parent_row(const DecodeArgs& a, int64_t n, int64_t t) {
  return a.ts.parents && a.ts.pool.data ? slots::parent_row(a.ts, a.ts.pool.indices, a.ts.parents, n, t) : -1;
}

// Token range of sequence n, raw (loaded ahead), then clamped to [0, T] at the use.
struct Span {
  int64_t b, e;
};
__device__ __forceinline__ Span span_raw(const DecodeArgs& a, int64_t n) {
  if (a.cu) return {load_index(a.cu, a.cu_type, n), load_index(a.cu, a.cu_type, n + 1)};
  return {n * a.len, (n + 1) * a.len};
}
__device__ __forceinline__ Span span_checked(const DecodeArgs& a, Span s) {
  const int64_t b = s.b < 0 ? 0 : (s.b > a.T ? a.T : s.b);
  const int64_t e = s.e < b ? b : (s.e > a.T ? a.T : s.e);
  return {b, e};
}

}  // namespace decode
}  // namespace cuda
}  // namespace gdn
