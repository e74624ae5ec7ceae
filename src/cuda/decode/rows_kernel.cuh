// The whole-row decode kernel (decode_rows_kernel), for K = V = 128 in both state layouts: one
// block per (sequence, value head) holds the whole 64 KiB state in registers. See the comment above
// the kernel; tiles_kernel.cuh has the persistent-warp kernel of the other head sizes.
#pragma once

#include <cstdint>

#include "cuda/core/common.cuh"
#include "cuda/decode/decode_args.cuh"

namespace gdn {
namespace cuda {
namespace decode {

constexpr int kRowsWarps = 4;        // warps per block: 32 state rows each
constexpr int kRowsBlocksPerSm = 2;  // the registers are sized for two blocks per SM

// Sums x[i] over the warp's lanes for every i < 32 and returns, in lane l, the sum of x[l]: a
// butterfly that halves the vector at each level (31 shuffles, not 32 x 5). x is clobbered.
template <int O>
__device__ __forceinline__ void transpose_sum_level(float (&x)[32], int lane) {
  const bool upper = (lane & O) != 0;  // keeps the upper half of the remaining 2 O values
#pragma unroll
  for (int i = 0; i < O; ++i) {
    const float send = upper ? x[i] : x[i + O];
    const float keep = upper ? x[i + O] : x[i];
    x[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}
__device__ __forceinline__ float warp_transpose_sum(float (&x)[32]) {
  const int lane = threadIdx.x % 32;
  transpose_sum_level<16>(x, lane);
  transpose_sum_level<8>(x, lane);
  transpose_sum_level<4>(x, lane);
  transpose_sum_level<2>(x, lane);
  transpose_sum_level<1>(x, lane);
  return x[0];
}

// By whole rows (K = V = 128): one block per (sequence, value head), warp w owns the
// state rows [RW w, RW w + RW) (K rows when K-major, V rows when V-major), lane the columns
// 4 lane..4 lane + 3, in registers. Every load and store instruction of a warp is one contiguous
// 512-byte row (the persistent kernel's K-major tiles read 128 of every 512 bytes per
// instruction). K-major: S^T k and S^T q are summed in-lane over the warp's rows, then across the
// W warps through shared memory. V-major (RW = 32): the row sums are in-lane partials over 4
// columns, completed across the lanes by warp_transpose_sum (lane l gets row l); no cross-warp step.
// Not persistent: the whole state's loads are issued at the block's start; two blocks per SM
// (4 warps: 219 registers K-major, 253 V-major) keep up to 128 KB of loads in flight, as
// flash-linear-attention's one-warp programs do.
// TS: the pool's element type. A bf16 / fp16 pool moves half the bytes (a lane loads 8 bytes per
// row instead of 16) and is converted to fp32 in registers; the state is rounded once, at the
// store after the last token. Pools whose rows start on 4-element pieces only
// (decode_pools_in_pieces); decode_heuristics sends the others to the general kernel.
template <int W, bool KMAJ, typename TS>
__global__ void __launch_bounds__(W * 32, kRowsBlocksPerSm) decode_rows_kernel(DecodeArgs a) {
  constexpr int K = 128, V = 128, RW = K / W;
  static_assert(KMAJ || RW == 32, "V-major rows: 32 rows per warp (one per lane after the sums)");
  constexpr int NVL = KMAJ ? 4 : 1;  // values of v per lane: columns 4 lane + e, or row RW w + lane
  constexpr int64_t KV = int64_t(K) * V;
  __shared__ __align__(16) float qk_raw[2][K];  // the token's q, k as loaded (fp32)
  __shared__ float4 part[2][W][V / 4];          // per warp: S^T k, S^T q over its rows (columns 4 lane..)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t n = blockIdx.x / a.HV;
  const int hv = static_cast<int>(blockIdx.x % a.HV);
  const int hk = hv / a.group;
  const int64_t rin = read_checked(a, read_raw(a, n));
  const int64_t rfin = row_checked(a.fin, row_raw(a.fin, n));
  const int64_t row0 = int64_t(RW) * warp;  // first state row of this warp

  float4 s[RW];  // s[r]: row row0 + r, columns 4 lane..4 lane + 3 (row stride 128 = K = V in both layouts)
  // This thread's part of row `row` of pool p (its 4 elements of each of the warp's state rows).
  auto part_of = [&](const StateRef& p, int64_t row) -> TS* {
    return static_cast<TS*>(p.data) + state_offset(p, row, hv, a.HV, KV) + row0 * V + 4 * lane;
  };
  {
    const TS* src = rin >= 0 ? part_of(read_pool(a), rin) : nullptr;
#pragma unroll
    for (int r = 0; r < RW; ++r) s[r] = src ? ld_state4(src + r * V) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  TS* out = rfin >= 0 ? part_of(a.fin, rfin) : nullptr;
  auto store_state = [&](TS* dst) {
#pragma unroll
    for (int r = 0; r < RW; ++r) st_state4(dst + r * V, s[r]);
  };
  const Span span = span_checked(a, span_raw(a, n));
  if (span.b == span.e) {  // no tokens: the final state is the initial state
    if (out) store_state(out);
    return;
  }
  for (int64_t t = span.b; t < span.e; ++t) {
    const int64_t snap = token_row(a, n, t - span.b);  // where the state after this token goes (or -1)
    // EAGLE trees: this thread's part of the parent token's state, which this thread stored itself.
    const int64_t parent = parent_row(a, n, t - span.b);
    if (parent >= 0) {
      const TS* src = part_of(a.ts.pool, parent);
#pragma unroll
      for (int r = 0; r < RW; ++r) s[r] = ld_state4(src + r * V);
    }
    // The token's inputs (raw bits, converted at the use): q, k by all threads, v and the gates by
    // each lane for its columns.
    uint32_t qk_bits[(2 * K + W * 32 - 1) / (W * 32)];
#pragma unroll
    for (int i = 0; i < (2 * K + W * 32 - 1) / (W * 32); ++i) {
      const int d = tid + W * 32 * i;
      qk_bits[i] = d < K ? ld_raw(a.q, a.qk_dt, t * a.q_st + hk * a.q_sh + d)
                         : (d < 2 * K ? ld_raw(a.k, a.qk_dt, t * a.k_st + hk * a.k_sh + (d - K)) : 0u);
    }
    uint32_t v_bits[NVL];
#pragma unroll
    for (int e = 0; e < NVL; ++e)
      v_bits[e] = ld_raw(a.v, a.dt, t * a.v_st + hv * a.v_sh + (KMAJ ? 4 * lane + e : row0 + lane));
    const GateBits gx = load_gate_bits(a.gates, t, hv);

    __syncthreads();  // the previous token's readers of qk_raw and part are done
#pragma unroll
    for (int i = 0; i < (2 * K + W * 32 - 1) / (W * 32); ++i) {
      const int d = tid + W * 32 * i;
      if (d < 2 * K) qk_raw[d / K][d % K] = raw_f(qk_bits[i], a.qk_dt);
    }
    __syncthreads();
    // Norms and q . k, by every warp (the same sums; no block barrier needed for them).
    float sq = 0.f, sk = 0.f, sqk = 0.f;
#pragma unroll
    for (int m = 0; m < K / 32; ++m) {
      const float qv = qk_raw[0][lane + 32 * m], kv = qk_raw[1][lane + 32 * m];
      sq += qv * qv;
      sk += kv * kv;
      sqk += qv * kv;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
      sqk += __shfl_xor_sync(0xffffffffu, sqk, o);
    }
    const float iq = l2norm_scale(a.l2norm, sq), ik = l2norm_scale(a.l2norm, sk);
    const float kq = sqk * iq * ik;  // (normalized k) . (normalized q)

    float g, beta;
    if constexpr (!KMAJ) {
      gates_of(a.gates, gx, g, beta);
      const float decay = expf(g);
      // Pass 1: (S k)[v], (S q)[v] of this warp's rows v = row0 + r: in-lane partials over
      // columns 4 lane..+3, then summed across the lanes (lane l: row row0 + l).
      const float4 k4 = *reinterpret_cast<const float4*>(&qk_raw[1][4 * lane]);
      const float4 q4 = *reinterpret_cast<const float4*>(&qk_raw[0][4 * lane]);
      float x[RW];
#pragma unroll
      for (int r = 0; r < RW; ++r) x[r] = s[r].x * k4.x + s[r].y * k4.y + s[r].z * k4.z + s[r].w * k4.w;
      const float kv = warp_transpose_sum(x);
#pragma unroll
      for (int r = 0; r < RW; ++r) x[r] = s[r].x * q4.x + s[r].y * q4.y + s[r].z * q4.z + s[r].w * q4.w;
      const float qv = warp_transpose_sum(x);
      const float vp = beta * (raw_f(v_bits[0], a.dt) - decay * ik * kv);  // v' of row row0 + lane
      store_dt(a.o, a.o_dt, t * a.o_st + hv * a.o_sh + row0 + lane, a.scale * (decay * iq * qv + vp * kq));
      // Pass 2: decay S + v' k^T in registers.
      const float4 kh = make_float4(k4.x * ik, k4.y * ik, k4.z * ik, k4.w * ik);
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const float vr = __shfl_sync(0xffffffffu, vp, r);
        s[r] = make_float4(fmaf(kh.x, vr, s[r].x * decay), fmaf(kh.y, vr, s[r].y * decay),
                           fmaf(kh.z, vr, s[r].z * decay), fmaf(kh.w, vr, s[r].w * decay));
      }
      if (snap >= 0) store_state(part_of(a.ts.pool, snap));
      continue;
    }
    // Pass 1: S^T k, S^T q over this warp's rows (the norms applied once, after the sums).
    float4 ak = make_float4(0.f, 0.f, 0.f, 0.f), aq = ak;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const float kr = qk_raw[1][row0 + r], qr = qk_raw[0][row0 + r];
      ak.x = fmaf(s[r].x, kr, ak.x);
      ak.y = fmaf(s[r].y, kr, ak.y);
      ak.z = fmaf(s[r].z, kr, ak.z);
      ak.w = fmaf(s[r].w, kr, ak.w);
      aq.x = fmaf(s[r].x, qr, aq.x);
      aq.y = fmaf(s[r].y, qr, aq.y);
      aq.z = fmaf(s[r].z, qr, aq.z);
      aq.w = fmaf(s[r].w, qr, aq.w);
    }
    part[0][warp][lane] = ak;
    part[1][warp][lane] = aq;
    __syncthreads();
    float kv[4] = {0.f, 0.f, 0.f, 0.f}, qv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float4 pk = part[0][w][lane], pq = part[1][w][lane];
      kv[0] += pk.x;
      kv[1] += pk.y;
      kv[2] += pk.z;
      kv[3] += pk.w;
      qv[0] += pq.x;
      qv[1] += pq.y;
      qv[2] += pq.z;
      qv[3] += pq.w;
    }
    gates_of(a.gates, gx, g, beta);
    const float decay = expf(g);
    float vp[4];  // v' of columns 4 lane + e
#pragma unroll
    for (int e = 0; e < 4; ++e) vp[e] = beta * (raw_f(v_bits[e], a.dt) - decay * ik * kv[e]);
    if (warp == 0) {
      const int64_t ob = t * a.o_st + hv * a.o_sh + 4 * lane;
#pragma unroll
      for (int e = 0; e < 4; ++e) store_dt(a.o, a.o_dt, ob + e, a.scale * (decay * iq * qv[e] + vp[e] * kq));
    }
    // Pass 2: decay S + k v'^T in registers; the final state leaves after the last token, a token's
    // state (token_states) after its token.
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const float kr = qk_raw[1][row0 + r] * ik;
      s[r] = make_float4(fmaf(kr, vp[0], s[r].x * decay), fmaf(kr, vp[1], s[r].y * decay),
                         fmaf(kr, vp[2], s[r].z * decay), fmaf(kr, vp[3], s[r].w * decay));
    }
    if (snap >= 0) store_state(part_of(a.ts.pool, snap));
  }
  if (out) store_state(out);
}

}  // namespace decode
}  // namespace cuda
}  // namespace gdn
