// Extra precision on weakly decaying chunks in the wgmma chain (fwd_h_wgmma.cuh, chain_o.cuh).
//
// Why: with bf16 operands, three roundings enter the state or o and, without decay, accumulate
// over ~K / beta tokens instead of fading: W (the chain's A operand of v_new^T = W^T A_s^T), vs
// (the update's A operand of S^T += vs^T k) and h_o (the fused o's q h_c, from the state's 16-bit
// image). At g = 0 they take bf16 err_o to 3.8e-3 against the 2.4e-3 target. A CPU model of the
// kernels' roundings (tools/precision/emulate_roundings.py --adaptive 32 --set
// W=hilo,vs=hilo,h_o=hilo; docs/perf.md, "g = 0 accuracy, session 19") shows that taking those
// three as hi + lo parts (the bf16 residual as a second operand: one more product each) on the
// chunks whose decay exp(G_last) > e^-32 meets 2.4e-3 at every gate scale (T = 4096: g = 0
// 2.18e-3, the bench's gates times 0.4 2.34e-3), while a chunk that decays more wipes what its
// roundings left, so the bench's gates (G_last ~ -51 per chunk) keep today's instructions.
//
// On such a chunk (a per-chunk, warp-uniform branch: every thread reads the chunk's decays from the
// ring's eg in shared memory, so both warpgroups decide alike; precise_state_chunk and
// precise_w_chunk below say which chunks):
//   chain:  v_new^T += W_lo^T A_s_hi^T (6 m64n32k16: A_s's lower triangle as the hi pass's);
//           S^T += vs_lo^T k (4 m64n128k16);
//   fused o: o += q h_lo (8 m64n64k16) from the h_lo staging, which the chain writes beside h's
//           after a weakly decaying chunk only (kFusedO): so the o warpgroup takes it where the
//           chunk before decayed weakly too (a flag it carries across chunks). The model puts the
//           first weakly decaying chunk's q h in bf16 at no cost: h_c is then made of the last
//           chunk's update, not of long-accumulated roundings (gates x0.6, T = 4096, 14 such
//           chunks of 64: err_o 2.360e-3 against 2.359e-3 with h_lo staged after every chunk).
//           Staged after every chunk, h_lo cost ~170 instructions per thread and chunk of the
//           chain warpgroup on every chunk (8 stmatrix, 32 packs, 64 subtractions, 64 unpacks).
// The unfused o (fwd_o.cu): its q h reads the h image (one rounding); on such a chunk its P v_new
// adds v_new's lo part (b.v_new_lo, which the storing chain writes for such chunks only).
// fp16 operands take the same passes with fp16 hi + lo parts (kHiLoOperands below).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/core/fragments.cuh"  // pack2, lo_f, hi_f
#include "cuda/ptx/copy.cuh"        // ld_shared16, st_shared16
#include "cuda/ptx/wgmma.cuh"
#include "gdn/gdn.h"  // kChunkSize

namespace gdn {
namespace cuda {

// exp(G_last) above this (e^-32): the chunk takes the extra passes. The model's A = 32 (docs/perf.md:
// A = 16 misses at gates x0.4, 2.46e-3; A = 32 and 48 meet 2.4e-3 at every scale).
constexpr float kPreciseDecay = 1.26641655e-14f;  // e^-32

// Whether operands of type E take the hi + lo passes at all: bf16 and fp16. fp16's 3 more
// significand bits were not enough at g = 0 on long sequences (the model: 4.77e-4 at T = 16384
// against issue 11's 5e-4; with the lo passes as fp16 hi + lo parts 2.73e-4:
// tools/precision/emulate_roundings.py --base fp16 --set h_o=hilo16,W=hilo16,vs=hilo16).
template <typename E>
constexpr bool kHiLoOperands = std::is_same<E, __nv_bfloat16>::value || std::is_same<E, __half>::value;
// Whether a chain of operands E on inputs EI takes them: not fp16 operands for bf16 inputs
// (FastBufs<__half, __nv_bfloat16>: cfg.fp16_operands), whose 11 bits carry bf16 inputs' products
// at ~1.7e-3 with no lo pass on any chunk (the rounding model: --base fp16 --set o=bf16,P=fp16).
template <typename E, typename EI = E>
constexpr bool kLoPasses = std::is_same<E, EI>::value&& kHiLoOperands<E>;

// Whether the o warpgroup's P (|P_ij| <= 1 with l2norm) goes into P v_new as hi + lo parts: bf16
// only. bf16's 8 bits need the lo part on every chunk (tools/precision/emulate_roundings.py
// --strong P=bf16: the bench's gates 2.38e-3 -> 2.89e-3); fp16's 11 bits do not (--base fp16
// --set ...,P=fp16: err_o 2.7-3.0e-4 -> 2.9-3.7e-4 at g = 0, the bench's gates, x0.1 and x2,
// under issue 11's 5e-4), and the fp16 kernels (fp16 inputs, and fp32 inputs' fp16 copies) save
// P's split and its 4 lo products a chunk in the warpgroup that paces the fused chain.
template <typename E>
constexpr bool kPSplit = std::is_same<E, __nv_bfloat16>::value;

// The lo part of a packed pair: E(x - hi) per half, hi = pack2<E>(x0, x1) (as the o warpgroup's P
// split). Not residual2 (cuda/core/fragments.cuh), whose bf162 view of hi made nvcc keep every
// pair of the fast path's operands as split halves and rejoin them (32 PRMT per chunk and 16
// registers live into the precise branch); lo_f / hi_f read the halves by shifts and masks.
template <typename E>
__device__ __forceinline__ uint32_t lo_part(float x0, float x1, uint32_t hi) {
  return pack2<E>(x0 - lo_f<E>(hi), x1 - hi_f<E>(hi));
}

// exp(G_last - G_i) of the chunk's last quarter (i = 3 len / 4) above this (e^-4): its state is
// made of weakly decaying tokens too, whatever came before them.
constexpr float kPreciseTail = 0.0183156389f;  // e^-4

// Which chunks take them, from the chunk's (exp(G_i), exp(G_last - G_i)) (eg, len rows; NaN: no).
// precise_state_chunk: the vs pass, and the h_lo staging after the chunk. The chunk decays weakly
// (exp(G_last) > e^-32), or its last quarter does: a reset (g = -1e4) early in the chunk gives
// exp(G_last) = 0, but the state the tokens after it build lasts as at g = 0 (the model, --gates
// zero+resets --rule ...: err_o 2.73e-3 with exp(G_last) alone, 2.21e-3 with both rules here;
// the bench's gates take no more chunks: their last 16 tokens decay by ~e^-13).
// precise_state_decays decides from the two decays it reads (exp(G_last), exp(G_last - G_{3 len / 4}))
// for a kernel that loads them from global memory early, to hide their latency (fwd_o.cu).
template <typename E, typename EI = E>
__device__ __forceinline__ bool precise_state_decays(float last, float tail) {
  return kLoPasses<E, EI> && (last > kPreciseDecay || tail > kPreciseTail);
}
template <typename E, typename EI = E>
__device__ __forceinline__ bool precise_state_chunk(const float2* eg, int len) {
  return precise_state_decays<E, EI>(eg[len - 1].x, eg[(3 * len) / 4].y);
}
// precise_w_chunk: W's pass (and the fused o's q h_lo). Also where the chunk before left a weakly
// decayed state (after_precise: its precise_state_chunk) that this chunk's first rows still see
// (exp(G_0) > e^-32): rows before a reset read the whole state.
template <typename E, typename EI = E>
__device__ __forceinline__ bool precise_w_chunk(const float2* eg, bool state_precise, bool after_precise) {
  return state_precise || (kLoPasses<E, EI> && after_precise && eg[0].x > kPreciseDecay);
}

// lo[i] = the lo part of hi[i] = pack2<E>(x[2 i], x[2 i + 1]), pinned here (formed before the
// fence of the hi pass that reads hi, while x is live anyway).
template <typename E>
__device__ __forceinline__ void lo_parts(uint32_t (&lo)[16], const float (&x)[32], const uint32_t (&hi)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    lo[i] = lo_part<E>(x[2 * i], x[2 * i + 1], hi[i]);
    pin(lo[i]);
  }
}

// The lo parts of 4 packed pairs (hi[q] = pack2<E>(x[2 q], x[2 q + 1])) -> the h_lo staging at
// addr, by stmatrix.trans as the h staging's hi parts.
template <typename E>
__device__ __forceinline__ void stage_lo_x4(uint32_t addr, const float* x, const uint32_t* hi) {
  uint32_t lo[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) lo[q] = lo_part<E>(x[2 * q], x[2 * q + 1], hi[q]);
  stsm_x4_t(addr, lo[0], lo[1], lo[2], lo[3]);
}

// The lo passes, each a wgmma group of its own that completes before it returns: the callers
// branch on the chunk, and in the chain a branch that wgmmas in flight cross (or a guarded wgmma)
// made ptxas serialize every wgmma of the kernel (C7520; the o warpgroup's branch below, entered
// with P_c's group in flight, compiled without it: check the build log for C75xx after edits). So each runs apart from
// its hi pass (W's after it, the update's before it: its lo operand is then dead while the hi pass, the v_new stores
// and B2 run), and its latency adds to the precise chunks' time. v_new^T [left | right] += W_lo^T A_s_hi^T: A_s's hi
// atom at `as`, the hi pass's k-steps (left: tokens j < 32 only; right: B from row 32).
template <typename E>
__device__ __forceinline__ void w_lo_pass(float (&left)[16], float (&right)[16], const uint32_t (&wl)[16],
                                          uint32_t as) {
  constexpr uint32_t kHalf = 32 * 128;
  const WgTile at = wg_tile(as, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) wgmma_m64n32_rs<E>(left, &wl[4 * ks], at.at(ks * 32), true);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_m64n32_rs<E>(right, &wl[4 * ks], at.at(kHalf + ks * 32), true);
  wgmma_commit();
  wgmma_wait<0>();
}
// The state update's products, S^T += a^T k over the chunk's 64 tokens (4 k-steps; the caller
// fences, commits and waits): k [token][kk] at `ks0` read MN-major (SW128: k-step ks at token
// 16 ks, 2048 bytes; kk atoms of 64 8192 bytes apart, 8-token groups 1024), m64n128 for K = V =
// 128's state (N = 64 floats a thread), m64n64 for K = V = 64's (N = 32: k's first atom).
template <typename E, int N>
__device__ __forceinline__ void wgmma_state_update(float (&st)[N], const uint32_t (&a)[16], uint32_t ks0) {
  const WgTile kt = wg_tile(ks0, kChunkSize * 128, 1024);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    if constexpr (N == 64)
      wgmma_m64n128_tb<E>(st, &a[4 * ks], kt.at(ks * 2048));
    else
      wgmma_m64n64_tb<E>(st, &a[4 * ks], kt.at(ks * 2048));
  }
}
// S^T += vs_lo^T k: the update's hi pass again on vs's lo part.
template <typename E, int N>
__device__ __forceinline__ void vs_lo_pass(float (&st)[N], const uint32_t (&vl)[16], uint32_t ks0) {
  wgmma_fence();
  wgmma_state_update<E>(st, vl, ks0);
  wgmma_commit();
  wgmma_wait<0>();
}
// The fused o's o += q h_lo: q [token][kk] at `qs` (K-major, two 64-wide atoms), the h_lo staging
// [kk][vv] at `hls` (MN-major), as q h, over kk < 16 kKS (K = V = 64: 4). Waits for every group in
// flight.
template <typename E, int kKS = 8>
__device__ __forceinline__ void qh_lo_pass(float (&o)[32], uint32_t qs, uint32_t hls) {
  const WgTile qt = wg_tile(qs, 16, 1024), ht = wg_tile(hls, kChunkSize * 128, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKS; ++ks)
    wgmma_m64n64_ss<E, 1>(o, qt.at((ks / 4) * (kChunkSize * 128) + (ks % 4) * 32), ht.at(ks * 2048), true);
  wgmma_commit();
  wgmma_wait<0>();
}

// fp16 operands for bf16 inputs (cfg.fp16_operands): a ring stage's q or k tile as TMA brought it
// (bf16) converted in place to fp16 before any wgmma reads it (bf16x2_to_f16x2, fragments.cuh:
// exact within fp16's range, as for fp16 inputs). The tile is [2 atoms][64 rows][128 B]: the
// swizzle permutes a row's 16-byte pieces within its 128 bytes, so converting every piece of a row
// converts the row, and rows are independent (rows past len are chain_zero_rows'). Converts piece
// `piece` (0 .. 7) of rows row, row + step, .., row + (kRows - 1) step below len, in both atoms:
// every load first, then the conversions and stores (the loads' latency once, not 2 kRows times:
// the asm's memory clobbers keep each store ahead of the next load as written).
__device__ __forceinline__ uint4 bf16x8_to_f16x8(uint4 v) {
  return make_uint4(bf16x2_to_f16x2(v.x), bf16x2_to_f16x2(v.y), bf16x2_to_f16x2(v.z), bf16x2_to_f16x2(v.w));
}
// One row's piece, one atom at a time (4 data registers): the norm warpgroup's form, at 40
// registers, where convert_stage_rows<1> (8) made ptxas spill.
__device__ __forceinline__ void convert_stage_row_piece(uint32_t tile, int row, int len, int piece) {
  if (row >= len) return;
  const uint32_t p = tile + row * 128 + 16 * piece;
  st_shared16(p, bf16x8_to_f16x8(ld_shared16(p)));
  st_shared16(p + kChunkSize * 128, bf16x8_to_f16x8(ld_shared16(p + kChunkSize * 128)));
}
template <int kRows>
__device__ __forceinline__ void convert_stage_rows(uint32_t tile, int row, int step, int len, int piece) {
  uint4 x[kRows][2];
  const uint32_t p = tile + row * 128 + 16 * piece;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (row + r * step < len) {
      x[r][0] = ld_shared16(p + r * step * 128);
      x[r][1] = ld_shared16(p + r * step * 128 + kChunkSize * 128);  // (the second 64-column atom)
    }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (row + r * step < len) {
      st_shared16(p + r * step * 128, bf16x8_to_f16x8(x[r][0]));
      st_shared16(p + r * step * 128 + kChunkSize * 128, bf16x8_to_f16x8(x[r][1]));
    }
}

}  // namespace cuda
}  // namespace gdn
