// fwd_o: per (chunk, value head, 128 columns of V), in parallel over all chunks:
//   o_i = scale (exp(G_i) q_i^T h_c + sum_{j <= i} (q_i . k_j) exp(G_i - G_j) v_new_j)
// with l2norm, q_i and k_j are the raw rows and their inverse norms rq_i (computed here) and
// rk_j (the prep kernel's) scale the products in fp32.
// K = V = kD, 128 or 256 (the chain's store mode): one block per (chunk, value head) writes o in
// 128-column halves of V, all of V at 128, both halves one after the other at 256 (h's [256][256]
// alone would take 128 KB of shared memory), with P = q k^T and q's norms formed once over all 256
// columns of K (session 43: one block per half formed them twice, o 15% slower). At 256, each
// half's h [256][128] (68 KB) passes through k's rows (dead once P is formed) in four 64-row
// pieces, two at a time, so that a block takes 103 KB and two share an SM: one block's loads run
// under the other's products (with h whole, 170 KB, one block a SM loaded, then multiplied, alone:
// the o phase ran at ~55% of the memory's rate).
// Three mma products per block (q k^T, q h_c, P v_new), operands of type E (the input dtype, bf16
// or fp16) in shared memory; P is split into hi + lo parts (two passes) so that only h and v_new
// carry a rounding to E (q and k are the inputs' exact values). o is written in E. With fp16 operands
// for bf16 inputs (EI = bf16, E = fp16: cfg.fp16_operands) q and k stay bf16 in shared memory and
// their fragments are converted to fp16 in registers (exact within fp16's range); o is written in EI.
// 8 warps (4 measured slower): warps w and w + 4 own row
// tiles w and 3 - w and one half of the columns each, so that the two warps of one SM
// sub-partition (w % 4) carry equal triangular work.
#include <type_traits>

#include "cuda/chunk/chain_precise.cuh"  // precise_state_decays: the chain's weakly decaying chunks
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/chunk/gate_factors.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;
constexpr int kDV = 128;  // o's columns per block (K = V = 64 always fuses o: no fwd_o there)

// One block's operands: q and k over all of K, v_new and h for the block's kDV columns of V
// (kD = 128: 104 KB, h whole; 256: 103 KB, h in two 64-row pieces over k's rows). Rows padded by 16
// bytes (ldmatrix without bank conflicts).
template <typename E, int kD>
struct OSmem {
  static constexpr bool kHPieces = kD == 256;  // h streamed through k's rows (kHPieceRows at a time)
  static constexpr int kHPieceRows = 64;
  static constexpr int SK = kD + 8;   // q, k
  static constexpr int SV = kDV + 8;  // v_new, h, and k's rows reused for h's pieces, v_new_lo and o's staging
  static constexpr int SP = C + 8;
  static constexpr int kSlotElems = kHPieceRows * SV;  // one piece of h: [kHPieceRows kk][kDV vv]
  // V halves (kDV columns) a block writes, one after the other (kHPieces: both, P formed once), and
  // blocks per (chunk, value head).
  static constexpr int kBlockHalves = kHPieces ? kD / kDV : 1;
  static constexpr int kGridHalves = kD / kDV / kBlockHalves;
  static constexpr int kKSize = C * SK;  // k's elements
  static constexpr int kKElems = kHPieces && 2 * kSlotElems > kKSize ? 2 * kSlotElems : kKSize;
  E q[C * SK];
  E k[kKElems];  // k; then (kHPieces) h's pieces in slots 0 and 1, v_new_lo in slot 0
  E vn[C * SV];
  E h[kHPieces ? 8 : kD * SV];  // [kD kk][kDV vv] (kHPieces: unused)
  E P[C * SP];
  E Plo[C * SP];
  double G[C];
  float rk[C];  // inverse l2 norms of k's rows (kkt_solve's), with l2norm
};

template <typename E, typename EI, int NW, int kD>
__global__ void __launch_bounds__(NW * 32)
    chunk_fwd_o_kernel(FastBufs<E, EI> b, EI* __restrict__ o, int64_t o_st, int64_t o_sh, bool rows16) {
  extern __shared__ __align__(16) char smem_raw[];
  using S = OSmem<E, kD>;  // (q and k hold EI: 16-bit either way)
  constexpr bool kConvert = !std::is_same<E, EI>::value;
  auto as_op = [](uint32_t(&x)[4]) { as_operands<E, EI>(x); };  // a fragment of q or k (EI) as E operands
  S& sm = *reinterpret_cast<S*>(smem_raw);
  constexpr int kThreads = NW * 32;
  constexpr int HALVES = NW / 4;           // column groups
  constexpr int CP = (C / 16) / HALVES;    // P column-tile pairs per warp
  constexpr int DP = (kDV / 16) / HALVES;  // o column-tile pairs per warp
  const int HV = b.HV;
  const unsigned bh = blockIdx.x / S::kGridHalves;  // (a head's blocks adjacent: their q, k reads meet in L2)
  const int vh0 = blockIdx.x % S::kGridHalves;      // the block's first V half
  const int64_t gc = bh / HV;
  const int hv = bh % HV;
  const int hk = qk_head_of(hv, HV, b.H);
  int64_t t0;
  int len;
  if (!chunk_rows(b.pl, gc, t0, len)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int half = warp / 4;
  const int m = half == 0 ? warp : 3 - (warp - 4);  // row tile

  // Two groups of async copies: q, k, G first (for P), then h and v_new, which land while P is
  // computed. Thread tid copies 16-byte piece pc = tid % kPieces of rows pr + kRows j of h and
  // v_new ([.][kDV]), and piece qc = tid % kQPieces of rows qr + kQRows j of q and k ([C][kD]; the
  // same mapping at kD = 128): its source pointers and shared offsets step by whole passes of rows
  // (the arithmetic once, not per piece); rows past len read the chunk's first row (in bounds) with
  // a source size of 0.
  constexpr int kPieces = kDV / 8, kRows = kThreads / kPieces;
  constexpr int kQPieces = kD / 8, kQRows = kThreads / kQPieces;
  static_assert(kThreads % kPieces == 0 && C % kRows == 0 && kD % kRows == 0, "whole passes of rows");
  static_assert(kThreads % kQPieces == 0 && C % kQRows == 0, "whole passes of rows");
  const int pc = tid % kPieces, pr = tid / kPieces;
  const int qc = tid % kQPieces, qr = tid / kQPieces;
  // Piece pc's 64-wide V slice in V half vh (the chain's images of h, v_new).
  auto slice_of = [&](int vh) { return (kDV / 64) * vh + pc / 8; };
  // The chunk's two decays that decide whether the chain stored v_new's lo part (chain_precise.cuh),
  // loaded now: their global latency hides behind P instead of stalling every warp before q h.
  float last_decay = 0.f, tail_decay = 0.f;
  if (!kConvert && b.v_new_lo != nullptr) {
    const float2* const eg = b.eg + int64_t(hv) * b.T + t0;  // [HV, T] (exp(G_i), exp(G_last - G_i))
    last_decay = eg[len - 1].x;
    tail_decay = eg[(3 * len) / 4].y;
  }
  {
    const EI* const q0 = b.q + t0 * b.q_st + hk * b.q_sh + 8 * qc;  // [T, H, kD], the chunk's row 0
    const EI* const k0 = b.k + t0 * b.k_st + hk * b.k_sh + 8 * qc;
    const EI* qs = q0 + qr * b.q_st;
    const EI* ks = k0 + qr * b.k_st;
#pragma unroll
    for (int j = 0; j < C / kQRows; ++j, qs += kQRows * b.q_st, ks += kQRows * b.k_st) {
      const int i = qr + kQRows * j;
      const bool ok = i < len;
      cp_async16(&sm.q[i * S::SK + 8 * qc], ok ? qs : q0, ok ? 16 : 0);
      cp_async16(&sm.k[i * S::SK + 8 * qc], ok ? ks : k0, ok ? 16 : 0);
    }
  }
  if (tid < C) {
    const bool ok = tid < len;
    cp_async8(&sm.G[tid], b.Gt + int64_t(hv) * b.T + t0 + (ok ? tid : 0), ok ? 8 : 0);
  } else if (tid < 2 * C && b.l2norm) {
    const int i = tid - C;
    const bool ok = i < len;
    cp_async4(&sm.rk[i], b.rk + int64_t(hk) * b.T + t0 + (ok ? i : 0), ok ? 4 : 0);
  }
  cp_async_commit();
  {
    // The chain's staging images (fwd_fast.cuh): 16-byte piece pc of a row sits in slice sl at the
    // swizzled byte sw128(row, pc % 8) (h's rows kk < kD in order, 128 bytes apart); rows kRows (a
    // multiple of 8) apart share the swizzle.
    static_assert(kRows % 8 == 0, "the swizzle repeats every 8 rows");
    const char* const vimg =
        reinterpret_cast<const char*>(b.v_new + fwd_v_image(gc, hv, slice_of(vh0), HV, kD)) + sw128(pr, pc % 8);
    [[maybe_unused]] const char* const himg =
        reinterpret_cast<const char*>(b.h + fwd_h_image(gc, hv, slice_of(vh0), HV, kD)) + sw128(pr, pc % 8);
#pragma unroll
    for (int j = 0; j < C / kRows; ++j) {
      const int i = pr + kRows * j;
      cp_async16(&sm.vn[i * S::SV + 8 * pc], vimg + j * kRows * 128, i < len ? 16 : 0);
    }
    if constexpr (!S::kHPieces) {
#pragma unroll
      for (int j = 0; j < kD / kRows; ++j)
        cp_async16(&sm.h[(pr + kRows * j) * S::SV + 8 * pc], himg + j * kRows * 128, 16);
    }
  }
  cp_async_commit();
  // (kHPieces) h's rows [64 p, 64 p + 64) of V half vh into slot p % 2 of k's rows, one commit group.
  static_assert(S::kHPieceRows % kRows == 0, "whole passes of rows a piece");
  auto load_h_piece = [&](int vh, int p) {
    const char* const himg = reinterpret_cast<const char*>(b.h + fwd_h_image(gc, hv, slice_of(vh), HV, kD)) +
                             sw128(pr, pc % 8) + p * S::kHPieceRows * 128;
    E* const slot = sm.k + (p % 2) * S::kSlotElems;
#pragma unroll
    for (int j = 0; j < S::kHPieceRows / kRows; ++j)
      cp_async16(&slot[(pr + kRows * j) * S::SV + 8 * pc], himg + j * kRows * 128, 16);
    cp_async_commit();
  };
  cp_async_wait<1>();  // q, k, G
  __syncthreads();

  const int i0 = 16 * m + g, i1 = i0 + 8;  // this thread's two rows
  const double Gi0 = sm.G[i0], Gi1 = sm.G[i1];
  // Inverse l2 norms of this thread's two q rows (over all kD columns): the quad (lanes 4 g ..
  // 4 g + 3) shares the rows, each lane sums a quarter of them.
  float rq0 = 1.f, rq1 = 1.f;
  if (b.l2norm) {
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int qq = 0; qq < kD / 32; ++qq) {
      const int d = t * (kD / 4) + 8 * qq;
      const uint4 x0 = *reinterpret_cast<const uint4*>(&sm.q[i0 * S::SK + d]);
      const uint4 x1 = *reinterpret_cast<const uint4*>(&sm.q[i1 * S::SK + d]);
      const EI* e0 = reinterpret_cast<const EI*>(&x0);
      const EI* e1 = reinterpret_cast<const EI*>(&x1);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        s0 += to_f(e0[j]) * to_f(e0[j]);
        s1 += to_f(e1[j]) * to_f(e1[j]);
      }
    }
    rq0 = quad_inv_l2norm(s0);
    rq1 = quad_inv_l2norm(s1);
  }
  auto rk_of = [&](int j) { return b.l2norm ? sm.rk[j] : 1.f; };
  // P = (q k^T) * exp(G_i - G_j), j <= i: column tiles of this warp's half, up to the diagonal.
  {
    float acc[2 * CP][4];
#pragma unroll
    for (int nt = 0; nt < 2 * CP; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t a[4];
      frag_a(sm.q, S::SK, 16 * m, 16 * ks, a);
      as_op(a);
#pragma unroll
      for (int jp = 0; jp < CP; ++jp) {
        const int np = CP * half + jp;
        if (np > m) break;
        uint32_t bb[4];
        frag_b_nk(sm.k, S::SK, 16 * np, 16 * ks, bb);
        as_op(bb);
        mma16<E>(acc[2 * jp], a, bb[0], bb[1]);
        mma16<E>(acc[2 * jp + 1], a, bb[2], bb[3]);
      }
    }
    // P's gates: exp(G_i - G_j) as row x column factors about the chunk's middle, else about the
    // warp's first row, else per element (gate_factors.cuh); the causal mask a select.
    const double g_row[2] = {Gi0, Gi1};
    const bool rows_on[2] = {i0 < len, i1 < len};
    const float row_scale[2] = {rq0, rq1};
    float rf[2], c2[2];  // rq_i exp(G_i - G_r); rk_j exp(G_r - G_j) of columns j = 2 lane + e
    bool factored = gate_factors(0.5 * (sm.G[0] + sm.G[len - 1]), kGateSpanMiddle, true, g_row, rows_on, row_scale,
                                 sm.G, lane, len, rk_of, rf, c2);
    if (!factored)
      factored = gate_factors(sm.G[min(16 * m, len - 1)], kGateSpanRow, false, g_row, rows_on, row_scale, sm.G, lane,
                              min(len, 16 * m + 16), rk_of, rf, c2);
#pragma unroll
    for (int jt = 0; jt < 2 * CP; ++jt) {
      const int nt = 2 * CP * half + jt;
      if (nt / 2 > m) break;  // (warp-uniform: the shuffles below see every lane)
      const int j = 8 * nt + 2 * t;
      float p00, p01, p10, p11;
      if (factored) {
        const float cf0 = __shfl_sync(0xffffffffu, c2[0], 4 * nt + t);
        const float cf1 = __shfl_sync(0xffffffffu, c2[1], 4 * nt + t);
        const float v00 = acc[jt][0] * rf[0] * cf0, v01 = acc[jt][1] * rf[0] * cf1;
        const float v10 = acc[jt][2] * rf[1] * cf0, v11 = acc[jt][3] * rf[1] * cf1;
        p00 = j <= i0 && i0 < len ? v00 : 0.f;
        p01 = j + 1 <= i0 && i0 < len ? v01 : 0.f;
        p10 = j <= i1 && i1 < len ? v10 : 0.f;
        p11 = j + 1 <= i1 && i1 < len ? v11 : 0.f;
      } else {
        const float rk0 = rk_of(j), rk1 = rk_of(j + 1);
        p00 = j <= i0 ? acc[jt][0] * (rq0 * rk0) * __expf(float(Gi0 - sm.G[j])) : 0.f;
        p01 = j + 1 <= i0 ? acc[jt][1] * (rq0 * rk1) * __expf(float(Gi0 - sm.G[j + 1])) : 0.f;
        p10 = j <= i1 ? acc[jt][2] * (rq1 * rk0) * __expf(float(Gi1 - sm.G[j])) : 0.f;
        p11 = j + 1 <= i1 ? acc[jt][3] * (rq1 * rk1) * __expf(float(Gi1 - sm.G[j + 1])) : 0.f;
      }
      const uint32_t h0 = pack2<E>(p00, p01), h1 = pack2<E>(p10, p11);
      *reinterpret_cast<uint32_t*>(&sm.P[i0 * S::SP + j]) = h0;
      *reinterpret_cast<uint32_t*>(&sm.P[i1 * S::SP + j]) = h1;
      *reinterpret_cast<uint32_t*>(&sm.Plo[i0 * S::SP + j]) = residual2<E>(p00, p01, h0);
      *reinterpret_cast<uint32_t*>(&sm.Plo[i1 * S::SP + j]) = residual2<E>(p10, p11, h1);
    }
  }
  // h and v_new have landed; P rows of tile m (written by the warps that own that tile) are
  // visible to all after the barrier.
  cp_async_wait<0>();
  __syncthreads();
  // A weakly decaying chunk (the chain's decision from the same eg, chain_precise.cuh): the chain
  // stored v_new's lo part too (b.v_new_lo); it lands in k's rows (dead since P; at stride SV) while
  // q h and P v_new run, for a third pass P_hi v_new_lo (the store chain's images).
  const bool vn_lo = b.v_new_lo != nullptr && precise_state_decays<E, EI>(last_decay, tail_decay);
  auto load_vn_lo = [&](int vh) {
    const char* const limg =
        reinterpret_cast<const char*>(b.v_new_lo + fwd_v_image(gc, hv, slice_of(vh), HV, kD)) + sw128(pr, pc % 8);
#pragma unroll
    for (int j = 0; j < C / kRows; ++j) {
      const int i = pr + kRows * j;
      cp_async16(&sm.k[i * S::SV + 8 * pc], limg + j * kRows * 128, i < len ? 16 : 0);
    }
    cp_async_commit();
  };
  if constexpr (!S::kHPieces) {
    if (vn_lo) load_vn_lo(vh0);
  }

  // The block's V halves, one after the other (kHPieces: two; v_new of the second loaded into
  // v_new's rows once every warp is done with the first's o; otherwise one).
#pragma unroll 1
  for (int vh = vh0; vh < vh0 + S::kBlockHalves; ++vh) {
    if (vh > vh0) {
      const char* const vimg =
          reinterpret_cast<const char*>(b.v_new + fwd_v_image(gc, hv, slice_of(vh), HV, kD)) + sw128(pr, pc % 8);
#pragma unroll
      for (int j = 0; j < C / kRows; ++j) {
        const int i = pr + kRows * j;
        cp_async16(&sm.vn[i * S::SV + 8 * pc], vimg + j * kRows * 128, i < len ? 16 : 0);
      }
      cp_async_commit();
    }

    float acc[2 * DP][4];
#pragma unroll
    for (int nt = 0; nt < 2 * DP; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
    // q h_c over k-steps ks0 .. ks0 + kSteps - 1 of the block's h columns, h's row 16 ks0 at hs's row 0.
    // acc += a (and al, unless null) times this thread's DP column pairs of B's 16 rows from k0.
    auto add_a_times = [&](const uint32_t* a, const uint32_t* al, const E* b, int k0) {
#pragma unroll
      for (int jp = 0; jp < DP; ++jp) {
        uint32_t bb[4];
        frag_b_kn(b, S::SV, 16 * (DP * half + jp), k0, bb);
        mma16<E>(acc[2 * jp], a, bb[0], bb[1]);
        mma16<E>(acc[2 * jp + 1], a, bb[2], bb[3]);
        if (al) {
          mma16<E>(acc[2 * jp], al, bb[0], bb[1]);
          mma16<E>(acc[2 * jp + 1], al, bb[2], bb[3]);
        }
      }
    };
    auto add_q_times_h = [&](const E* hs, int ks0, auto steps) {
      constexpr int kSteps = decltype(steps)::value;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        uint32_t a[4];
        frag_a(sm.q, S::SK, 16 * m, 16 * (ks0 + kk), a);
        as_op(a);
        add_a_times(a, nullptr, hs, 16 * kk);
      }
    };
    if constexpr (S::kHPieces) {
      // Pieces 0 and 1 in flight; piece p + 1 is refilled into slot (p + 1) % 2 once every warp has
      // passed the barrier of piece p (so is done with piece p - 1, that slot's last reader); after
      // the last piece, slot 0 takes v_new_lo. The k-steps in the same order as with h whole.
      constexpr int kNP = kD / S::kHPieceRows, kKS = S::kHPieceRows / 16;
      load_h_piece(vh, 0);
      load_h_piece(vh, 1);
#pragma unroll 1
      for (int p = 0; p < kNP; ++p) {
        if (p == 0)
          cp_async_wait<1>();
        else
          cp_async_wait<0>();
        __syncthreads();
        if (p >= 1 && p + 1 < kNP) load_h_piece(vh, p + 1);
        if (p == kNP - 1 && vn_lo) load_vn_lo(vh);  // (slot 0's last piece, kNP - 2, read before this barrier)
        add_q_times_h(sm.k + (p % 2) * S::kSlotElems, kKS * p, std::integral_constant<int, kKS>{});
      }
    } else {
      add_q_times_h(sm.h, 0, std::integral_constant<int, kD / 16>{});
    }
    const float e0 = __expf(float(Gi0)) * rq0, e1 = __expf(float(Gi1)) * rq1;
#pragma unroll
    for (int nt = 0; nt < 2 * DP; ++nt) {
      acc[nt][0] *= e0;
      acc[nt][1] *= e0;
      acc[nt][2] *= e1;
      acc[nt][3] *= e1;
    }
    // + P v (k-steps past the diagonal block are zero): P's hi part, and its lo part where with_lo
    // (each B fragment taken by hi then lo).
    auto add_p_times = [&](const E* v, bool with_lo) {
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        if (ks > m) break;
        uint32_t a[4], al[4];
        frag_a(sm.P, S::SP, 16 * m, 16 * ks, a);
        if (with_lo) frag_a(sm.Plo, S::SP, 16 * m, 16 * ks, al);
        add_a_times(a, with_lo ? al : nullptr, v, 16 * ks);
      }
    };
    add_p_times(sm.vn, true);  // P v_new
    if (vn_lo) {               // + P_hi v_new_lo (block-uniform branch)
      cp_async_wait<0>();
      __syncthreads();
      add_p_times(sm.k, false);
      __syncthreads();  // every warp's reads of v_new_lo done: k's rows become o's staging
    }
    // o leaves through shared memory in 16-byte pieces: stmatrix into k's rows (dead since P).
    const int r0 = 16 * m, c0 = 16 * DP * half;
    EI* stage = reinterpret_cast<EI*>(sm.k);  // (o in the inputs' dtype)
    stage_acc(stage, S::SV, r0, c0, acc, b.scale);
    __syncwarp();
    stage_rows_out<EI, 16 * DP>(stage, S::SV, r0, c0, len - r0, [&](int i, int c, uint4 x) {
      EI* dst = o + (t0 + r0 + i) * o_st + hv * o_sh + kDV * vh + c0 + c;  // [T, HV, kD]
      if (rows16) {
        st_global16(dst, x);
      } else {
        const EI* e = reinterpret_cast<const EI*>(&x);
#pragma unroll
        for (int j = 0; j < 8; ++j) dst[j] = e[j];
      }
    });
    if (vh + 1 < vh0 + S::kBlockHalves) __syncthreads();  // o's staging and v_new read: both rewritten next
  }
}

// One block per (chunk, value head) and kGridHalves (1) of V's kDV-column halves.
template <typename E, typename EI, int NW, int kD>
void launch(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s, bool rows16) {
  static_assert(sizeof(OSmem<E, kD>) <= 227 * 1024, "one block's shared memory (sm_90's opt-in limit)");
  const size_t smem = sizeof(OSmem<E, kD>);
  const unsigned blocks = grid_1d(b.pl.max_chunks * b.HV * OSmem<E, kD>::kGridHalves, 1);
  auto k = chunk_fwd_o_kernel<E, EI, NW, kD>;
  allow_smem(k, smem);
  k<<<blocks, NW * 32, smem, s>>>(b, static_cast<EI*>(f.o.data), f.o.stride_token, f.o.stride_head, rows16);
  GDN_CUDA_LAUNCH_CHECK("chunk_fwd_o_kernel");
}

}  // namespace

// The head size b.dk becomes the kernel's kD here, the one place (128 or 256: the chain's store mode).
template <typename E, typename EI>
void launch_fwd_o(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s) {
  constexpr bool kConvert = !std::is_same<E, EI>::value;
  if (kConvert && b.dk == 256)
    throw Error("chunk_fwd_o_kernel: fp16 operands for bf16 inputs (fp16_operands) run K = V = 128 only, not 256");
  if (b.pl.max_chunks == 0) return;
  // o rows in 16-byte pieces when the caller's layout allows it, else element by element.
  const bool rows16 = rows_in_16_byte_pieces(f.o);
  // (o in EI: o_dtype = dtype, takes_fast_path)
  if constexpr (!kConvert) {
    if (b.dk == 256) return launch<E, EI, 8, 256>(b, f, s, rows16);
  }
  launch<E, EI, 8, 128>(b, f, s, rows16);
}

template void launch_fwd_o(const FastBufs<__nv_bfloat16>&, const ForwardArgs&, cudaStream_t);
template void launch_fwd_o(const FastBufs<__half>&, const ForwardArgs&, cudaStream_t);
#ifdef GDN_FP16_OPERANDS_D128  // bf16 inputs on fp16 operands at D = 128 (heuristics.h: kFp16OperandsD128)
template void launch_fwd_o(const FastBufs<__half, __nv_bfloat16>&, const ForwardArgs&, cudaStream_t);
#endif

}  // namespace cuda
}  // namespace gdn
