// fwd_h on Hopper warpgroup MMA (wgmma, sm_90a): the sequential part of the chunked forward for
// D = K = V = 128, chunk C = 64; K = V = 64 (kDK) on the same ring layout with only the first
// 64-column atom of k and q filled (every product over K runs its 4 k-steps there), the state an
// m64n64 accumulator (32 floats a thread), one 64-wide V slice per head; K = V = 256 in the store
// mode and the summary pass on two chain warpgroups a block, one per half of K (below the modes).
// Three modes (ChainMode below): h and v_new stored for fwd_o (described here), the split's summary
// pass, and fused o (a second warpgroup computes o from the h and v staging: chain_o.cuh).
//
// One block = one warpgroup (4 warps, 128 threads) per (sequence n, value head hv, 64-wide slice
// v0 of V). The fp32 state slice lives TRANSPOSED in registers as a wgmma accumulator,
//   S^T [64 (vv) x 128 (kk)]  (m64n128: 64 floats per thread),
// and per chunk (rows i < len of tokens t0 .. t0 + len - 1; A_s = (I + L)^-1 diag(beta) from
// kkt_solve, gates folded in, as hi + lo parts in E; s_i = exp(G_i) r_i, r = k's inverse norms):
//   h_c       = S                                  -> b.h image [gc][hv][slice]   (E [kk][vv])
//   -U^T      = -S^T k^T                           wgmma m64n64k16 x 8 (k = kk; kDK = 64: x 4):
//               A = E(S^T) from registers (accumulator -> A fragment: same lanes, no shuffles),
//               B = k [token][kk] in shared memory (K-major B), scale-a = -1
//   W^T       = v^T - U^T diag(s)                  in registers, rounded to E once
//   v_new^T   = W^T A_s^T                          wgmma m64n32k16 x 12 (k = tokens, hi and lo;
//               A_s lower triangular: columns i < 32 take tokens j < 32 only):
//               A = W^T from registers, B = A_s [i][j] in shared memory (K-major B)
//                                                  -> b.v_new image [gc][hv][slice] (E [t][vv])
//   S^T       = exp(G_last) S^T + vs^T k           wgmma m64n128k16 x 4 (k = tokens):
//               A = vs^T = E(v_new^T diag(exp(G_last - G_i) r_i)) from the v_new^T
//               accumulators, B = k [token][kk] in shared memory read MN-major (trans-b)
// and the final state goes to the pool (K- or V-major, row state_row(fin, n)); so does the state
// after a chunk that ends on a prefill checkpoint boundary (cuda/core/checkpoints.cuh: once every
// every_chunks chunks, after the update's wait; not in the summary pass).
// v_new = A_s (v - diag(s) k S) is u - w S of the WY form (u = A_s v, w = A_s diag(s) k) with A
// applied last, as FlashQLA does: w and u never exist in memory (kkt_solve only solves for A), and
// the one rounding before A is W's, after the cancellation of v against the state's prediction
// k S (u's and w S's roundings before it amplified that cancellation at g = 0).
//
// Why wgmma: the mma.sync formulation (fwd_h_mma.cu, deleted; it also ran D = 128 before this kernel;
// its timings are in docs/perf.md) loads every B fragment per warp from shared memory (110-180 KB
// of shared reads per chunk at D = 128) and needs three block barriers per chunk. Here the
// products are single warpgroup instructions whose B operands the tensor cores read once, the
// state never leaves the registers, and each product feeds the next from registers: no barrier
// sits between them. Per chunk the block reads A_s, k (16 KB each), v (8 KB) and writes h (16 KB)
// and v_new (8 KB).
//
// Shared memory, its prefetch, the per-chunk synchronization and the modes: chain_layout.cuh.
// This header: the kernel, in an anonymous namespace (a file that includes it emits only the
// kernels it launches); its steps (the part's state in and out, the products and fragments of a
// chunk): chain_steps.cuh; kFusedO's other two warpgroups: chain_o.cuh; its launch and the files
// that instantiate it, one mode each: fwd_h_wgmma_launch.cuh.
// On chunks that decay weakly, W, vs and the fused o's h also as hi + lo: chain_precise.cuh.
// The split's decisions (the negligible history of the summary pass, where part 1 of two begins):
// split_cut.cuh.
#pragma once

#include "cuda/chunk/chain_layout.cuh"
#include "cuda/chunk/chain_o.cuh"
#include "cuda/chunk/chain_precise.cuh"
#include "cuda/chunk/chain_steps.cuh"

#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/chunk/split_cut.cuh"
#include "cuda/core/checkpoints.cuh"

namespace gdn {
namespace cuda {
namespace {

using namespace chain;  // kC, kD, kBV, ChainMode, WgSmem, chain_prefetch (chain_layout.cuh)

// kSummary: the exact split's summary pass (split.cuh): blocks of (sequence, part, head, slice of
// V + K): part 0 runs from the initial state and leaves S_1; parts 1 .. parts - 2 run from zero
// (slices 0, 1 -> B_p) and on the identity with u = 0 (slices 2, 3 -> M_p); nothing else is stored.
// Otherwise blocks of (sequence, part, head, slice of V), each part from its exact initial state
// (the pool row for part 0, S_p of the scan for the others); the last part writes the final state.
// Without a split every sequence is one part.
// E: the operands' type; EI: the inputs' (q, k, v) and o's: E, or bf16 beside fp16 operands
// (cfg.fp16_operands), whose q and k the ring converts to fp16 in place (the norm warpgroup,
// kFusedO; the chain warpgroup itself otherwise) and whose chunks take no lo passes (kLoPasses,
// chain_precise.cuh; kStoreBulk then stores no v_new lo part).
// K = V = 256 (kDK; the store mode and the summary pass): two chain warpgroups (kWG), warpgroup x holding the rows
// kk of K half x of S^T [64 x 128] (the D = 128 chain's registers) and reading its half of k (atoms
// 2 x, 2 x + 1); per chunk each forms its partial -S_x^T k_x^T, the two exchange them through
// shared memory (WgExchangeSmem: a block barrier; p_0 + p_1 = p_1 + p_0 bitwise in fp32, so both
// hold the same -U^T) and both then form W^T, v_new^T and the gating alike (the v_new products
// twice: the tensor work of one more 64 x 64 x 64 product a chunk), update their own half and stage
// it into their half of the h staging [256 kk][64 vv]; the first stores v_new.
template <int ST, ChainMode kMode, typename E, typename EI, int kDK>
__global__ void __launch_bounds__(chain_threads(kMode, kDK), kMode == ChainMode::kFusedSerial ? 2 : 1)
    chunk_fwd_h_wgmma_kernel(const __grid_constant__ FastBufs<E, EI> b, SplitBufs sp, StateRef init, StateRef fin,
                             bool kmajor, OutRef out, CheckpointOut ck) {
  constexpr bool kSummary = kMode == ChainMode::kSummary;
  constexpr bool kConvert = !std::is_same<E, EI>::value, kLo = kLoPasses<E, EI>;
  // kFused: o on chip (the q ring, the h_lo and o stagings), by a second warpgroup (kTwoWarpgroups)
  // or by the chain warpgroup itself after each chunk's update (kSerial).
  constexpr bool kSerial = kMode == ChainMode::kFusedSerial, kTwoWarpgroups = kMode == ChainMode::kFusedO;
  constexpr bool kFused = kSerial || kTwoWarpgroups;
  static_assert(!kSerial || ST == 1, "the serial chain refills its one stage after the chunk's o");
  constexpr bool kBulk = kMode == ChainMode::kStoreBulk;
  static_assert(kDK == kD || (kDK == 64 && !kBulk) || (kDK == 256 && (kBulk || kSummary)),
                "K = V = 64: the fused modes and the summary; K = V = 256: the store mode and the summary");
  // The chain warpgroups (K = V = 256: two, one per 128-row half of K), the rows of K each holds.
  constexpr int kWG = kDK > kD ? kDK / kD : 1, kDH = kDK / kWG;
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the library is built for it only
#else
  extern __shared__ __align__(16) char smem_raw[];
  using Sm = WgSmem<ST, kFused, E, chain_width(kDK)>;
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw + align_1024_offset(smem_raw));  // (wgmma's swizzle atoms)
  // The block's barriers: with the o warpgroup, which reaches them from its own code (chain_o.cuh),
  // the mbarriers sm.bar[which] in phase `parity`; otherwise __syncthreads.
  auto block_sync = [&](int which, uint32_t parity) {
    if constexpr (kTwoWarpgroups)
      mbarrier_block_sync(&sm.bar[which], parity);
    else
      __syncthreads();
  };
  if (threadIdx.x == 0) {
    if constexpr (kTwoWarpgroups) {
      mbarrier_init(&sm.bar[0], 128);  // B1: the chain warpgroup
      mbarrier_init(&sm.bar[1], 256);  // B2: both
      mbarrier_init(&sm.bar[2], 128);  // F: the o warpgroup
      mbarrier_init(&sm.bar[3], 128);  // V: the chain's v_new issued
#pragma unroll
      for (int i = 0; i < ST; ++i) {
        mbarrier_init(&sm.normed[i], 128);                             // the norm warpgroup
        if constexpr (kConvert) mbarrier_init(&sm.converted[i], 128);  // the norm warpgroup
      }
    }
#pragma unroll
    for (int i = 0; i < ST; ++i) mbarrier_init(&sm.full[i], 1);  // thread 0's arrival + the TMA bytes
  }
  // (kFusedO: at its warpgroups' split below, the one barrier instruction all three reach; every
  // thread of a block takes the early returns before it alike.)
  if constexpr (!kTwoWarpgroups) __syncthreads();
  // The summary pass: the chain launched after it as its programmatic dependent (no scan between
  // them: split.cuh) may start now; its part 0 blocks need nothing from this kernel.
  if constexpr (kSummary) pdl_launch_dependents();
  // Launched beside the split's summary pass, the grid's last block waits for it too (part >= 1
  // blocks do below): then this kernel ends after the summary pass whatever the parts, and the
  // next kernel in the stream may reuse what it reads. (A no-op in stream order.)
  if (block_index_here() == gridDim.x - 1) pdl_wait();
  const int HV = b.HV;
  // 64-wide column slices per (part, head): V's (and the summary's M_p columns, K's)
  constexpr int kVSlices = kDK / kBV, kSlices = kSummary ? 2 * kVSlices : kVSlices;
  constexpr int kKS = kDH / 16;  // k-steps of the products over K (k's and q's atoms past them: unused)
  const int64_t item = blockIdx.x;
  const int sl = static_cast<int>(item % kSlices);
  const int hv = static_cast<int>((item / kSlices) % HV);
  const int64_t part = (item / (kSlices * int64_t(HV))) % sp.max_parts;
  // The sequence: the plan's longest first (the long ones start in the first wave).
  int64_t n;
  const SeqChunks sc = ordered_seq_chunks(b.pl, blockIdx.x / static_cast<uint32_t>(kSlices * HV * sp.max_parts), n);
  // (Read back from shared memory where needed after the prologue: the chain loop runs at 255
  // registers, and n kept live across it, or its load, spills.)
  __shared__ int64_t seq_shared;
  if (threadIdx.x == 0) seq_shared = n;
  const int hk = hv / (HV / b.H);
  // The first part's chunks (first_part_here; for the checkpoints' lambdas in shared memory). The
  // store mode at K = V = 128 keeps first_part_chunks (fwd_fast.cu gives it no even_first_chunks:
  // its loop runs at 255 registers, and the decision's registers spilled there).
  __shared__ int first_part_shared;
  int first_part = sp.first_part_chunks;
  if constexpr (!kBulk || kWG > 1) first_part = first_part_here(sp, b.transition_log_bound, sc.c0, sc.count, HV);
  if (threadIdx.x == 0) first_part_shared = first_part;
  const int64_t parts = split_parts_of(sc.count, sp.chunks_per_part, sp.max_parts, first_part);
  // Whether the part is its sequence's last, kept in shared memory for the same reason.
  __shared__ int last_part_flag;
  if (threadIdx.x == 0) last_part_flag = part == parts - 1;
  if (part >= (kSummary ? parts - 1 : parts)) return;  // no such part (the last needs no summary)
  const bool transition = kSummary && sl >= kVSlices;  // M_p's columns: the identity's chain, u = 0
  if (transition && part == 0) return;                 // part 0 needs no M
  const int v0 = (transition ? sl - kVSlices : sl) * kBV;
  // tid: the thread in its warpgroup; wgx: its chain warpgroup (K half) where there are two. (One
  // thread issues the bulk copies: threadIdx.x == 0.)
  const int wgx = kWG > 1 ? static_cast<int>(threadIdx.x) / 128 : 0;
  const int tid = threadIdx.x - 128 * wgx, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // This warpgroup's K half: its first row kk, its k atoms' byte offset in a ring stage and its
  // rows' in the h staging (128-byte rows).
  const int kk0 = kDH * wgx;
  const uint32_t k_half = wgx * (2 * kC * 128), h_half = wgx * (kDH * 128);
  // ldmatrix / stmatrix lane roles for a 16 x 16 tile: matrix lm = lane / 8, row lr = lane % 8;
  // a tile's rows are (16 i + 8 (lm / 2) + lr), its 16-byte chunk of the slice 2 warp + lm % 2.
  const int lrow = 8 * ((lane / 8) / 2) + lane % 8, lch = 2 * warp + (lane / 8) % 2;

  // The part's chunks (split.cuh), the last part up to the sequence's end.
  const int64_t cb = split_part_begin(part, sp.chunks_per_part, first_part);
  const int64_t ce = part == parts - 1 ? sc.count : split_part_begin(part + 1, sp.chunks_per_part, first_part);
  // The summary pass skips the part's history that cannot matter (negligible_history_start, from
  // chunk `cut`): M_p = 0 without its chain, and B_p (or part 0's S_1) run from zero over chunks
  // [cut, ce) only. S_{p+1} = M_p S_p + B_p then moves by at most e^-64 times the state it drops,
  // which the unsplit chain's fp32 state does not resolve either unless that state exceeds
  // S_{p+1} by ~1e20. On the bench's gates (G_last ~ -51 per chunk) every part runs its last 2
  // chunks only and its M blocks end here; g = 0 and slow heads run in full.
  const int64_t cut = kSummary ? negligible_history_start(b.transition_log_bound, sc.c0, cb, ce, hv, HV) : -1;
  const bool negligible = transition && cut >= 0;
  const int64_t cs = cut >= 0 ? cut : cb;  // the chain's first chunk
  const int64_t c0 = sc.c0 + cs;
  const int64_t nch = negligible ? 0 : ce - cs;
  int64_t tb = sc.tb + cs * kC;
  const int64_t te = sc.te;
  // kFusedO: the norm and the o warpgroups run their roles and leave here (chain_o.cuh); the part's
  // first token read back past the setmaxnreg.
  if constexpr (kTwoWarpgroups) {
    __shared__ int64_t part_tb;  // (declared here: the block's other shared scalars' order as before)
    if (!chain_fused_roles<E, EI, ST, kKS>(sm, b, out, tb, part_tb, te, nch, v0, hv)) return;
  }
  // The sequence past the warpgroups' split: read back from shared memory (carried across it in a
  // register, as a load's result, ptxas spilled it).
  int64_t seq = n;
  if constexpr (kTwoWarpgroups) seq = seq_shared;

  // S^T accumulator: st[4 j + 2 hh + e] = S[kk = 8 j + 2 t + e][vv = v0 + 16 warp + g + 8 hh], j < 16.
  // The part's initial state: the pool row (part 0), the scan's S_p (K-major, later parts of the
  // full pass), zero (B_p) or the identity (M_p).
  constexpr int kSt = kDH / 2;  // the accumulator's floats a thread: m64n128 (m64n64 at K = V = 64)
  float st[kSt];
  load_part_state<kSummary, kDK, kDH>(st, init, sp, ck.dtype, kmajor, part, cut, seq, hv, HV, transition, negligible,
                                      kk0, t, v0 + 16 * warp + g);

  // Chunk c into ring stage s (chain_layout.cuh).
  // The serial chain reads the small rows' sources from shared memory at each prefetch: held from
  // the prologue, ptxas kept their three pointers in registers through the loop and spilled them.
  __shared__ ChainRowSources rows_shared;
  if constexpr (kSerial) {
    if (tid == 0) rows_shared = {b.eg, b.Gt, b.rk};
    __syncthreads();
  }
  auto prefetch = [&](int64_t c, int s) {
    if (kWG > 1 && wgx != 0) return;  // (the first chain warpgroup's 128 threads fill the ring)
    if constexpr (kSerial) {
      chain_prefetch<kFused, kDK>(sm, b, rows_shared, c0 + c, tb + c * kC, te, s, HV, hv, hk, v0, transition, tid);
    } else {
      const ChainRowSources rows = {b.eg, b.Gt, b.rk};
      chain_prefetch<kFused, kDK>(sm, b, rows, c0 + c, tb + c * kC, te, s, HV, hv, hk, v0, transition, tid);
    }
  };

  // E(S^T) as the A fragments of w h and into the h staging (the summary pass stores no h);
  // kFusedO, with_lo: the residual into the h_lo staging too, for the o warpgroup's q h_lo.
  uint32_t ha[32];
  auto stage_state = [&](bool with_lo) {
    uint32_t hls = 0;
    if constexpr (kFused && kLo) hls = smem_u32(sm.h_lo);
    stage_state_fragments<E, !kSummary, kFused && kLo, kKS>(ha, st, smem_u32(sm.h) + h_half, hls, lrow, lch, with_lo);
  };

  // Chunks 0 .. ST - 2 in flight before the loop; chunk c + ST - 1 is issued in iteration c into
  // the stage of chunk c - 1 (free after barrier B1; kFusedO: after F). One commit group per chunk (empty past the
  // end), so "all but the newest ST - 2 groups complete" means "chunk c's cp.async rows have landed";
  // its TMA copies complete the phase (c / ST) % 2 of the stage's full barrier.
#pragma unroll
  for (int c = 0; c < ST - 1; ++c) {
    if (c < nch) prefetch(c, c);
    cp_async_commit();
  }
  if constexpr (kSerial) {  // (its one stage: chunk c + 1 is issued after chunk c's o)
    if (nch > 0) prefetch(0, 0);
    cp_async_commit();
  }
  // Prefill checkpoints: whether part-local chunk c may end on a boundary (checkpoint_row_after
  // decides), in 32-bit arithmetic from the kernel's parameters and the block index: the loop runs
  // at 255 registers, and a counter carried across it spills. Without checkpoints: one uniform
  // branch on a parameter per chunk.
  auto at_boundary = [&](int64_t c) {
    if (kSummary || ck.ck.pool.data == nullptr || ck.ck.every_chunks < 1 || ck.ck.every_chunks > (1 << 30))
      return false;
    const int part_b = static_cast<int>(block_index_here() / (kSlices * b.HV)) % sp.max_parts;
    const int begin = static_cast<int>(split_part_begin(part_b, sp.chunks_per_part, first_part_shared));
    return (begin + static_cast<int>(c) + 1) % static_cast<int>(ck.ck.every_chunks) == 0;
  };
  // The state registers (after chunk c's update) -> the checkpoint's pool row, rounded once; the
  // sequence and the part recomputed here for the same reason, the sequence's length from the part's
  // token range (no load: the one global read is the slot map's index).
  auto store_checkpoint = [&](int64_t c) {
    const int64_t ns = seq_shared;
    const int64_t part_start = split_part_begin(blockIdx.x / static_cast<uint32_t>(kSlices * b.HV) % sp.max_parts,
                                                sp.chunks_per_part, first_part_shared);
    const int64_t r = checkpoint_row_after(ck.ck, ns, part_start + c, te - tb + part_start * kC);
    if (r < 0) return;
    // This thread's first element (kk = 2 t, vv = v0 + 16 warp + g); the rest at constant offsets.
    store_chain_checkpoint<kDK, kDH>(
        ck, state_elem(ck.ck.pool, r, hv, b.HV, kDK, kDK, kmajor, kk0 + 2 * t, v0 + 16 * warp + g), kmajor, st);
  };
  stage_state(true);        // (h_0's lo part: the o warpgroup counts chunk -1 as weakly decaying)
  bool o_lo_staged = true;  // kSerial: chain_o_chunk's lo_staged (the h_lo staging holds h_c's lo part)
  int s = 0;
  bool after_precise = true;  // (chunk -1 counts as weakly decaying here too: precise_w_chunk)
  for (int64_t c = 0; c < nch; ++c) {
    const int64_t gc = c0 + c;
    const int64_t t0 = tb + c * kC;
    const int len = static_cast<int>(te - t0 < kC ? te - t0 : kC);
    // (Nothing in flight here: the update of chunk c - 1 was waited for. This wait lets ptxas see
    // that st, loop-carried from a wgmma, is complete; without it ptxas injects a wgmma wait before
    // the state's decay below (warning-free C7517 info), serializing it behind the v_new products.)
    wgmma_wait<0>();
    cp_async_wait<kSerial ? 0 : ST - 2>();
    mbarrier_wait(&sm.full[s], (static_cast<uint32_t>(c) / ST) & 1u);  // the stage's TMA copies
    if constexpr (kConvert) {  // q and k to fp16 operands, rows below len (chain_precise.cuh)
      if constexpr (kTwoWarpgroups)
        mbarrier_wait(&sm.converted[s], (static_cast<uint32_t>(c) / ST) & 1u);  // k, by the norm warpgroup
      else
        chain_convert_stage<kFused>(sm, s, len, tid);
    }
    if (len < kC) chain_zero_rows<kFused, 2 * kWG>(sm, s, len, transition, threadIdx.x);  // (a sequence's last chunk)
    fence_proxy_async();  // this thread's landed cp.async writes and zeros -> visible to wgmma (async proxy)
    if (kBulk && threadIdx.x == 0) bulk_wait_read<0>();  // v_new_{c-1}'s staging read: rewritten after B1
    // B1: chunk c complete for all; h staging holds h_c; stage (c - 1) % ST free (kFusedO: B1 is this
    // warpgroup's alone, the o warpgroup only waits on it; the stage and the v staging are freed by
    // F below, so that these products need not wait for the o warpgroup's P v_new of chunk c - 1).
    block_sync(0, c & 1);

    // 1. acc = -U^T = -S^T k^T (U = k S: the state's prediction of v): 8 x m64n64k16, A = E(S^T)
    //    from registers, B = k [token][kk] (K-major, SW128): k-step ks is 32 bytes into the
    //    128-byte rows of atom ks / 4; 8-row groups of tokens 1024 bytes apart (SBO).
    float acc[32];
#pragma unroll
    for (int i = 0; i < 4 * kKS; ++i) pin(ha[i]);
    wgmma_fence();
    {
      const WgTile kt = wg_tile(smem_u32(sm.k[s]) + k_half, 16, 1024);
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks)  // (K = V = 64: k's zero columns need no k-steps)
        wgmma_m64n64_rs<E, true>(acc, &ha[4 * ks], kt.at((ks / 4) * (kC * 128) + (ks % 4) * 32), ks > 0);
    }
    wgmma_commit();

    // While the tensor cores run: the row scalings, v^T, the h store; then the wait. (The state's
    // decay below does not stay here: ptxas sinks its 64 FMUL into the v_new products' shadow
    // wherever the source puts it, pinned or before this issue; SASS, session 28.)
    // sc[j][e]: exp(G_i) r_i of column token i = 8 j + 2 t + e of U^T (0 past len).
    const float2* eg = sm.eg[s];
    float sc[8][2];
    chain_row_factors<false>(sc, eg, sm.rk[s], b.l2norm, len, lane, t);
    uint32_t vx[16];  // v^T of this slice (zeros for the identity's chain: v = 0 there)
    load_v_fragments(vx, sm.vin[s], transition, lrow, lch);
    const float dl = eg[len - 1].x;  // exp(G_last)
    // A weakly decaying chunk: vs (precise) and W (precise_w) also as hi + lo parts below
    // (chain_precise.cuh).
    const bool precise = precise_state_chunk<E, EI>(eg, len);
    const bool precise_w = precise_w_chunk<E, EI>(eg, precise, after_precise);
#pragma unroll
    for (int i = 0; i < kSt; ++i) st[i] *= dl;
    // h_c -> workspace: the staging's image (fwd_h_image).
    if constexpr (kBulk) {
      if (threadIdx.x == 0) {
        bulk_store(b.h + fwd_h_image(gc, hv, v0 / kBV, HV, kDK), smem_u32(sm.h), kDK * kBV * 2);
        bulk_commit();
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(acc[i]);
    if constexpr (kWG > 1) exchange_k_halves(acc, sm.xch[wgx], sm.xch[1 - wgx], tid);  // -U^T = p_0 + p_1

    // 2. W^T = v^T - U^T diag(exp(G) r) -> A fragments (wa[4 ks + q]: tokens [16 ks, 16 ks + 16));
    //    v_new^T = W^T A_s^T with A_s = (I + L)^-1 diag(beta) (kkt_solve) as hi + lo parts:
    //    12 x m64n32k16 (below), B = A_s [i][j] rows (K-major, SW128): atom 0 the hi part, atom 1 the lo.
    //    W is rounded to E once, after the cancellation v - k S, never its terms.
    //    A weakly decaying chunk also takes W's residual wl = E(W - E(W)) times A_s's hi part.
    float wf[32];  // W^T in fp32 (acc's layout)
    uint32_t wa[16], wl[16];
    form_w<E, EI>(wf, wa, acc, vx, sc);
    if (precise_w) lo_parts<E>(wl, wf, wa);
    float left[16], right[16];  // v_new^T's columns i < 32 and i >= 32 (acc = [left | right] after the wait)
    wgmma_fence();
    wgmma_v_new<E>(left, right, wa, smem_u32(sm.a[s]));
    wgmma_commit();
    // V(c): the o warpgroup's q k^T of chunk c goes to the tensor cores after these products, not
    // before them (it is not on the chain's critical path; they are).
    if constexpr (kTwoWarpgroups) mbarrier_arrive(&sm.bar[3]);

    // While the tensor cores run: the update's decays, the next prefetch.
    // dec[j][e]: decay of column token 8 j + 2 t + e of v_new^T (k_i's inverse norm folds in).
    float dec[8][2];
    chain_row_factors<true>(dec, eg, sm.rk[s], b.l2norm, len, lane, t);  // exp(G_last - G_i) r_i
    // kFusedO: F(c), the o warpgroup done with chunk c - 1 (its stage, refilled now, and the v
    // staging, rewritten below); one phase per chunk, the o warpgroup's first arrival being F(0).
    if constexpr (kTwoWarpgroups) mbarrier_wait(&sm.bar[2], c & 1);
    if constexpr (!kSerial) {
      const int64_t cn = c + ST - 1;
      int sn = s + ST - 1;
      if (sn >= ST) sn -= ST;
      if (cn < nch) prefetch(cn, sn);
      cp_async_commit();
    }
    wgmma_wait<0>();
    if (precise_w) w_lo_pass<E>(left, right, wl, smem_u32(sm.a[s]));  // after the hi pass (chain_precise.cuh)
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      acc[i] = left[i];
      acc[16 + i] = right[i];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(acc[i]);

    // vs^T = v_new^T diag(decay) -> A fragments (va[4 ks + q]: tokens [16 ks, 16 ks + 16)); a
    // weakly decaying chunk also its residual vl = E(vs - E(vs)).
    float vf[32];  // vs^T in fp32
    uint32_t va[16], vl[16];
    form_vs<E>(vf, va, acc, dec);
    // A weakly decaying chunk: S^T += vs_lo^T k first, waited for (chain_precise.cuh), so that vl
    // is dead while the update's hi pass, the v_new stores and B2 run (with vl live there, the storing
    // chain spilled once the split-overlap patch added its registers).
    if (precise) {
      lo_parts<E>(vl, vf, va);
      vs_lo_pass<E, kSt>(st, vl, smem_u32(sm.k[s]) + k_half);
      // kStoreBulk: v_new's lo part for fwd_o's P v_new (b.v_new_lo), staged in this chunk's v input
      // stage (read into vx by every warp before its v_new products, which this wait completed; not
      // refilled before the next chunk's B1, which thread 0 passes only once the bulk copies below
      // have read it), in the v staging's layout.
      if (kBulk && wgx == 0)  // (kWG = 2: every warp read vin[s] before the exchange's barrier)
        stage_v_new<E, true>(acc, smem_u32(sm.vin[s]), lrow, lch);
    }
    // S^T += vs^T k (wgmma_state_update: B = k [token][kk] read MN-major).
#pragma unroll
    for (int i = 0; i < kSt; ++i) pin(st[i]);
#pragma unroll
    for (int i = 0; i < 16; ++i) pin(va[i]);
    wgmma_fence();
    wgmma_state_update<E>(st, va, smem_u32(sm.k[s]) + k_half);
    wgmma_commit();
    // v_new (E, as stored) -> v staging [token][vv], while the update runs (the summary pass
    // stores no v_new).
    if (!kSummary && wgx == 0) stage_v_new<E, false>(acc, smem_u32(sm.v[0]), lrow, lch);  // (kWG = 2: both hold it)
    if constexpr (kFused || kBulk) fence_proxy_async();  // the v staging -> wgmma of the o warpgroup / TMA
    // (kBulk: the h staging's bulk read is done before B2: stage_state rewrites it after B2.)
    if (kBulk && threadIdx.x == 0) bulk_wait_read<0>();
    block_sync(1, c & 1);  // B2: v staging complete; every thread's reads of the h staging done
    // v_new (rows past len: zeros) -> workspace: the staging's image (fwd_v_image).
    if constexpr (kBulk) {
      if (threadIdx.x == 0) {
        bulk_store(b.v_new + fwd_v_image(gc, hv, v0 / kBV, HV, kDK), smem_u32(sm.v[0]), kC * kBV * 2);
        if (precise) bulk_store(b.v_new_lo + fwd_v_image(gc, hv, v0 / kBV, HV, kDK), smem_u32(sm.vin[s]), kC * kBV * 2);
        bulk_commit();
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < kSt; ++i) pin(st[i]);
    if constexpr (kSerial) {
      // o of chunk c by this warpgroup, from the h staging (h_c, visible since B1) and the v
      // staging (v_new_c, since B2); its o accumulators live for this chunk's o only (the state's
      // 64 registers are the only ones carried through it).
      float o[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) o[i] = 0.f;
      // The shared-memory base formed again here (pinned): its derived addresses, kept from the
      // prologue through the chain, were what ptxas spilled.
      uint32_t base_off = align_1024_offset(smem_raw);
      pin(base_off);
      Sm& sm_o = *reinterpret_cast<Sm*>(smem_raw + base_off);
      chain_o_chunk<E, EI, ST, true, kKS>(sm_o, b, out, tb, te, c, s, v0, hv, tid, o_lo_staged, o);
      // Every warp's products done with the h stagings (rewritten below) and with the stage
      // (refilled below; its copies land by the TMA engine, its small rows by cp.async).
      __syncthreads();
    }
    // h_{c+1}: A fragments and staging (read after the next B1); its lo part only after a weakly
    // decaying chunk (the o warpgroup takes q h_lo on chunk c + 1 only then: chain_o.cuh).
    stage_state(precise);
    after_precise = precise;
    // A checkpoint boundary: stores only (nothing waits for them; st is not changed until the next
    // chunk's update).
    if (at_boundary(c)) store_checkpoint(c);
    if constexpr (kSerial) {
      if (c + 1 < nch) prefetch(c + 1, 0);
      cp_async_commit();
    }
    if (++s == ST) s = 0;
  }
  cp_async_wait<0>();
  if (kBulk && threadIdx.x == 0) bulk_wait<0>();  // the staging stays allocated until the copies are done

  // The end state: a summary (S_1 from part 0, else B_p or M_p), or the final state from the
  // sequence's last part.
  if constexpr (kSummary) {
    store_part_summary<kDK, kDH>(st, sp, n, part, hv, HV, transition, negligible, sl == kVSlices && tid == 0, kk0, t,
                                 v0 + 16 * warp + g);
  } else {
    block_sync(0, nch & 1);  // last_part_flag, set before the loop, seen by every thread (of the chain)
    const int64_t r = last_part_flag ? state_row(fin, seq_shared) : -1;
    // The caller's row in its element type, rounded once (this thread's first element e0).
    if (r >= 0)
      store_chain_state_as<kDK, kDH, true>(
          ck.dtype, fin.data, state_elem(fin, r, hv, HV, kDK, kDK, kmajor, kk0 + 2 * t, v0 + 16 * warp + g), kmajor,
          st);
  }
#endif
}

}  // namespace

}  // namespace cuda
}  // namespace gdn
