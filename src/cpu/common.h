// Shared pieces of the CPU backend: sequence boundaries, dtype-aware row loads and stores, the
// gates (the formulas of common/spec_math.h), state copies and the thread pool (OpenMP). The
// per-thread chunk scratch, carved from the caller's workspace, is in chunk.h.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>

#include "common/host_dtype.h"
#include "common/spec_math.h"
#include "gdn/gdn.h"

namespace gdn {
namespace cpu {

constexpr int C = kChunkSize;

// Sequence boundaries read straight from cu_seqlens (validated by the API layer) or the
// fixed-length rule; no copy.
struct Sequences {
  const void* cu_seqlens;
  IndexType type;
  int64_t num_tokens, num_seqs;
  explicit Sequences(const Problem& p)
      : cu_seqlens(p.cu_seqlens), type(p.cu_seqlens_type), num_tokens(p.num_tokens), num_seqs(p.num_seqs) {}
  int64_t begin(int64_t n) const { return bound(n); }
  int64_t end(int64_t n) const { return bound(n + 1); }
  int64_t bound(int64_t n) const {
    if (cu_seqlens == nullptr) return n * (num_tokens / num_seqs);
    return type == IndexType::kInt32 ? static_cast<const int32_t*>(cu_seqlens)[n]
                                     : static_cast<const int64_t*>(cu_seqlens)[n];
  }
  int64_t num_chunks(int64_t n) const { return (end(n) - begin(n) + C - 1) / C; }
};

// Row of sequence n in a pool (initial or final state), or -1 for "none": no data, a negative
// index, the pool's null slot, or absent in the present mask (the API layer checked the rest).
inline int64_t state_row(const StateRef& s, int64_t n) {
  if (s.data == nullptr || (s.present && s.present[n] == 0)) return -1;
  if (s.indices == nullptr) return n;
  const int64_t r = s.index_type == IndexType::kInt32 ? static_cast<const int32_t*>(s.indices)[n]
                                                      : static_cast<const int64_t*>(s.indices)[n];
  return r < 0 || r == s.null_slot ? -1 : r;
}

// dst[0, n) = src[offset, offset + n) converted to fp32.
inline void load_row(const void* base, int64_t offset, DType dtype, int n, float* dst) {
  switch (dtype) {
    case DType::kFloat32: {
      const float* s = static_cast<const float*>(base) + offset;
      for (int i = 0; i < n; ++i) dst[i] = s[i];
      break;
    }
    case DType::kBFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      break;
    }
    default: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) dst[i] = fp16_to_float(s[i]);
      break;
    }
  }
}

inline void store_row(void* base, int64_t offset, DType dtype, int n, const float* src, float scale) {
  switch (dtype) {
    case DType::kFloat32: {
      float* d = static_cast<float*>(base) + offset;
      for (int i = 0; i < n; ++i) d[i] = src[i] * scale;
      break;
    }
    case DType::kBFloat16: {
      uint16_t* d = static_cast<uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) d[i] = float_to_bf16(src[i] * scale);
      break;
    }
    default: {
      uint16_t* d = static_cast<uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) d[i] = float_to_fp16(src[i] * scale);
      break;
    }
  }
}

inline float load_scalar(const ConstTensor& t, int64_t token, int head, DType dtype) {
  return load_as_float(t.data, token * t.stride_token + head * t.stride_head, dtype);
}

// x <- x / sqrt(sum(x^2) + eps) in fp32 (spec::l2norm_inv).
inline void l2norm_row(float* x, int n) {
  float ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = spec::l2norm_inv(ss);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// Gate of token t, value head hv: plain g/beta, or fused from a, b, A_log and dt_bias.
inline void load_gates(const Problem& p, const ConstTensor& g, const ConstTensor& beta, const float* A_log,
                       const float* dt_bias, int64_t t, int hv, float* g_out, float* beta_out) {
  const float gv = load_scalar(g, t, hv, p.gate_dtype);
  const float bv = load_scalar(beta, t, hv, p.gate_dtype);
  if (!p.fused_gate) {
    *g_out = gv;
    *beta_out = bv;
    return;
  }
  *g_out = spec::fused_gate(gv, A_log[hv], dt_bias[hv]);
  *beta_out = spec::fused_beta(bv);
}

// Offset (elements) of head hv of row `row` of a pool: rows are row_stride apart (0: packed; the
// API layer fills it in), the heads of a row K * V apart.
inline int64_t state_offset(const StateRef& s, int64_t row, int hv, int HV, int64_t head_elems) {
  return row * (s.row_stride != 0 ? s.row_stride : HV * head_elems) + hv * head_elems;
}

// Copies a [K, V] state between a pool row of either layout and dtype (at element `offset` of
// `base`) and a K-major fp32 scratch S [Kp, Vp] (Kp >= K, Vp >= V: the padded widths of the chunk
// buffers, cpu/chunk.h; the padding is zero): converted to fp32 on the way in, rounded once on the
// way out. V-major rows pass through a stack row (K <= 256).
inline void load_state(const void* base, int64_t offset, DType dtype, StateLayout layout, int K, int V, int Kp, int Vp,
                       float* S) {
  if (Kp != K || Vp != V)
    for (int64_t i = 0; i < int64_t{Kp} * Vp; ++i) S[i] = 0.0f;
  if (layout == StateLayout::kKMajor) {
    for (int i = 0; i < K; ++i) load_row(base, offset + int64_t{i} * V, dtype, V, S + int64_t{i} * Vp);
  } else {
    float row[256];
    for (int j = 0; j < V; ++j) {
      load_row(base, offset + int64_t{j} * K, dtype, K, row);
      for (int i = 0; i < K; ++i) S[int64_t{i} * Vp + j] = row[i];
    }
  }
}
// State of value head hv of sequence n from the initial-state array or pool (zeros when the
// sequence has none), into a K-major scratch S [Kp, Vp].
inline void load_initial_state(const StateRef& init, DType init_dtype, int64_t n, int hv, int HV, StateLayout layout,
                               int K, int V, int Kp, int Vp, float* S) {
  const int64_t row = state_row(init, n), head_elems = int64_t{K} * V;
  if (row >= 0) {
    load_state(init.data, state_offset(init, row, hv, HV, head_elems), init_dtype, layout, K, V, Kp, Vp, S);
  } else {
    for (int64_t i = 0; i < int64_t{Kp} * Vp; ++i) S[i] = 0.0f;
  }
}

// The first K rows and V columns of a K-major scratch S [.., Vp] into a pool row of either layout
// and dtype (at element `offset` of `base`), rounded once.
inline void store_state(const float* S, int Vp, StateLayout layout, int K, int V, void* base, int64_t offset,
                        DType dtype) {
  if (layout == StateLayout::kKMajor) {
    for (int i = 0; i < K; ++i) store_row(base, offset + int64_t{i} * V, dtype, V, S + int64_t{i} * Vp, 1.0f);
  } else {
    float row[256];
    for (int j = 0; j < V; ++j) {
      for (int i = 0; i < K; ++i) row[i] = S[int64_t{i} * Vp + j];
      store_row(base, offset + int64_t{j} * K, dtype, K, row, 1.0f);
    }
  }
}

// Splits `num_tasks` over the threads with dynamic balancing; fn(thread, task).
template <typename Fn>
void parallel_for(int64_t num_tasks, int num_threads, Fn&& fn) {
  if (num_threads <= 1 || num_tasks <= 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(0, t);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(num_threads)
  for (int64_t t = 0; t < num_tasks; ++t) fn(omp_get_thread_num(), t);
}

inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace cpu
}  // namespace gdn
