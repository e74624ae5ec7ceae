// The wgmma chain kernel's (fwd_h_wgmma.cuh) modes, constants and shared-memory layout, with the
// per-chunk synchronization they serve and the prefetch that fills the ring (chain_prefetch).
//
// Shared memory (sizes for ST ring stages; offsets 1024-aligned where wgmma reads them):
//   a[ST], k[ST]: [2 atoms][64 tokens][128 B], 128-byte swizzle (16-byte chunk index XOR
//                 token % 8): the canonical SW128 layout. k: atoms of kk / 64, K-major for S^T k^T,
//                 MN-major for vs^T k; a: A_s's rows, atom 0 its hi part, atom 1 its lo part
//   vin[ST]:      [64 tokens][64 vv] of v, 128-byte rows, same swizzle (conflict-free ldmatrix.trans)
//   h:            [128 kk][64 vv] staging of h_c (stmatrix.trans from the A fragments of S^T)
//   h_lo:         kFusedO: the same for the residual S - h (the o warpgroup's q h_lo on weakly
//                 decaying chunks, chain_precise.cuh)
//   v:            [64 tokens][64 vv] staging of v_new (stmatrix.trans; kStoreBulk: one bulk store)
//   eg[ST] ((exp(G_i), exp(G_last - G_i)) from kkt_solve), G[ST] (fp64, kFusedO only: the o
//   warpgroup's fallback), rk[ST] (inverse norms of k's rows, with l2norm), rq[ST] (of q's rows,
//   kFusedO with l2norm: formed from the ring's q by a third, norm warpgroup, chain_o.cuh)
// ST = 2: 107.5 KB (two blocks per SM, for many chains); ST = 4: 190 KB (the summary pass with few
// chains, one block per SM: the deepest prefetch); kFusedO, ST = 3: ~222 KiB (226,896 B + 1 KB alignment
// slack; bf16 and fp16 alike).
//
// Synchronization per chunk c (stage s = c % ST), two block barriers, both overlapped with wgmma:
//   wait for chunk c's cp.async group (eg, G, rk) and its stage's full barrier (A_s, k, q, v by
//   the TMA engine); a partial chunk zeroes its rows past len (chain_zero_rows); fence.proxy.async
//   (those zeros and the h staging are generic-proxy writes that the async proxy of wgmma reads);
//   barrier B1
//   issue the 8 -U^T wgmmas; meanwhile: scalings, v^T, h_c -> global (from the h staging
//   written before B1); wait; W^T -> A fragments; issue the 8 v_new wgmmas; meanwhile: decays,
//   S^T *= exp(G_last) (ptxas puts it here), prefetch chunk c + ST - 1 into stage (c - 1) % ST
//   (freed by B1; kFusedO: by F, the o warpgroup's arrival once its P v_new of chunk c - 1 is
//   done, which B1 no longer waits for: the -U^T products of chunk c overlap it); wait;
//   A fragments of vs^T; issue the 4 update wgmmas; meanwhile: v_new -> v staging, barrier B2
//   (v staging complete, every read of the h staging done), v_new -> global;
//   wait; E(S^T) -> A fragments (next chunk's k S) and -> h staging (kFusedO, after a weakly
//   decaying chunk: its residual -> h_lo staging too). A weakly decaying chunk adds a lo pass
//   after the v_new wait and one before the update's hi pass, each waited for at once
//   (chain_precise.cuh).
// kFusedO runs a third warpgroup of few registers (setmaxnreg): it waits for each stage's full
// barrier, forms q's inverse norms from the ring's q into rq[s] (fp16 operands for bf16 inputs:
// after converting the stage's k to fp16 in place, then its arrival at converted[s], which the
// chain warpgroup waits for, then q) and arrives at normed[s], which the o warpgroup waits for
// before it reads them (then its F arrival frees the stage for the refill, so the norm
// warpgroup's reads of a stage end before the TMA engine rewrites it).
// Rows past len: zero in A_s's image (kkt_solve writes them), zeroed in k, q and v; their decays are
// 0, and they are never stored.
#pragma once

#include <cstdint>

#include "cuda/chunk/chain_o.cuh"        // kChainOStride
#include "cuda/chunk/chain_precise.cuh"  // stage_lo_x4

namespace gdn {
namespace cuda {
namespace chain {

constexpr int kC = kChunkSize;  // 64 tokens per chunk
constexpr int kD = 128;         // head dim (K = V; K = V = 64 runs padded to it: fwd_h_wgmma.cuh's kDK)
constexpr int kBV = 64;         // V slice per block (the wgmma M)

// What the chain kernel does besides carrying the state:
//   kStoreBulk: stores h_c and v_new per chunk for fwd_o, which runs after this kernel: each
//             chunk's h and v_new staging leaves by one bulk copy (TMA) issued by thread 0;
//   kSummary: the split's summary pass (below); stores nothing per chunk;
//   kFusedO:  a second warpgroup computes o on chip (chain_o.cuh); nothing per chunk goes to
//             global memory but o, and fwd_o does not run;
//   kFusedSerial: the same o by the chain warpgroup itself after each chunk's update, on one ring
//             stage (~108 KB: two blocks per SM, each hiding the other's loads and latencies),
//             for sequences of a few chunks in several waves (one block of kFusedO per SM runs
//             their load, chain, o and store back to back with nothing beside them).
enum class ChainMode { kStoreBulk, kSummary, kFusedO, kFusedSerial };

// A chain block's threads (three warpgroups with o fused beside the chain, two chain warpgroups at
// K = V = 256, else one): the kernel's launch bounds and its launch. (Its width: chain_width,
// fwd_fast.cuh.)
constexpr int chain_threads(ChainMode m, int dk) { return m == ChainMode::kFusedO ? 384 : dk > kD ? 256 : 128; }
static_assert(chain_width(64) == kD && chain_width(kD) == kD, "K = V = 64 runs padded to the chain's kD");

// kFusedO's additions: the q ring beside w and k, the h_lo staging (the operands' hi + lo parts:
// kHiLoOperands, chain_precise.cuh), and the o staging (kChainOStride-element rows).
// E: the 16-bit operand type (the input dtype, bf16 or fp16; fwd_fast.cuh).
template <int ST, bool kFused, typename E>
struct WgFusedSmem {
  static_assert(kHiLoOperands<E>, "operands without lo parts would need no h_lo staging");
  E q[ST][kC * kD];               // 16 KB per stage, SW128 like w and k
  E h_lo[kD * kBV];               // 16 KB: the h staging's residual (chain_precise.cuh), as h
  E o_stage[kC * kChainOStride];  // 9 KB
};
template <int ST, typename E>
struct WgFusedSmem<ST, false, E> {};

// K = V = 256 (kW; the store mode and the summary pass): the two chain warpgroups' partial -U^T = -S_x^T k_x^T,
// one [8][128 threads][4] float4 image per warpgroup x (its K half), which each adds to the
// other's (fwd_h_wgmma.cuh).
template <int kW>
struct WgExchangeSmem {
  float xch[2][kC * kBV];  // 32 KB
};
template <>
struct WgExchangeSmem<kD> {};

// kW: k's and the h staging's width (kD; 256 for K = V = 256, whose two halves are two warpgroups').
template <int ST, bool kFused, typename E, int kW = kD>
struct WgSmem : WgFusedSmem<ST, kFused, E>, WgExchangeSmem<kW> {  // (empty bases take no space: a stays at 0)
  E a[ST][kC * kD];                                               // 16 KB per stage, 1024-aligned (the block base is)
  E k[ST][kC * kW];                                               // 16 KB per stage (kW = 256: 32 KB, four atoms)
  E vin[ST][kC * kBV];                                            // 8 KB per stage
  E h[kW * kBV];                                                  // 16 KB (kW = 256: 32 KB, K half 0's rows first)
  E v[1][kC * kBV];                                               // 8 KB
  float2 eg[ST][kC];                                              // (exp(G_i), exp(G_last - G_i)): b.eg
  double G[ST][kC];  // kFusedO: fp64 G, for the o warpgroup's gates where a chunk's span is wide
  float rk[ST][kC];
  float rq[ST][kC];  // kFusedO with l2norm: inverse norms of q's rows (chain_norm_warpgroup)
  // kFusedO: bar[0] B1 (the chain warpgroup's 128 threads: chunk c landed, the h staging holds h_c;
  // the o warpgroup waits on it), bar[1] B2 (both warpgroups, 256), bar[2] F (the o warpgroup's 128:
  // done with chunk c's stage and the v staging; the chain waits on it before refilling them),
  // bar[3] V (the chain warpgroup's 128: its v_new products of chunk c issued; the o warpgroup
  // issues its q k^T after them)
  uint64_t bar[4];
  // full[s]: stage s's A_s, k, q and v landed (the TMA copies' bytes, announced by thread 0's
  // arrival; phase parity (c / ST) & 1 for chunk c). Every mode.
  uint64_t full[ST];
  // kFusedO with l2norm: normed[s], stage s's rq formed by the norm warpgroup's 128 threads
  // (chain_norm_warpgroup; phase parity (c / ST) & 1 for chunk c), which the o warpgroup waits for.
  uint64_t normed[ST];
  // kFusedO with fp16 operands for bf16 inputs: converted[s], stage s's k converted by the norm
  // warpgroup's 128 threads (phase parity (c / ST) & 1 for chunk c), which the chain waits for.
  uint64_t converted[ST];
};
static_assert(sizeof(__nv_bfloat16) * kC * kD % 1024 == 0, "stages stay 1024-aligned");
static_assert(sizeof(WgFusedSmem<3, true, __nv_bfloat16>) % 1024 == 0, "a, k and h_lo stay 1024-aligned");
static_assert(sizeof(WgFusedSmem<3, true, __half>) % 1024 == 0, "a and k stay 1024-aligned");
static_assert(sizeof(WgFusedSmem<1, true, __nv_bfloat16>) % 1024 == 0, "a and k stay 1024-aligned (kFusedSerial)");
static_assert(sizeof(WgExchangeSmem<256>) % 1024 == 0, "a and k stay 1024-aligned (K = V = 256)");

// The state slice's registers (S^T as an m64n128 wgmma accumulator) and the elements they hold:
// f(i, kk, vv) for st[i] = S[kk][vv], i = 4 j + 2 hh + e, kk = 8 j + 2 t + e, vv = vv0 + 8 hh
// (vv0 = v0 + 16 warp + g: this thread's first row of S^T; t = lane % 4).
// kJ: 8-row groups of kk (16; K = V = 64: 8, the m64n64 accumulator of 32 floats).
template <int kJ = 16, typename F>
__device__ __forceinline__ void for_each_state_elem(int vv0, int t, F&& f) {
#pragma unroll
  for (int j = 0; j < kJ; ++j)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int e = 0; e < 2; ++e) f(4 * j + 2 * hh + e, 8 * j + 2 * t + e, vv0 + 8 * hh);
}

// A 16-bit state element widened exactly (bf16: an fp32's high half).
__device__ __forceinline__ float widen_state16(unsigned short h, bool bf16) {
  return bf16 ? __uint_as_float(static_cast<unsigned>(h) << 16) : __half2float(__ushort_as_half(h));
}

// The state slice's registers from a state row: element (kk, vv) at row[kk d + vv] (K-major) or
// row[vv d + kk] (V-major), row = src + off elements of type dt (fp32, fp16 or bf16); src null:
// zero. kk0: this thread's first row of S (its warpgroup's first + 2 t), vv0 as for_each_state_elem's;
// kJ its 8-row groups. One loop per case with no branch inside: a branch around each load made every
// 16-bit load wait for the one before it (256x64 with a bf16 pool: the chain 2.3x its fp32 time,
// session 43). A V-major row holds each thread's pairs (kk, kk + 1) side by side: one load a pair
// where the pair is aligned (every row of an unpadded pool; kk0 is even).
template <int kJ>
__device__ __forceinline__ void load_chain_state(float (&st)[4 * kJ], const void* src, int64_t off, DType dt,
                                                 bool kmajor, int d, int kk0, int vv0) {
  const int64_t sk = kmajor ? d : 1, sv = kmajor ? 1 : d;  // element (kk, vv): kk sk + vv sv
  const int64_t e0 = kk0 * sk + vv0 * sv;                  // this thread's first
  const bool bf16 = dt == DType::kBFloat16;
  const unsigned pair_bytes = dt == DType::kFloat32 ? 8u : 4u;
  const bool pairs =
      src != nullptr && !kmajor && (reinterpret_cast<uintptr_t>(src) + (off + e0) * (pair_bytes / 2)) % pair_bytes == 0;
  if (src == nullptr) {
#pragma unroll
    for (int i = 0; i < 4 * kJ; ++i) st[i] = 0.f;
  } else if (pairs && dt == DType::kFloat32) {
    const float2* row = reinterpret_cast<const float2*>(static_cast<const float*>(src) + off + e0);
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float2 x = row[(8 * j + 8 * hh * sv) / 2];
        st[4 * j + 2 * hh] = x.x, st[4 * j + 2 * hh + 1] = x.y;
      }
  } else if (pairs) {
    const unsigned* row = reinterpret_cast<const unsigned*>(static_cast<const unsigned short*>(src) + off + e0);
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const unsigned w = row[(8 * j + 8 * hh * sv) / 2];
        st[4 * j + 2 * hh] = widen_state16(static_cast<unsigned short>(w & 0xffffu), bf16);
        st[4 * j + 2 * hh + 1] = widen_state16(static_cast<unsigned short>(w >> 16), bf16);
      }
  } else if (dt == DType::kFloat32) {
    const float* row = static_cast<const float*>(src) + off + e0;
    for_each_state_elem<kJ>(0, 0, [&](int i, int kk, int vv) { st[i] = row[kk * sk + vv * sv]; });
  } else {
    const unsigned short* row = static_cast<const unsigned short*>(src) + off + e0;
    for_each_state_elem<kJ>(0, 0, [&](int i, int kk, int vv) { st[i] = widen_state16(row[kk * sk + vv * sv], bf16); });
  }
}

// E(S^T) as the A fragments of w h (ha[4 ks + q]: kk in [16 ks, 16 ks + 16)) and, kStageH, into
// the h staging at hs ([kk][vv], transposed by stmatrix; lrow, lch: this lane's row and 16-byte
// chunk of a 16 x 16 tile); kStageLo and with_lo: also the residual S^T - E(S^T) into the h_lo
// staging at hls. Rows kk < 16 kKS (K = V = 64: kKS = 4, the m64n64 state's 32 floats; the
// stagings' rows past them are never read: every product over K runs kKS k-steps).
template <typename E, bool kStageH, bool kStageLo, int kKS = 8>
__device__ __forceinline__ void stage_state_fragments(uint32_t (&ha)[32], const float (&st)[8 * kKS], uint32_t hs,
                                                      uint32_t hls, int lrow, int lch, bool with_lo) {
#pragma unroll
  for (int ks = 0; ks < kKS; ++ks) {
#pragma unroll
    for (int q = 0; q < 4; ++q) ha[4 * ks + q] = pack2<E>(st[8 * ks + 2 * q], st[8 * ks + 2 * q + 1]);
    if constexpr (kStageH)
      stsm_x4_t(hs + sw128(16 * ks + lrow, lch), ha[4 * ks], ha[4 * ks + 1], ha[4 * ks + 2], ha[4 * ks + 3]);
  }
  if constexpr (kStageLo) {
    if (with_lo) {
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) stage_lo_x4<E>(hls + sw128(16 * ks + lrow, lch), &st[8 * ks], &ha[4 * ks]);
    }
  }
}

// Ring stage s <- global chunk gc at tokens t0 .. t0 + len - 1 (len = min(te - t0, kC)) of (value
// head hv, key head hk). One lane of each warp issues copies of the TMA engine on the stage's full
// barrier: A_s (hi | lo) as one bulk copy of its image (fwd_a_image: kkt_solve wrote it in the
// stage's layout, zero rows past len), k's two 64-column atoms (and q's, kFused: for the o
// warpgroup) and v's slice [v0, v0 + kBV) (none for the identity's chain: `transition`) as boxes of
// their tensor maps (row_maps.cuh; rows past len hold the next sequence's tokens until
// chain_zero_rows). The small per-token rows go by cp.async from `rows` (the caller commits one
// group per chunk): eg (and G for the o warpgroup), rk.
// Where a chunk's small per-token rows come from (b.eg, b.Gt, b.rk unless the caller says).
struct ChainRowSources {
  const float2* eg;  // [HV, T]
  const double* Gt;  // [HV, T]
  const float* rk;   // [H, T]
};
// K = V = 64 (kDK): k's and q's first atom only (nothing reads the second).
template <bool kFused, int kDK, typename E, typename EI, typename Sm>
__device__ __forceinline__ void chain_prefetch(Sm& sm, const FastBufs<E, EI>& b, const ChainRowSources& rows,
                                               int64_t gc, int64_t t0, int64_t te, int s, int HV, int hv, int hk,
                                               int v0, bool transition, int tid) {
  const int len = static_cast<int>(te - t0 < kC ? te - t0 : kC);
  // One lane per warp issues, so that no warp carries all the copies' issue (each is ~15
  // instructions of uniform-register setup and elect loop): warp 0 announces the stage's bytes and
  // copies A_s, warp 1 k, warp 2 q, warp 3 v. A copy that completes before warp 0's announcement
  // leaves the tx-count below zero for a while, which the barrier allows; the phase cannot
  // complete before that arrival.
  if (tid % 32 == 0) {
    constexpr uint32_t kTile = kC * kD * sizeof(E), kAtom = kTile / 2, kV = kC * kBV * sizeof(E);  // 16, 8, 8 KB
    constexpr int kAtoms = kDK / 64;                                                               // of k and q
    const int warp = tid / 32, tt = static_cast<int>(t0);
    if (warp == 0) {
      mbarrier_arrive_expect_tx(&sm.full[s], kTile + (kFused ? 2 : 1) * kAtoms * kAtom + (transition ? 0 : kV));
      bulk_load(smem_u32(sm.a[s]), b.w + fwd_a_image(gc, hv, HV), kTile, &sm.full[s]);
    } else if (warp == 1) {
#pragma unroll
      for (int atom = 0; atom < kAtoms; ++atom)
        tma_load_3d(smem_u32(sm.k[s]) + atom * kAtom, &b.maps.k, 64 * atom, hk, tt, &sm.full[s]);
    } else if (warp == 2) {
      if constexpr (kFused)
#pragma unroll
        for (int atom = 0; atom < kAtoms; ++atom)
          tma_load_3d(smem_u32(sm.q[s]) + atom * kAtom, &b.maps.q, 64 * atom, hk, tt, &sm.full[s]);
    } else if (!transition) {
      tma_load_3d(smem_u32(sm.vin[s]), &b.maps.v, v0, hv, tt, &sm.full[s]);
    }
  }
  if (tid < kC) {
    const bool ok = tid < len;
    const int64_t at = int64_t(hv) * b.T + t0 + (ok ? tid : 0);
    cp_async8(&sm.eg[s][tid], rows.eg + at, ok ? 8 : 0);
    if constexpr (kFused) cp_async8(&sm.G[s][tid], rows.Gt + at, ok ? 8 : 0);
  } else if (b.l2norm) {
    const int i = tid - kC;
    const bool ok = i < len;
    cp_async4(&sm.rk[s][i], rows.rk + int64_t(hk) * b.T + t0 + (ok ? i : 0), ok ? 4 : 0);
  }
}

// A partial chunk's rows len .. kC - 1 of stage s's k (and q, kFused) and v (not for `transition`)
// -> zeros: TMA brought the next sequence's tokens there (or the caller's padding past the last
// sequence, which may hold anything: 0 * NaN is NaN). The chain warpgroup's 128 threads (kKAtoms =
// 4, K = V = 256: both chain warpgroups' 256, v by the first 128), before fence.proxy.async and B1.
// (A_s's image has zero rows there already.)
template <bool kFused, int kKAtoms = 2, typename Sm>
__device__ __forceinline__ void chain_zero_rows(Sm& sm, int s, int len, bool transition, int tid) {
  static_assert(kKAtoms == 2 || (kKAtoms == 4 && !kFused), "k's atoms: 2 (any mode), 4 (the store mode)");
  const uint4 z = make_uint4(0u, 0u, 0u, 0u);
  // k, q: [kKAtoms atoms][64 rows][128 B]: piece tid % (8 kKAtoms) (atom piece / 8) of rows
  // tid / (8 kKAtoms) + 8 j: the swizzle's row % 8 is the thread's own, so the rows are 1 KB apart
  // (as chain_prefetch's were).
  {
    constexpr int kPieces = 8 * kKAtoms;
    const int r0 = tid / kPieces;
    const uint32_t off = ((tid % kPieces) / 8) * (kC * 128) + sw128(r0, tid % 8);
#pragma unroll
    for (int j = 0; j < kC / 8; ++j)
      if (r0 + 8 * j >= len) {
        *reinterpret_cast<uint4*>(reinterpret_cast<char*>(sm.k[s]) + off + 1024 * j) = z;
        if constexpr (kFused) *reinterpret_cast<uint4*>(reinterpret_cast<char*>(sm.q[s]) + off + 1024 * j) = z;
      }
  }
  if (!transition && (kKAtoms == 2 || tid < 128)) {  // v: [64 rows][128 B], piece tid % 8 of rows tid / 8 + 16 j
    const int r0 = tid / 8;
    char* const v0 = reinterpret_cast<char*>(sm.vin[s]) + sw128(r0, tid % 8);
#pragma unroll
    for (int j = 0; j < kC / 16; ++j)
      if (r0 + 16 * j >= len) *reinterpret_cast<uint4*>(v0 + 2048 * j) = z;
  }
}

// The chain warpgroup's own conversion (the modes without the norm warpgroup: the summary pass,
// the serial chain): stage s's k (and q, kFused), rows below len, by its 128 threads (piece tid % 8
// of rows tid / 8 + 16 j), before its fence.proxy.async and barrier B1.
template <bool kFused, typename Sm>
__device__ __forceinline__ void chain_convert_stage(Sm& sm, int s, int len, int tid) {
  convert_stage_rows<2>(smem_u32(sm.k[s]), tid / 8, 16, len, tid % 8);
  convert_stage_rows<2>(smem_u32(sm.k[s]), tid / 8 + 32, 16, len, tid % 8);
  if constexpr (kFused) {
    convert_stage_rows<2>(smem_u32(sm.q[s]), tid / 8, 16, len, tid % 8);
    convert_stage_rows<2>(smem_u32(sm.q[s]), tid / 8 + 32, 16, len, tid % 8);
  }
}

}  // namespace chain
}  // namespace cuda
}  // namespace gdn
