// Shared device helpers of the CUDA backend: dtype conversions, device-side clamping of indices
// that the host could not validate, the gates (SPEC's fused formula), the sequence plan and the
// workspace carver. Includes the host helpers (device.h), every PTX wrapper (ptx/) and the mma.sync
// fragment helpers with the warp butterfly sums (fragments.cuh), so that a kernel file includes
// this one header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/spec_math.h"
#include "cuda/core/device.h"
#include "cuda/core/fragments.cuh"
#include "cuda/ptx/ptx.cuh"
#include "gdn/gdn.h"

namespace gdn {
namespace cuda {

// ---- dtype conversions ------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_f<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Element i of a buffer whose dtype is only known at run time (gates: fp32 or the input dtype).
__device__ __forceinline__ float load_dt(const void* p, DType dt, int64_t i) {
  if (dt == DType::kFloat32) return static_cast<const float*>(p)[i];
  if (dt == DType::kFloat16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void store_dt(void* p, DType dt, int64_t i, float x) {
  if (dt == DType::kFloat32)
    static_cast<float*>(p)[i] = x;
  else if (dt == DType::kFloat16)
    static_cast<__half*>(p)[i] = __float2half_rn(x);
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
}

__device__ __forceinline__ int64_t load_index(const void* p, IndexType t, int64_t i) {
  return t == IndexType::kInt64 ? static_cast<const int64_t*>(p)[i]
                                : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// State row of sequence n in a pool: indices may be unvalidated device data, so anything outside
// [0, num_slots) means "no state" (-1), as do the pool's null slot and a 0 in the present mask.
__device__ __forceinline__ int64_t state_row(const StateRef& s, int64_t n) {
  if (s.data == nullptr || (s.present && s.present[n] == 0)) return -1;
  const int64_t r = s.indices ? load_index(s.indices, s.index_type, n) : n;
  return (r >= 0 && r < s.num_slots && r != s.null_slot) ? r : -1;
}

// Offset (elements of the pool's dtype) of head hv of pool row r: rows s.row_stride apart (0:
// packed, HV heads; the API layer fills it in, tools that call the backend directly may not),
// heads head_elems = K * V apart.
__host__ __device__ __forceinline__ int64_t state_offset(const StateRef& s, int64_t r, int hv, int HV,
                                                         int64_t head_elems) {
  return r * (s.row_stride != 0 ? s.row_stride : HV * head_elems) + hv * head_elems;
}

// Gates of token t, head hv: fp32 decay g (natural log) and beta, with optional model fusion
// (SPEC's formulas, spec_math.h, evaluated in fp32).
struct GateArgs {
  const void* g;
  int64_t g_st, g_sh;
  const void* beta;
  int64_t b_st, b_sh;
  DType dt;
  bool fused;
  const float* A_log;
  const float* dt_bias;
};
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

// One token's gate inputs of one value head: g and beta as raw bits, A_log and dt_bias (fused
// gates; 0 otherwise).
struct GateBits {
  uint32_t g, b;
  float a_log, dt_bias;
};
__device__ __forceinline__ GateBits load_gate_bits(const GateArgs& ga, int64_t t, int hv) {
  GateBits x;
  x.g = ld_raw(ga.g, ga.dt, t * ga.g_st + hv * ga.g_sh);
  x.b = ld_raw(ga.beta, ga.dt, t * ga.b_st + hv * ga.b_sh);
  x.a_log = ga.fused ? ga.A_log[hv] : 0.f;
  x.dt_bias = ga.fused ? ga.dt_bias[hv] : 0.f;
  return x;
}
// The decay g (natural log) and beta of prefetched gate bits: load_gates in two steps, so that
// the loads go ahead.
__device__ __forceinline__ void gates_of(const GateArgs& ga, const GateBits& x, float& g, float& beta) {
  const float a = raw_f(x.g, ga.dt), b = raw_f(x.b, ga.dt);
  if (ga.fused) {
    g = spec::fused_gate(a, x.a_log, x.dt_bias);
    beta = spec::fused_beta(b);
  } else {
    g = a;
    beta = b;
  }
}

__device__ __forceinline__ void load_gates(const GateArgs& ga, int64_t t, int hv, float& g, float& beta) {
  gates_of(ga, load_gate_bits(ga, t, hv), g, beta);
}

// The gates of a chunk's rows t0 .. t0 + len - 1 (g = beta = 0 past len) and G = their inclusive
// cumsum in fp64, into shared memory G[0 .. 64), beta[0 .. 64), by threads tid = 0 .. 63 (two
// warps, shuffle scans) of a group of at least 64 threads that all call it; `sync` is the group's
// barrier (__syncthreads for a whole block). G is complete after the caller's next barrier.
// In two steps (chunk_gates_load, then chunk_gates_scan) for a caller that issues other copies
// while the gates are in flight.
__device__ __forceinline__ GateBits chunk_gates_load(const GateArgs& ga, int64_t t0, int len, int hv, int tid) {
  return tid < kChunkSize && tid < len ? load_gate_bits(ga, t0 + tid, hv) : GateBits{};
}
template <class Sync>
__device__ __forceinline__ void chunk_gates_scan(const GateArgs& ga, const GateBits& r, int len, double* G, float* beta,
                                                 int tid, Sync sync) {
  const int lane = tid % 32;
  if (tid < kChunkSize) {
    float gg = 0.f, be = 0.f;
    if (tid < len) gates_of(ga, r, gg, be);
    double x = gg;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    G[tid] = x;  // per-warp inclusive scan
    beta[tid] = be;
  }
  sync();
  if (tid >= 32 && tid < kChunkSize) G[tid] += G[31];
}
template <class Sync>
__device__ __forceinline__ void chunk_gates_cumsum(const GateArgs& ga, int64_t t0, int len, int hv, double* G,
                                                   float* beta, int tid, Sync sync) {
  chunk_gates_scan(ga, chunk_gates_load(ga, t0, len, hv, tid), len, G, beta, tid, sync);
}

// Column c of (I + N)^-1 for a strictly lower triangular kN x kN block N in fp32 (rows `stride`
// floats apart, each 16-byte aligned; every lane of a warp may read the same row: broadcast), by
// forward substitution in fp32, the sums in the order j = 0, 1, ... Rows above c stay those of
// the identity. The prep kernels' diagonal blocks (kN = 16, one column per thread; kkt_solve's
// blocked 16 x 16 inverse: its two 8 x 8 diagonal blocks).
template <int kN>
__device__ __forceinline__ void unit_lower_inverse_column(const float* N, int stride, int c, float (&x)[kN]) {
  static_assert(kN % 4 == 0, "rows read in float4 pieces");
#pragma unroll
  for (int i = 0; i < kN; ++i) x[i] = i == c ? 1.f : 0.f;
#pragma unroll
  for (int i = 1; i < kN; ++i) {
    float s = 0.f;
#pragma unroll
    for (int j4 = 0; j4 < i; j4 += 4) {  // row i in float4 pieces
      const float4 l = *reinterpret_cast<const float4*>(&N[i * stride + j4]);
      s = fmaf(l.x, x[j4], s);
      if (j4 + 1 < i) s = fmaf(l.y, x[j4 + 1], s);
      if (j4 + 2 < i) s = fmaf(l.z, x[j4 + 2], s);
      if (j4 + 3 < i) s = fmaf(l.w, x[j4 + 3], s);
    }
    if (i > c) x[i] = -s;
  }
}

// The q/k head that value head hv reads (GVA: each q/k head serves HV / H value heads), in unsigned
// arithmetic (fewer instructions than a signed division).
__host__ __device__ __forceinline__ int qk_head_of(int hv, int HV, int H) {
  return static_cast<int>(unsigned(hv) / (unsigned(HV) / unsigned(H)));
}
// Whether value head hv is the first of its q/k head's group: the one that writes what depends on
// the q/k head only (k's and q's inverse norms).
__host__ __device__ __forceinline__ bool first_of_qk_group(int hv, int HV, int H) { return hv % (HV / H) == 0; }

// Gate arguments of a forward call (decode and prefill share them).
inline GateArgs make_gates(const ForwardArgs& f) {
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

// ---- sequence plan (see plan.cu) ----------------------------------------------------------------
// One entry of the plan's longest-first order: sequence seq's tokens [tb, te) and first global chunk
// c0 (32 bytes: two 16-byte loads).
struct alignas(16) OrderedSeq {
  int64_t tb, te, c0, seq;
};

// Device-side view of the sequences and chunks of one call, built from (clamped) cu_seqlens.
struct Plan {
  const int64_t* bounds;     // [N + 1] token boundaries, clamped to [0, T] and monotone
  const int64_t* chunk_off;  // [N + 1] global chunk number of each sequence's first chunk
  const int32_t* chunk_seq;  // [max_chunks] sequence of each global chunk, -1 past the last
  // [max_chunks] each global chunk's rows as one word, t0 * 128 + len (0 past the last): kernels
  // that need no sequence number find their rows in one load instead of two dependent ones
  const int64_t* chunk_rows;
  // [N] the sequences longest first (by chunk count; ties in no fixed order), or null (the
  // heuristics' longest_first: lengths known equal, or one sequence): the sequential kernels take
  // the sequence of longest_first[i] for their i-th group of blocks, so that the long ones start
  // in the first wave instead of trailing the short ones (ordered_seq_chunks). Each entry carries
  // what they read of the sequence, so that the order costs them no dependent load. Which block
  // computes a sequence changes nothing it computes.
  const OrderedSeq* longest_first;
  int64_t num_seqs;
  int64_t max_chunks;
};

// Chunk gc's first token and number of valid rows (false when gc is unused), from one load.
__device__ __forceinline__ bool chunk_rows(const Plan& pl, int64_t gc, int64_t& t0, int& len) {
  if (gc >= pl.max_chunks) return false;
  const int64_t w = pl.chunk_rows[gc];
  t0 = w >> 7;
  len = static_cast<int>(w & 127);
  return len > 0;
}

// Where chunk gc lives: sequence n, first token, number of valid rows (false when gc is unused).
// The rows come from chunk_rows (the plan kernel's one formula), loaded beside the sequence.
__device__ __forceinline__ bool chunk_info(const Plan& pl, int64_t gc, int64_t& n, int64_t& t0, int& len) {
  if (gc >= pl.max_chunks) return false;
  const int32_t s = pl.chunk_seq[gc];
  if (!chunk_rows(pl, gc, t0, len) || s < 0) return false;
  n = s;
  return true;
}

// Sequence n's chunks in the plan: global chunks [c0, c0 + count) (clipped to max_chunks), tokens
// [tb, te). The sequential kernels walk them in order.
struct SeqChunks {
  int64_t c0, count, tb, te;
};
__device__ __forceinline__ SeqChunks seq_chunks(const Plan& pl, int64_t n) {
  SeqChunks s;
  s.c0 = pl.chunk_off[n];
  s.count = pl.chunk_off[n + 1] - s.c0;
  if (s.c0 + s.count > pl.max_chunks) s.count = pl.max_chunks - s.c0;
  s.tb = pl.bounds[n];
  s.te = pl.bounds[n + 1];
  return s;
}

// The i-th group of a sequential kernel's blocks: its sequence n (longest first, where the plan has
// the order) and n's chunks, from one round of loads either way.
__device__ __forceinline__ SeqChunks ordered_seq_chunks(const Plan& pl, int64_t i, int64_t& n) {
  if (pl.longest_first == nullptr) {
    n = i;
    return seq_chunks(pl, i);
  }
  const OrderedSeq e = pl.longest_first[i];
  n = e.seq;
  SeqChunks s;
  s.c0 = e.c0;
  s.tb = e.tb;
  s.te = e.te;
  s.count = (e.te - e.tb + kChunkSize - 1) / kChunkSize;  // (chunk_off's difference, as the plan forms it)
  if (s.c0 + s.count > pl.max_chunks) s.count = pl.max_chunks - s.c0;
  return s;
}

// max_num_chunks(T, N) of gdn.h, kept here so the backend links on its own.
inline int64_t chunk_bound(int64_t num_tokens, int64_t num_seqs) { return num_tokens / kChunkSize + num_seqs; }

size_t plan_bytes(int64_t num_tokens, int64_t num_seqs);
// Builds the plan into `ws` (plan_bytes long) on the stream; returns the device view.
// longest_first: also the longest-first order (Plan::longest_first; the chunk forward's heuristics
// say where it can matter); the stages' plans go without it.
Plan build_plan(const Problem& p, void* ws, cudaStream_t stream, bool longest_first = false);

inline size_t align_up(size_t x) { return (x + 255) & ~size_t(255); }

// Carves consecutive 256-byte aligned pieces out of a workspace.
struct Carver {
  char* base;
  size_t used = 0;
  explicit Carver(void* b) : base(static_cast<char*>(b)) {}
  template <typename T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(base ? base + used : nullptr);
    used += align_up(count * sizeof(T));
    return p;
  }
};

}  // namespace cuda
}  // namespace gdn
