// The split's summary pass with the look-ahead U (experimental: built with the CMake option
// GDN_SUMMARY_AHEAD only; docs/perf.md, "Session 50" and "Session 51"). The same blocks and
// results as the wgmma chain's summary mode (fwd_h_wgmma.cuh, kSummary: one block per (sequence,
// part, head, 64-wide slice of V or of K), B_p from zero, M_p from the identity with v = 0, part
// 0's S_1), for K = V = 128 and E = EI, with the state's work off the chain's per-chunk path.
//
// Why: the summary chain is bound by its chunk's dependent path (-U^T over K, W, v_new, vs, the
// update, E(S) staged: ~1.9 us a chunk, three wgmma waits). With S_{c+1} = e^{G_last,c} S_c +
// k_c^T vs_c,
//   U_{c+1} = k_{c+1} S_{c+1} = e^{G_last,c} (k_{c+1} E(S_c)) + (k_{c+1} k_c^T) vs_c,
// so chunk c + 1's U needs only S_c, known a chunk early, and vs_c, through a 64 x 64 correction.
// Two warpgroups a block (one block per SM, ~219 KB of shared memory):
//   the chain warpgroup (threads 0-127), per chunk c: -U_c^T = base_c (from shared memory) -
//     vs_{c-1}^T KK_c (4 m64n64k16; on weakly decaying chunks also vs's and KK's lo parts), W,
//     v_new (as the summary mode: chain_steps.cuh), vs_c -> the vs exchange, announced on
//     vs_ready;
//   the state warpgroup (threads 128-255) holds S^T: per chunk c it waits for vs_c, updates S
//     (A = vs^T from shared memory), then forms base_{c+2} = -e^{G_last,c+1} E(S_{c+1})^T
//     k_{c+2}^T and KK_{c+2} = k_{c+2} k_{c+1}^T (hi, and lo where chunk c + 1 decays weakly) into
//     the exchanges, announced on u_ready; it fills the ring (chunk c + 3 into chunk c's stage,
//     once its update has read k_c) and zeroes a partial chunk's rows.
// The roundings are the rounding model's `--form lookahead` with KK in hi + lo where the chunk
// before decays weakly (tools/precision/emulate_roundings.py: as exact as today's chain or more).
//
// Shared memory: the ring (kAheadStages stages of A_s, k, v, eg, rk: chain_prefetch's layout), the
// vs exchange [2 buffers][hi, lo][64 vv][64 tokens] (the update's A, K-major SW128), the KK
// exchange [2][hi, lo][64 i][64 j] (the correction's B, K-major SW128: KK^T's rows), the base
// exchange [2][8][128 threads][4] floats (each chain thread reads what the state thread of its
// index wrote: the two warpgroups' accumulators have the same layout). Chunk c uses buffer c % 2:
// the chain reads base_c and KK_c before it announces vs_c, and the state warpgroup writes
// base_{c+2} and KK_{c+2} only after vs_c; it reads vs_c in the update of chunk c, before it
// announces u_ready for chunk c + 2, which the chain waits for before it writes vs_{c+2}.
#pragma once

#include "cuda/chunk/chain_layout.cuh"
#include "cuda/chunk/chain_precise.cuh"
#include "cuda/chunk/chain_steps.cuh"
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/chunk/split_cut.cuh"

namespace gdn {
namespace cuda {
namespace {

using namespace chain;  // kC, kD, kBV, chain_prefetch, chain_zero_rows (chain_layout.cuh)

constexpr int kAheadStages = 3;  // chunk c + 1's k lands a chunk before the state warpgroup reads it

template <typename E>
struct AheadSmem {
  E a[kAheadStages][kC * kD];     // 16 KB a stage (chain_prefetch's names: it fills these)
  E k[kAheadStages][kC * kD];     // 16 KB
  E vin[kAheadStages][kC * kBV];  // 8 KB
  E vs[2][2][kC * kBV];           // 8 KB each: vs^T [vv][token], hi and lo
  E kk[2][2][kC * kC];            // 8 KB each: KK^T [i][j], hi and lo
  float base[2][kC * kBV];        // 16 KB each
  float2 eg[kAheadStages][kC];
  float rk[kAheadStages][kC];
  // full[s]: stage s's copies (TMA bytes, one arrival of thread 0) and cp.async rows (every state
  // thread's arrival: mbarrier_arrive_cp_async) landed. vs_ready[b] / u_ready[b]: the chain's /
  // the state warpgroup's 128 threads. wg: the state warpgroup's own barrier (128).
  uint64_t full[kAheadStages], vs_ready[2], u_ready[2], wg;
};

// stmatrix (not transposed) of an m64n64 accumulator's 16-bit fragments x[4 ks + q] into [row][col]
// rows of 128 bytes, SW128, at addr: this thread's rows 16 warp + g + 8 (q % 2), columns 16 ks +
// 8 (q / 2) + 2 t (+1). Lane l addresses row l % 8 of matrix l / 8 (ldsm's roles).
__device__ __forceinline__ void stage_rows_x16(uint32_t addr, const uint32_t (&x)[16], int warp, int lane) {
  const int row = 16 * warp + 8 * ((lane / 8) % 2) + lane % 8;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
    stsm_x4(addr + sw128(row, 2 * ks + (lane / 8) / 2), x[4 * ks], x[4 * ks + 1], x[4 * ks + 2], x[4 * ks + 3]);
}

// An m64n64 accumulator as hi (and, with_lo, lo) 16-bit parts staged by stage_rows_x16 at hi / lo.
template <typename E>
__device__ __forceinline__ void stage_hi_lo(const float (&x)[32], uint32_t hi, uint32_t lo, bool with_lo, int warp,
                                            int lane) {
  uint32_t h[16], l[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) h[i] = pack2<E>(x[2 * i], x[2 * i + 1]);
  stage_rows_x16(hi, h, warp, lane);
  if (with_lo) {
    lo_parts<E>(l, x, h);
    stage_rows_x16(lo, l, warp, lane);
  }
}

template <typename E>
__global__ void __launch_bounds__(256, 1)
    chunk_summary_ahead_kernel(const __grid_constant__ FastBufs<E, E> b, SplitBufs sp, StateRef init, DType init_dt,
                               bool kmajor) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the library is built for it only
#else
  constexpr int ST = kAheadStages, kVSlices = kD / kBV, kSlices = 2 * kVSlices;
  extern __shared__ __align__(16) char smem_raw[];
  using Sm = AheadSmem<E>;
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw + align_1024_offset(smem_raw));
  if (threadIdx.x == 0) {
    for (int i = 0; i < ST; ++i) mbarrier_init(&sm.full[i], 1 + 128);
    for (int i = 0; i < 2; ++i) mbarrier_init(&sm.vs_ready[i], 128), mbarrier_init(&sm.u_ready[i], 128);
    mbarrier_init(&sm.wg, 128);
  }
  __syncthreads();
  pdl_launch_dependents();  // (as the summary mode: the chain after it may start its part 0 blocks)
  if (block_index_here() == gridDim.x - 1) pdl_wait();
  // The block's item, as the summary mode's (fwd_h_wgmma.cuh).
  const int HV = b.HV;
  const int64_t item = blockIdx.x;
  const int sl = static_cast<int>(item % kSlices);
  const int hv = static_cast<int>((item / kSlices) % HV);
  const int64_t part = (item / (kSlices * int64_t(HV))) % sp.max_parts;
  int64_t n;
  const SeqChunks sc = ordered_seq_chunks(b.pl, blockIdx.x / static_cast<uint32_t>(kSlices * HV * sp.max_parts), n);
  const int hk = hv / (HV / b.H);
  const int first_part = first_part_here(sp, b.transition_log_bound, sc.c0, sc.count, HV);
  const int64_t parts = split_parts_of(sc.count, sp.chunks_per_part, sp.max_parts, first_part);
  if (part >= parts - 1) return;  // (the last part needs no summary)
  const bool transition = sl >= kVSlices;
  if (transition && part == 0) return;
  const int v0 = (transition ? sl - kVSlices : sl) * kBV;
  const int64_t cb = split_part_begin(part, sp.chunks_per_part, first_part);
  const int64_t ce = split_part_begin(part + 1, sp.chunks_per_part, first_part);
  const int64_t cut = negligible_history_start(b.transition_log_bound, sc.c0, cb, ce, hv, HV);
  const bool negligible = transition && cut >= 0;
  const int64_t cs = cut >= 0 ? cut : cb;
  const int64_t c0 = sc.c0 + cs;
  const int nch = negligible ? 0 : static_cast<int>(ce - cs);
  const int64_t tb = sc.tb + cs * kC, te = sc.te;
  const bool state_wg = threadIdx.x >= 128;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int lrow = 8 * ((lane / 8) / 2) + lane % 8, lch = 2 * warp + (lane / 8) % 2;  // (ldsm.trans roles)
  auto len_of = [&](int c) { return static_cast<int>(te - (tb + c * kC) < kC ? te - (tb + c * kC) : kC); };

  if (state_wg) {
    // ---- The state warpgroup: S^T in registers (the summary mode's layout), the ring, base and KK.
    float st[64];
    load_part_state<true, kD, kD>(st, init, sp, init_dt, kmajor, part, cut, n, hv, HV, transition, negligible, 0, t,
                                  v0 + 16 * warp + g);
    uint32_t wg_phase = 0;
    auto wg_sync = [&] { mbarrier_block_sync(&sm.wg, (wg_phase++) & 1u); };
    auto prefetch = [&](int c) {  // chunk c into its stage; every thread's cp.async rows announced on full[s]
      const int s = c % ST;
      const ChainRowSources rows = {b.eg, b.Gt, b.rk};
      chain_prefetch<false, kD>(sm, b, rows, c0 + c, tb + c * kC, te, s, HV, hv, hk, v0, transition, tid);
      mbarrier_arrive_cp_async(&sm.full[s]);
    };
    for (int c = 0; c < ST && c < nch; ++c) prefetch(c);
    // Chunk c landed; a partial chunk's rows past len zeroed (k for this warpgroup's products, v for
    // the chain's W) and fenced for the async proxy before any product reads them.
    auto landed = [&](int c) {
      mbarrier_wait(&sm.full[c % ST], (static_cast<uint32_t>(c) / ST) & 1u);
      const int len = len_of(c);
      if (len < kC) chain_zero_rows<false, 2>(sm, c % ST, len, transition, tid);
      fence_proxy_async();
      wg_sync();
    };
    // base_c = -dl E(S)^T k_c^T (S the state at chunk c - 1's start, dl its decay; chunk 0: S_0,
    // dl = 1) and KK_c = k_c k_{c-1}^T (c >= 1; its lo part where chunk c - 1 decays weakly) into
    // buffer c % 2, announced on u_ready.
    auto form_u_base = [&](int c) {
      uint32_t ha[32];
      stage_state_fragments<E, false, false, 8>(ha, st, 0, 0, lrow, lch, false);
      float acc[32];
      const int s = c % ST;
      float dl = 1.f;  // (read before the products: a branch that a wgmma group crosses serializes them, C7520)
      bool lo = false;
      if (c > 0) {
        const int sp_ = (c - 1) % ST, lenp = len_of(c - 1);
        dl = sm.eg[sp_][lenp - 1].x;
        lo = precise_state_chunk<E, E>(sm.eg[sp_], lenp);
      }
      wgmma_fence();
      {
        const WgTile kt = wg_tile(smem_u32(sm.k[s]), 16, 1024);
#pragma unroll
        for (int ks = 0; ks < 8; ++ks)
          wgmma_m64n64_rs<E, true>(acc, &ha[4 * ks], kt.at((ks / 4) * (kC * 128) + (ks % 4) * 32), ks > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      float4* const img = reinterpret_cast<float4*>(sm.base[c % 2]) + tid;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        img[128 * j] = make_float4(dl * acc[4 * j], dl * acc[4 * j + 1], dl * acc[4 * j + 2], dl * acc[4 * j + 3]);
      if (c > 0) {
        // KK^T [i][j] = k_c[i] . k_{c-1}[j]: A = k_c, B = k_{c-1}, both the ring's K-major tiles.
        const WgTile at = wg_tile(smem_u32(sm.k[s]), 16, 1024), bt = wg_tile(smem_u32(sm.k[(c - 1) % ST]), 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 8; ++ks) {
          const uint32_t off = (ks / 4) * (kC * 128) + (ks % 4) * 32;
          wgmma_m64n64_ss<E, 0>(acc, at.at(off), bt.at(off), ks > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        stage_hi_lo<E>(acc, smem_u32(sm.kk[c % 2][0]), smem_u32(sm.kk[c % 2][1]), lo, warp, lane);
        fence_proxy_async();  // the KK image -> the chain's wgmma
      }
      mbarrier_arrive(&sm.u_ready[c % 2]);
    };
    if (nch > 0) landed(0), form_u_base(0);
    if (nch > 1) landed(1), form_u_base(1);
    for (int c = 0; c < nch; ++c) {
      const int s = c % ST, len = len_of(c);
      const float dl = sm.eg[s][len - 1].x;
      const bool precise = precise_state_chunk<E, E>(sm.eg[s], len);
      mbarrier_wait(&sm.vs_ready[c % 2], (static_cast<uint32_t>(c) / 2) & 1u);
      // S^T = dl S^T + vs^T k (+ vs_lo^T k first on a weakly decaying chunk, as the summary mode).
      const WgTile kt = wg_tile(smem_u32(sm.k[s]), kC * 128, 1024);
#pragma unroll
      for (int i = 0; i < 64; ++i) st[i] *= dl;
      auto update_from = [&](const E* vs_image) {
        const WgTile vt = wg_tile(smem_u32(vs_image), 16, 1024);
#pragma unroll
        for (int i = 0; i < 64; ++i) pin(st[i]);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_m64n128_ss_tb<E>(st, vt.at(ks * 32), kt.at(ks * 2048));
        wgmma_commit();
        wgmma_wait<0>();
      };
      if (precise) update_from(sm.vs[c % 2][1]);
      update_from(sm.vs[c % 2][0]);
#pragma unroll
      for (int i = 0; i < 64; ++i) pin(st[i]);
      if (c + 2 < nch) landed(c + 2), form_u_base(c + 2);
      // Chunk c's stage is free (the chain announced vs_c after its last read of it; this
      // warpgroup's reads of it end with the update above and KK_{c+1}, formed before): chunk c + 3.
      if (c + ST < nch) {
        wg_sync();  // (every thread's reads of eg[s] before the rows are rewritten)
        prefetch(c + ST);
      }
    }
    store_part_summary<kD, kD>(st, sp, n, part, hv, HV, transition, negligible, sl == kVSlices && tid == 0, 0, t,
                               v0 + 16 * warp + g);
  } else {
    // ---- The chain warpgroup: W, v_new and vs (the summary mode's steps, chain_steps.cuh).
    uint32_t va[16], vl[16];    // vs_{c-1}^T (the correction's A), its lo part
    bool after_precise = true;  // (past chunk 0: chunk c - 1's precise_state_chunk)
    for (int c = 0; c < nch; ++c) {
      const int s = c % ST, len = len_of(c);
      mbarrier_wait(&sm.full[s], (static_cast<uint32_t>(c) / ST) & 1u);
      mbarrier_wait(&sm.u_ready[c % 2], (static_cast<uint32_t>(c) / 2) & 1u);
      // -U^T = base_c - vs_{c-1}^T KK_c (+ vs_lo^T KK_hi + vs^T KK_lo after a weakly decaying chunk).
      float acc[32];
      {
        const float4* const img = reinterpret_cast<const float4*>(sm.base[c % 2]) + tid;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float4 x = img[128 * j];
          acc[4 * j] = x.x, acc[4 * j + 1] = x.y, acc[4 * j + 2] = x.z, acc[4 * j + 3] = x.w;
        }
      }
      if (c > 0) {
        const WgTile kh = wg_tile(smem_u32(sm.kk[c % 2][0]), 16, 1024),
                     kl = wg_tile(smem_u32(sm.kk[c % 2][1]), 16, 1024);
#pragma unroll
        for (int i = 0; i < 32; ++i) pin(acc[i]);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_m64n64_rs<E, true>(acc, &va[4 * ks], kh.at(ks * 32), true);
        wgmma_commit();
        wgmma_wait<0>();
        if (after_precise) {
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) wgmma_m64n64_rs<E, true>(acc, &vl[4 * ks], kh.at(ks * 32), true);
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) wgmma_m64n64_rs<E, true>(acc, &va[4 * ks], kl.at(ks * 32), true);
          wgmma_commit();
          wgmma_wait<0>();
        }
#pragma unroll
        for (int i = 0; i < 32; ++i) pin(acc[i]);
      }
      const float2* eg = sm.eg[s];
      float scf[8][2];
      chain_row_factors<false>(scf, eg, sm.rk[s], b.l2norm, len, lane, t);
      uint32_t vx[16];
      load_v_fragments(vx, sm.vin[s], transition, lrow, lch);
      const bool precise = precise_state_chunk<E, E>(eg, len);
      const bool precise_w = precise_w_chunk<E, E>(eg, precise, after_precise);
      float wf[32];
      uint32_t wa[16], wl[16];
      form_w<E, E>(wf, wa, acc, vx, scf);
      if (precise_w) lo_parts<E>(wl, wf, wa);
      float left[16], right[16];
      wgmma_fence();
      wgmma_v_new<E>(left, right, wa, smem_u32(sm.a[s]));
      wgmma_commit();
      float dec[8][2];
      chain_row_factors<true>(dec, eg, sm.rk[s], b.l2norm, len, lane, t);
      wgmma_wait<0>();
      if (precise_w) w_lo_pass<E>(left, right, wl, smem_u32(sm.a[s]));
#pragma unroll
      for (int i = 0; i < 16; ++i) acc[i] = left[i], acc[16 + i] = right[i];
      float vf[32];
      form_vs<E>(vf, va, acc, dec);
      if (precise) lo_parts<E>(vl, vf, va);
      // vs^T (and its lo part) -> the exchange [vv][token] for the state warpgroup's update.
      stage_rows_x16(smem_u32(sm.vs[c % 2][0]), va, warp, lane);
      if (precise) stage_rows_x16(smem_u32(sm.vs[c % 2][1]), vl, warp, lane);
      fence_proxy_async();  // the vs image -> the state warpgroup's wgmma
      mbarrier_arrive(&sm.vs_ready[c % 2]);
      after_precise = precise;
    }
  }
#endif
}

// The launch (launch_fwd_h_wgmma_summary, fwd_h_wgmma_summary.cu, where K = V = 128 and E = EI):
// the summary mode's grid, 256 threads a block.
template <typename E>
void launch_summary_ahead(const FastBufs<E, E>& b, const SplitBufs& sp, const ForwardArgs& f, cudaStream_t s) {
  const size_t smem = sizeof(AheadSmem<E>) + 1024;  // + alignment slack
  const int64_t blocks = f.problem.num_seqs * sp.max_parts * b.HV * 2 * (kD / kBV);
  auto k = chunk_summary_ahead_kernel<E>;
  allow_smem(k, smem);
  const LaunchConfig lc(dim3(grid_1d(blocks, 1)), dim3(256), smem, s, false);
  check(cudaLaunchKernelEx(&lc.cfg, k, b, sp, f.initial_state, f.problem.state_dtype,
                           f.problem.state_layout == StateLayout::kKMajor),
        "chunk_summary_ahead_kernel (split summary, look-ahead U)");
}

}  // namespace
}  // namespace cuda
}  // namespace gdn
