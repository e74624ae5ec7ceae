// The decode step: the token-by-token recurrence, memory-bound on the fp32 state (read once and
// written once: 64 KiB per (sequence, value head) at K = V = 128). The design keeps 96 to 192 KiB
// of state loads in flight per SM at all times (Little's law asks about 32-64 KiB at 4.3 TB/s),
// so that the loads, the arithmetic and the stores of different items overlap instead of running
// in lockstep waves.
//
// Items: (sequence, value head, slice of 32 values of v); the item's state tile is 32 x K fp32
// (K * 128 bytes) and its output is 32 values of o, one per lane. Items are numbered
// (n * HV + hv) * (V / 32) + slice, so that neighbouring items share q/k and the warps of one
// block work on the slices of one head at the same time.
//
// Persistent warps: a grid of one block per SM (DecodeCfg: kWarps warps, about 200 KB of shared
// memory), each warp an independent pipeline over the items j = warp id + i * (total warps), with
// no block-wide barrier. Each warp owns a ring of kStages tiles in shared memory: while it computes
// item i, the tiles of items i + 1 .. i + kStages - 1 are in flight as cp.async (16 bytes a lane;
// each warp instruction fills a contiguous 512-byte run of shared memory from four whole 128-byte
// lines), which holds no registers. The small inputs (pool rows, cu_seqlens, q, k, v and the
// gates) are loaded one or two items (or one token) ahead into registers as raw bits and converted
// at the use, so their latency is hidden as well. The new state leaves from registers with
// streaming stores (st.global.cs) while the next tiles are already in flight.
//
// Per token, two passes over the tile in shared memory: pass 1 reads S for S^T k and S^T q (the
// decay factors out); pass 2 writes decay S + k v'^T: to global memory after the last token (if
// there is a final state), back to the ring when more tokens follow.
//   K-major [K][V]: the tile is columns v0..v0+31 of all K rows (128 bytes of each). Lane
//                   (c = lane % 8, kp = lane / 8) holds columns 4c..4c+3 of rows k = 4i + kp, the
//                   chunks that it copied itself; sums over k are in-lane, then 2 xor shuffles.
//   V-major [V][K]: the tile is rows v0..v0+31, contiguous. Lane (kg = lane % 8, vr = lane / 8)
//                   holds rows v = 8 vr + i (i < 8), columns 32 jj + 4 kg..+3; sums over k are
//                   in-lane, then 3 xor shuffles.
// Sequences with no tokens copy their state through; pool rows outside [0, num_slots) read as
// zeros (zero-filled tile) and are not written; cu_seqlens is clamped to [0, T] per sequence.
// The state pools must be 16-byte aligned (float4 accesses).
//
// Variants (recurrent.cuh: set_decode_variant, for the device check): the same kernel with other
// warps / ring depths / blocks per SM, or with the tile computed from registers (TileMode kRegs:
// moved there from the ring slot, which is refilled at once; kDirect: no ring, loaded from global
// memory straight into registers as flash-linear-attention does), or decode_rows_kernel below.
// Variant 0 (DefaultCfg above) runs every other size; K = V = 128 runs variant 9 unless set
// otherwise: decode_rows_kernel for both layouts. The list: above launch_variant.
#include <algorithm>
#include <type_traits>

#include "cuda/decode/recurrent.cuh"

namespace gdn {
namespace cuda {
namespace {

struct DecodeArgs {
  const void* q;  // [T, H, K]
  int64_t q_st, q_sh;
  const void* k;  // [T, H, K]
  int64_t k_st, k_sh;
  const void* v;  // [T, HV, V]
  int64_t v_st, v_sh;
  void* o;  // [T, HV, V]
  int64_t o_st, o_sh;
  DType dt;
  GateArgs gates;
  const void* cu;  // [N + 1] or null
  IndexType cu_type;
  int64_t T, N;
  int64_t len;  // T / N: tokens per sequence when cu is null
  int H, HV;
  int group;  // HV / H
  float scale;
  bool l2norm;
  StateRef init, fin;  // pools [num_slots, HV, K, V] or [num_slots, HV, V, K]
};

constexpr int kSlice = 32;  // values of v per item

// Warps per block and ring tiles per warp, about 200 KB of shared memory per block: one block per
// SM. K = 64, 128: kWarps * kStages tiles of K * 128 bytes = 192 KiB; the two tiles after the
// current one are in flight while a warp computes (128 KiB of loads in flight per SM). K = 256
// (twice the arithmetic per byte of a warp): 3 warps of 2 tiles (96 KiB in flight per SM).
template <int K>
struct DecodeCfg {
  static constexpr int kWarps = K == 256 ? 3 : 512 / K;  // 8, 4, 3
  static constexpr int kStages = K == 256 ? 2 : 3;
};

// cp.async with "memory" clobbers, so that the compiler keeps shared-memory accesses on their side.
__device__ __forceinline__ void ldgsts16(float* smem, const float* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// An element's raw bits (fp32, or fp16/bf16 zero-extended), converted at the use: a prefetch must
// not wait for its own load.
__device__ __forceinline__ uint32_t ld_raw(const void* p, DType dt, int64_t i) {
  if (dt == DType::kFloat32) return static_cast<const uint32_t*>(p)[i];
  return static_cast<const uint16_t*>(p)[i];
}
__device__ __forceinline__ float raw_f(uint32_t r, DType dt) {
  // All three conversions and a select: no branch per element.
  const float h = __half2float(__ushort_as_half(static_cast<unsigned short>(r)));
  const float b = __uint_as_float(r << 16);  // bf16: the high half of an fp32
  return dt == DType::kFloat32 ? __uint_as_float(r) : (dt == DType::kFloat16 ? h : b);
}

// One token's inputs of one item, as raw bits: lane holds q[lane + 32 m], k[lane + 32 m],
// v[v0 + lane], the gates (and A_log, dt_bias with fused gates).
template <int K>
struct Tok {
  uint32_t q[K / 32], k[K / 32];
  uint32_t v, g, b;
  float a_log, dt_bias;
};

template <int K>
__device__ __forceinline__ Tok<K> load_tok(const DecodeArgs& a, int64_t t, int hv, int v0, int lane) {
  Tok<K> x;
  const int hk = hv / a.group;
  const int64_t qo = t * a.q_st + hk * a.q_sh + lane, ko = t * a.k_st + hk * a.k_sh + lane;
#pragma unroll
  for (int m = 0; m < K / 32; ++m) {
    x.q[m] = ld_raw(a.q, a.dt, qo + 32 * m);
    x.k[m] = ld_raw(a.k, a.dt, ko + 32 * m);
  }
  x.v = ld_raw(a.v, a.dt, t * a.v_st + hv * a.v_sh + v0 + lane);
  const GateArgs& ga = a.gates;
  x.g = ld_raw(ga.g, ga.dt, t * ga.g_st + hv * ga.g_sh);
  x.b = ld_raw(ga.beta, ga.dt, t * ga.b_st + hv * ga.b_sh);
  x.a_log = ga.fused ? ga.A_log[hv] : 0.f;
  x.dt_bias = ga.fused ? ga.dt_bias[hv] : 0.f;
  return x;
}

// load_gates of common.cuh on prefetched bits (the same arithmetic).
template <int K>
__device__ __forceinline__ void gates_of(const GateArgs& ga, const Tok<K>& x, float& g, float& beta) {
  const float a = raw_f(x.g, ga.dt), b = raw_f(x.b, ga.dt);
  if (ga.fused) {
    const float y = a + x.dt_bias;
    const float sp = y > 20.f ? y : log1pf(expf(y));
    g = -expf(x.a_log) * sp;
    beta = 1.f / (1.f + expf(-b));
  } else {
    g = a;
    beta = b;
  }
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

// state_row of common.cuh in two halves: the raw index is loaded ahead, and checked at the use.
__device__ __forceinline__ int64_t row_raw(const StateRef& s, int64_t n) {
  if (s.data == nullptr) return -1;
  return s.indices ? load_index(s.indices, s.index_type, n) : n;
}
__device__ __forceinline__ int64_t row_checked(const StateRef& s, int64_t r) {
  return (r >= 0 && r < s.num_slots) ? r : -1;
}

// Token range of sequence n, raw (loaded ahead), then clamped to [0, T] at the use.
struct Span {
  int64_t b, e;
};
__device__ __forceinline__ Span span_raw(const DecodeArgs& a, int64_t n) {
  if (a.cu) return {load_index(a.cu, a.cu_type, n), load_index(a.cu, a.cu_type, n + 1)};
  return {n * a.len, (n + 1) * a.len};
}
__device__ __forceinline__ Span span_checked(const DecodeArgs& a, Span s) {
  const int64_t b = s.b < 0 ? 0 : (s.b > a.T ? a.T : s.b);
  const int64_t e = s.e < b ? b : (s.e > a.T ? a.T : s.e);
  return {b, e};
}

// How a warp holds the state tile of the item that it computes.
enum class TileMode {
  kSmem,    // in its ring slot: passes 1 and 2 read the slot (and write it back between tokens)
  kRegs,    // moved from the ring slot into registers first, which frees the slot for the next copy at
            // once: kStages + 1 tiles per warp, kStages of them in flight while it computes
  kDirect,  // no ring: 16-byte loads from global memory straight into registers, all issued at once
            // (as flash-linear-attention's Triton kernel does); nothing in flight while it computes
};

// A decode configuration: warps per block, ring tiles per warp (0 with kDirect), blocks per SM asked
// of the register allocator (__launch_bounds__), tile mode.
template <int W, int P, int B, TileMode M>
struct Cfg {
  static constexpr int kWarps = W, kStages = P, kBlocks = B;
  static constexpr TileMode kMode = M;
  static_assert(M == TileMode::kDirect ? P == 0 : P >= 1, "kDirect has no ring, the others at least one slot");
  static_assert(M != TileMode::kSmem || P >= 2, "kSmem computes in a slot: one more must be in flight");
};
template <int K>
using DefaultCfg = Cfg<DecodeCfg<K>::kWarps, DecodeCfg<K>::kStages, 1, TileMode::kSmem>;

template <int K, int V, bool KMAJ, class C>
__global__ void __launch_bounds__(C::kWarps * 32, C::kBlocks) decode_kernel(DecodeArgs a) {
  constexpr int W = C::kWarps, P = C::kStages;
  constexpr TileMode M = C::kMode;
  constexpr bool RT = M != TileMode::kSmem;  // the tile is computed from registers
  // Distance (in items of this warp) of the tile copy that the loop starts next: the prologue
  // starts that many. kSmem: P - 1 (its slot is refilled at the top of the next item); kRegs: P.
  constexpr int AHEAD = M == TileMode::kSmem ? P - 1 : (M == TileMode::kRegs ? P : 0);
  constexpr int SL = V / kSlice;    // items per (sequence, head)
  constexpr int TILE = kSlice * K;  // floats of one item's state
  constexpr int CH = TILE / 128;    // 16-byte chunks per lane per item (K / 4)
  constexpr int QS = K + 16;        // floats of a q / k buffer (K-major: 4 padded rows of K / 4)
  constexpr int KP = K / 4 + 4;     // K-major: padded row of the q / k buffer (no bank conflicts)
  // The passes walk this lane's CH pieces of the tile as (a, b), a < NA, b < NB: K-major piece
  // 4a + b (rows 4 (4a + b) + lane / 8), V-major row 8 (lane / 8) + b, columns 32 a + 4 (lane % 8)..+3.
  // With the tile in registers, piece (a, b) is rt[NB * a + b] and the loops over a unroll fully.
  constexpr int NA = KMAJ ? K / 16 : K / 32, NB = KMAJ ? 4 : 8;
  constexpr int UA = RT ? NA : 2;  // unrolling of the loops over a
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
  // Piece (a, b) of the passes: in a ring slot (soff) and in global memory (poff), from the tile's
  // first element. K-major: this lane's own chunk 4a + b; V-major: the same offset in both.
  auto soff = [&](int pa, int pb) -> int {
    return KMAJ ? 128 * (4 * pa + pb) + 4 * lane : (8 * (lane / 8) + pb) * K + 32 * pa + 4 * (lane % 8);
  };
  auto poff = [&](int pa, int pb) -> int64_t { return KMAJ ? goff(4 * pa + pb) : int64_t(soff(pa, pb)); };
  auto tile_of = [&](float* data, int64_t row, const Item& it) -> float* {
    return data + (row * a.HV + it.hv) * KV + (KMAJ ? int64_t(it.v0) : int64_t(it.v0) * K);
  };
  // Starts the copy of item j's initial tile into ring slot `slot` (zeros when it has no row) and
  // closes one cp.async group (possibly empty: the group count stays one per item).
  auto issue = [&](int64_t j, int slot, int64_t raw_row) {
    if (j < NI) {
      float* dst = ring + slot * TILE + 4 * lane;
      const int64_t row = row_checked(a.init, raw_row);
      if (row >= 0) {
        const float* src = tile_of(a.init.data, row, item_of<SL>(j, a.HV));
#pragma unroll 8
        for (int c = 0; c < CH; ++c) ldgsts16(dst + 128 * c, src + goff(c));
      } else {
#pragma unroll 8
        for (int c = 0; c < CH; ++c) *reinterpret_cast<float4*>(dst + 128 * c) = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
    commit_group();
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
  auto init_row_of = [&](int64_t j) { return j < NI ? row_raw(a.init, item_of<SL>(j, a.HV).n) : int64_t(-1); };

  // Prologue: the first AHEAD tiles in flight, the rest of the register pipeline filled.
  if constexpr (AHEAD > 0) {
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
    float4 rt[RT ? CH : 1];  // the tile in registers (RT)
    if constexpr (M == TileMode::kSmem) {
      __syncwarp();  // every lane is done with the slot that this issue refills (the last item's)
      const int64_t ja = j + (P - 1) * TW;
      issue(ja, slot == 0 ? P - 1 : slot - 1, row_ahead);
      row_ahead = init_row_of(ja + TW);
    } else if constexpr (M == TileMode::kDirect) {
      // All CH loads of this item's tile issued back to back; the first use waits for them.
      const int64_t row = row_checked(a.init, row_ahead);
      const float* src = row >= 0 ? tile_of(a.init.data, row, item_of<SL>(j, a.HV)) : nullptr;
#pragma unroll
      for (int pa = 0; pa < NA; ++pa)
#pragma unroll
        for (int pb = 0; pb < NB; ++pb)
          rt[NB * pa + pb] =
              src ? __ldcs(reinterpret_cast<const float4*>(src + poff(pa, pb))) : make_float4(0.f, 0.f, 0.f, 0.f);
      row_ahead = init_row_of(j + TW);
    }
    const Span span_after = span_of(j + 2 * TW);
    const Tok<K> tok_next = tok_of(j + TW, span_next);
    const Item it = item_of<SL>(j, a.HV);
    const int64_t fin_raw = row_raw(a.fin, it.n);
    if constexpr (M != TileMode::kDirect) {
      wait_groups<P - 1>();  // this item's group is complete (one group per item, in order; P in flight)
      __syncwarp();          // and the chunks that other lanes copied are visible to this lane
    }

    float* tile = ring + slot * TILE;
    if constexpr (M == TileMode::kRegs) {
#pragma unroll
      for (int pa = 0; pa < NA; ++pa)
#pragma unroll
        for (int pb = 0; pb < NB; ++pb) rt[NB * pa + pb] = *reinterpret_cast<const float4*>(tile + soff(pa, pb));
      __syncwarp();  // every lane has read the slot: refill it with the tile P items ahead
      const int64_t ja = j + P * TW;
      issue(ja, slot, row_ahead);
      row_ahead = init_row_of(ja + TW);
    }
    // Piece (a, b) of the tile, read and written back between tokens.
    auto ld = [&](int pa, int pb) -> float4 {
      if constexpr (RT)
        return rt[NB * pa + pb];
      else
        return *reinterpret_cast<const float4*>(tile + soff(pa, pb));
    };
    auto st = [&](int pa, int pb, float4 r) {
      if constexpr (RT)
        rt[NB * pa + pb] = r;
      else
        *reinterpret_cast<float4*>(tile + soff(pa, pb)) = r;
    };
    const Span span = span_checked(a, span_cur);
    const int64_t fin_row = row_checked(a.fin, fin_raw);
    float* out = fin_row >= 0 ? tile_of(a.fin.data, fin_row, it) : nullptr;
    if (span.b == span.e) {  // no tokens: the final state is the initial state
      if (out) {
        if constexpr (RT) {
#pragma unroll
          for (int pa = 0; pa < NA; ++pa)
#pragma unroll
            for (int pb = 0; pb < NB; ++pb) __stcs(reinterpret_cast<float4*>(out + poff(pa, pb)), ld(pa, pb));
        } else {
#pragma unroll 8
          for (int c = 0; c < CH; ++c)
            __stcs(reinterpret_cast<float4*>(out + goff(c)),
                   *reinterpret_cast<const float4*>(tile + 128 * c + 4 * lane));
        }
      }
    } else {
      Tok<K> x = tok_cur;
      for (int64_t t = span.b; t < span.e; ++t) {
        const bool last = t + 1 == span.e;
        Tok<K> x_next = x;
        if (!last) x_next = load_tok<K>(a, t + 1, it.hv, it.v0, lane);  // in flight during this token

        // q, k: l2norm over the warp; normalized copies in the warp's buffers, laid out for pass 1/2.
        float qf[K / 32], kf[K / 32];
        float sq = 0.f, sk = 0.f, qk = 0.f;
#pragma unroll
        for (int m = 0; m < K / 32; ++m) {
          qf[m] = raw_f(x.q[m], a.dt);
          kf[m] = raw_f(x.k[m], a.dt);
          sq += qf[m] * qf[m];
          sk += kf[m] * kf[m];
          qk += qf[m] * kf[m];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          sq += __shfl_xor_sync(0xffffffffu, sq, o);
          sk += __shfl_xor_sync(0xffffffffu, sk, o);
          qk += __shfl_xor_sync(0xffffffffu, qk, o);
        }
        const float iq = a.l2norm ? rsqrtf(sq + 1e-6f) : 1.f, ik = a.l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
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
        gates_of<K>(a.gates, x, g, beta);
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
#pragma unroll
          for (int o = 8; o < 32; o <<= 1)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              kv[e] += __shfl_xor_sync(0xffffffffu, kv[e], o);
              qv[e] += __shfl_xor_sync(0xffffffffu, qv[e], o);
            }
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
          store_dt(a.o, a.dt, ob + 4 * c + kp, a.scale * (decay * qs + vs * kq));
          // Pass 2: decay S + k v'^T, to global memory after the last token, else back to the tile.
          auto update = [&](auto to_global) {
#pragma unroll UA
            for (int u = 0; u < K / 16; ++u) {
              const float4 k4 = *reinterpret_cast<const float4*>(kr + 4 * u);
              const float kk[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const float4 s = ld(u, e);
                const float4 r = make_float4(fmaf(kk[e], vp[0], s.x * decay), fmaf(kk[e], vp[1], s.y * decay),
                                             fmaf(kk[e], vp[2], s.z * decay), fmaf(kk[e], vp[3], s.w * decay));
                if constexpr (decltype(to_global)::value)
                  __stcs(reinterpret_cast<float4*>(out + goff(4 * u + e)), r);
                else
                  st(u, e, r);
              }
            }
          };
          if (!last)
            update(std::false_type{});
          else if (out)
            update(std::true_type{});
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
#pragma unroll
          for (int o = 1; o < 8; o <<= 1)
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              kv[i] += __shfl_xor_sync(0xffffffffu, kv[i], o);
              qv[i] += __shfl_xor_sync(0xffffffffu, qv[i], o);
            }
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
          store_dt(a.o, a.dt, ob + lane, a.scale * (decay * qs + vs * kq));
          auto update = [&](auto to_global) {  // pass 2, as in the K-major branch
#pragma unroll UA
            for (int jj = 0; jj < K / 32; ++jj) {
              const float4 k4 = *reinterpret_cast<const float4*>(kbuf + 32 * jj + 4 * kg);
#pragma unroll
              for (int i = 0; i < 8; ++i) {
                const float4 s = ld(jj, i);
                const float4 r = make_float4(fmaf(k4.x, vp[i], s.x * decay), fmaf(k4.y, vp[i], s.y * decay),
                                             fmaf(k4.z, vp[i], s.z * decay), fmaf(k4.w, vp[i], s.w * decay));
                if constexpr (decltype(to_global)::value)
                  __stcs(reinterpret_cast<float4*>(out + soff(jj, i)),
                         r);  // same offset in the tile and in global memory
                else
                  st(jj, i, r);
              }
            }
          };
          if (!last)
            update(std::false_type{});
          else if (out)
            update(std::true_type{});
        }
        x = x_next;
      }
    }
    tok_cur = tok_next;
    span_cur = span_next;
    span_next = span_after;
    if constexpr (P > 0) slot = slot + 1 == P ? 0 : slot + 1;
  }
}

// Sums x[i] over the warp's lanes for every i < 32 and returns, in lane l, the sum of x[l]: a
// butterfly that halves the vector at each level (31 shuffles, not 32 x 5). x is clobbered.
template <int O>
__device__ __forceinline__ void transpose_sum_level(float (&x)[32], int lane) {
  const bool upper = (lane & O) != 0;  // keeps the upper half of the remaining 2 O values
#pragma unroll
  for (int i = 0; i < O; ++i) {
    const float send = upper ? x[i] : x[i + O];
    const float keep = upper ? x[i + O] : x[i];
    x[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}
__device__ __forceinline__ float warp_transpose_sum(float (&x)[32]) {
  const int lane = threadIdx.x % 32;
  transpose_sum_level<16>(x, lane);
  transpose_sum_level<8>(x, lane);
  transpose_sum_level<4>(x, lane);
  transpose_sum_level<2>(x, lane);
  transpose_sum_level<1>(x, lane);
  return x[0];
}

// By whole rows (variants 7-9; K = V = 128): one block per (sequence, value head), warp w owns the
// state rows [RW w, RW w + RW) (K rows when K-major, V rows when V-major), lane the columns
// 4 lane..4 lane + 3, in registers. Every load and store instruction of a warp is one contiguous
// 512-byte row (the persistent kernel's K-major tiles read 128 of every 512 bytes per
// instruction). K-major: S^T k and S^T q are summed in-lane over the warp's rows, then across the
// W warps through shared memory. V-major (RW = 32): the row sums are in-lane partials over 4
// columns, completed across the lanes by warp_transpose_sum (lane l gets row l); no cross-warp step.
// Not persistent: the whole state's loads are issued at the block's start; two blocks per SM
// (registers: 219 with 4 warps, 128 with 8) keep up to 128 KB of loads in flight, as
// flash-linear-attention's one-warp programs do.
template <int W, bool KMAJ>
__global__ void __launch_bounds__(W * 32, 2) decode_rows_kernel(DecodeArgs a) {
  constexpr int K = 128, V = 128, RW = K / W;
  static_assert(KMAJ || RW == 32, "V-major rows: 32 rows per warp (one per lane after the sums)");
  constexpr int NVL = KMAJ ? 4 : 1;  // values of v per lane: columns 4 lane + e, or row RW w + lane
  constexpr int64_t KV = int64_t(K) * V;
  __shared__ __align__(16) float qk_raw[2][K];  // the token's q, k as loaded (fp32)
  __shared__ float4 part[2][W][V / 4];          // per warp: S^T k, S^T q over its rows (columns 4 lane..)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t n = blockIdx.x / a.HV;
  const int hv = static_cast<int>(blockIdx.x % a.HV);
  const int hk = hv / a.group;
  const int64_t rin = row_checked(a.init, row_raw(a.init, n));
  const int64_t rfin = row_checked(a.fin, row_raw(a.fin, n));
  const int64_t row0 = int64_t(RW) * warp;  // first state row of this warp

  float4 s[RW];  // s[r]: row row0 + r, columns 4 lane..4 lane + 3 (row stride 128 = K = V in both layouts)
  {
    const float* src = rin >= 0 ? a.init.data + (rin * a.HV + hv) * KV + row0 * V + 4 * lane : nullptr;
#pragma unroll
    for (int r = 0; r < RW; ++r)
      s[r] = src ? __ldcs(reinterpret_cast<const float4*>(src + r * V)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float* out = rfin >= 0 ? a.fin.data + (rfin * a.HV + hv) * KV + row0 * V + 4 * lane : nullptr;
  auto store_state = [&]() {
#pragma unroll
    for (int r = 0; r < RW; ++r) __stcs(reinterpret_cast<float4*>(out + r * V), s[r]);
  };
  const Span span = span_checked(a, span_raw(a, n));
  if (span.b == span.e) {  // no tokens: the final state is the initial state
    if (out) store_state();
    return;
  }
  for (int64_t t = span.b; t < span.e; ++t) {
    // The token's inputs (raw bits, converted at the use): q, k by all threads, v and the gates by
    // each lane for its columns.
    uint32_t qk_bits[(2 * K + W * 32 - 1) / (W * 32)];
#pragma unroll
    for (int i = 0; i < (2 * K + W * 32 - 1) / (W * 32); ++i) {
      const int d = tid + W * 32 * i;
      qk_bits[i] = d < K ? ld_raw(a.q, a.dt, t * a.q_st + hk * a.q_sh + d)
                         : (d < 2 * K ? ld_raw(a.k, a.dt, t * a.k_st + hk * a.k_sh + (d - K)) : 0u);
    }
    uint32_t v_bits[NVL];
#pragma unroll
    for (int e = 0; e < NVL; ++e)
      v_bits[e] = ld_raw(a.v, a.dt, t * a.v_st + hv * a.v_sh + (KMAJ ? 4 * lane + e : row0 + lane));
    Tok<K> gx;
    gx.g = ld_raw(a.gates.g, a.gates.dt, t * a.gates.g_st + hv * a.gates.g_sh);
    gx.b = ld_raw(a.gates.beta, a.gates.dt, t * a.gates.b_st + hv * a.gates.b_sh);
    gx.a_log = a.gates.fused ? a.gates.A_log[hv] : 0.f;
    gx.dt_bias = a.gates.fused ? a.gates.dt_bias[hv] : 0.f;

    __syncthreads();  // the previous token's readers of qk_raw and part are done
#pragma unroll
    for (int i = 0; i < (2 * K + W * 32 - 1) / (W * 32); ++i) {
      const int d = tid + W * 32 * i;
      if (d < 2 * K) qk_raw[d / K][d % K] = raw_f(qk_bits[i], a.dt);
    }
    __syncthreads();
    // Norms and q . k, by every warp (the same sums; no block barrier needed for them).
    float sq = 0.f, sk = 0.f, sqk = 0.f;
#pragma unroll
    for (int m = 0; m < K / 32; ++m) {
      const float qv = qk_raw[0][lane + 32 * m], kv = qk_raw[1][lane + 32 * m];
      sq += qv * qv;
      sk += kv * kv;
      sqk += qv * kv;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
      sqk += __shfl_xor_sync(0xffffffffu, sqk, o);
    }
    const float iq = a.l2norm ? rsqrtf(sq + 1e-6f) : 1.f, ik = a.l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
    const float kq = sqk * iq * ik;  // (normalized k) . (normalized q)

    float g, beta;
    if constexpr (!KMAJ) {
      gates_of<K>(a.gates, gx, g, beta);
      const float decay = expf(g);
      // Pass 1: (S k)[v], (S q)[v] of this warp's rows v = row0 + r: in-lane partials over
      // columns 4 lane..+3, then summed across the lanes (lane l: row row0 + l).
      const float4 k4 = *reinterpret_cast<const float4*>(&qk_raw[1][4 * lane]);
      const float4 q4 = *reinterpret_cast<const float4*>(&qk_raw[0][4 * lane]);
      float x[RW];
#pragma unroll
      for (int r = 0; r < RW; ++r) x[r] = s[r].x * k4.x + s[r].y * k4.y + s[r].z * k4.z + s[r].w * k4.w;
      const float kv = warp_transpose_sum(x);
#pragma unroll
      for (int r = 0; r < RW; ++r) x[r] = s[r].x * q4.x + s[r].y * q4.y + s[r].z * q4.z + s[r].w * q4.w;
      const float qv = warp_transpose_sum(x);
      const float vp = beta * (raw_f(v_bits[0], a.dt) - decay * ik * kv);  // v' of row row0 + lane
      store_dt(a.o, a.dt, t * a.o_st + hv * a.o_sh + row0 + lane, a.scale * (decay * iq * qv + vp * kq));
      // Pass 2: decay S + v' k^T in registers.
      const float4 kh = make_float4(k4.x * ik, k4.y * ik, k4.z * ik, k4.w * ik);
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const float vr = __shfl_sync(0xffffffffu, vp, r);
        s[r] = make_float4(fmaf(kh.x, vr, s[r].x * decay), fmaf(kh.y, vr, s[r].y * decay),
                           fmaf(kh.z, vr, s[r].z * decay), fmaf(kh.w, vr, s[r].w * decay));
      }
      continue;
    }
    // Pass 1: S^T k, S^T q over this warp's rows (the norms applied once, after the sums).
    float4 ak = make_float4(0.f, 0.f, 0.f, 0.f), aq = ak;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const float kr = qk_raw[1][row0 + r], qr = qk_raw[0][row0 + r];
      ak.x = fmaf(s[r].x, kr, ak.x);
      ak.y = fmaf(s[r].y, kr, ak.y);
      ak.z = fmaf(s[r].z, kr, ak.z);
      ak.w = fmaf(s[r].w, kr, ak.w);
      aq.x = fmaf(s[r].x, qr, aq.x);
      aq.y = fmaf(s[r].y, qr, aq.y);
      aq.z = fmaf(s[r].z, qr, aq.z);
      aq.w = fmaf(s[r].w, qr, aq.w);
    }
    part[0][warp][lane] = ak;
    part[1][warp][lane] = aq;
    __syncthreads();
    float kv[4] = {0.f, 0.f, 0.f, 0.f}, qv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float4 pk = part[0][w][lane], pq = part[1][w][lane];
      kv[0] += pk.x;
      kv[1] += pk.y;
      kv[2] += pk.z;
      kv[3] += pk.w;
      qv[0] += pq.x;
      qv[1] += pq.y;
      qv[2] += pq.z;
      qv[3] += pq.w;
    }
    gates_of<K>(a.gates, gx, g, beta);
    const float decay = expf(g);
    float vp[4];  // v' of columns 4 lane + e
#pragma unroll
    for (int e = 0; e < 4; ++e) vp[e] = beta * (raw_f(v_bits[e], a.dt) - decay * ik * kv[e]);
    if (warp == 0) {
      const int64_t ob = t * a.o_st + hv * a.o_sh + 4 * lane;
#pragma unroll
      for (int e = 0; e < 4; ++e) store_dt(a.o, a.dt, ob + e, a.scale * (decay * iq * qv[e] + vp[e] * kq));
    }
    // Pass 2: decay S + k v'^T in registers; the final state leaves after the last token.
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const float kr = qk_raw[1][row0 + r] * ik;
      s[r] = make_float4(fmaf(kr, vp[0], s[r].x * decay), fmaf(kr, vp[1], s[r].y * decay),
                         fmaf(kr, vp[2], s[r].z * decay), fmaf(kr, vp[3], s[r].w * decay));
    }
  }
  if (out) store_state();
}

template <int W, bool KMAJ>
void launch_rows(const DecodeArgs& a, cudaStream_t st) {
  decode_rows_kernel<W, KMAJ><<<grid_1d(a.N * a.HV, 1), W * 32, 0, st>>>(a);
  GDN_CUDA_LAUNCH_CHECK("decode_rows_kernel");
}

// Persistent grid: as many blocks as fit on the device at once, fewer for few items.
template <int K, int V, class C>
void launch_cfg(const DecodeArgs& a, bool kmaj, cudaStream_t st) {
  constexpr int W = C::kWarps, P = C::kStages;
  const size_t smem = size_t(W) * (P * kSlice * K + 2 * (K + 16)) * sizeof(float);
  auto kern = kmaj ? decode_kernel<K, V, true, C> : decode_kernel<K, V, false, C>;
  allow_smem(kern, smem);
  const DeviceProps& dp = device_props();
  int64_t per_sm = std::max<int64_t>(1, int64_t(dp.smem_per_sm) / int64_t(smem + dp.smem_reserved_per_block));
  if constexpr (C::kMode != TileMode::kSmem) {
    // Register tiles: registers, not shared memory, bound the blocks per SM (asked once per kernel).
    auto occupancy = [&](auto k) {
      allow_smem(k, smem);
      int n = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, W * 32, smem), "cudaOccupancy");
      return std::max(n, 1);
    };
    static const int occ[2] = {occupancy(decode_kernel<K, V, false, C>), occupancy(decode_kernel<K, V, true, C>)};
    per_sm = std::min<int64_t>(per_sm, occ[kmaj]);
  }
  const int64_t items = a.N * a.HV * (V / kSlice);
  const int64_t blocks = std::min<int64_t>((items + W - 1) / W, int64_t(dp.sms) * per_sm);
  kern<<<grid_1d(blocks, 1), W * 32, smem, st>>>(a);
  GDN_CUDA_LAUNCH_CHECK("decode_kernel");
}

template <int K>
void launch_k(const DecodeArgs& a, int V, bool kmaj, cudaStream_t st) {
  if (V == 64)
    launch_cfg<K, 64, DefaultCfg<K>>(a, kmaj, st);
  else if (V == 128)
    launch_cfg<K, 128, DefaultCfg<K>>(a, kmaj, st);
  else
    launch_cfg<K, 256, DefaultCfg<K>>(a, kmaj, st);
}

// The variants of set_decode_variant (K = V = 128 only; other sizes run DefaultCfg). A tile is
// 16 KiB; shared memory per warp: ring slots x 16 KiB + 1152 bytes of q / k buffers. Registers
// (K-major / V-major) from ptxas 13.0; none spills.
//   warps x ring (blocks/SM)   regs      smem/block  tiles per warp, in flight per SM while computing
// 0 4 x 3 smem (1), DefaultCfg 164/128   196.5 KiB   3, 8 (128 KiB)
// 1 6 x 2 smem (1)             156/128   198.8 KiB   2, 6 (96 KiB): 6 warps hide more of the passes
// 2 8 x 1 smem + regs (1)      255/250   137.0 KiB   2, 8 (128 KiB): 8 warps; the slot read once per
//                                                    item, not twice per token (8 x 2 smem: 256 KiB)
// 3 4 x 3 smem + regs (1)      250/252   196.5 KiB   4, 12 (192 KiB) (4 x 4 smem: 256 KiB, too much)
// 4 2 x 3 smem (2)             164/128   98.3 KiB    3, 8 (128 KiB): variant 0 in two blocks per SM
// 5 4 direct (2)               255/250   4.5 KiB     1, 0: fla's scheme, 8 warps (12 would spill)
// 6 6 x 2 smem + regs (1)      250/254   198.8 KiB   3, 12 (192 KiB): 6 warps and 2 tiles ahead
// 7 rows, 4 warps (2)          219       5 KiB       K-major: decode_rows_kernel (a block per state,
//                                                    32 rows per warp); V-major: variant 2
// 8 rows, 8 warps (2)          128       5 KiB       the same, 16 rows per warp
// 9 rows, 4 warps (2)          219/253   5 KiB       decode_rows_kernel for both layouts. Default
// Measured on an H200, % of the copy rate, "N = 256 V-major, K-major / N = 4096 V-major, K-major"
// (bench/results/h200_decode_variants.log): 0: 89, 80 / 79, 78   1: 89, 86 / 82, 77
// 2: 90, 84 / 85, 79   3: 88, 84 / 78, 77   4: 89, 81 / 79, 78   5: 86, 80 / 78, 74
// 6: 86, 82 / 80, 74   7: 90, 96 / 85, 90   8: 89, 90 / 85, 85   9: 95, 97 / 89, 90
constexpr int kDecodeVariants = 10;
constexpr int kDefaultVariant = 9;
constexpr const char* kVariantNames[kDecodeVariants] = {"4w x 3 smem",
                                                        "6w x 2 smem",
                                                        "8w x 1 smem + regs",
                                                        "4w x 3 smem + regs",
                                                        "2w x 3 smem, 2 blocks/SM",
                                                        "4w direct, 2 blocks/SM",
                                                        "6w x 2 smem + regs",
                                                        "K-major rows 4w, V-major 8w x 1 + regs",
                                                        "K-major rows 8w, V-major 8w x 1 + regs",
                                                        "rows 4w, both layouts (default)"};
int g_decode_variant = kDefaultVariant;

void launch_variant(const DecodeArgs& a, bool kmaj, cudaStream_t st) {
  switch (g_decode_variant) {
    case 1:
      launch_cfg<128, 128, Cfg<6, 2, 1, TileMode::kSmem>>(a, kmaj, st);
      break;
    case 2:
      launch_cfg<128, 128, Cfg<8, 1, 1, TileMode::kRegs>>(a, kmaj, st);
      break;
    case 3:
      launch_cfg<128, 128, Cfg<4, 3, 1, TileMode::kRegs>>(a, kmaj, st);
      break;
    case 4:
      launch_cfg<128, 128, Cfg<2, 3, 2, TileMode::kSmem>>(a, kmaj, st);
      break;
    case 5:
      launch_cfg<128, 128, Cfg<4, 0, 2, TileMode::kDirect>>(a, kmaj, st);
      break;
    case 6:
      launch_cfg<128, 128, Cfg<6, 2, 1, TileMode::kRegs>>(a, kmaj, st);
      break;
    case 7:
    case 8:
      if (!kmaj)
        launch_cfg<128, 128, Cfg<8, 1, 1, TileMode::kRegs>>(a, kmaj, st);
      else if (g_decode_variant == 7)
        launch_rows<4, true>(a, st);
      else
        launch_rows<8, true>(a, st);
      break;
    case 9:
      if (kmaj)
        launch_rows<4, true>(a, st);
      else
        launch_rows<4, false>(a, st);
      break;
    default:
      launch_cfg<128, 128, DefaultCfg<128>>(a, kmaj, st);
  }
}

}  // namespace

int decode_variant_count() { return kDecodeVariants; }
const char* decode_variant_name(int v) { return v >= 0 && v < kDecodeVariants ? kVariantNames[v] : "?"; }
void set_decode_variant(int v) { g_decode_variant = v >= 0 && v < kDecodeVariants ? v : kDefaultVariant; }

GateArgs make_gates(const ForwardArgs& f) {
  GateArgs g;
  g.g = f.g.data;
  g.g_st = f.g.stride_token;
  g.g_sh = f.g.stride_head;
  g.beta = f.beta.data;
  g.b_st = f.beta.stride_token;
  g.b_sh = f.beta.stride_head;
  g.dt = f.problem.gate_dtype;
  g.fused = f.problem.fused_gate;
  g.A_log = f.A_log;
  g.dt_bias = f.dt_bias;
  return g;
}

size_t recurrent_gated_delta_rule_workspace_size(const Problem&, int) { return 0; }

void recurrent_gated_delta_rule(const ForwardArgs& f, const Exec& exec) {
  const Problem& p = f.problem;
  const int K = p.head_k, V = p.head_v;
  auto ok = [](int d) { return d == 64 || d == 128 || d == 256; };
  if (!ok(K) || !ok(V))
    throw Error("recurrent_gated_delta_rule: head_k and head_v must be 64, 128 or 256 on the CUDA backend");
  DecodeArgs a;
  a.q = f.q.data;
  a.q_st = f.q.stride_token;
  a.q_sh = f.q.stride_head;
  a.k = f.k.data;
  a.k_st = f.k.stride_token;
  a.k_sh = f.k.stride_head;
  a.v = f.v.data;
  a.v_st = f.v.stride_token;
  a.v_sh = f.v.stride_head;
  a.o = f.o.data;
  a.o_st = f.o.stride_token;
  a.o_sh = f.o.stride_head;
  a.dt = p.dtype;
  a.gates = make_gates(f);
  a.cu = p.cu_seqlens;
  a.cu_type = p.cu_seqlens_type;
  a.T = p.num_tokens;
  a.N = p.num_seqs;
  a.len = p.num_seqs > 0 ? p.num_tokens / p.num_seqs : 0;
  a.H = p.num_qk_heads;
  a.HV = p.num_v_heads;
  a.group = p.num_v_heads / p.num_qk_heads;
  a.scale = p.scale;
  a.l2norm = p.use_qk_l2norm;
  a.init = f.initial_state;
  a.fin = f.final_state;
  const bool kmaj = p.state_layout == StateLayout::kKMajor;
  cudaStream_t st = stream_of(exec);
  if (K == 128 && V == 128)
    launch_variant(a, kmaj, st);
  else if (K == 64)
    launch_k<64>(a, V, kmaj, st);
  else if (K == 128)
    launch_k<128>(a, V, kmaj, st);
  else
    launch_k<256>(a, V, kmaj, st);
}

}  // namespace cuda
}  // namespace gdn
