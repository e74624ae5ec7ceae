// The prep on the tensor cores: per (chunk, value head), in parallel over all chunks,
// the gates and G = chunk-local cumsum (fp64), k's inverse l2 norms r (from the diagonal of the
// Gram matrix k k^T, which the tensor cores form anyway), L and
//   A_s = (I + L)^-1 diag(beta),   L_ij = beta_i r_i r_j (k_i . k_j) exp(G_i - G_j) for j < i,
// stored as hi + lo parts in E, the chain's operand type (b.w: one image per chunk and value head,
// fwd_a_image; k is read in EI, the input dtype: fp16 images from bf16 k with cfg.fp16_operands) for the wgmma chain,
// which applies it to v - diag(exp(G) r) k S (fwd_h_wgmma.cuh); and G, exp(G) and r. k's tile is
// kDK = 128 columns wide for K = 64 and 128, 256 for K = 256 (E = EI only); K = 64 reads k's rows
// into the first 64 columns of the 128-wide tile, the rest zero (the Gram unchanged). Only the Gram
// sees K: everything after it works on 64 x 64 matrices.
//
// One block of 4 warps per (chunk, value head). Warp m owns rows [16 m, 16 m + 16) of every 64 x 64
// matrix, as 16 x 16 blocks: fp32 in mma accumulator layout, or bf16 hi + lo operand fragments.
//   1. the Gram matrix k k^T by one warpgroup wgmma (m64n64k16 x kDK / 16, k in shared memory in the
//      128-byte swizzle as both operands; warp m's accumulator rows are block row m, in the
//      mma.sync accumulator layout the rest uses); L's blocks scaled in registers;
//   2. the diagonal blocks D_m = (I + L_mm)^-1 by blocked forward substitution in fp32 (8 x 8
//      blocks over the warp's 32 lanes; a product form such as (I - N)(I + N^2)... cancels large
//      powers of N and loses accuracy when keys repeat), all four at once;
//   3. the off-diagonal blocks, X_mj = -D_m sum_{j <= k < m} L_mk X_kj, every product on the tensor
//      cores, one diagonal of blocks at a time (X_10, X_21, X_32 side by side, then X_20 and X_31,
//      then X_30: 3 solved blocks on the longest path, not 5); blocks cross warps through shared
//      memory (3 barriers).
// Each product runs in three bf16 passes (hi hi + lo hi + hi lo, fp32 accumulation): operands carry
// ~17 significand bits (hi + lo), so a product is good to ~2^-17 relative, the precision A_s is
// stored with. The scalar solve that preceded it (fwd_prep.cu, deleted) ran through shared memory
// and was L1-bound.
#include <string>
#include <type_traits>

#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/chunk/gate_factors.cuh"
#include "cuda/ptx/wgmma.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;  // 64
constexpr int kThreads = 128;
using bf16 = __nv_bfloat16;
// Blocks per SM: 5 (94 registers). With the Gram's wgmma, whose 32 accumulators take a contiguous
// register range, bf16 spills at 80 registers (6 blocks); the mma.sync Gram ran 6 (H200: prep
// 0.229 -> 0.222 ms on 1x32k). The same at kDK = 256: its longer Gram adds no live registers, and
// its k tile (32 KB) fits in the union that the solve's buffers size (35 KB): the block's shared
// memory is independent of kDK (static_assert below), 37 KB with the slack, 5 x 38 KB (with the 1 KB
// the runtime reserves per block) in the SM's 228.
constexpr int kSolveBlocksPerSm = 5;

// EK: k's dtype (the Gram's operands); EA: A_s's image type (the chain's operands); kDK: k's tile
// width (128: K = 64 and 128; 256).
template <typename EK, typename EA, int kDK>
struct SolveSmem {
  static_assert(kDK == 128 || kDK == 256, "k's tile is 128 or 256 columns wide");
  static constexpr int SX = C + 8;      // 16-bit row strides (+16 bytes: ldmatrix without conflicts)
  static constexpr int SD = 16 + 4;     // fp32 diagonal blocks (rows of float4), in the warp's out rows
  static constexpr int SO = 2 * C + 8;  // A_s's output rows [hi 64 | lo 64] in EA
  union alignas(16) {
    // [C][kDK] k (step 1 only): kDK / 64 atoms [C][64] (8 KB each), 128-byte swizzle (1024-aligned)
    EK k[C * kDK];
    struct {
      bf16 hi[C * SX], lo[C * SX];  // [C][C] the solved blocks X_mj (hi + lo), for other warps
      // [C][2 C] A_s's rows, staged for 16-byte stores (per warp its 16); before that, per warp,
      // L_mm and then D_m in fp32 ([16][SD] floats at the start of its rows)
      EA out[C * SO];
    } x;
  } u;
  double G[C];  // fp64: G_i - G_j keeps its small decays even after a huge one
  float beta[C];
  float rk[C];  // inverse l2 norms of k's rows (1 without l2norm)
};
static_assert(sizeof(SolveSmem<bf16, bf16, 256>) == sizeof(SolveSmem<bf16, bf16, 128>) &&
                  sizeof(SolveSmem<bf16, bf16, 128>) + 2 * 1024 <= 228 * 1024 / kSolveBlocksPerSm,
              "kDK = 256's k tile fits in the solve's buffers; kSolveBlocksPerSm blocks fit an SM");

// A 16 x 16 block as bf16 hi + lo fragments: the A operand layout of mma.m16n8k16 (row r, pair of
// columns: h[0] (g, 2t), h[1] (g + 8, 2t), h[2] (g, 2t + 8), h[3] (g + 8, 2t + 8)), or the B layout
// of two n-tiles (h[0..1] columns 0..7, h[2..3] columns 8..15), as frag_b_kn returns.
struct Frag {
  uint32_t h[4], l[4];
};
// An accumulator block c[nt][e] = X[g + 8 (e / 2)][8 nt + 2 t + e % 2] as A fragments.
__device__ __forceinline__ Frag split(const float (&c)[2][4]) {
  Frag f;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float x0 = c[r / 2][2 * (r % 2)], x1 = c[r / 2][2 * (r % 2) + 1];
    f.h[r] = pack_bf16(x0, x1);
    f.l[r] = residual2<bf16>(x0, x1, f.h[r]);
  }
  return f;
}
// The A fragments of X as the B fragments of X (X the right operand): each 8 x 8 quarter transposed
// in registers (quarter (R, Q) of X is register 2 Q + R in both layouts).
__device__ __forceinline__ Frag as_b(const Frag& a) {
  Frag f;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    f.h[r] = movmatrix_t(a.h[r]);
    f.l[r] = movmatrix_t(a.l[r]);
  }
  return f;
}
// acc += A B for 16 x 16 blocks, in three passes (the lo lo term is below the operands' precision).
__device__ __forceinline__ void mma3(float (&acc)[2][4], const Frag& a, const Frag& b) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    mma16<bf16>(acc[nt], a.h, b.h[2 * nt], b.h[2 * nt + 1]);
    mma16<bf16>(acc[nt], a.l, b.h[2 * nt], b.h[2 * nt + 1]);
    mma16<bf16>(acc[nt], a.h, b.l[2 * nt], b.l[2 * nt + 1]);
  }
}
__device__ __forceinline__ void zero(float (&acc)[2][4]) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
}

// (I + N)^-1 for a strictly lower triangular 16 x 16 block N in fp32, in place (rows `stride`
// floats apart, 16-byte aligned), by the 32 lanes of a warp, in 8 x 8 blocks
//   (I + N)^-1 = [[A, 0], [X, B]],  A = (I + N11)^-1,  B = (I + N22)^-1,  X = -B (N21 A):
// lanes 0-7 solve A column by column by forward substitution in fp32 (sums in order of j), lanes
// 8-15 B (lanes 16-31 repeat them); then each lane forms two entries of Y = N21 A and of X = -B Y
// (rows r and r + 4 of column c). A's and Y's columns cross lanes by shuffles, B's rows through the
// block. Blocked substitution, not a product form: as accurate as one column per lane
// (unit_lower_inverse_column<16>; host model, random and repeated-key blocks: the same error), with
// ~60 multiply-adds per lane instead of 120.
__device__ __forceinline__ void unit_lower_inverse16_warp(float* N, int stride, int lane) {
  const int c = lane % 8, q = (lane / 8) % 2, r0 = lane / 8 % 4;
  float* blk = N + 8 * q * stride + 8 * q;  // N11 (q = 0) or N22 (q = 1)
  float x[8];                               // column c of A or B
  unit_lower_inverse_column<8>(blk, stride, c, x);
  // Y[r][c] = (N21 A)[r][c] for r = r0, r0 + 4: column c of A from lane c, rows of N21 (rows 8 ..
  // 15, columns 0 .. 7: untouched until X replaces them).
  float a[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) a[k] = __shfl_sync(0xffffffffu, x[k], c);
  float y[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float* row = N + (8 + r0 + 4 * h) * stride;
    const float4 n0 = *reinterpret_cast<const float4*>(row), n1 = *reinterpret_cast<const float4*>(row + 4);
    const float n[8] = {n0.x, n0.y, n0.z, n0.w, n1.x, n1.y, n1.z, n1.w};
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) t = fmaf(n[k], a[k], t);
    y[h] = t;
  }
  __syncwarp();  // every lane has read N11 and N22
  if (lane < 16)
#pragma unroll
    for (int i = 0; i < 8; ++i) blk[i * stride + c] = x[i];  // A and B in place (0 above the diagonal)
  __syncwarp();                                              // B's rows complete
  // X[r][c] = -(B Y)[r][c]: Y[k][c] is entry k / 4 of lane (k % 4) 8 + c; B's row r (0 past r).
  float yk[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) yk[k] = __shfl_sync(0xffffffffu, y[k / 4], (k % 4) * 8 + c);
  float xo[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float* row = N + (8 + r0 + 4 * h) * stride + 8;
    const float4 b0 = *reinterpret_cast<const float4*>(row), b1 = *reinterpret_cast<const float4*>(row + 4);
    const float bk[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) t = fmaf(bk[k], yk[k], t);
    xo[h] = -t;
  }
  __syncwarp();  // every lane has read N21
#pragma unroll
  for (int h = 0; h < 2; ++h) N[(8 + r0 + 4 * h) * stride + c] = xo[h];
  __syncwarp();
}

// One item (chunk gc, value head hv), item = gc HV + hv, by 128 threads tid = 0 .. 127 (the whole
// block) whose barrier is `sync`. Returns whether the chunk exists; its A_s rows, G and r are then
// stored once every thread of the block has passed its next barrier.
template <typename E, typename EI, int kDK, typename Item, class Sync>
__device__ __forceinline__ bool solve_item(const FastBufs<E, EI>& b, const GateArgs& ga, SolveSmem<EI, E, kDK>& sm,
                                           Item item, int tid, Sync sync) {
  using S = SolveSmem<EI, E, kDK>;
  constexpr int SX = S::SX, SD = S::SD;
  const int HV = b.HV;
  const int64_t gc = item / HV;
  const int hv = item % HV;
  const int hk = qk_head_of(hv, HV, b.H);
  int64_t t0;
  int len;
  if (!chunk_rows(b.pl, gc, t0, len)) return false;
  const int m = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

  // The gates' loads first (warps 0 and 1): they are in flight while k's copies are issued.
  const GateBits raw = chunk_gates_load(ga, t0, len, hv, tid);

  // k rows, zero-filled past the sequence's end, as wgmma's K-major 128-byte swizzle: 16-byte piece
  // c of row i in atom c / 8 at sw128(i, c % 8). In each 128-column half h of the tile (one at
  // kDK = 128, two at 256) thread tid copies piece c = 16 h + tid % 16 of rows i = tid / 16 + 8 j: one
  // source pointer stepped 8 rows at a time, one swizzled offset stepped 1 KB (i % 8, and so the
  // swizzle, is the thread's own); rows past len read the chunk's first row (in bounds) with a
  // source size of 0, and so do pieces past K = b.dk (zero columns).
  {
    constexpr int kPieces = 128 / 8, kRowStep = kThreads / kPieces;  // 16 pieces a half row, 8 rows a pass
    static_assert(kRowStep == 8 && C % kRowStep == 0, "the swizzle repeats every 8 rows");
    const int64_t step = kRowStep * b.k_st;
#pragma unroll
    for (int h = 0; h < kDK / 128; ++h) {
      const int c = kPieces * h + tid % kPieces, i0 = tid / kPieces;
      const bool col_ok = 8 * c < b.dk;
      const EI* const row0 = b.k + t0 * b.k_st + hk * b.k_sh + (col_ok ? 8 * c : 0);  // [T, H, K]
      const EI* src = row0 + i0 * b.k_st;
      char* const dst = reinterpret_cast<char*>(sm.u.k) + (c / 8) * (C * 128) + sw128(i0, c % 8);
#pragma unroll
      for (int j = 0; j < C / kRowStep; ++j, src += step) {
        const bool ok = col_ok && i0 + kRowStep * j < len;
        cp_async16(dst + j * kRowStep * 128, ok ? src : row0, ok ? 16 : 0);
      }
    }
  }
  cp_async_commit();

  // Gates and the inclusive cumsum over the chunk.
  chunk_gates_scan(ga, raw, len, sm.G, sm.beta, tid, sync);
  cp_async_wait<0>();
  fence_proxy_async();  // this thread's landed k pieces -> visible to wgmma (async proxy)
  sync();
  if (tid < len) {
    b.Gt[int64_t(hv) * b.T + t0 + tid] = sm.G[tid];
    b.eg[int64_t(hv) * b.T + t0 + tid] =
        make_float2(__expf(float(sm.G[tid])), __expf(float(sm.G[len - 1] - sm.G[tid])));
  }
  // The split's bound on this chunk's transition (fwd_fast.cuh): warp 0 checks the 64 betas
  // (rows past len: 0). NaN: out of [0, 2], no bound.
  if (b.transition_log_bound && tid < 32) {
    auto contracts = [](float be) { return be >= 0.f && be <= 2.f; };
    const bool ok = __all_sync(0xffffffffu, contracts(sm.beta[tid]) && contracts(sm.beta[tid + 32]));
    if (tid == 0) b.transition_log_bound[gc * HV + hv] = ok && b.l2norm ? static_cast<float>(sm.G[len - 1]) : INFINITY;
  }

  // 1. The Gram matrix k k^T [64 x 64] (the blocks above the diagonal too: computed, unused).
  //    acc[j][nt][e] = d[8 j + 4 nt + e]: wgmma's m64n64 accumulator, warp m holding rows
  //    16 m + g (+ 8), columns 8 (2 j + nt) + 2 t (+ 1), mma.sync's block layout.
  float acc[4][2][4];
  {
    float(&d)[32] = reinterpret_cast<float(&)[32]>(acc);
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    const WgTile kt = wg_tile(smem_u32(sm.u.k), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kDK / 16; ++ks) {
      const uint32_t off = (ks / 4) * (C * 128) + (ks % 4) * 32;  // k-step ks: atom ks / 4, 32 bytes a step
      wgmma_m64n64_ss<EI, 0>(d, kt.at(off), kt.at(off), ks > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(d[i]);
  }
  // The diagonal of block (m, m): rows g and g + 8 sit in lane t = g / 2 (elements e = g % 2 and
  // 2 + g % 2): r_i = (|k_i|^2 + eps)^-1/2. The first value head of each q/k head writes them.
  {
    float d0 = 0.f, d1 = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (j == m) {
        d0 = (g & 1) ? acc[j][0][1] : acc[j][0][0];
        d1 = (g & 1) ? acc[j][1][3] : acc[j][1][2];
      }
    if (t == g / 2) {
      const int i0 = 16 * m + g, i1 = i0 + 8;
      const float r0 = b.l2norm ? rsqrtf(d0 + float(spec::kL2NormEps)) : 1.f;
      const float r1 = b.l2norm ? rsqrtf(d1 + float(spec::kL2NormEps)) : 1.f;
      sm.rk[i0] = r0;
      sm.rk[i1] = r1;
      if (first_of_qk_group(hv, HV, b.H)) {
        if (i0 < len) b.rk[int64_t(hk) * b.T + t0 + i0] = r0;
        if (i1 < len) b.rk[int64_t(hk) * b.T + t0 + i1] = r1;
      }
    }
  }
  sync();  // S1: r complete; k dead (its space becomes x)

  // L's blocks in registers: rows i = 16 m + g + 8 h, columns j = 16 jb + 8 nt + 2 t + e.
  const float* rk = sm.rk;
  const double Gi[2] = {sm.G[16 * m + g], sm.G[16 * m + g + 8]};
  const float bri[2] = {sm.beta[16 * m + g] * rk[16 * m + g], sm.beta[16 * m + g + 8] * rk[16 * m + g + 8]};
  // exp(G_i - G_j) as row x column factors about the chunk's middle, else about the warp's first
  // row, else per element (gate_factors.cuh; G past len repeats G[len - 1]).
  const bool rows_on[2] = {true, true};
  auto col_scale = [&](int j) { return rk[j]; };
  float rf[2], c2[2];  // beta_i r_i exp(G_i - G_r); r_j exp(G_r - G_j) of columns j = 2 lane + e
  bool factored = gate_factors(0.5 * (sm.G[0] + sm.G[C - 1]), kGateSpanMiddle, true, Gi, rows_on, bri, sm.G, lane, C,
                               col_scale, rf, c2);
  if (!factored)
    factored =
        gate_factors(sm.G[16 * m], kGateSpanRow, false, Gi, rows_on, bri, sm.G, lane, 16 * m + 16, col_scale, rf, c2);
  if (factored) {
#pragma unroll
    for (int jb = 0; jb < 4; ++jb) {
      if (jb > m) break;  // (warp-uniform: the shuffles see every lane)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float cf[2] = {__shfl_sync(0xffffffffu, c2[0], 8 * jb + 4 * nt + t),
                             __shfl_sync(0xffffffffu, c2[1], 8 * jb + 4 * nt + t)};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, i = 16 * m + g + 8 * h, j = 16 * jb + 8 * nt + 2 * t + (e % 2);
          const float v = acc[jb][nt][e] * (rf[h] * cf[e % 2]);  // (the factors first: no overflow)
          acc[jb][nt][e] = j < i ? v : 0.f;
        }
      }
    }
  } else {
#pragma unroll
    for (int jb = 0; jb < 4; ++jb) {
      if (jb > m) break;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, i = 16 * m + g + 8 * h, j = 16 * jb + 8 * nt + 2 * t + (e % 2);
          // Mask before exponentiating: G_i - G_j > 0 (overflow) for j > i.
          acc[jb][nt][e] = j < i ? bri[h] * rk[j] * acc[jb][nt][e] * __expf(float(Gi[h] - sm.G[j])) : 0.f;
        }
    }
  }
  Frag Lf[3];  // L_mj, j < m, as A fragments
#pragma unroll
  for (int jb = 0; jb < 3; ++jb)
    if (jb < m) Lf[jb] = split(acc[jb]);

  // A_s's rows of this warp are staged block by block (X_mj diag(beta) as hi + lo in E; blocks
  // j > m are zero) in its 16 rows of x.out, which leave at the end in 16-byte pieces.
  const int st_row = 16 * m + lane % 8 + ((lane / 8) % 2) * 8, st_col = (lane / 16) * 8;  // stmatrix lanes
  auto out_block = [&](const float(&x)[2][4], int jb) {
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // A-fragment order: (row g + 8 (r % 2), columns 8 (r / 2) + 2 t, + 1)
      const int j = 16 * jb + 8 * (r / 2) + 2 * t;
      const float a0 = x[r / 2][2 * (r % 2)] * sm.beta[j], a1 = x[r / 2][2 * (r % 2) + 1] * sm.beta[j + 1];
      hi[r] = pack2<E>(a0, a1);
      lo[r] = residual2<E>(a0, a1, hi[r]);
    }
    E* row = &sm.u.x.out[st_row * S::SO + st_col + 16 * jb];
    stsm_x4(smem_u32(row), hi[0], hi[1], hi[2], hi[3]);
    stsm_x4(smem_u32(row + C), lo[0], lo[1], lo[2], lo[3]);
  };
  auto store_x = [&](const Frag& f, int ib, int jb) {  // X_ib,jb for other warps (stmatrix)
    const int r = 16 * ib + lane % 8 + ((lane / 8) % 2) * 8, c = 16 * jb + (lane / 16) * 8;
    stsm_x4(smem_u32(&sm.u.x.hi[r * SX + c]), f.h[0], f.h[1], f.h[2], f.h[3]);
    stsm_x4(smem_u32(&sm.u.x.lo[r * SX + c]), f.l[0], f.l[1], f.l[2], f.l[3]);
  };
  auto load_b = [&](int kb, int jb) {  // X_kb,jb as the B operand
    Frag f;
    frag_b_kn(sm.u.x.hi, SX, 16 * jb, 16 * kb, f.h);
    frag_b_kn(sm.u.x.lo, SX, 16 * jb, 16 * kb, f.l);
    return f;
  };

  // 2. D_m = (I + L_mm)^-1 in fp32 by blocked forward substitution (unit_lower_inverse16_warp; the
  //    diagonal inside the block stays 1, the part above it 0).
  float* Ld = reinterpret_cast<float*>(&sm.u.x.out[16 * m * S::SO]);  // (16 x 272 bytes >= 16 x SD floats)
#pragma unroll
  for (int jb = 0; jb < 4; ++jb)
    if (jb == m)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(&Ld[(g + 8 * h) * SD + 8 * nt + 2 * t]) =
              make_float2(acc[jb][nt][2 * h], acc[jb][nt][2 * h + 1]);
  __syncwarp();
  unit_lower_inverse16_warp(Ld, SD, lane);
  float dm[2][4];  // D_m
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 v = *reinterpret_cast<const float2*>(&Ld[(g + 8 * h) * SD + 8 * nt + 2 * t]);
      dm[nt][2 * h] = v.x;
      dm[nt][2 * h + 1] = v.y;
    }
  __syncwarp();  // every lane has read D_m: its rows become A_s's
  const Frag Df = split(dm);
  store_x(Df, m, m);
  out_block(dm, m);
#pragma unroll
  for (int jb = 1; jb < 4; ++jb)
    if (jb > m) {
      E* row = &sm.u.x.out[st_row * S::SO + st_col + 16 * jb];
      stsm_x4(smem_u32(row), 0, 0, 0, 0);
      stsm_x4(smem_u32(row + C), 0, 0, 0, 0);
    }
  sync();  // S2: D_0 .. D_3 in x

  // 3. Block rows: T_mj = sum_{j <= k < m} L_mk X_kj, X_mj = -D_m T_mj, by distance from the
  //    diagonal so that the three warps work side by side: X_10, X_21, X_32 (the k = j terms: D_j
  //    is there), S3, X_20 and X_31, S4, X_30. Each T_mj sums its terms in order of k.
  float T[3][2][4];
#pragma unroll
  for (int jb = 0; jb < 3; ++jb) {
    zero(T[jb]);
    if (jb < m) mma3(T[jb], Lf[jb], load_b(jb, jb));
  }
  auto finish = [&](const float(&tj)[2][4], int jb) {  // X_mj: out, and into x for later rows
    float xm[2][4];
    zero(xm);
    mma3(xm, Df, as_b(split(tj)));
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) xm[nt][e] = -xm[nt][e];
    out_block(xm, jb);
    if (m < 3) store_x(split(xm), m, jb);
  };
  if (m == 1) finish(T[0], 0);
  if (m == 2) finish(T[1], 1);
  if (m == 3) finish(T[2], 2);
  sync();  // S3: X_10, X_21 in x
  if (m >= 2) mma3(T[0], Lf[1], load_b(1, 0));
  if (m == 2) finish(T[0], 0);
  if (m == 3) {
    mma3(T[1], Lf[2], load_b(2, 1));
    finish(T[1], 1);
  }
  sync();  // S4: X_20 in x
  if (m == 3) {
    mma3(T[0], Lf[2], load_b(2, 0));
    finish(T[0], 0);
  }
  // This warp's 16 rows of A_s -> its image in b.w (fwd_a_image: the chain's ring stage, one bulk
  // copy there), 16 bytes per lane and copy: lane copies piece lane % 16 of rows
  // 16 m + lane / 16 + 2 j, i.e. 16-byte chunk piece % 8 of the row in atom piece / 8 (hi, lo).
  // Rows past len are written as zeros (the chain reads all 64).
  __syncwarp();
  {
    constexpr int kPieces = 2 * C / 8;  // 16 pieces of 8 elements per row [hi 64 | lo 64]
    const int piece = lane % kPieces, i0 = 16 * m + lane / kPieces;
    const E* from = &sm.u.x.out[i0 * S::SO + 8 * piece];
    char* const img = reinterpret_cast<char*>(b.w + fwd_a_image(gc, hv, HV)) + (piece / 8) * (C * 128);
#pragma unroll
    for (int j = 0; j < 16 * kPieces / 32; ++j, from += (32 / kPieces) * S::SO) {
      const int i = i0 + (32 / kPieces) * j;
      uint4 x = *reinterpret_cast<const uint4*>(from);
      if (i >= len) x = make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(img + sw128(i, piece % 8)) = x;
    }
  }
  return true;
}

template <typename E, typename EI, int kDK>
__global__ void __launch_bounds__(kThreads, kSolveBlocksPerSm) chunk_kkt_solve_kernel(FastBufs<E, EI> b, GateArgs ga) {
  extern __shared__ __align__(16) char smem_raw[];
  // (The k tile's swizzle atoms: 1 KB slack in the launch.)
  solve_item(b, ga, *reinterpret_cast<SolveSmem<EI, E, kDK>*>(smem_raw + align_1024_offset(smem_raw)), blockIdx.x,
             static_cast<int>(threadIdx.x), [] { __syncthreads(); });
}

template <int kDK, typename E, typename EI>
void launch_kkt_solve_dk(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s) {
  const size_t smem = sizeof(SolveSmem<EI, E, kDK>) + 1024;  // 36 KB + the alignment slack
  chunk_kkt_solve_kernel<E, EI, kDK><<<grid_1d(b.pl.max_chunks * b.HV, 1), kThreads, smem, s>>>(b, make_gates(f));
  GDN_CUDA_LAUNCH_CHECK("chunk_kkt_solve_kernel");
}

}  // namespace

template <typename E, typename EI>
void launch_kkt_solve(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s) {
  if (!tensor_core_head(b.dk))
    throw Error("launch_kkt_solve: K = " + std::to_string(b.dk) + "; the prep runs K = 64, 128 and 256");
  if (b.pl.max_chunks == 0) return;
  // k's tile width, chosen here only: K = 256 its own (E = EI only: no fp16-operands kernel is built
  // for it), 64 and 128 the 128-wide tile.
  if (b.dk == 256) {
    if constexpr (std::is_same_v<E, EI>)
      launch_kkt_solve_dk<256>(b, f, s);
    else
      throw Error("launch_kkt_solve: K = 256 runs on the inputs' dtype only (no fp16_operands)");
    return;
  }
  launch_kkt_solve_dk<128>(b, f, s);
}

template void launch_kkt_solve(const FastBufs<__nv_bfloat16>&, const ForwardArgs&, cudaStream_t);
template void launch_kkt_solve(const FastBufs<__half>&, const ForwardArgs&, cudaStream_t);
// bf16 inputs on fp16 operands (heuristics.h: K = V = 64 always; 128 with GDN_FP16_OPERANDS_D128)
template void launch_kkt_solve(const FastBufs<__half, __nv_bfloat16>&, const ForwardArgs&, cudaStream_t);

}  // namespace cuda
}  // namespace gdn
