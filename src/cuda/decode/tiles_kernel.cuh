// The persistent-warp decode kernel (decode_tiles_kernel), for every head size but K = V = 128
// (rows_kernel.cuh). The decode step is memory-bound on the fp32 state (read once and written
// once: K * V * 4 bytes per (sequence, value head)). The design keeps 96 to 192 KiB of state loads
// in flight per SM at all times (Little's law asks about 32-64 KiB at 4.3 TB/s), so that the
// loads, the arithmetic and the stores of different items overlap instead of running in lockstep
// waves.
//
// Items: (sequence, value head, slice of 32 values of v); the item's state tile is 32 x K fp32
// (K * 128 bytes) and its output is 32 values of o, one per lane. Items are numbered
// (n * HV + hv) * (V / 32) + slice, so that neighbouring items share q/k and the warps of one
// block work on the slices of one head at the same time.
//
// Persistent warps: a grid of one block per SM (tiles_warps(K) warps, about 200 KB of shared
// memory), each warp an independent pipeline over the items j = warp id + i * (total warps), with
// no block-wide barrier. Each warp owns a ring of tiles_stages(K) tiles in shared memory: while it
// computes item i, the tiles of items i + 1 .. i + stages - 1 are in flight as cp.async (16 bytes
// a lane; each warp instruction fills a contiguous 512-byte run of shared memory from four whole
// 128-byte lines), which holds no registers. The small inputs (pool rows, cu_seqlens, q, k, v and
// the gates) are loaded one or two items (or one token) ahead into registers as raw bits and
// converted at the use, so their latency is hidden as well. The new state leaves from registers
// with streaming stores (st.global.cs) while the next tiles are already in flight.
//
// Per token, two passes over the tile in shared memory: pass 1 reads S for S^T k and S^T q (the
// decay factors out); pass 2 writes decay S + k v'^T: to global memory after the last token (if
// there is a final state), back to the ring when more tokens follow; with token_states also to the
// token's row after every token.
//   K-major [K][V]: the tile is columns v0..v0+31 of all K rows (128 bytes of each). Lane
//                   (c = lane % 8, kp = lane / 8) holds columns 4c..4c+3 of rows k = 4i + kp, the
//                   chunks that it copied itself; sums over k are in-lane, then 2 xor shuffles.
//   V-major [V][K]: the tile is rows v0..v0+31, contiguous. Lane (kg = lane % 8, vr = lane / 8)
//                   holds rows v = 8 vr + i (i < 8), columns 32 jj + 4 kg..+3; sums over k are
//                   in-lane, then 3 xor shuffles.
// Sequences with no tokens copy their state through; pool rows outside [0, num_slots) read as
// zeros (zero-filled tile) and are not written; cu_seqlens is clamped to [0, T] per sequence.
// The initial tile comes from initial_state, or from a token_states row through num_accepted.
// The state pools' rows must start on 4-element pieces (float4 / uint2, cp.async of 16 / 8 bytes):
// decode_heuristics sends other pools to the general kernel.
//
// bf16 / fp16 pools (TS): the ring keeps fp32 tiles (a tile stays in the slot between the tokens
// of a multi-token item and is rounded only when it leaves). A 16-bit tile is copied, 8 bytes a
// lane per chunk, into the upper half of its slot, and expanded to fp32 in place once it has
// arrived (in the item loop: fp32 chunk q overwrites only 16-bit chunks below q, already read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/core/common.cuh"
#include "cuda/decode/decode_args.cuh"

namespace gdn {
namespace cuda {
namespace decode {

constexpr int kSlice = 32;  // values of v per item

// Warps per block and ring tiles per warp, about 200 KB of shared memory per block: one block per
// SM. K = 64, 128: warps * stages tiles of K * 128 bytes = 192 KiB; the two tiles after the
// current one are in flight while a warp computes (128 KiB of loads in flight per SM). K = 256
// (twice the arithmetic per byte of a warp): 3 warps of 2 tiles (96 KiB in flight per SM).
constexpr int tiles_warps(int head_k) { return head_k == 256 ? 3 : 512 / head_k; }  // 8, 4, 3
constexpr int tiles_stages(int head_k) { return head_k == 256 ? 2 : 3; }
// Dynamic shared memory of a block: per warp, its ring and its q / k buffers (K + 16 floats each).
constexpr size_t tiles_smem_bytes(int head_k) {
  return size_t(tiles_warps(head_k)) * (tiles_stages(head_k) * kSlice * head_k + 2 * (head_k + 16)) * sizeof(float);
}

struct Item {
  int64_t n;
  int hv, v0;
};
// Item j = (n * HV + hv) * SL + slice; a 32-bit division when the quotient fits (always in practice).
template <int SL>
__device__ __forceinline__ Item item_of(int64_t j, int HV) {
  const uint64_t h = static_cast<uint64_t>(j) / SL;
  const uint64_t n = (h >> 32) == 0 ? static_cast<uint32_t>(h) / static_cast<uint32_t>(HV) : h / HV;
  Item it;
  it.n = static_cast<int64_t>(n);
  it.hv = static_cast<int>(h - n * HV);
  it.v0 = static_cast<int>(static_cast<uint64_t>(j) - h * SL) * kSlice;
  return it;
}

template <int K, int V, bool KMAJ, typename TS>
__global__ void __launch_bounds__(tiles_warps(K) * 32, 1) decode_tiles_kernel(DecodeArgs a) {
  constexpr bool kWide = std::is_same_v<TS, float>;  // fp32 pool: cp.async straight into the fp32 tile
  constexpr int W = tiles_warps(K), P = tiles_stages(K);
  static_assert(P >= 2, "a warp computes in one ring slot: at least one more must be in flight");
  // Distance (in items of this warp) of the tile copy that the loop starts next: the prologue
  // starts that many; the slot of the current item is refilled at the top of the next one.
  constexpr int AHEAD = P - 1;
  constexpr int SL = V / kSlice;    // items per (sequence, head)
  constexpr int TILE = kSlice * K;  // floats of one item's state
  constexpr int CH = TILE / 128;    // 16-byte chunks per lane per item (K / 4)
  constexpr int QS = K + 16;        // floats of a q / k buffer (K-major: 4 padded rows of K / 4)
  constexpr int KP = K / 4 + 4;     // K-major: padded row of the q / k buffer (no bank conflicts)
  // The passes walk this lane's CH pieces of the tile as (a, b), a < NA, b < NB: K-major piece
  // 4a + b (rows 4 (4a + b) + lane / 8), V-major row 8 (lane / 8) + b, columns 32 a + 4 (lane % 8)..+3.
  constexpr int UA = 2;  // unrolling of the loops over a
  constexpr int64_t KV = int64_t(K) * V;
  extern __shared__ float4 decode_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ring = reinterpret_cast<float*>(decode_smem) + warp * (P * TILE + 2 * QS);  // [P][TILE]
  float* qbuf = ring + P * TILE;                                                     // [QS] q / |q|
  float* kbuf = qbuf + QS;                                                           // [QS] k / |k|

  const int64_t NI = a.N * a.HV * SL;
  const int64_t TW = int64_t(gridDim.x) * W;
  const int64_t j0 = int64_t(blockIdx.x) * W + warp;

  // Chunk c of this lane: at 128 c + 4 lane in the tile (shared memory), at goff(c) from the
  // tile's first element in global memory. K-major: row 4c + lane / 8, columns 4 (lane % 8)..+3.
  auto goff = [&](int c) -> int64_t {
    return KMAJ ? int64_t(4 * c + lane / 8) * V + 4 * (lane % 8) : int64_t(128 * c + 4 * lane);
  };
  // Piece (a, b) of the passes in a ring slot, from the tile's first element. K-major: this lane's
  // own chunk 4a + b; V-major: the same offset as in global memory.
  auto soff = [&](int pa, int pb) -> int {
    return KMAJ ? 128 * (4 * pa + pb) + 4 * lane : (8 * (lane / 8) + pb) * K + 32 * pa + 4 * (lane % 8);
  };
  // The tile's first element in pool s (of type TS).
  auto tile_of = [&](const StateRef& s, int64_t row, const Item& it) -> TS* {
    return static_cast<TS*>(s.data) + state_offset(s, row, it.hv, a.HV, KV) +
           (KMAJ ? int64_t(it.v0) : int64_t(it.v0) * K);
  };
  // A 16-bit tile's chunk c of this lane (4 elements, 8 bytes) while in flight: in the slot's upper
  // half, 16-bit chunk 32 c + lane.
  auto raw_of = [&](float* slot_base, int c) -> float* { return slot_base + TILE / 2 + 64 * c + 2 * lane; };
  // Starts the copy of item j's initial tile into ring slot `slot` (zeros when it has no row) and
  // closes one cp.async group (possibly empty: the group count stays one per item).
  auto issue = [&](int64_t j, int slot, int64_t raw_row) {
    if (j < NI) {
      float* dst = ring + slot * TILE + 4 * lane;
      const int64_t row = read_checked(a, raw_row);
      if (row >= 0) {
        const TS* src = tile_of(read_pool(a), row, item_of<SL>(j, a.HV));
#pragma unroll 8
        for (int c = 0; c < CH; ++c) {
          if constexpr (kWide)
            cp_async16(dst + 128 * c, src + goff(c), 16);
          else
            cp_async8(raw_of(ring + slot * TILE, c), src + goff(c), 8);
        }
      } else {
#pragma unroll 8
        for (int c = 0; c < CH; ++c) {
          if constexpr (kWide)
            *reinterpret_cast<float4*>(dst + 128 * c) = make_float4(0.f, 0.f, 0.f, 0.f);
          else
            *reinterpret_cast<uint2*>(raw_of(ring + slot * TILE, c)) = make_uint2(0u, 0u);
        }
      }
    }
    cp_async_commit();
  };
  auto tok_of = [&](int64_t j, Span raw) {
    Tok<K> x = {};
    if (j < NI) {
      const Span s = span_checked(a, raw);
      if (s.b < s.e) {
        const Item it = item_of<SL>(j, a.HV);
        x = load_tok<K>(a, s.b, it.hv, it.v0, lane);
      }
    }
    return x;
  };
  auto span_of = [&](int64_t j) { return j < NI ? span_raw(a, item_of<SL>(j, a.HV).n) : Span{0, 0}; };
  auto init_row_of = [&](int64_t j) { return j < NI ? read_raw(a, item_of<SL>(j, a.HV).n) : int64_t(-1); };

  // Prologue: the first AHEAD tiles in flight, the rest of the register pipeline filled.
  {
    int64_t rows[AHEAD];
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) rows[s] = init_row_of(j0 + s * TW);
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) issue(j0 + s * TW, s, rows[s]);
  }
  int64_t row_ahead = init_row_of(j0 + AHEAD * TW);  // raw init row of the item started next
  Span span_cur = span_of(j0), span_next = span_of(j0 + TW);
  Tok<K> tok_cur = tok_of(j0, span_cur);  // first token of the current item

  int slot = 0;
  for (int64_t j = j0; j < NI; j += TW) {
    __syncwarp();  // every lane is done with the slot that this issue refills (the last item's)
    const int64_t ja = j + (P - 1) * TW;
    issue(ja, slot == 0 ? P - 1 : slot - 1, row_ahead);
    row_ahead = init_row_of(ja + TW);
    const Span span_after = span_of(j + 2 * TW);
    const Tok<K> tok_next = tok_of(j + TW, span_next);
    const Item it = item_of<SL>(j, a.HV);
    const int64_t fin_raw = row_raw(a.fin, it.n);
    cp_async_wait<P - 1>();  // this item's group is complete (one group per item, in order; P in flight)
    __syncwarp();            // and the chunks that other lanes copied are visible to this lane

    float* tile = ring + slot * TILE;
    if constexpr (!kWide) {
      // Expand the 16-bit tile to fp32 in place, 8 chunks per lane at a time: all of a group's
      // 16-bit chunks are read (into registers) before any of its fp32 chunks is written, and a
      // write of fp32 chunk q lands on 16-bit chunks 2 q - TILE / 4 (+1) < q, read in this or an
      // earlier group; later groups' chunks are above every q written so far.
      constexpr int G = 8;
      static_assert(CH % G == 0, "whole groups of chunks");
#pragma unroll 1
      for (int c0 = 0; c0 < CH; c0 += G) {
        uint2 raw[G];
#pragma unroll
        for (int g = 0; g < G; ++g) raw[g] = *reinterpret_cast<const uint2*>(raw_of(tile, c0 + g));
        __syncwarp();
#pragma unroll
        for (int g = 0; g < G; ++g)
          *reinterpret_cast<float4*>(tile + 128 * (c0 + g) + 4 * lane) = state4_to_f<TS>(raw[g]);
        __syncwarp();
      }
    }
    // Piece (a, b) of the tile, read and written back between tokens.
    auto ld = [&](int pa, int pb) -> float4 { return *reinterpret_cast<const float4*>(tile + soff(pa, pb)); };
    auto st = [&](int pa, int pb, float4 r) { *reinterpret_cast<float4*>(tile + soff(pa, pb)) = r; };
    const Span span = span_checked(a, span_cur);
    const int64_t fin_row = row_checked(a.fin, fin_raw);
    TS* out = fin_row >= 0 ? tile_of(a.fin, fin_row, it) : nullptr;
    if (span.b == span.e) {  // no tokens: the final state is the initial state
      if (out) {
#pragma unroll 8
        for (int c = 0; c < CH; ++c)
          st_state4(out + goff(c), *reinterpret_cast<const float4*>(tile + 128 * c + 4 * lane));
      }
    } else {
      Tok<K> x = tok_cur;
      for (int64_t t = span.b; t < span.e; ++t) {
        const bool last = t + 1 == span.e;
        const int64_t snap_row = token_row(a, it.n, t - span.b);  // token_states row of this token's state
        TS* snap = snap_row >= 0 ? tile_of(a.ts.pool, snap_row, it) : nullptr;
        // EAGLE trees: the parent token's state into the tile, each lane the pieces that it stored
        // itself (global offset goff / soff of the pass pieces), so no other lane is involved.
        const int64_t parent = parent_row(a, it.n, t - span.b);
        if (parent >= 0) {
          const TS* src = tile_of(a.ts.pool, parent, it);
#pragma unroll 1
          for (int pa = 0; pa < CH / (KMAJ ? 4 : 8); ++pa)
#pragma unroll
            for (int pb = 0; pb < (KMAJ ? 4 : 8); ++pb)
              st(pa, pb, ld_state4(src + (KMAJ ? goff(4 * pa + pb) : soff(pa, pb))));
        }
        Tok<K> x_next = x;
        if (!last) x_next = load_tok<K>(a, t + 1, it.hv, it.v0, lane);  // in flight during this token

        // q, k: l2norm over the warp; normalized copies in the warp's buffers, laid out for pass 1/2.
        float qf[K / 32], kf[K / 32];
        float sq = 0.f, sk = 0.f, qk = 0.f;
#pragma unroll
        for (int m = 0; m < K / 32; ++m) {
          qf[m] = raw_f(x.q[m], a.qk_dt);
          kf[m] = raw_f(x.k[m], a.qk_dt);
          sq += qf[m] * qf[m];
          sk += kf[m] * kf[m];
          qk += qf[m] * kf[m];
        }
        warp_sum(sq, sk, qk);
        const float iq = l2norm_scale(a.l2norm, sq), ik = l2norm_scale(a.l2norm, sk);
        const float kq = qk * iq * ik;  // (normalized k) . (normalized q)
        __syncwarp();                   // the previous token's readers of qbuf / kbuf are done
#pragma unroll
        for (int m = 0; m < K / 32; ++m) {
          const int d = lane + 32 * m;
          const int p = KMAJ ? (d % 4) * KP + d / 4 : d;
          qbuf[p] = qf[m] * iq;
          kbuf[p] = kf[m] * ik;
        }
        __syncwarp();
        float g, beta;
        gates_of(a.gates, x.gate, g, beta);
        const float decay = expf(g);
        const float vl = raw_f(x.v, a.dt);  // v[v0 + lane]
        const int64_t ob = t * a.o_st + it.hv * a.o_sh + it.v0;

        if constexpr (KMAJ) {
          const int c = lane % 8, kp = lane / 8;
          const float* kr = kbuf + kp * KP;  // kr[i] = k[4 i + kp]
          const float* qr = qbuf + kp * KP;
          float kv[4] = {0.f, 0.f, 0.f, 0.f}, qv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll UA
          for (int u = 0; u < K / 16; ++u) {
            const float4 k4 = *reinterpret_cast<const float4*>(kr + 4 * u);
            const float4 q4 = *reinterpret_cast<const float4*>(qr + 4 * u);
            const float kk[4] = {k4.x, k4.y, k4.z, k4.w}, qq[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float4 s = ld(u, e);
              kv[0] += s.x * kk[e];
              kv[1] += s.y * kk[e];
              kv[2] += s.z * kk[e];
              kv[3] += s.w * kk[e];
              qv[0] += s.x * qq[e];
              qv[1] += s.y * qq[e];
              qv[2] += s.z * qq[e];
              qv[3] += s.w * qq[e];
            }
          }
          warp_sum_ascending<8>(kv, qv);
          float vp[4];  // v' of columns 4c..4c+3
#pragma unroll
          for (int e = 0; e < 4; ++e) vp[e] = beta * (__shfl_sync(0xffffffffu, vl, 4 * c + e) - decay * kv[e]);
          float qs = qv[0], vs = vp[0];  // this lane writes column 4c + kp of o
#pragma unroll
          for (int e = 1; e < 4; ++e)
            if (kp == e) {
              qs = qv[e];
              vs = vp[e];
            }
          store_dt(a.o, a.o_dt, ob + 4 * c + kp, a.scale * (decay * qs + vs * kq));
          // Pass 2: decay S + k v'^T, back to the tile unless it is the last token, and to global
          // memory: the final state after the last token, the token's state (token_states) after any.
          auto update = [&](auto to_tile, TS* dst, TS* dst2) {
#pragma unroll UA
            for (int u = 0; u < K / 16; ++u) {
              const float4 k4 = *reinterpret_cast<const float4*>(kr + 4 * u);
              const float kk[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const float4 s = ld(u, e);
                const float4 r = make_float4(fmaf(kk[e], vp[0], s.x * decay), fmaf(kk[e], vp[1], s.y * decay),
                                             fmaf(kk[e], vp[2], s.z * decay), fmaf(kk[e], vp[3], s.w * decay));
                if constexpr (decltype(to_tile)::value) st(u, e, r);
                if (dst) st_state4(dst + goff(4 * u + e), r);
                if (dst2) st_state4(dst2 + goff(4 * u + e), r);
              }
            }
          };
          if (!last)
            update(std::true_type{}, snap, nullptr);
          else if (out || snap)
            update(std::false_type{}, out, snap);
        } else {
          const int kg = lane % 8, vr = lane / 8;
          float kv[8], qv[8];  // rows 8 vr + i
#pragma unroll
          for (int i = 0; i < 8; ++i) kv[i] = qv[i] = 0.f;
#pragma unroll UA
          for (int jj = 0; jj < K / 32; ++jj) {
            const float4 k4 = *reinterpret_cast<const float4*>(kbuf + 32 * jj + 4 * kg);
            const float4 q4 = *reinterpret_cast<const float4*>(qbuf + 32 * jj + 4 * kg);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const float4 s = ld(jj, i);
              kv[i] += s.x * k4.x;
              kv[i] += s.y * k4.y;
              kv[i] += s.z * k4.z;
              kv[i] += s.w * k4.w;
              qv[i] += s.x * q4.x;
              qv[i] += s.y * q4.y;
              qv[i] += s.z * q4.z;
              qv[i] += s.w * q4.w;
            }
          }
          warp_sum_ascending<1, 8>(kv, qv);
          float vp[8];  // v' of rows 8 vr + i
#pragma unroll
          for (int i = 0; i < 8; ++i) vp[i] = beta * (__shfl_sync(0xffffffffu, vl, 8 * vr + i) - decay * kv[i]);
          float qs = qv[0], vs = vp[0];  // this lane writes row 8 vr + kg = lane of o
#pragma unroll
          for (int i = 1; i < 8; ++i)
            if (kg == i) {
              qs = qv[i];
              vs = vp[i];
            }
          store_dt(a.o, a.o_dt, ob + lane, a.scale * (decay * qs + vs * kq));
          auto update = [&](auto to_tile, TS* dst, TS* dst2) {  // pass 2, as in the K-major branch
#pragma unroll UA
            for (int jj = 0; jj < K / 32; ++jj) {
              const float4 k4 = *reinterpret_cast<const float4*>(kbuf + 32 * jj + 4 * kg);
#pragma unroll
              for (int i = 0; i < 8; ++i) {
                const float4 s = ld(jj, i);
                const float4 r = make_float4(fmaf(k4.x, vp[i], s.x * decay), fmaf(k4.y, vp[i], s.y * decay),
                                             fmaf(k4.z, vp[i], s.z * decay), fmaf(k4.w, vp[i], s.w * decay));
                if constexpr (decltype(to_tile)::value) st(jj, i, r);
                // The same offset in the tile and in global memory.
                if (dst) st_state4(dst + soff(jj, i), r);
                if (dst2) st_state4(dst2 + soff(jj, i), r);
              }
            }
          };
          if (!last)
            update(std::true_type{}, snap, nullptr);
          else if (out || snap)
            update(std::false_type{}, out, snap);
        }
        x = x_next;
      }
    }
    tok_cur = tok_next;
    span_cur = span_next;
    span_next = span_after;
    slot = slot + 1 == P ? 0 : slot + 1;
  }
}

}  // namespace decode
}  // namespace cuda
}  // namespace gdn
