// The o warpgroup of the fused chain (fwd_h_wgmma.cuh, ChainMode::kFusedO): o computed on chip from
// what the chain warpgroup stages in shared memory anyway, so h and v_new never go to global
// memory and fwd_o does not run. Per chunk c of the block's (sequence part, value head, 64-wide V
// slice), with q_i, k_j the raw rows (E: the input dtype), rq_i, rk_j their inverse l2 norms
// (1 without l2norm):
//   P_ij = (q_i . k_j) rq_i rk_j exp(G_i - G_j)  for j <= i   (m64n64k16 x 8, q and k from the ring)
//   o_i  = scale (exp(G_i) rq_i q_i h_c + sum_j P_ij v_new_j)  (q h_c: x 8 from the h staging;
//                                                              P v_new: P hi + lo from registers,
//                                                              x 2 x 4 from the v staging)
// The same two roundings to E as fwd_o (h_c and v_new as stored there, P split into hi + lo),
// but on weakly decaying chunks after another h_c as hi + lo: q h_c + q h_lo
// (chain_precise.cuh).
//
// Schedule (three mbarriers per chunk: B1 is the chain warpgroup's, this one only waits on it; B2
// is both warpgroups'; F is this one's, the chain waits on it. Each warpgroup arrives as soon as
// the other may go past, and waits only where it needs the other's work: ptx/sync.cuh):
//   after B1(c): issue o_c = q_c h_c (h staging, written by the chain before B1(c)) and
//   P_c = q_c k_c^T; q's norms meanwhile; once o_c is complete (on weakly decaying chunks
//   after o_c += q_c h_lo too), arrive at B2(c) (the chain overwrites the h and h_lo staging
//   after B2(c)); P_c -> hi/lo A fragments; the row scales of o_c.
//   wait for B2(c): o_c += P_c v_new_c (v staging, written by the chain before B2(c)); once that
//   is complete, arrive at F(c + 1) (the chain refills stage c's ring slot and rewrites the v
//   staging after it, in chunk c + 1 after its -U^T products: B1(c + 1) does not wait for this
//   warpgroup), then o_c -> this warpgroup's own o staging, whose rows go out while chunk c + 1's
//   P v_new runs.
// Measured on an H200 (docs/perf.md, v9) against issuing o_{c-1}'s P v_new after B1(c) instead:
// this order is 2-4% faster. The o warpgroup's work lengthens the chain's chunk from ~1.3 us (the
// chain alone, no h / v_new stores) to ~4 us (v13); fused, the forward still saves fwd_o and the
// h / v_new round trip through memory (where the heuristics fuse it: heuristics.h).
#pragma once

#include "cuda/chunk/chain_precise.cuh"
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/chunk/gate_factors.cuh"

namespace gdn {
namespace cuda {

// The sums of squares of q's rows r0 + g and r0 + 8 + g (g = lane / 4) of a ring stage's SW128
// tile (q_tile: its shared address; r0 < len, a warp's first row), valid in the lanes with
// lane % 4 == g / 2 (the diagonal's holders). On the tensor cores: the warp forms the diagonal of
// Q_w Q_w^T for its 16 rows (mma.sync m16n8k16, fp32 sums: the squares of 16-bit values are exact
// in fp32), Q_w from the tile by ldmatrix, whose A fragments are also the B fragments of Q_w^T
// (rows 0 .. 7 of Q_w as the columns: a0, a2; rows 8 .. 15: a1, a3). 8 ldmatrix and 16 mma a warp
// instead of ~140 unpacks and multiply-adds a thread. Rows past len are not read (the chain
// warpgroup zeroes them meanwhile): their lanes read the warp's first row, which only the
// discarded off-diagonal sums see. Columns < 16 kKS (K = 64: 4 k-steps; the second atom is not loaded).
template <typename E, int kKS = 8>
__device__ __forceinline__ float2 warp_q_square_sums(uint32_t q_tile, int len, int r0, int lane) {
  const int g = lane / 4;
  const int row = r0 + lane % 16 < len ? r0 + lane % 16 : r0;  // this lane's ldmatrix row
  // The row's 16-byte piece 2 ks + lane / 16 (k-step ks, atom ks / 4) sits at chunk
  // ((2 ks) & 7) ^ y of the row, y = (lane / 16) ^ (row & 7) (sw128: bit 0 is the lane's half).
  const uint32_t base = q_tile + static_cast<uint32_t>(row) * 128;
  const uint32_t y = static_cast<uint32_t>((lane / 16) ^ (row & 7));
  float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int ks = 0; ks < kKS; ++ks) {  // k-steps of 16 columns (8 over the 128)
    uint32_t a[4];
    ldsm_x4(base + (ks / 4) * (kChunkSize * 128) + ((((2 * ks) & 7) ^ y) << 4), a[0], a[1], a[2], a[3]);
    mma16<E>(c0, a, a[0], a[2]);  // columns: rows r0 .. r0 + 7
    mma16<E>(c1, a, a[1], a[3]);  // columns: rows r0 + 8 .. r0 + 15
  }
  // Diagonal (r0 + g, r0 + g) is c0[g & 1] of lane (g, g / 2), (r0 + 8 + g, r0 + 8 + g) its c1[2 + (g & 1)].
  return make_float2((g & 1) ? c0[1] : c0[0], (g & 1) ? c1[3] : c1[2]);
}

// q's inverse l2 norms of a ring stage's chunk for the o warpgroup (rq [kC]; rows past len: 0),
// formed by the norm warpgroup's 128 threads (tid: 0 .. 127), warp w rows 16 w .. 16 w + 15. Both
// warpgroups of the chain are on its critical path (docs/perf.md, session 27: formed by either
// with ALU instructions, they cost it 28-32%; session 32: by the o warpgroup's own mma.sync, +3%),
// and kkt_solve, which formed them before, had to read all of q from memory for them (prep +12-16%).
template <typename E, int kKS = 8>
__device__ __forceinline__ void chain_q_inverse_norms(const E* q, float* rq, int len, int tid) {
  const int lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r0 = 16 * (tid / 32);  // the warp's first row
  if (r0 >= len) {
    if (lane < 16) rq[r0 + lane] = 0.f;
    return;
  }
  const float2 sq = warp_q_square_sums<E, kKS>(smem_u32(q), len, r0, lane);
  if (t == g / 2) {
    const int i0 = r0 + g, i1 = i0 + 8;
    rq[i0] = i0 < len ? rsqrtf(sq.x + float(spec::kL2NormEps)) : 0.f;
    rq[i1] = i1 < len ? rsqrtf(sq.y + float(spec::kL2NormEps)) : 0.f;
  }
}

// The same norms of rows r0 + g and r0 + 8 + g for each of the warp's lanes (the serial chain's
// o rows: chain_o_chunk), the diagonal shuffled to its row's four lanes.
template <typename E, int kKS = 8>
__device__ __forceinline__ float2 warp_q_inverse_norms(uint32_t q_tile, int len, int r0, int lane) {
  if (r0 >= len) return make_float2(0.f, 0.f);  // (warp-uniform)
  const int g = lane / 4;
  const float2 sq = warp_q_square_sums<E, kKS>(q_tile, len, r0, lane);
  const float s0 = __shfl_sync(0xffffffffu, sq.x, 4 * g + g / 2);
  const float s1 = __shfl_sync(0xffffffffu, sq.y, 4 * g + g / 2);
  const int i0 = r0 + g, i1 = i0 + 8;
  return make_float2(i0 < len ? rsqrtf(s0 + float(spec::kL2NormEps)) : 0.f,
                     i1 < len ? rsqrtf(s1 + float(spec::kL2NormEps)) : 0.f);
}

// The norm warpgroup (kFusedO with l2norm; tid 0 .. 127, at 24 registers): the part's chunks in
// turn (its `tokens` from its first chunk's start, as the chain's nch chunks see them: the chunk
// of tokens left, up to kC each), each one's q norms into
// rq[s] once its stage has landed, then its arrival at normed[s]. It runs up to the ring's depth
// ahead of the o warpgroup and never further: the TMA engine refills a stage only after the o
// warpgroup's F, which follows its wait on normed[s] (so one parity per phase is unambiguous).
// Few live values (the token count, the stage, its phase): ptxas keeps a value in one place for
// the whole kernel, so one this warpgroup shares with the others at its small register budget
// spilled for all three.
// With fp16 operands for bf16 inputs (EI != E: cfg.fp16_operands) it also converts each stage's q
// and k in place (convert_stage_rows; each warp its 16 rows, whose norms it then forms from the
// converted q): k first, then its arrival at converted[s], which the chain waits for (it reads no
// q), then q; the o warpgroup waits for normed[s] (both converted).
template <typename E, typename EI, int ST, int kKS, typename Sm>
__device__ __forceinline__ void chain_norm_warpgroup(Sm& sm, const FastBufs<E, EI>& b, int64_t tokens, int tid) {
  constexpr bool kConvert = !std::is_same<E, EI>::value;
  int s = 0;
  uint32_t phase = 0;
  for (; tokens > 0; tokens -= kChunkSize) {
    mbarrier_wait(&sm.full[s], phase);  // q of this chunk landed
    const int len = static_cast<int>(tokens < kChunkSize ? tokens : kChunkSize);
    if constexpr (kConvert) {
      // Piece lane % 8 of rows row, row + 4, .., row + 12 (512 bytes apart), in both atoms; k
      // first, for the chain, which waits for it alone (converted[s]); then q, whose rows' norms
      // this warp forms below.
      const int lane = tid % 32, row = 16 * (tid / 32) + lane / 8;
#pragma unroll 1
      for (int j = 0; j < 4; ++j) convert_stage_row_piece(smem_u32(sm.k[s]), row + 4 * j, len, lane % 8);
      fence_proxy_async();  // the converted rows -> the other warpgroups' wgmma (async proxy)
      mbarrier_arrive(&sm.converted[s]);
#pragma unroll 1
      for (int j = 0; j < 4; ++j) convert_stage_row_piece(smem_u32(sm.q[s]), row + 4 * j, len, lane % 8);
      fence_proxy_async();
      __syncwarp();  // ... and this warp's ldmatrix of its rows below
    }
    // (E = EI: called with l2norm only.)
    if (!kConvert || b.l2norm) chain_q_inverse_norms<E, kKS>(sm.q[s], sm.rq[s], len, tid);
    mbarrier_arrive(&sm.normed[s]);
    if (++s == ST) {
      s = 0;
      phase ^= 1u;
    }
  }
}

// Where o goes: [T, HV, V] of E (bf16 or fp16), strides in elements; rows16: 16-byte pieces allowed.
struct OutRef {
  void* data;
  int64_t stride_token, stride_head;
  bool rows16;
};

constexpr int kChainOStride = 72;  // o staging row stride (elements): 64 + 8, conflict-free stmatrix

// o of chunk c (rows < len) from this warp's 16 rows of the o staging (stage_acc'd once its P v_new
// was complete) -> out: one chunk later, while the next chunk's P v_new runs on the tensor cores.
// E: o's dtype (the inputs', EI of chain_o_chunk), in which the o staging holds it.
template <typename E, typename Sm>
__device__ __forceinline__ void chain_o_flush(Sm& sm, const OutRef& out, int64_t tb, int64_t te, int64_t c, int v0,
                                              int hv, int warp) {
  const int64_t t0 = tb + c * kChunkSize;
  const int len = static_cast<int>(te - t0 < kChunkSize ? te - t0 : kChunkSize);
  const E* const staged = reinterpret_cast<const E*>(sm.o_stage);
  stage_rows_out<E, 64>(staged, kChainOStride, 16 * warp, 0, len - 16 * warp, [&](int i, int col, uint4 x) {
    E* dst = static_cast<E*>(out.data) + (t0 + 16 * warp + i) * out.stride_token + hv * out.stride_head + v0 + col;
    if (out.rows16) {
      st_global16(dst, x);
    } else {
      const E* e = reinterpret_cast<const E*>(&x);
#pragma unroll
      for (int k = 0; k < 8; ++k) dst[k] = e[k];
    }
  });
  __syncwarp();  // the staging rows are read before the next chunk's stage_acc
}

// o of chunk c (ring stage s; the part's tokens tb .. te - 1) into `o` and through the o staging
// (kFusedO: chunk c - 1's rows go out during chunk c's P v_new; kSerial: chunk c's at its end). kSerial = false: the o
// warpgroup's (chain_o_warpgroup), in step with the chain warpgroup by the mbarriers (its tid: 0 .. 127 of its own);
// kSerial: the chain warpgroup's own, after chunk c's update (ChainMode::kFusedSerial, fwd_h_wgmma.cuh), the h and v
// stagings made visible by its own barriers, and none here. lo_staged: whether the h_lo staging holds h_c's lo part
// (kept across chunks by the caller).
// E: the operands' type; EI: the inputs' and o's (E, or bf16 beside fp16 operands: q and k were
// converted in the ring before this warpgroup reads them).
// kKS: the k-steps of q's products (16 columns each; K = V = 64: 4, q's zero columns skipped).
template <typename E, typename EI, int ST, bool kSerial, int kKS, typename Sm>
__device__ __forceinline__ void chain_o_chunk(Sm& sm, const FastBufs<E, EI>& b, const OutRef& out, int64_t tb,
                                              int64_t te, int64_t c, int s, int v0, int hv, int tid, bool& lo_staged,
                                              float (&o)[32]) {
  constexpr int kC = kChunkSize;
  constexpr bool kConvert = !std::is_same<E, EI>::value;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int i0 = 16 * warp + g, i1 = i0 + 8;  // this thread's accumulator rows (tokens)
  // P of the chunk as A fragments (k-step ks: [4 ks, 4 ks + 4)), hi and lo parts (lo: kPSplit).
  uint32_t p_hi[16], p_lo[kPSplit<E> ? 16 : 1];
  // o += P v_new (the v staging: tokens j = the k dimension, read MN-major).
  auto issue_pv = [&]() {
    const WgTile vt = wg_tile(smem_u32(sm.v[0]), kC * 128, 1024);
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(o[i]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_m64n64_tb<E>(o, &p_hi[4 * ks], vt.at(ks * 2048));
    if constexpr (kPSplit<E>) {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_m64n64_tb<E>(o, &p_lo[4 * ks], vt.at(ks * 2048));
    }
    wgmma_commit();
  };
  uint32_t hls_lo = 0;  // the h_lo staging (kLoPasses: bf16 and fp16 operands on their own inputs)
  if constexpr (kLoPasses<E, EI>) hls_lo = smem_u32(sm.h_lo);
  const uint32_t q_base = smem_u32(sm.q[0]), k_base = smem_u32(sm.k[0]);
  constexpr uint32_t kStageBytes = sizeof(sm.q[0]);  // a [64 x 128] tile of E
  static_assert(sizeof(sm.k[0]) == kStageBytes, "q and k stages alike");
  if constexpr (!kSerial) {
    mbarrier_wait(&sm.bar[0], c & 1);  // B1(c): stage s holds chunk c's q, k, G, rk; the h staging holds h_c
    // (q and k came by TMA: this warpgroup observes their barrier too; complete, as B1 says.)
    mbarrier_wait(&sm.full[s], (static_cast<uint32_t>(c) / ST) & 1u);
    // fp16 operands: q and k converted by the norm warpgroup before q h and q k^T read them.
    if constexpr (kConvert) mbarrier_wait(&sm.normed[s], (static_cast<uint32_t>(c) / ST) & 1u);
  }
  const int64_t t0 = tb + c * kC;
  const int len = static_cast<int>(te - t0 < kC ? te - t0 : kC);
  // The stage's q and k from a stage index ptxas knows to be warp-uniform (a broadcast): it then
  // builds the 32 wgmma descriptors of q h and q k^T in uniform registers (from sm.q[s] it built
  // them in ordinary ones and moved each to a uniform one before its wgmma: ~45 R2UR per chunk).
  const uint32_t su = static_cast<uint32_t>(__shfl_sync(0xffffffffu, s, 0));
  const uint32_t qs = q_base + su * kStageBytes, ks0 = k_base + su * kStageBytes, hs = smem_u32(sm.h);
  const WgTile qt = wg_tile(qs, 16, 1024), ht = wg_tile(hs, kC * 128, 1024), kt = wg_tile(ks0, 16, 1024);
  // o_c = q h_c: B = the h staging [kk][vv] read MN-major (k-step = 16 rows = 2048 bytes), then
  // (after V(c), below) P_c = q k^T (K-major SW128 operands, as w's in the chain). o_c first:
  // once it is complete, this warpgroup is done with the h staging and arrives at B2(c), so the
  // chain, which rewrites the staging after B2(c), need not wait for P_c's gating below (it
  // waited there for ~40% of its time, ncu: docs/perf.md v14).
  auto issue_qh = [&]() {
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(o[i]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks)
      wgmma_m64n64_ss<E, 1>(o, qt.at((ks / 4) * (kC * 128) + (ks % 4) * 32), ht.at(ks * 2048), ks > 0);
    wgmma_commit();
  };
  float rq0 = 1.f, rq1 = 1.f;
  auto norms = [&]() {
    // Inverse norms of rows i0, i1 of q (rows past len: 0, never stored), while q h runs: the
    // norm warpgroup's (chain_norm_warpgroup) for the o warpgroup; the serial chain's own.
    if (b.l2norm) {
      if constexpr (kSerial) {
        const float2 r = warp_q_inverse_norms<E, kKS>(qs, len, 16 * warp, lane);
        rq0 = r.x;
        rq1 = r.y;
      } else {
        mbarrier_wait(&sm.normed[s], (static_cast<uint32_t>(c) / ST) & 1u);
        rq0 = sm.rq[s][i0];
        rq1 = sm.rq[s][i1];
      }
    }
    // o's scale folded into q's row factors, which both parts of o_i carry (exp(G_i) rq_i of q h,
    // rq_i of P's row): one multiply per row instead of one per element at the store.
    rq0 *= b.scale;
    rq1 *= b.scale;
  };
  // q h_c complete, then its lo pass where the chain staged h_c's lo part.
  auto finish_qh = [&]() {
    wgmma_wait<0>();  // o_c = q h_c complete
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(o[i]);
    // A weakly decaying chunk (the chain's decision, from the same eg: chain_precise.cuh) after
    // another (the chain stages h_c's lo part only then): o_c += q h_lo from the h_lo staging, a
    // group complete within the branch (as the chain's lo passes), before B2(c) (the chain
    // rewrites h_lo after it).
    const bool precise = precise_state_chunk<E, EI>(sm.eg[s], len);
    if (lo_staged && precise_w_chunk<E, EI>(sm.eg[s], precise, lo_staged)) {
      qh_lo_pass<E, kKS>(o, qs, hls_lo);
#pragma unroll
      for (int i = 0; i < 32; ++i) pin(o[i]);
    }
    lo_staged = precise;
  };
  // P_c: gates, norms and the causal mask (rows past len and columns past the row: 0), then the
  // hi / lo A fragments (E). exp(G_i - G_j) as a row factor times a column factor (the columns'
  // by lane, then shuffled, as the chain's scalings) instead of one exponential with an fp64
  // difference per element, and no branch per element (ncu: the per-element form was ~2/3 of
  // this warpgroup's time, and the chain warpgroup waited for it at B2; docs/perf.md v14).
  float pacc[32];
  auto issue_qk = [&]() {
#pragma unroll
    for (int i = 0; i < 32; ++i) pacc[i] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks) {
      const uint32_t off = (ks / 4) * (kC * 128) + (ks % 4) * 32;
      wgmma_m64n64_ss<E, 0>(pacc, qt.at(off), kt.at(off), ks > 0);
    }
    wgmma_commit();
  };
  const float2* eg = sm.eg[s];  // (exp(G_i), exp(G_last - G_i)), kkt_solve's
  auto form_p = [&]() {
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(pacc[i]);
    {
      const float rq[2] = {rq0, rq1};
      const int row[2] = {i0, i1};
      // exp(G_i - G_j) = e_j / e_i with e = exp(G_last - G) (kkt_solve's, from fp64 G): one
      // reciprocal per row, no exponential and no fp64 here. Where some e_j of the chunk leaves
      // [e^-80, e^80] (its gates span more than ~80: a model's fast-decaying heads), the warp
      // factors about its own first row from fp64 G instead, and only where its 16 rows span more
      // than 80 too (a g = -1e4 reset among them) it takes the per-element form
      // (gate_factors.cuh, forms 2 and 3).
      constexpr float kLo = 1.8e-35f, kHi = 5.5e34f;  // e^-80, e^80
      bool in_range = true;
      float rf[2];  // rq_i / e_i (form 2: rq_i exp(G_i - G_r))
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) rf[hh] = __fdividef(rq[hh], eg[row[hh]].y);
      float c2[2];  // rk_j e_j of columns j = 2 lane + e (form 2: rk_j exp(G_r - G_j))
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 2 * lane + e;
        const float ej = eg[col].y;
        in_range &= col >= len || (ej >= kLo && ej <= kHi);  // (NaN: out of range)
        c2[e] = (b.l2norm ? sm.rk[s][col] : 1.f) * ej;
      }
      // P times the factors: one copy per form (one shared copy after the forms' branch cost 1x32k
      // 2%, whose chunks all take the first form: session 21).
      auto scale_p = [&](const float(&fr)[2], const float(&fc)[2]) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = 8 * j + 2 * t + e;
            const float cf = __shfl_sync(0xffffffffu, fc[e], 4 * j + t);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              float& x = pacc[4 * j + 2 * hh + e];
              const float v = x * (fr[hh] * cf);  // (rf cf = rq rk exp(G_i - G_j) first: no overflow)
              x = col <= row[hh] && row[hh] < len ? v : 0.f;
            }
          }
      };
      if (__all_sync(0xffffffffu, in_range)) {
        scale_p(rf, c2);
      } else {
        const double* Gs = sm.G[s];
        const int r0 = 16 * warp;
        const double g_row[2] = {Gs[i0], Gs[i1]};
        const bool rows_on[2] = {i0 < len, i1 < len};
        if (gate_factors(
                Gs[min(r0, len - 1)], kGateSpanRow, false, g_row, rows_on, rq, Gs, lane, min(len, r0 + 16),
                [&](int j) { return b.l2norm ? sm.rk[s][j] : 1.f; }, rf, c2)) {
          scale_p(rf, c2);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int col = 8 * j + 2 * t + e;
              const float rk = b.l2norm ? sm.rk[s][col] : 1.f;
              const double Gj = Gs[col];
#pragma unroll
              for (int hh = 0; hh < 2; ++hh) {
                float& x = pacc[4 * j + 2 * hh + e];
                x = col <= row[hh] && row[hh] < len ? x * (rq[hh] * rk) * __expf(float(g_row[hh] - Gj)) : 0.f;
              }
            }
        }
      }
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float x0 = pacc[8 * ks + 2 * q], x1 = pacc[8 * ks + 2 * q + 1];
          const uint32_t hi = pack2<E>(x0, x1);
          p_hi[4 * ks + q] = hi;
          if constexpr (kPSplit<E>) p_lo[4 * ks + q] = pack2<E>(x0 - lo_f<E>(hi), x1 - hi_f<E>(hi));
        }
    }
  };
  if constexpr (!kSerial) {
    issue_qh();
    norms();
    finish_qh();
    // P_c = q k^T, once the chain's v_new products of chunk c are issued (V(c)): on the tensor
    // cores' queue behind them, not ahead (the chain waits for those; P_c is needed only after
    // B2(c)). Waited before B2(c)'s arrival, so that the chain, which passes B2(c) only after
    // it, cannot complete V(c + 1) before this wait has seen V(c) (one parity per phase).
    mbarrier_wait(&sm.bar[3], c & 1);
    mbarrier_arrive(&sm.bar[1]);  // B2(c): this warpgroup's reads of the h staging are done
    issue_qk();
    form_p();
  } else {
    // The serial chain (its state's 64 registers live throughout): P first, its q k^T products
    // in the norms' shadow, then o = q h beside P's hi / lo fragments only (o beside P's fp32
    // accumulators and its fragments, as above, spilled there).
    issue_qk();
    norms();
    form_p();
    issue_qh();
    finish_qh();
  }
  // o_c's rows times exp(G_i) rq_i (the P v_new part carries its own factors).
  const float f0 = eg[i0].x * rq0, f1 = eg[i1].x * rq1;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    o[4 * j] *= f0;
    o[4 * j + 1] *= f0;
    o[4 * j + 2] *= f1;
    o[4 * j + 3] *= f1;
  }
  if constexpr (!kSerial) mbarrier_wait(&sm.bar[1], c & 1);  // B2(c): the chain's v staging holds v_new_c
  issue_pv();
  // o_{c-1}'s rows -> out while P v_new runs (ncu: its loads of the staging and its stores held
  // ~8% of this warpgroup's samples after the wait)
  if constexpr (!kSerial) {
    if (c > 0) chain_o_flush<EI>(sm, out, tb, te, c - 1, v0, hv, warp);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < 32; ++i) pin(o[i]);
  // F(c + 1): done with stage s and the v staging (the chain refills them after waiting on it);
  // o_c's staging below touches only this warpgroup's o staging.
  if constexpr (!kSerial) mbarrier_arrive(&sm.bar[2]);
  stage_acc<EI, 8>(reinterpret_cast<EI*>(sm.o_stage), kChainOStride, 16 * warp, 0,
                   reinterpret_cast<const float(&)[8][4]>(o), 1.f);
  __syncwarp();
  // The serial chain's rows go out at once (carried to the next chunk or past the loop, the
  // flush's addresses spilled; the SM's other block runs meanwhile).
  if constexpr (kSerial) chain_o_flush<EI>(sm, out, tb, te, c, v0, hv, warp);
}

// The o warpgroup (kFusedO: threads 128 .. 255): the part's chunks in turn, each after the chain
// warpgroup's B1; o [64 tokens x 64 vv] as an m64n64 accumulator: o[4 j + 2 hh + e] is row
// 16 warp + g + 8 hh, column 8 j + 2 t + e.
template <typename E, typename EI, int ST, int kKS, typename Sm>
__device__ __forceinline__ void chain_o_warpgroup(Sm& sm, const FastBufs<E, EI>& b, const OutRef& out, int64_t tb,
                                                  int64_t te, int64_t nch, int v0, int hv) {
  const int tid = threadIdx.x - 128;
  float o[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i] = 0.f;
  int s = 0;
  bool lo_staged = true;        // the h_lo staging holds h_c's lo part (chunk c - 1 decayed weakly, or c = 0)
  mbarrier_arrive(&sm.bar[2]);  // F(0): nothing of this warpgroup's to wait for
  for (int64_t c = 0; c < nch; ++c) {
    chain_o_chunk<E, EI, ST, false, kKS>(sm, b, out, tb, te, c, s, v0, hv, tid, lo_staged, o);
    if (++s == ST) s = 0;
  }
  if (nch > 0) chain_o_flush<EI>(sm, out, tb, te, nch - 1, v0, hv, tid / 32);
  // (Nothing left to wait for: the chain's epilogue barrier is its own.)
}

// kFusedO's warpgroup roles, split from the block's 384 threads (the chain kernel, fwd_h_wgmma.cuh):
// the norm warpgroup (threads 256 .. 383) and the o warpgroup (128 .. 255) run theirs here and
// return false; the chain warpgroup (0 .. 127) returns true with its registers raised and tb, the
// part's first token, read back past the setmaxnreg from part_tb (the kernel's, in shared memory).
template <typename E, typename EI, int ST, int kKS, typename Sm>
__device__ __forceinline__ bool chain_fused_roles(Sm& sm, const FastBufs<E, EI>& b, const OutRef& out, int64_t& tb,
                                                  int64_t& part_tb, int64_t te, int64_t nch, int v0, int hv) {
  constexpr bool kConvert = !std::is_same<E, EI>::value;
  // Three warpgroups share the block's registers: launched at kLaunchRegs each (384 threads, the
  // launch bounds' most), the norm warpgroup gives registers back to the block's pool and the
  // chain and the o warpgroup take them from it. setmaxnreg.inc waits until the pool has them, so
  // the three counts must sum to three times the launch count exactly (more: the inc never
  // returns). (ptxas: the o warpgroup's code is the same at 232 and 240; 248 / 232 is the split
  // measured, session 29.)
  constexpr int kLaunchRegs = 65536 / 384 / 8 * 8;  // 168
  // (fp16 operands: the norm warpgroup converts the ring's q and k too, at 40; the chain, without
  // lo passes, at 232.)
  constexpr int kNormRegs = kConvert ? 40 : 32, kORegs = 232;
  constexpr int kChainRegs = 3 * kLaunchRegs - kNormRegs - kORegs;  // 240 (fp16 operands: 232)
  static_assert(kChainRegs <= 256 && kChainRegs % 8 == 0 && kNormRegs >= 24, "setmaxnreg's counts");
  // The part's first token read back from shared memory past each setmaxnreg: carried across
  // it in a register, ptxas spilled it (one value, reloaded in the chain's loop). The barrier
  // also orders the mbarriers' initialization before their first use.
  if (threadIdx.x == 0) part_tb = tb;
  __syncthreads();
  if (threadIdx.x >= 256) {  // the norm warpgroup (q's inverse norms for the o warpgroup)
    setmaxnreg_dec<kNormRegs>();
    // The part's tokens as its nch chunks see them (a part before the last: nch whole chunks).
    const int64_t part_tokens = te - part_tb < nch * kChunkSize ? te - part_tb : nch * kChunkSize;
    if (b.l2norm || kConvert) chain_norm_warpgroup<E, EI, ST, kKS>(sm, b, part_tokens, threadIdx.x - 256);
    return false;
  }
  if (threadIdx.x >= 128) {  // the o warpgroup
    setmaxnreg_inc<kORegs>();
    chain_o_warpgroup<E, EI, ST, kKS>(sm, b, out, part_tb, te, nch, v0, hv);
    return false;
  }
  setmaxnreg_inc<kChainRegs>();
  tb = part_tb;
  return true;
}

}  // namespace cuda
}  // namespace gdn
