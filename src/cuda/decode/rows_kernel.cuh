// The whole-row decode kernel (decode_rows_kernel), for K = V = 128 in both state layouts: one
// block per (sequence, value head) holds the whole state in registers. See the comment above the
// kernel; tiles_kernel.cuh has the persistent-warp kernel of the other head sizes.
#pragma once

#include <cstdint>

#include "cuda/core/common.cuh"
#include "cuda/decode/decode_args.cuh"
#include "cuda/ptx/copy.cuh"

namespace gdn {
namespace cuda {
namespace decode {

constexpr int kRowsWarps = 4;  // warps per block: 32 state rows each

// One level of warp_transpose_sum: lanes l and l ^ O add their halves of x[0, 2 H), lane l keeping
// the upper half when lane bit O is set (H shuffles).
template <int H, int O, int R>
__device__ __forceinline__ void transpose_sum_level(float (&x)[R], int lane) {
  const bool upper = (lane & O) != 0;
#pragma unroll
  for (int i = 0; i < H; ++i) {
    const float send = upper ? x[i] : x[i + H];
    const float keep = upper ? x[i + H] : x[i];
    x[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}
// i with its low b bits reversed: the index that warp_transpose_sum leaves in lane i.
__host__ __device__ constexpr int reverse_bits(int i, int b) {
  int r = 0;
  for (int k = 0; k < b; ++k) r |= ((i >> k) & 1) << (b - 1 - k);
  return r;
}
__host__ __device__ constexpr int log2_of(int r) { return r > 1 ? 1 + log2_of(r / 2) : 0; }
// Sums x[i] over the warp's lanes for every i < R (a power of two in [2, 32]) and returns, in lane
// l, the sum of x[reverse_bits(l % R, log2 R)] (x is clobbered): a transpose-sum that halves the
// vector at each level (R - 1 shuffles), then a plain butterfly over the lane bits above R. The
// lanes are combined lane bit 0 first, then 1, .., 4 whatever R, so that a part of R < 32 rows
// sums in the same order, bitwise, as the whole 32 rows (fp32 pools).
template <int R>
__device__ __forceinline__ float warp_transpose_sum(float (&x)[R]) {
  static_assert(R >= 2 && R <= 32 && (R & (R - 1)) == 0, "R: a power of two in [2, 32]");
  const int lane = threadIdx.x % 32;
  if constexpr (R >= 2) transpose_sum_level<R / 2, 1>(x, lane);
  if constexpr (R >= 4) transpose_sum_level<R / 4, 2>(x, lane);
  if constexpr (R >= 8) transpose_sum_level<R / 8, 4>(x, lane);
  if constexpr (R >= 16) transpose_sum_level<R / 16, 8>(x, lane);
  if constexpr (R >= 32) transpose_sum_level<1, 16>(x, lane);
  float s = x[0];
  warp_sum_ascending<R>(s);
  return s;
}

// C floats of shared memory in one access (C = 1, 2, 4; p aligned to C floats).
template <int C>
__device__ __forceinline__ void st_shared(float* p, const float (&x)[C]) {
  if constexpr (C == 4)
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  else if constexpr (C == 2)
    *reinterpret_cast<float2*>(p) = make_float2(x[0], x[1]);
  else
    *p = x[0];
}
template <int C>
__device__ __forceinline__ void add_shared(float (&x)[C], const float* p) {
  if constexpr (C == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    x[0] += f.x, x[1] += f.y, x[2] += f.z, x[3] += f.w;
  } else if constexpr (C == 2) {
    const float2 f = *reinterpret_cast<const float2*>(p);
    x[0] += f.x, x[1] += f.y;
  } else {
    x[0] += *p;
  }
}

// By whole rows (K = V = 128): one block per (sequence, value head), warp w owns the
// state rows [RW w, RW w + RW) (K rows when K-major, V rows when V-major), lane the columns
// 4 lane..4 lane + 3, in registers (pc: one piece per row). Every load and store instruction of a
// warp is one contiguous row (512 bytes of fp32, 256 of bf16 / fp16). Not persistent: the whole
// state's loads are issued at the block's start, so the bytes in flight per SM are the pieces of
// its resident blocks.
// fp32 pools (NP = 1, BPS = 2): the pieces are the fp32 state; two blocks per SM (4 warps: 243
// registers K-major, 255 V-major) keep 128 KB of loads in flight, as flash-linear-attention's
// one-warp programs do.
// bf16 / fp16 pools: the pieces stay packed (two registers per row instead of four) and the
// thread's state is made fp32 in NP parts, one after the other, each for all the sequence's
// tokens, then rounded once back into its pieces; the pieces leave after the last part. K-major
// parts are 4 / NP of the lane's columns (the columns are independent: S^T k sums over rows),
// V-major parts RW / NP of the warp's rows (the rows are independent). Fewer fp32 registers let
// BPS blocks share an SM: BPS x 32 KB in flight. STAGED: the pieces wait in shared memory
// (cp.async, 32 KB per block) instead of registers (64 per thread), so that even more blocks fit
// (decode_heuristics takes NP, BPS, STAGED from kRows16Shapes: {2, 4, staged}, 128 registers).
// K-major: S^T k and S^T q are summed in-lane over the warp's rows, then across the W warps through
// shared memory. V-major (RW = 32): the row sums are in-lane partials over 4 columns, completed
// across the lanes by warp_transpose_sum (lane l gets the part's row reverse_bits(l % PR)); no
// cross-warp step. Every part sums in the order of the whole state (both layouts), so a 16-bit
// pool's results are bitwise those of an fp32 pool holding the same values, rounded once.
// A sequence of one token (decode) stages its q, k in shared memory once for all parts. Pools whose
// rows start on 4-element pieces only (decode_pools_in_pieces); decode_heuristics sends the others
// to the general kernel.
template <int W, bool KMAJ, typename TS, int NP, int BPS, bool STAGED>
__global__ void __launch_bounds__(W * 32, BPS) decode_rows_kernel(DecodeArgs a) {
  constexpr int K = 128, V = 128, RW = K / W;
  static_assert(KMAJ || RW == 32, "V-major rows: 32 rows per warp (one per lane after the sums)");
  static_assert(!STAGED || sizeof(TS) == 2, "staged: 16-bit pools (32 KB of static shared memory)");
  // A part: PR rows (the warp's row row0 + pr0 + i) x PC columns (4 lane + pc0 + c).
  constexpr int PR = KMAJ ? RW : RW / NP, PC = KMAJ ? 4 / NP : 4;
  static_assert(PR * PC * NP == RW * 4 && PR >= 1 && PC >= 1, "NP: 1, 2 or 4");
  constexpr int NVL = KMAJ ? PC : 1;  // values of v per lane and part: columns 4 lane + pc0 + e, or a row
  constexpr int LPR = log2_of(PR);
  constexpr int64_t KV = int64_t(K) * V;
  __shared__ __align__(16) float qk_raw[2][K];  // the token's q, k as loaded (fp32)
  // K-major, per warp: S^T k, S^T q over its rows; part p's columns at [32 PC p, 32 PC (p + 1))
  __shared__ __align__(16) float part[2][W][V];
  // STAGED: the pieces, stage[r][tid] (row row0 + r of thread tid; stage[r][32 w..32 w + 31]: the
  // whole row row0 + r of warp w), after the copies each only by its thread
  __shared__ __align__(16) Piece<TS> stage[STAGED ? RW : 1][W * 32];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t n = blockIdx.x / a.HV;
  const int hv = static_cast<int>(blockIdx.x % a.HV);
  const int hk = hv / a.group;
  const int64_t rin = read_checked(a, read_raw(a, n));
  const int64_t rfin = row_checked(a.fin, row_raw(a.fin, n));
  const int64_t row0 = int64_t(RW) * warp;  // first state row of this warp
  // V-major: the row of the part (of PR rows) that this lane holds after warp_transpose_sum
  const int vrow = reverse_bits(lane % PR, LPR);

  // pc[r]: row row0 + r, columns 4 lane..4 lane + 3 (row stride 128 = K = V in both layouts); in
  // stage[r][tid] instead when STAGED
  Piece<TS> pc[STAGED ? 1 : RW];
  // This thread's part of row `row` of pool p (its 4 elements of each of the warp's state rows).
  auto part_of = [&](const StateRef& p, int64_t row) -> TS* {
    return static_cast<TS*>(p.data) + state_offset(p, row, hv, a.HV, KV) + row0 * V + 4 * lane;
  };
  {
    const TS* src = rin >= 0 ? part_of(read_pool(a), rin) : nullptr;
    if constexpr (STAGED) {
      // Copies that hold no registers while in flight. 16-byte ones bypass L1 (cp.async.cg): the
      // L1 left beside BPS x 37 KB of shared memory could not track BPS x 32 KB of misses. stage's
      // rows of a warp are images of the pool's rows, so the warp copies them whole, 2 rows per
      // instruction, when they start on 16 bytes (the thread's own 8-byte pieces otherwise).
      if (src) {
        const TS* rows = src - 4 * lane;  // the warp's first row, column 0
        if ((reinterpret_cast<uintptr_t>(rows) & 15) == 0) {
#pragma unroll
          for (int j = 0; j < RW / 2; ++j) {
            const int r = 2 * j + lane / 16, c = lane % 16;  // 16 bytes: row r, elements 8 c..8 c + 7
            cp_async16(reinterpret_cast<char*>(&stage[r][32 * warp]) + 16 * c, rows + r * V + 8 * c);
          }
        } else {
#pragma unroll
          for (int r = 0; r < RW; ++r) cp_async8(&stage[r][tid], src + r * V, 8);
        }
        cp_async_commit();  // waited for at the first token, after its inputs' loads (below)
      } else {
#pragma unroll
        for (int r = 0; r < RW; ++r) stage[r][tid] = Piece<TS>{};
      }
    } else {
#pragma unroll
      for (int r = 0; r < RW; ++r) pc[r] = src ? ld_piece(src + r * V) : Piece<TS>{};
    }
  }
  TS* out = rfin >= 0 ? part_of(a.fin, rfin) : nullptr;
  const Span span = span_checked(a, span_raw(a, n));
  if (span.b < span.e) {
    const bool one_token = span.e - span.b == 1;  // parts after the first reuse the token's q, k in shared memory
    // One copy of the token loop for all parts (not unrolled: copies would keep each other's
    // address arithmetic live); pc is indexed with constants only, in the unrolled q loops.
#pragma unroll 1
    for (int p = 0; p < NP; ++p) {
      const int pr0 = KMAJ ? 0 : p * PR, pc0 = KMAJ ? p * PC : 0;
      float s[PR][PC];  // the part in fp32: row row0 + pr0 + i, column 4 lane + pc0 + c
      if constexpr (!STAGED) {
#pragma unroll
        for (int q = 0; q < NP; ++q)
          if (q == p) {
#pragma unroll
            for (int i = 0; i < PR; ++i)
#pragma unroll
              for (int c = 0; c < PC; ++c)
                s[i][c] = piece_get<TS>(pc[(KMAJ ? 0 : q * PR) + i], (KMAJ ? q * PC : 0) + c);
          }
      }
      for (int64_t t = span.b; t < span.e; ++t) {
        const int64_t snap = token_row(a, n, t - span.b);  // where the state after this token goes (or -1)
        // EAGLE trees: this thread's part of the parent token's state, which this thread stored itself.
        const int64_t parent = parent_row(a, n, t - span.b);
        if (parent >= 0) {
          const TS* src = part_of(a.ts.pool, parent) + pc0;
#pragma unroll
          for (int i = 0; i < PR; ++i) ld_elems<TS, PC>(src + (pr0 + i) * V, s[i]);
        }
        // The token's inputs (raw bits, converted at the use): v by each lane for its columns or
        // row; q, k (to shared memory) and the gates by all threads, once per token.
        uint32_t v_bits[NVL];
#pragma unroll
        for (int e = 0; e < NVL; ++e)
          v_bits[e] = ld_raw(a.v, a.dt, t * a.v_st + hv * a.v_sh + (KMAJ ? 4 * lane + pc0 + e : row0 + pr0 + vrow));
        const GateBits gx = load_gate_bits(a.gates, t, hv);
        if (p == 0 || !one_token) {
          uint32_t qk_bits[(2 * K + W * 32 - 1) / (W * 32)];
#pragma unroll
          for (int i = 0; i < (2 * K + W * 32 - 1) / (W * 32); ++i) {
            const int d = tid + W * 32 * i;
            qk_bits[i] = d < K ? ld_raw(a.q, a.qk_dt, t * a.q_st + hk * a.q_sh + d)
                               : (d < 2 * K ? ld_raw(a.k, a.qk_dt, t * a.k_st + hk * a.k_sh + (d - K)) : 0u);
          }
          __syncthreads();  // the previous token's readers of qk_raw and part are done
#pragma unroll
          for (int i = 0; i < (2 * K + W * 32 - 1) / (W * 32); ++i) {
            const int d = tid + W * 32 * i;
            if (d < 2 * K) qk_raw[d / K][d % K] = raw_f(qk_bits[i], a.qk_dt);
          }
          __syncthreads();
        }
        if constexpr (STAGED) {
          // The part's state from stage at its first token, not at the part's start: part 0 waits
          // for the state's copies only here, after the span and the token's v, gates, q, k were
          // loaded, so that those latencies overlap the copies instead of following them (the
          // fp32 kernel's register loads overlap them alike). A parent's state (above) replaces it.
          if (t == span.b) {
            if (p == 0) {
              cp_async_wait<0>();
              __syncwarp();  // the lanes' copies visible to the warp
            }
            if (parent < 0) {
#pragma unroll
              for (int i = 0; i < PR; ++i)
                ld_elems<TS, PC>(reinterpret_cast<const TS*>(&stage[pr0 + i][tid]) + pc0, s[i]);
            }
          }
        }
        // Norms and q . k, by every warp (the same sums; no block barrier needed for them), again
        // for each part (fewer registers live across the parts than keeping them).
        float sq = 0.f, sk = 0.f, sqk = 0.f;
#pragma unroll
        for (int m = 0; m < K / 32; ++m) {
          const float qv = qk_raw[0][lane + 32 * m], kv = qk_raw[1][lane + 32 * m];
          sq += qv * qv;
          sk += kv * kv;
          sqk += qv * kv;
        }
        warp_sum(sq, sk, sqk);
        const float iq = l2norm_scale(a.l2norm, sq), ik = l2norm_scale(a.l2norm, sk);
        const float kq = sqk * iq * ik;  // (normalized k) . (normalized q)
        float g, beta;
        gates_of(a.gates, gx, g, beta);
        const float decay = expf(g);

        if constexpr (!KMAJ) {
          // Pass 1: (S k)[v], (S q)[v] of the part's rows v = row0 + pr0 + i: in-lane partials
          // over columns 4 lane..+3, then summed across the lanes (lane l: row row0 + pr0 + vrow).
          // (k and q are read from shared memory at each use: fewer registers live beside x.)
          auto dot_rows = [&](const float* u, float(&x)[PR]) {
            const float4 u4 = *reinterpret_cast<const float4*>(u + 4 * lane);
#pragma unroll
            for (int i = 0; i < PR; ++i) x[i] = s[i][0] * u4.x + s[i][1] * u4.y + s[i][2] * u4.z + s[i][3] * u4.w;
          };
          float x[PR];
          dot_rows(qk_raw[1], x);
          const float kv = warp_transpose_sum(x);
          dot_rows(qk_raw[0], x);
          const float qv = warp_transpose_sum(x);
          const float vp = beta * (raw_f(v_bits[0], a.dt) - decay * ik * kv);  // v' of row row0 + pr0 + vrow
          if (PR == 32 || lane < PR)
            store_dt(a.o, a.o_dt, t * a.o_st + hv * a.o_sh + row0 + pr0 + vrow, a.scale * (decay * iq * qv + vp * kq));
          // Pass 2: decay S + v' k^T in registers.
          const float4 k4 = *reinterpret_cast<const float4*>(&qk_raw[1][4 * lane]);
          const float kh[4] = {k4.x * ik, k4.y * ik, k4.z * ik, k4.w * ik};
#pragma unroll
          for (int i = 0; i < PR; ++i) {
            const float vr = __shfl_sync(0xffffffffu, vp, reverse_bits(i, LPR));  // from row i's lane
#pragma unroll
            for (int c = 0; c < 4; ++c) s[i][c] = fmaf(kh[c], vr, s[i][c] * decay);
          }
        } else {
          // Pass 1: S^T k, S^T q of the part's columns over this warp's rows (the norms applied
          // once, after the sums), then over the W warps.
          float ak[PC], aq[PC];
#pragma unroll
          for (int c = 0; c < PC; ++c) ak[c] = aq[c] = 0.f;
#pragma unroll
          for (int i = 0; i < PR; ++i) {
            const float kr = qk_raw[1][row0 + i], qr = qk_raw[0][row0 + i];
#pragma unroll
            for (int c = 0; c < PC; ++c) {
              ak[c] = fmaf(s[i][c], kr, ak[c]);
              aq[c] = fmaf(s[i][c], qr, aq[c]);
            }
          }
          const int slot = 32 * PC * p + PC * lane;  // this lane's columns of part p
          st_shared(&part[0][warp][slot], ak);
          st_shared(&part[1][warp][slot], aq);
          __syncthreads();
          float kv[PC], qv[PC];
#pragma unroll
          for (int c = 0; c < PC; ++c) kv[c] = qv[c] = 0.f;
#pragma unroll
          for (int w = 0; w < W; ++w) {
            add_shared(kv, &part[0][w][slot]);
            add_shared(qv, &part[1][w][slot]);
          }
          float vp[PC];  // v' of columns 4 lane + pc0 + c
#pragma unroll
          for (int c = 0; c < PC; ++c) vp[c] = beta * (raw_f(v_bits[c], a.dt) - decay * ik * kv[c]);
          if (warp == 0) {
            const int64_t ob = t * a.o_st + hv * a.o_sh + 4 * lane + pc0;
#pragma unroll
            for (int c = 0; c < PC; ++c) store_dt(a.o, a.o_dt, ob + c, a.scale * (decay * iq * qv[c] + vp[c] * kq));
          }
          // Pass 2: decay S + k v'^T in registers.
#pragma unroll
          for (int i = 0; i < PR; ++i) {
            const float kr = qk_raw[1][row0 + i] * ik;
#pragma unroll
            for (int c = 0; c < PC; ++c) s[i][c] = fmaf(kr, vp[c], s[i][c] * decay);
          }
        }
        // A token's state (token_states) leaves after its token, part by part.
        if (snap >= 0) {
          TS* dst = part_of(a.ts.pool, snap) + pc0;
#pragma unroll
          for (int i = 0; i < PR; ++i) st_elems<TS, PC>(dst + (pr0 + i) * V, s[i]);
        }
      }
      // The part's final state, rounded once into its pieces.
      if constexpr (STAGED) {
#pragma unroll
        for (int i = 0; i < PR; ++i) st_elems<TS, PC>(reinterpret_cast<TS*>(&stage[pr0 + i][tid]) + pc0, s[i]);
      } else {
#pragma unroll
        for (int q = 0; q < NP; ++q)
          if (q == p) {
#pragma unroll
            for (int i = 0; i < PR; ++i) piece_put<TS, PC>(pc[(KMAJ ? 0 : q * PR) + i], KMAJ ? q * PC : 0, s[i]);
          }
      }
    }
  }
  // The final state (or, without tokens, the initial state as loaded) leaves after the last part.
  if constexpr (STAGED) {  // a sequence without tokens has not waited for its copies yet
    cp_async_wait<0>();
    __syncwarp();
  }
  if (out) {
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      if constexpr (STAGED)
        st_piece(out + r * V, stage[r][tid]);
      else
        st_piece(out + r * V, pc[r]);
    }
  }
}

}  // namespace decode
}  // namespace cuda
}  // namespace gdn
