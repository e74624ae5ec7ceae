// The chain warpgroup's steps (fwd_h_wgmma.cuh): the part's state in and, for the summary pass,
// out, and the loop's per-chunk steps in its order. Each is inlined where the kernel calls it: the
// register arrays are the kernel's, passed by reference.
// Fragment layouts (one warpgroup, thread tid: warp = tid / 32, g = lane / 4, t = lane % 4):
//   acc, left | right  [64 vv x 64 tokens] m64n64 accumulator: acc[8 ks + 2 q + e] is token
//                      16 ks + 8 (q / 2) + 2 t + e of row vv = 16 warp + g + 8 (q % 2)
//   wa, va, vx         the same tokens as A fragments (two 16-bit values a register)
//   sc, dec            [8][2]: column token 8 j + 2 t + e's row scaling (j = 2 ks + q / 2)
#pragma once

#include <cstdint>

#include "cuda/chunk/chain_layout.cuh"
#include "cuda/chunk/split.cuh"
#include "cuda/core/common.cuh"     // StateRef, state_row, state_offset
#include "cuda/core/fragments.cuh"  // pack2, lo_f, hi_f, pin
#include "cuda/ptx/wgmma.cuh"

namespace gdn {
namespace cuda {
namespace chain {

// The part's initial state into st (this thread's elements from row kk0 + 2 t and column vv0,
// for_each_state_elem's): the caller's pool row for part 0 (element type dt, converted here; zero
// where the row is absent), the scan's S_p for the full pass's later parts, zero for the summary's
// B_p, the identity for its M_p (transition; zero where M_p is negligible). The split's part states
// and summaries are [kW][kW] K-major fp32 (the chain's width: K = V = 64 in the top left corner of
// 128, the rest never written nor read); the caller's states [kDK][kDK].
template <bool kSummary, int kDK, int kDH>
__device__ __forceinline__ void load_part_state(float (&st)[kDH / 2], const StateRef& init, const SplitBufs& sp,
                                                DType dt, bool kmajor, int64_t part, int64_t cut, int64_t seq, int hv,
                                                int HV, bool transition, bool negligible, int kk0, int t, int vv0) {
  constexpr int kW = chain_width(kDK);
  const void* src = nullptr;
  int64_t src_off = 0;
  DType src_dt = DType::kFloat32;
  bool base_kmajor = kmajor;
  int base_d = kDK;  // its row length
  if (part == 0 && cut < 0) {
    const int64_t r = state_row(init, seq);
    if (r >= 0) src = init.data, src_off = state_offset(init, r, hv, HV, int64_t(kDK) * kDK), src_dt = dt;
  } else if (!kSummary) {
    // S_p comes from the summary pass (and the scan). Launched as a programmatic dependent of the
    // summary pass (no scan), the full pass's part 0 blocks run beside it; the others wait here for
    // it to complete. (A no-op when launched in stream order.)
    pdl_wait();
    src = sp.part_state, src_off = ((seq * sp.max_parts + part) * HV + hv) * int64_t(kW) * kW;
    base_kmajor = true;
    base_d = kW;
  }
  load_chain_state<kDH / 8>(st, src, src_off, src_dt, base_kmajor, base_d, kk0 + 2 * t, vv0);
  if (transition)
    for_each_state_elem<kDH / 8>(vv0, t,
                                 [&](int i, int kk, int vv) { st[i] = kk + kk0 == vv && !negligible ? 1.f : 0.f; });
}

// The summary pass's end state (split.cuh), K-major fp32 [kW][kW]: part 0's S_1 into the part
// states, else B_p or M_p into the summaries. A negligible M_p is flagged for the scan instead of
// stored (flag_writer: the one thread of its first M slice that writes the flag). (The null base
// is tested as the kernel tested it before this function: returning early instead, ptxas
// rescheduled the summary kernels' loops; SASS, session 50.)
template <int kDK, int kDH>
__device__ __forceinline__ void store_part_summary(const float (&st)[kDH / 2], const SplitBufs& sp, int64_t n,
                                                   int64_t part, int hv, int HV, bool transition, bool negligible,
                                                   bool flag_writer, int kk0, int t, int vv0) {
  constexpr int kW = chain_width(kDK);
  constexpr int64_t DD = int64_t(kW) * kW;
  float* dst = part == 0 ? sp.part_state + (n * sp.max_parts + 1) * HV * DD
                         : (transition ? sp.summary_m : sp.summary_b) + (n * sp.max_parts + part) * HV * DD;
  if (transition && flag_writer) sp.m_negligible[(n * sp.max_parts + part) * HV + hv] = negligible;
  float* const base = transition && negligible ? nullptr : dst + hv * DD;
  if (base)
    for_each_state_elem<kDH / 8>(vv0, t, [&](int i, int kk, int vv) {
      kk += kk0;
      base[int64_t(kk) * kW + vv] = st[i];
    });
}

// Per-token row factors of chunk rows i < len, one pair (x: exp(G_i), the -U^T scaling; y:
// exp(G_last - G_i), the update's decay) as each thread's accumulator columns need them, times k's
// inverse norm r_i with l2norm (0 past len). Each lane forms tokens 2 lane, 2 lane + 1; the others
// come by shuffles. The exponentials come from kkt_solve (eg, from fp64 G): none in the chain's loop,
// and no fp64 (ncu: the fp64 / conversion pipe throttled the fused chain, docs/perf.md). Pinned:
// formed while the tensor cores run, not after the wait.
template <bool kDecay>
__device__ __forceinline__ void chain_row_factors(float (&f)[8][2], const float2* eg, const float* rk, bool l2norm,
                                                  int len, int lane, int t) {
  float f2[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int i = 2 * lane + e;
    const float x = (kDecay ? eg[i].y : eg[i].x) * (l2norm ? rk[i] : 1.f);
    f2[e] = i < len ? x : 0.f;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      f[j][e] = __shfl_sync(0xffffffffu, f2[e], 4 * j + t);
      pin(f[j][e]);
    }
}

// v^T of the slice from the ring's v stage, packed: vx[4 p + q] holds tokens 16 p + 8 (q / 2) +
// 2 t + {0, 1} of row vv = v0 + 16 warp + g + 8 (q % 2); zeros for the identity's chain (v = 0).
// (The stage's address is formed inside the load branch, as the kernel formed it: formed before
// the branch, it changed the summary kernels' code.)
template <typename T>
__device__ __forceinline__ void load_v_fragments(uint32_t (&vx)[16], const T* vin, bool zero, int lrow, int lch) {
  if (zero) {
#pragma unroll
    for (int i = 0; i < 16; ++i) vx[i] = 0u;
  } else {
    const uint32_t vsm = smem_u32(vin);
#pragma unroll
    for (int p = 0; p < 4; ++p)
      ldsm_x4_t(vsm + sw128(16 * p + lrow, lch), vx[4 * p], vx[4 * p + 1], vx[4 * p + 2], vx[4 * p + 3]);
  }
}

// K = V = 256: -U^T = p_0 + p_1, the two K halves' partial products: each warpgroup's image
// [8][128][4] in xch (a warp's float4 stores 512 contiguous bytes), a block barrier, the other's
// added (p_0 + p_1 = p_1 + p_0 bitwise: both hold the same -U^T). The other's reads of an image
// end before its next write: B1 lies between.
__device__ __forceinline__ void exchange_k_halves(float (&acc)[32], float* mine_image, const float* other_image,
                                                  int tid) {
  float4* const mine = reinterpret_cast<float4*>(mine_image) + tid;
#pragma unroll
  for (int j = 0; j < 8; ++j) mine[128 * j] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  __syncthreads();
  const float4* const other = reinterpret_cast<const float4*>(other_image) + tid;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float4 x = other[128 * j];
    acc[4 * j] += x.x;
    acc[4 * j + 1] += x.y;
    acc[4 * j + 2] += x.z;
    acc[4 * j + 3] += x.w;
  }
}

// W^T = v^T - U^T diag(exp(G) r) from acc = -U^T: fp32 in wf, rounded to E once (after the
// cancellation v - k S, never its terms) as A fragments in wa (wa[4 ks + q]: tokens [16 ks, 16 ks +
// 16)). v is in the inputs' dtype EI.
template <typename E, typename EI>
__device__ __forceinline__ void form_w(float (&wf)[32], uint32_t (&wa)[16], const float (&acc)[32],
                                       const uint32_t (&vx)[16], const float (&sc)[8][2]) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int j = 2 * ks + q / 2;
      const uint32_t x = vx[4 * ks + q];
      wf[8 * ks + 2 * q] = fmaf(acc[8 * ks + 2 * q], sc[j][0], lo_f<EI>(x));
      wf[8 * ks + 2 * q + 1] = fmaf(acc[8 * ks + 2 * q + 1], sc[j][1], hi_f<EI>(x));
      wa[4 * ks + q] = pack2<E>(wf[8 * ks + 2 * q], wf[8 * ks + 2 * q + 1]);
    }
#pragma unroll
  for (int i = 0; i < 16; ++i) pin(wa[i]);
}

// v_new^T = W^T A_s^T, A_s = (I + L)^-1 diag(beta) from kkt_solve as hi + lo parts (as: the ring
// stage's image [i][j] rows, K-major SW128: atom 0 the hi part, atom 1 the lo). A_s is lower
// triangular, so columns i < 32 take the k-steps of tokens j < 32 only (-25% of this product's
// tensor time): two m64n32 halves into their own accumulators (B of the second from row 32, 4096
// bytes), 12 m64n32k16 in all. (Suffixes of one accumulator as n48 / n32 / n16 made ptxas serialize
// every wgmma: C7511.) Issued only: the caller commits and waits.
template <typename E>
__device__ __forceinline__ void wgmma_v_new(float (&left)[16], float (&right)[16], const uint32_t (&wa)[16],
                                            uint32_t as) {
  constexpr uint32_t kLo = kC * 128, kHalf = 32 * 128;  // the lo atom; B's row 32
  const WgTile at = wg_tile(as, 16, 1024);
#pragma unroll
  for (int lo = 0; lo < 2; ++lo) {  // A_s's hi, then lo part
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) wgmma_m64n32_rs<E>(left, &wa[4 * ks], at.at(lo * kLo + ks * 32), lo + ks > 0);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_m64n32_rs<E>(right, &wa[4 * ks], at.at(lo * kLo + kHalf + ks * 32), lo + ks > 0);
  }
}

// vs^T = v_new^T diag(decay) from acc = v_new^T: fp32 in vf, as A fragments in va.
template <typename E>
__device__ __forceinline__ void form_vs(float (&vf)[32], uint32_t (&va)[16], const float (&acc)[32],
                                        const float (&dec)[8][2]) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int j = 2 * ks + q / 2;
      vf[8 * ks + 2 * q] = acc[8 * ks + 2 * q] * dec[j][0];
      vf[8 * ks + 2 * q + 1] = acc[8 * ks + 2 * q + 1] * dec[j][1];
      va[4 * ks + q] = pack2<E>(vf[8 * ks + 2 * q], vf[8 * ks + 2 * q + 1]);
    }
  }
}

// v_new^T (acc) into a [token][vv] staging of 128-byte swizzled rows at vs by stmatrix.trans: E as
// rounded (kLoPart false), or its residual acc - E(acc) (kLoPart: fwd_o's v_new lo part).
template <typename E, bool kLoPart>
__device__ __forceinline__ void stage_v_new(const float (&acc)[32], uint32_t vs, int lrow, int lch) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    uint32_t vn[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) vn[q] = pack2<E>(acc[8 * ks + 2 * q], acc[8 * ks + 2 * q + 1]);
    if constexpr (kLoPart)
      stage_lo_x4<E>(vs + sw128(16 * ks + lrow, lch), &acc[8 * ks], vn);
    else
      stsm_x4_t(vs + sw128(16 * ks + lrow, lch), vn[0], vn[1], vn[2], vn[3]);
  }
}

}  // namespace chain
}  // namespace cuda
}  // namespace gdn
