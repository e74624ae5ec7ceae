// The decode step for the head sizes without a tuned kernel (decode_general_kernel): any K and V
// in [1, 256] that are not both in {64, 128, 256} (those run decode_rows_kernel and
// decode_tiles_kernel). Correctness and simplicity first: fla's test grids use K, V = 32, 60, 100,
// shapes that matter for coverage, not for speed. The state is still read once and written once.
// Every state access is one element, so any pool row works (small heads whose rows are not
// 16-byte multiples, odd row strides); decode_heuristics also gives it the tuned sizes when a
// pool's rows do not start on the 4-element pieces that the rows and tiles kernels move.
//
// Items: (sequence, value head, slice of 32 values of v), one block of 8 warps each; the grid has
// N * HV * ceil(V / 32) blocks. Thread (warp w, lane) owns column j = v0 + lane of the state and
// its rows i = w + 8 r (r < KT / 8), KT the next of 64, 128, 256 at or above K: a 32-column
// K x 32 tile in registers (at most 32 per thread). Rows i >= K and columns j >= V are masked:
// they load as zero, stay zero (k_i = 0 there, v_j = 0) and are never stored.
//
// Per token:  S = e^g S;  v' = beta (v - S^T k);  S += k v'^T;  o = scale S^T q  (SPEC section 1),
// with q, k loaded once per token into shared memory (l2-normalized when asked), and the two sums
// over rows (S^T k before the update, S^T q after it) as per-warp partial sums reduced across the
// 8 warps through shared memory. q/k are read in their own dtype (DecodeArgs::qk_dt), v in dt, o written in o_dt.
// Sequences with no tokens copy their state through; pool rows outside [0, num_slots) read as
// zeros and are not written; cu_seqlens is clamped to [0, T] per sequence (decode_args.cuh).
// Per-token states (TokenStates, speculative decoding's verify) as the other decode kernels: the
// initial state from initial_state or a token_states row through num_accepted, the state after
// every token into its token_states row, and for EAGLE trees the parent token's state reloaded
// before a token. Each thread stores and reloads only its own elements, so no barrier is needed
// between a token's store and a later token's reload.
#pragma once

#include <cstdint>

#include "cuda/core/common.cuh"
#include "cuda/decode/decode_args.cuh"

namespace gdn {
namespace cuda {
namespace decode {

constexpr int kGeneralWarps = 8;
constexpr int kGeneralSlice = 32;  // values of v per item (one per lane)

// TS: the pools' element type (float, __nv_bfloat16, __half); the state is fp32 in registers and
// rounded once per store.
template <int KT, typename TS>
__global__ void __launch_bounds__(kGeneralWarps * 32) decode_general_kernel(DecodeArgs a, bool kmaj) {
  constexpr int W = kGeneralWarps;
  constexpr int R = KT / W;  // state rows per thread
  static_assert(KT % 32 == 0 && R <= 32, "KT is 64, 128 or 256");
  __shared__ float qs[KT], ks[KT];  // this token's q and k (zero past K)
  __shared__ float red_k[W][32];    // per-warp partial sums of S^T k
  __shared__ float red_q[W][32];    // per-warp partial sums of S^T q

  const int K = a.K, V = a.V;
  const int slices = (V + kGeneralSlice - 1) / kGeneralSlice;
  const int64_t item = blockIdx.x;
  const int64_t n = item / (int64_t(a.HV) * slices);
  const int hv = static_cast<int>((item / slices) % a.HV);
  const int v0 = static_cast<int>(item % slices) * kGeneralSlice;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  const int hk = hv / a.group;
  const int j = v0 + lane;
  const bool col = j < V;
  const int64_t KV = int64_t(K) * V;
  // Element (i, j) of a state in its layout (K * V <= 65536: a 32-bit offset, so that the offsets
  // that the compiler keeps for the token loop's loads and stores take one register each).
  auto at = [&](int i) -> int { return kmaj ? i * V + j : j * K + i; };

  const int64_t in_row = read_checked(a, read_raw(a, n));
  const int64_t out_row = row_checked(a.fin, row_raw(a.fin, n));
  const Span span = span_checked(a, span_raw(a, n));
  // This thread's elements of a state (rows warp + 8 r < K of column j) from or to row `row` of a pool.
  auto load_state = [&](float* s, StateRef pool, int64_t row) {  // pool by value: no local copy of the params
    const TS* src = static_cast<const TS*>(pool.data) + state_offset(pool, row, hv, a.HV, KV);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = warp + W * r;
      if (col && i < K) s[r] = to_f(src[at(i)]);
    }
  };
  auto store_state = [&](const float* s, StateRef pool, int64_t row) {
    TS* dst = static_cast<TS*>(pool.data) + state_offset(pool, row, hv, a.HV, KV);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = warp + W * r;
      if (col && i < K) dst[at(i)] = from_f<TS>(s[r]);
    }
  };

  float s[R];
#pragma unroll
  for (int r = 0; r < R; ++r) s[r] = 0.f;
  if (in_row >= 0) load_state(s, read_pool(a), in_row);

  for (int64_t t = span.b; t < span.e; ++t) {
    // EAGLE trees: continue from the parent token's stored state (this thread's own elements).
    const int64_t parent = parent_row(a, n, t - span.b);
    if (parent >= 0) load_state(s, a.ts.pool, parent);
    __syncthreads();     // the previous token's readers of qs, ks, red_k and red_q are done
    const int hi = tid;  // one element of q and of k per thread (K <= KT <= 256 = blockDim)
    if (hi < KT) {
      const bool in = hi < K;
      qs[hi] = in ? raw_f(ld_raw(a.q, a.qk_dt, t * a.q_st + hk * a.q_sh + hi), a.qk_dt) : 0.f;
      ks[hi] = in ? raw_f(ld_raw(a.k, a.qk_dt, t * a.k_st + hk * a.k_sh + hi), a.qk_dt) : 0.f;
    }
    __syncthreads();
    // The qk l2-norm: every warp computes the same sums (no extra barrier).
    float sq = 0.f, sk = 0.f;
#pragma unroll
    for (int m = 0; m < KT / 32; ++m) {
      const float qv = qs[lane + 32 * m], kv = ks[lane + 32 * m];
      sq += qv * qv;
      sk += kv * kv;
    }
    warp_sum(sq, sk);
    const float iq = l2norm_scale(a.l2norm, sq), ik = l2norm_scale(a.l2norm, sk);
    float g, beta;
    gates_of(a.gates, load_gate_bits(a.gates, t, hv), g, beta);
    const float decay = expf(g);
    const float vj = col ? raw_f(ld_raw(a.v, a.dt, t * a.v_st + hv * a.v_sh + j), a.dt) : 0.f;

    // S^T k of column j (the state before the decay; the decay factors out).
    float pk = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) pk += s[r] * ks[warp + W * r];
    red_k[warp][lane] = pk * ik;
    __syncthreads();
    float kS = 0.f;
#pragma unroll
    for (int w = 0; w < W; ++w) kS += red_k[w][lane];
    const float vp = beta * (vj - decay * kS);

    // The update, and S^T q of column j after it.
    float pq = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = warp + W * r;
      s[r] = fmaf(ks[i] * ik, vp, decay * s[r]);
      pq += s[r] * qs[i];
    }
    red_q[warp][lane] = pq * iq;
    __syncthreads();
    if (warp == 0 && col) {
      float o = 0.f;
#pragma unroll
      for (int w = 0; w < W; ++w) o += red_q[w][lane];
      store_dt(a.o, a.o_dt, t * a.o_st + hv * a.o_sh + j, a.scale * o);
    }
    const int64_t snap = token_row(a, n, t - span.b);  // token_states row of the state after this token
    if (snap >= 0) store_state(s, a.ts.pool, snap);
  }

  if (out_row >= 0) store_state(s, a.fin, out_row);
}

}  // namespace decode
}  // namespace cuda
}  // namespace gdn
