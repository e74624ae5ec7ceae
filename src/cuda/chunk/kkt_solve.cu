// fwd_prep for D = 128 on the tensor cores: per (chunk, value head), in parallel over all chunks,
// the gates and G = chunk-local cumsum (fp64), k's inverse l2 norms r (from the diagonal of the
// Gram matrix k k^T, which the tensor cores form anyway), L and
//   A_s = (I + L)^-1 diag(beta),   L_ij = beta_i r_i r_j (k_i . k_j) exp(G_i - G_j) for j < i,
// stored as hi + lo rows in E (b.w [T, HV, 128]: row i = [hi (64) | lo (64)]) for the wgmma chain,
// which applies it to v - diag(exp(G) r) k S (fwd_h_wgmma.cuh). Writes G and r as fwd_prep.cu does.
//
// One block of 4 warps per (chunk, value head); 64 x 64 matrices as 16 x 16 blocks (i, j): fp32 in
// mma accumulator layout, or bf16 hi + lo operand fragments. Warp m solves D_m; the other blocks
// are spread so that every warp issues about the same number of mma (62 / 68 / 66 / 60 of 256;
// with each block on its row's warp it was 16 / 44 / 78 / 118 and warp 3 held every barrier):
//   1. the 10 Gram blocks k_i k_j^T (j <= i), 2 / 2 / 3 / 3 per warp (warp m has (m, m)), with
//      mma.sync from k in shared memory; L's blocks scaled in registers by the warp that formed
//      them, the off-diagonal ones then through shared memory (S2) to the warps that use them;
//   2. the diagonal blocks D_m = (I + L_mm)^-1 by forward substitution in fp32 (one column per
//      lane; a product form such as (I - N)(I + N^2)... cancels large powers of N and loses
//      accuracy when keys repeat), all four at once;
//   3. the off-diagonal blocks, X_ij = -D_i sum_{j <= k < i} L_ik X_kj, every product on the
//      tensor cores, as six chains (X_10, X_21, X_32, X_20, X_31, X_30) over the warps; operands
//      cross warps through shared memory (3 barriers; at most 3 products per warp between two).
// Every block is computed with the same products and fp32 sums, in the same order, as when each
// row's warp formed it alone: only where they run changed. A_s's blocks leave as they are made.
// Each product runs in three bf16 passes (hi hi + lo hi + hi lo, fp32 accumulation): operands carry
// ~17 significand bits (hi + lo), so a product is good to ~2^-17 relative, the precision A_s is
// stored with. fwd_prep.cu's scalar solve (D = 64) ran through shared memory and was L1-bound.
#include "cuda/chunk/fwd_fast.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;  // 64
constexpr int D = 128;
constexpr int kThreads = 128;
using bf16 = __nv_bfloat16;

template <typename E>
struct SolveSmem {
  static constexpr int SK = D + 8;  // 16-bit row strides (+16 bytes: ldmatrix without conflicts)
  static constexpr int SX = C + 8;
  static constexpr int SD = 16 + 4;  // fp32 rows of the per-warp tile (80 bytes: 16-byte rows, no conflicts)
  union alignas(16) {
    E k[C * SK];  // [C][D] k (step 1 only)
    struct {
      // [C][C] as 16 x 16 tiles (hi + lo) for other warps: D_m at (m, m), X_mj at (m, j) and the
      // handed-over L_mj at (j, m) (j < m: the upper triangle is otherwise unused).
      bf16 hi[C * SX], lo[C * SX];
      // Per warp w: L_ww, then D_w (fp32); then the stage of the A_s pieces it stores, 16 rows of
      // [hi 16 | lo 16] in E, for 16-byte global stores.
      float tile[4][16 * SD];
    } x;
  } u;
  double G[C];  // fp64: G_i - G_j keeps its small decays even after a huge one
  float beta[C];
  float rk[C];  // inverse l2 norms of k's rows (1 without l2norm)
};

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

// One item (chunk gc, value head hv), item = gc HV + hv, by 128 threads tid = 0 .. 127 (the whole
// block) whose barrier is `sync`. Returns whether the chunk exists (its A_s rows, G and r are then
// written); its shared memory is free for another item once every thread has passed a barrier.
template <typename E, typename Item, class Sync>
__device__ __forceinline__ bool solve_item(const FastBufs<E>& b, const GateArgs& ga, SolveSmem<E>& sm, Item item,
                                           int tid, Sync sync) {
  using S = SolveSmem<E>;
  constexpr int SK = S::SK, SX = S::SX, SD = S::SD;
  const int HV = b.HV;
  const int64_t gc = item / HV;
  const int hv = item % HV;
  const int hk = hv / (HV / b.H);
  int64_t n, t0;
  int len;
  if (!chunk_info(b.pl, gc, n, t0, len)) return false;
  const int m = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

  // k rows, zero-filled past the sequence's end.
  for (int e = tid; e < C * D / 8; e += kThreads) {
    const int i = e / (D / 8), c8 = (e % (D / 8)) * 8;
    const bool ok = i < len;
    cp_async16(&sm.u.k[i * SK + c8], b.k + (t0 + (ok ? i : 0)) * b.k_st + hk * b.k_sh + c8, ok ? 16 : 0);
  }
  cp_async_commit();

  // Gates and the inclusive cumsum over the chunk.
  chunk_gates_cumsum(ga, t0, len, hv, sm.G, sm.beta, tid, sync);
  cp_async_wait<0>();
  sync();
  if (tid < len) {
    b.Gt[int64_t(hv) * b.T + t0 + tid] = sm.G[tid];
    b.eg[int64_t(hv) * b.T + t0 + tid] =
        make_float2(__expf(float(sm.G[tid])), __expf(float(sm.G[len - 1] - sm.G[tid])));
  }

  // 1. Gram blocks, 2 / 2 / 3 / 3 per warp (16 mma each): slot 0 (m, m), slot 1 (r1, c1) = (3, 1),
  //    (1, 0), (2, 1), (3, 2), slot 2 (m, 0) for m >= 2. Each block's k-steps run in order, so
  //    every block is the same whichever warp forms it.
  const int r1 = m == 0 ? 3 : m, c1 = m == 0 ? 1 : m - 1;
  float acc[3][2][4];
#pragma unroll
  for (int s = 0; s < 3; ++s) zero(acc[s]);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[4], a1[4], bb[4];
    frag_a(sm.u.k, SK, 16 * m, 16 * ks, a);
    if (m == 0) {
      frag_a(sm.u.k, SK, 16 * r1, 16 * ks, a1);
    } else {
#pragma unroll
      for (int r = 0; r < 4; ++r) a1[r] = a[r];
    }
    frag_b_nk(sm.u.k, SK, 16 * m, 16 * ks, bb);
    mma16<E>(acc[0][0], a, bb[0], bb[1]);
    mma16<E>(acc[0][1], a, bb[2], bb[3]);
    frag_b_nk(sm.u.k, SK, 16 * c1, 16 * ks, bb);
    mma16<E>(acc[1][0], a1, bb[0], bb[1]);
    mma16<E>(acc[1][1], a1, bb[2], bb[3]);
    if (m >= 2) {
      frag_b_nk(sm.u.k, SK, 0, 16 * ks, bb);
      mma16<E>(acc[2][0], a, bb[0], bb[1]);
      mma16<E>(acc[2][1], a, bb[2], bb[3]);
    }
  }
  // The diagonal of block (m, m): rows g and g + 8 sit in lane t = g / 2 (elements e = g % 2 and
  // 2 + g % 2): r_i = (|k_i|^2 + eps)^-1/2. The first value head of each q/k head writes them.
  {
    const float d0 = (g & 1) ? acc[0][0][1] : acc[0][0][0];
    const float d1 = (g & 1) ? acc[0][1][3] : acc[0][1][2];
    if (t == g / 2) {
      const int i0 = 16 * m + g, i1 = i0 + 8;
      const float n0 = b.l2norm ? rsqrtf(d0 + float(spec::kL2NormEps)) : 1.f;
      const float n1 = b.l2norm ? rsqrtf(d1 + float(spec::kL2NormEps)) : 1.f;
      sm.rk[i0] = n0;
      sm.rk[i1] = n1;
      if (hv % (HV / b.H) == 0) {
        if (i0 < len) b.rk[int64_t(hk) * b.T + t0 + i0] = n0;
        if (i1 < len) b.rk[int64_t(hk) * b.T + t0 + i1] = n1;
      }
    }
  }
  sync();  // S1: r complete; k dead (its space becomes x)

  // L's blocks in registers: rows i = 16 rb + g + 8 h, columns j = 16 jb + 8 nt + 2 t + e.
  const float* rk = sm.rk;
  // exp(G_i - G_j) = exp(G_i - G_m) exp(G_m - G_j), G_m the middle of the chunk's gates (G past
  // len repeats G[len - 1]): 2 row and 2 column exponentials per thread and row block (the columns
  // by lane, shuffled) instead of one per element with an fp64 difference (the fused o warpgroup's
  // form, v14). Where a factor of row block rb (or any column's) leaves e^+-40, every block of that
  // row takes the per-element form, whichever warp scales it.
  const double Gm = 0.5 * (sm.G[0] + sm.G[C - 1]);
  constexpr double kSpan = 40.0;
  auto row_factors = [&](int rb, float(&rf)[2]) {  // beta_i r_i exp(G_i - G_m); whether in span
    bool in_range = true;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 16 * rb + g + 8 * h;
      const double d = sm.G[i] - Gm;
      in_range &= d >= -kSpan && d <= kSpan;
      rf[h] = (sm.beta[i] * rk[i]) * __expf(float(d));
    }
    return in_range;
  };
  bool cols_in_range = true;
  float c2[2];  // r_j exp(G_m - G_j) of columns j = 2 lane + e
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const double d = Gm - sm.G[2 * lane + e];
    cols_in_range &= d >= -kSpan && d <= kSpan;
    c2[e] = rk[2 * lane + e] * __expf(float(d));
  }
  float rf0[2], rf1[2];  // row blocks m and r1
  const bool fast0 = __all_sync(0xffffffffu, row_factors(m, rf0) && cols_in_range);
  bool fast1 = fast0;
  rf1[0] = rf0[0];
  rf1[1] = rf0[1];
  if (m == 0) fast1 = __all_sync(0xffffffffu, row_factors(r1, rf1) && cols_in_range);
  auto scale = [&](float(&x)[2][4], int rb, int jb, const float(&rf)[2], bool fast) {  // L_rb,jb
    if (fast) {  // (warp-uniform: the shuffles see every lane)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float cf[2] = {__shfl_sync(0xffffffffu, c2[0], 8 * jb + 4 * nt + t),
                             __shfl_sync(0xffffffffu, c2[1], 8 * jb + 4 * nt + t)};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, i = 16 * rb + g + 8 * h, j = 16 * jb + 8 * nt + 2 * t + (e % 2);
          const float v = x[nt][e] * (rf[h] * cf[e % 2]);  // (the factors first: no overflow)
          x[nt][e] = j < i ? v : 0.f;
        }
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, i = 16 * rb + g + 8 * h, j = 16 * jb + 8 * nt + 2 * t + (e % 2);
          // Mask before exponentiating: G_i - G_j > 0 (overflow) for j > i.
          x[nt][e] = j < i ? (sm.beta[i] * rk[i]) * rk[j] * x[nt][e] * __expf(float(sm.G[i] - sm.G[j])) : 0.f;
        }
    }
  };
  scale(acc[0], m, m, rf0, fast0);
  scale(acc[1], r1, c1, rf1, fast1);
  if (m >= 2) scale(acc[2], m, 0, rf0, fast0);

  auto store_x = [&](const Frag& f, int ib, int jb) {  // tile (ib, jb) for other warps (stmatrix)
    const int r = 16 * ib + lane % 8 + ((lane / 8) % 2) * 8, c = 16 * jb + (lane / 16) * 8;
    stsm_x4(smem_u32(&sm.u.x.hi[r * SX + c]), f.h[0], f.h[1], f.h[2], f.h[3]);
    stsm_x4(smem_u32(&sm.u.x.lo[r * SX + c]), f.l[0], f.l[1], f.l[2], f.l[3]);
  };
  auto load_a = [&](int ib, int jb) {  // tile (ib, jb) as the A operand: the fragments store_x stored
    Frag f;
    frag_a(sm.u.x.hi, SX, 16 * ib, 16 * jb, f.h);
    frag_a(sm.u.x.lo, SX, 16 * ib, 16 * jb, f.l);
    return f;
  };
  auto load_b = [&](int kb, int jb) {  // X_kb,jb as the B operand
    Frag f;
    frag_b_kn(sm.u.x.hi, SX, 16 * jb, 16 * kb, f.h);
    frag_b_kn(sm.u.x.lo, SX, 16 * jb, 16 * kb, f.l);
    return f;
  };
  // L_{r1 c1} and L_m0 as A fragments to the upper triangle, L_ij at (j, i), for whichever warp
  // uses them (through shared memory even for the warp that formed them: fewer live registers).
  store_x(split(acc[1]), c1, r1);
  if (m >= 2) store_x(split(acc[2]), 0, m);
  auto load_l = [&](int i, int j) { return load_a(j, i); };  // L_ij

  // A_s's blocks leave as they are made: X_ib,jb diag(beta) as hi + lo in E, staged through this
  // warp's tile (16 rows of 64 bytes, 80 apart) so that every lane stores 16-byte pieces (a row's
  // hi or lo piece of a block is one 32-byte sector, two lanes). Blocks j > i are zero.
  E* stage = reinterpret_cast<E*>(sm.u.x.tile[m]);
  constexpr int SE = 2 * SD;                       // the stage's row stride in E
  const int pr = lane % 16, pc = 8 * (lane / 16);  // the piece (row pr, columns pc .. pc + 7) of each lane
  auto w_row = [&](int ib, int jb) { return b.w + ((t0 + 16 * ib + pr) * HV + hv) * D + 16 * jb + pc; };
  auto out_block = [&](const float(&x)[2][4], int ib, int jb) {
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // A-fragment order: (row g + 8 (r % 2), columns 8 (r / 2) + 2 t, + 1)
      const int j = 16 * jb + 8 * (r / 2) + 2 * t;
      const float a0 = x[r / 2][2 * (r % 2)] * sm.beta[j], a1 = x[r / 2][2 * (r % 2) + 1] * sm.beta[j + 1];
      hi[r] = pack2<E>(a0, a1);
      lo[r] = residual2<E>(a0, a1, hi[r]);
    }
    E* row = stage + (lane % 8 + ((lane / 8) % 2) * 8) * SE + (lane / 16) * 8;  // stmatrix lanes
    stsm_x4(smem_u32(row), hi[0], hi[1], hi[2], hi[3]);
    stsm_x4(smem_u32(row + 16), lo[0], lo[1], lo[2], lo[3]);
    __syncwarp();
    if (16 * ib + pr < len) {
      E* dst = w_row(ib, jb);
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(stage + pr * SE + pc);
      *reinterpret_cast<uint4*>(dst + C) = *reinterpret_cast<const uint4*>(stage + pr * SE + 16 + pc);
    }
    __syncwarp();  // the stage is read before it is written again
  };

  // 2. D_m = (I + L_mm)^-1: lane c solves column c % 16 by forward substitution in fp32 (the
  //    diagonal inside the block stays 1, the part above it 0).
  float* Ld = sm.u.x.tile[m];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<float2*>(&Ld[(g + 8 * h) * SD + 8 * nt + 2 * t]) =
          make_float2(acc[0][nt][2 * h], acc[0][nt][2 * h + 1]);
  __syncwarp();
  {
    const int c = lane % 16;
    float x[16];
    unit_lower_inverse_column16(Ld, SD, c, x);
    __syncwarp();  // every lane has read L_mm
    if (lane < 16)
#pragma unroll
      for (int i = 0; i < 16; ++i) Ld[i * SD + c] = x[i];
    __syncwarp();
  }
  float dm[2][4];  // D_m
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 v = *reinterpret_cast<const float2*>(&Ld[(g + 8 * h) * SD + 8 * nt + 2 * t]);
      dm[nt][2 * h] = v.x;
      dm[nt][2 * h + 1] = v.y;
    }
  __syncwarp();  // every lane has read D_m: the tile becomes the stage
  store_x(split(dm), m, m);
  out_block(dm, m, m);
#pragma unroll
  for (int jb = 1; jb < 4; ++jb)
    if (jb > m && 16 * m + pr < len) {
      E* dst = w_row(m, jb);
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(dst + C) = make_uint4(0, 0, 0, 0);
    }
  sync();  // S2: D_0 .. D_3 and the handed-over L blocks in x

  // 3. Block rows: T_ij = sum_{j <= k < i} L_ik X_kj in this order (one accumulator each),
  //    X_ij = -D_i T_ij, spread by chains over the warps (mma3 products per phase, with step 1's
  //    blocks 16 mma each: warp 0 62 mma in all, warp 1 68, warp 2 66, warp 3 60):
  //      S2 -> S3: warp 0 X_21, T_31 = L_31 D_1; warp 1 X_10, T_30 = L_30 D_0; warp 2 T_20 = L_20 D_0;
  //                warp 3 X_32;
  //      S3 -> S4: warp 0 T_31 += L_32 X_21, X_31; warp 1 T_30 += L_31 X_10; warp 2 T_20 += L_21 X_10, X_20;
  //      after S4: warp 1 T_30 += L_32 X_20, X_30.
  //    Operands from other warps come as the same fragments through x, so every block is what the
  //    row owner alone computed before (the same products and sums in the same order).
  auto finish = [&](const float(&tj)[2][4], const Frag& di, int ib, int jb, bool keep) {  // X_ib,jb
    float xm[2][4];
    zero(xm);
    mma3(xm, di, as_b(split(tj)));
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) xm[nt][e] = -xm[nt][e];
    out_block(xm, ib, jb);
    if (keep) store_x(split(xm), ib, jb);  // for later rows
  };
  float T0[2][4], T1[2][4];
  zero(T0);
  zero(T1);
  if (m == 0) {
    const Frag d1 = load_b(1, 1);
    mma3(T0, load_l(2, 1), d1);  // L_21 D_1
    mma3(T1, load_l(3, 1), d1);  // L_31 D_1
    finish(T0, load_a(2, 2), 2, 1, true);
  } else if (m == 1) {
    const Frag d0 = load_b(0, 0);
    mma3(T0, load_l(1, 0), d0);  // L_10 D_0
    mma3(T1, load_l(3, 0), d0);  // L_30 D_0
    finish(T0, load_a(1, 1), 1, 0, true);
  } else if (m == 2) {
    mma3(T0, load_l(2, 0), load_b(0, 0));  // L_20 D_0
  } else {
    mma3(T0, load_l(3, 2), load_b(2, 2));  // L_32 D_2
    finish(T0, load_a(3, 3), 3, 2, false);
  }
  sync();  // S3: X_10, X_21 in x
  if (m == 0) {
    mma3(T1, load_l(3, 2), load_b(2, 1));  // L_32 X_21
    finish(T1, load_a(3, 3), 3, 1, false);
  } else if (m == 1) {
    mma3(T1, load_l(3, 1), load_b(1, 0));  // L_31 X_10
  } else if (m == 2) {
    mma3(T0, load_l(2, 1), load_b(1, 0));  // L_21 X_10
    finish(T0, load_a(2, 2), 2, 0, true);
  }
  sync();  // S4: X_20 in x
  if (m == 1) {
    mma3(T1, load_l(3, 2), load_b(2, 0));  // L_32 X_20
    finish(T1, load_a(3, 3), 3, 0, false);
  }
  return true;
}

template <typename E>
__global__ void __launch_bounds__(kThreads, 7) chunk_kkt_solve_kernel(FastBufs<E> b, GateArgs ga) {
  extern __shared__ __align__(16) char smem_raw[];
  if (b.ready && threadIdx.x == 0) b.ready[blockIdx.x] = 0;  // fwd_h counts from here
  solve_item(b, ga, *reinterpret_cast<SolveSmem<E>*>(smem_raw), blockIdx.x, static_cast<int>(threadIdx.x),
             [] { __syncthreads(); });
}

}  // namespace

template <typename E>
void launch_kkt_solve(const FastBufs<E>& b, const ForwardArgs& f, cudaStream_t s) {
  if (b.pl.max_chunks == 0) return;
  // 24 KB and <= 72 registers (the launch bounds): 7 blocks per SM, given the largest shared-memory
  // carveout (7 x 25 KB with the reserve; a smaller one would cap the blocks).
  const size_t smem = sizeof(SolveSmem<E>);
  check(cudaFuncSetAttribute(chunk_kkt_solve_kernel<E>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared),
        "cudaFuncSetAttribute");
  chunk_kkt_solve_kernel<E><<<grid_1d(b.pl.max_chunks * b.HV, 1), kThreads, smem, s>>>(b, make_gates(f));
  GDN_CUDA_LAUNCH_CHECK("chunk_kkt_solve_kernel");
}

template void launch_kkt_solve(const FastBufs<__nv_bfloat16>&, const ForwardArgs&, cudaStream_t);
template void launch_kkt_solve(const FastBufs<__half>&, const ForwardArgs&, cudaStream_t);

}  // namespace cuda
}  // namespace gdn
