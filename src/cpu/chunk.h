// One chunk of the chunked algorithm on the CPU: the scratch a thread works in and the steps
// that the fused forward (forward.cpp) and the stage operations (stages.cpp) share.
// Chunks are always 64 rows: rows past the end of a sequence are zero (k, q, v, w, u) with g = 0
// and beta = 0, so they add nothing to the state and the products need no masking.
// Head sizes that are not a multiple of 16 work the same way in the other direction: every
// per-chunk buffer has rows of padded(K) / padded(V) floats whose columns past K / V are zero
// (loads zero-fill them), so the 16-float vector products run unchanged and the padded columns of
// w, u, v_new, o and the state stay zero; only the first K / V columns are ever stored.
#pragma once

#include "cpu/common.h"
#include "cpu/gemm.h"

namespace gdn {
namespace cpu {

// A head size rounded up to whole 16-float vectors: the row width of the chunk buffers.
inline int padded(int d) { return (d + 15) / 16 * 16; }

// Row widths below are the padded sizes Kp = padded(K), Vp = padded(V).
struct ChunkScratch {
  float* S;      // [states, Kp, Vp]  running states, K-major (one per value head of a task)
  float* X;      // [3C, Kp] rows [0, C): k, [C, 2C): q, [2C, 3C): w  (so [k; q] and [q; w] are contiguous)
  float* kT;     // [Kp, C]  k transposed
  float* KQraw;  // [2C, C]  [k k^T; q k^T] (lower triangles), shared by the value heads of a q/k head
  float* KQ;     // [2C, C]  [L; P]: KQraw gated for one value head
  float* A;      // [C, C]   (I + L)^-1
  float* kb;     // [C, Kp]  beta exp(G) k
  float* vb;     // [C, Vp]  beta v
  float* u;      // [C, Vp]  u, then v_new in place
  float* QW;     // [2C, Vp] [q S; w S], then o in rows [0, C)
  float* vd;     // [C, Vp]  exp(G_last - G) v_new
  double* G;     // [C]      chunk-local cumulative gate (natural log), fp64: see chunk_cumsum
  float* beta;   // [C]

  static size_t bytes(int head_k, int head_v, int states) {
    const int K = padded(head_k), V = padded(head_v);
    const size_t floats[] = {
        size_t(states) * K * V, 3u * C * K,    size_t(K) * C, 2u * C * C,    2u * C * C, C * C, size_t(C) * K,
        size_t(C) * V,          size_t(C) * V, 2u * C * V,    size_t(C) * V, C,          C};
    size_t total = 0;
    for (size_t f : floats) total += align_up(f * sizeof(float), 64);
    return total;
  }

  // Lays the buffers out in `base` (64-byte aligned, ChunkScratch::bytes(K, V) long).
  static ChunkScratch carve(void* base, int head_k, int head_v, int states) {
    const int K = padded(head_k), V = padded(head_v);
    char* p = static_cast<char*>(base);
    auto take = [&](size_t n) {
      float* f = reinterpret_cast<float*>(p);
      p += align_up(n * sizeof(float), 64);
      return f;
    };
    ChunkScratch s;
    s.S = take(size_t(states) * K * V);
    s.X = take(3u * C * K);
    s.kT = take(size_t(K) * C);
    s.KQraw = take(2u * C * C);
    s.KQ = take(2u * C * C);
    s.A = take(C * C);
    s.kb = take(size_t(C) * K);
    s.vb = take(size_t(C) * V);
    s.u = take(size_t(C) * V);
    s.QW = take(2u * C * V);
    s.vd = take(size_t(C) * V);
    s.G = reinterpret_cast<double*>(take(2 * C));
    s.beta = take(C);
    return s;
  }
};

// Per-thread scratch carved from the caller's workspace.
inline size_t per_thread_bytes(int K, int V, int states) { return align_up(ChunkScratch::bytes(K, V, states), 4096); }
inline ChunkScratch thread_scratch(void* workspace, int thread, int K, int V, int states = 1) {
  char* base = static_cast<char*>(workspace);
  // Align the caller's pointer up to 64 bytes (the workspace size includes the slack).
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  return ChunkScratch::carve(base + size_t(thread) * per_thread_bytes(K, V, states), K, V, states);
}
inline size_t threads_workspace_bytes(int threads, int K, int V, int states = 1) {
  return 64 + size_t(threads) * per_thread_bytes(K, V, states);
}

// Asks for the rows [t0, t0 + rows) of one head of a token-major tensor to be brought into cache:
// they are strided (one row per token), which the hardware prefetcher follows poorly.
inline void prefetch_rows(const void* data, int64_t stride_token, int64_t offset, int64_t t0, int rows, int bytes,
                          size_t elem) {
  const char* base = static_cast<const char*>(data) + offset * elem;
  for (int i = 0; i < rows; ++i) {
    const char* row = base + (t0 + i) * stride_token * elem;
    for (int b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
  }
}

// Loads `rows` token rows of head `head` of a [T, heads, dim] tensor into dst[C, ld] (fp32, ld >=
// dim), optionally l2-normalized, zero-filling columns [dim, ld) and rows [rows, C).
inline void load_rows(const ConstTensor& t, DType dtype, int64_t t0, int rows, int head, int dim, int ld,
                      bool normalize, float* dst) {
  for (int i = 0; i < rows; ++i) {
    float* row = dst + i * ld;
    load_row(t.data, (t0 + i) * t.stride_token + head * t.stride_head, dtype, dim, row);
    if (normalize) l2norm_row(row, dim);
    for (int x = dim; x < ld; ++x) row[x] = 0.0f;
  }
  for (int i = rows * ld; i < C * ld; ++i) dst[i] = 0.0f;
}

// Same for fp32 packed intermediates [T, heads, dim].
inline void load_rows_f32(const float* base, int64_t t0, int rows, int heads, int head, int dim, int ld, float* dst) {
  for (int i = 0; i < rows; ++i) {
    const float* src = base + ((t0 + i) * heads + head) * int64_t{dim};
    for (int x = 0; x < dim; ++x) dst[i * ld + x] = src[x];
    for (int x = dim; x < ld; ++x) dst[i * ld + x] = 0.0f;
  }
  for (int i = rows * ld; i < C * ld; ++i) dst[i] = 0.0f;
}
inline void store_rows_f32(const float* src, int ld, int64_t t0, int rows, int heads, int head, int dim, float* base) {
  for (int i = 0; i < rows; ++i) {
    float* d = base + ((t0 + i) * heads + head) * int64_t{dim};
    for (int x = 0; x < dim; ++x) d[x] = src[i * ld + x];
  }
}

// G[i] = g_0 + ... + g_i for the valid rows; padded rows repeat G_last (their g is 0).
// Summed in fp64: after a very negative gate (g = -1e4) an fp32 G keeps only ~1e-3 of absolute
// precision, and G_i - G_j of two later tokens would lose it (exp of it then errs by ~1e-3).
inline void chunk_cumsum(const float* g, int rows, double* G) {
  double acc = 0;
  for (int i = 0; i < C; ++i) {
    if (i < rows) acc += g[i];
    G[i] = acc;
  }
}

// In-chunk values below kNegligible become 0. A fast-decaying head's factors (a model's: ~1.3 per
// token, -86 over a chunk) and the products they scale reach the subnormal range, and every x86
// FMA that then reads one (w = A kb, w S, the update's vd, o's scaled q S) takes a microcode assist:
// the forward ran 3x slower on a model's gates (bench/cases.txt "model"). 2^-100 leaves their
// products with O(2^-20) values normal, and against their rows' O(1) terms such values are far
// under the rounding. The state's decay exp(G_last) keeps its subnormals (a state may decay that low).
constexpr float kNegligible = 0x1p-100f;
constexpr double kNegligibleLog = -69.31471805599453094;  // ln(2^-100)

// exp(x) for a decay factor inside a chunk, or 0 below kNegligible.
inline float decay_factor(double x) { return x < kNegligibleLog ? 0.0f : std::exp(static_cast<float>(x)); }

// x[0 .. n) below kNegligible in magnitude -> 0.
inline void flush_negligible(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) < kNegligible) x[i] = 0.0f;
}

// X[i, j] <- coef_i X[i, j] exp(G_i - G_j) for j < i (strict) or j <= i, else 0.
// Masked before exponentiating: exp(G_i - G_j) overflows for j > i.
inline void gate_lower(float* X, const double* G, const float* coef, bool strict) {
  for (int i = 0; i < C; ++i) {
    const int last = strict ? i : i + 1;
    const float c = coef ? coef[i] : 1.0f;
    for (int j = 0; j < last; ++j) X[i * C + j] *= c * decay_factor(G[i] - G[j]);
    for (int j = last; j < C; ++j) X[i * C + j] = 0.0f;
  }
}

// out[i, j] = coef_i X[i, j] exp(G_i - G_j) for j < i (strict) or j <= i, else 0; X is not changed
// and only its lower triangle is read.
inline void gate_lower_into(const float* X, float* out, const double* G, const float* coef, bool strict) {
  for (int i = 0; i < C; ++i) {
    const int last = strict ? i : i + 1;
    const float c = coef ? coef[i] : 1.0f;
    for (int j = 0; j < last; ++j) out[i * C + j] = X[i * C + j] * c * decay_factor(G[i] - G[j]);
    for (int j = last; j < C; ++j) out[i * C + j] = 0.0f;
  }
}

// A = (I + L)^-1 for a strictly lower triangular L [C, C], by forward substitution row by row:
// A_i = e_i - sum_{j < i} L_ij A_j (A_j vanishes past column j).
inline void invert_unit_lower(const float* L, float* A) {
  constexpr int kVecs = C / kLanes;
  for (int i = 0; i < C; ++i) {
    f32xN acc[kVecs] = {};
    for (int j = 0; j < i; ++j) {
      const float l = L[i * C + j];
      const int vecs = j / kLanes + 1;
      for (int v = 0; v < vecs; ++v) acc[v] -= l * loadN(A + j * C + kLanes * v);
    }
    for (int v = 0; v < kVecs; ++v) storeN(A + i * C + kLanes * v, acc[v]);
    flush_negligible(A + i * C, i);  // products of a fast head's decays, against the diagonal 1
    A[i * C + i] = 1.0f;
  }
}

// kb_j = beta_j exp(G_j) k_j; vb_j = beta_j v_j (vb holds v on entry). K, V: row widths.
inline void scale_rows_for_w_u(const float* k, const double* G, const float* beta, int K, int V, float* kb, float* vb) {
  for (int j = 0; j < C; ++j) {
    const float fk = beta[j] * decay_factor(G[j]);
    for (int x = 0; x < K; ++x) kb[j * K + x] = fk * k[j * K + x];
    for (int x = 0; x < V; ++x) vb[j * V + x] *= beta[j];
  }
}

// w = A kb, u = A vb (A lower triangular).
inline void chunk_w_u(const float* A, const float* kb, const float* vb, int K, int V, float* w, float* u) {
  gemm<Shape::kLowerA>(C, K, C, A, C, kb, K, w, K, false);
  gemm<Shape::kLowerA>(C, V, C, A, C, vb, V, u, V, false);
  // w_i carries exp(G_i): a fast head's late rows, against u_i in v_new_i = u_i - w_i S.
  flush_negligible(w, int64_t{C} * K);
}

// S <- exp(G_last) S + sum_i exp(G_last - G_i) k_i v_new_i^T  (kT: [K, C], v_new: [C, V]; K, V:
// the padded widths).
inline void chunk_state_update(float* S, const float* kT, const float* v_new, const double* G, int K, int V,
                               float* vd) {
  const double G_last = G[C - 1];
  for (int i = 0; i < C; ++i) {
    const float f = decay_factor(G_last - G[i]);
    for (int x = 0; x < V; ++x) vd[i * V + x] = f * v_new[i * V + x];
  }
  const float decay = std::exp(static_cast<float>(G_last));
  for (int64_t i = 0; i < int64_t{K} * V; ++i) S[i] *= decay;
  gemm(K, V, C, kT, C, vd, V, S, V, true);
}

}  // namespace cpu
}  // namespace gdn
