// The decode step on the CPU: the recurrence itself, token by token, one task per
// (sequence, value head). The state is worked on in place in its own layout, so a decode step
// reads each state row once and writes it once.
#include "backend.h"
#include "common/token_slots.h"
#include "cpu/common.h"
#include "cpu/gemm.h"

namespace gdn {
namespace cpu {
namespace {

// Rows of q, k, v and o live on the stack: K and V are at most 256 (max_head_size of the CPU
// entry of the capability table, common/capabilities.h; validation rejects larger ones).
constexpr int kMaxDim = 256;

// One token on a K-major state S [K, V]:  S = e S;  err = beta (v - S^T k);  S += k err^T;  o = S^T q.
// Two passes over S: the first reads it for S^T k (the decay factors out), the second decays,
// writes and reads for o.
void token_k_major(float* S, int K, int V, const float* k, const float* q, const float* v, float decay, float beta,
                   float* o) {
  float kS[kMaxDim] = {};
  for (int i = 0; i < K; ++i) {
    const float* row = S + i * V;
    for (int j = 0; j < V; ++j) kS[j] += k[i] * row[j];
  }
  float err[kMaxDim];
  for (int j = 0; j < V; ++j) err[j] = beta * (v[j] - decay * kS[j]);
  for (int j = 0; j < V; ++j) o[j] = 0.0f;
  for (int i = 0; i < K; ++i) {
    float* row = S + i * V;
    for (int j = 0; j < V; ++j) {
      row[j] = decay * row[j] + k[i] * err[j];
      o[j] += q[i] * row[j];
    }
  }
}

// The same on a V-major state S [V, K]: each row j is the column S[:, j] of the K-major form, so
// the products are dot products along rows. Two passes over R rows at a time: S_j . k (the decay
// factors out), then the decayed and updated rows, written, and their dot products with q; whole
// vectors of the target's width (f32xN: on AVX2, 16-float vectors in this loop ran 2.3x slower,
// session 30), then a scalar tail when K is not a multiple of it.
template <int R>
inline void rows_v_major(float* S, int K, const float* k, const float* q, const float* v, float decay, float beta,
                         float* o) {
  const int whole = K / kLanes * kLanes;
  f32xN acc[R] = {};
  for (int i = 0; i < whole; i += kLanes) {
    const f32xN kv = loadN(k + i);
    for (int r = 0; r < R; ++r) acc[r] += loadN(S + r * K + i) * kv;
  }
  float err[R];
  for (int r = 0; r < R; ++r) {
    float kS = hsumN(acc[r]);
    for (int i = whole; i < K; ++i) kS += S[r * K + i] * k[i];
    err[r] = beta * (v[r] - decay * kS);
    acc[r] = f32xN{};
  }
  for (int i = 0; i < whole; i += kLanes) {
    const f32xN kv = loadN(k + i), qv = loadN(q + i);
    for (int r = 0; r < R; ++r) {
      const f32xN x = loadN(S + r * K + i) * decay + err[r] * kv;
      storeN(S + r * K + i, x);
      acc[r] += x * qv;
    }
  }
  for (int r = 0; r < R; ++r) {
    float oj = hsumN(acc[r]);
    for (int i = whole; i < K; ++i) {
      float& x = S[r * K + i];
      x = x * decay + err[r] * k[i];
      oj += x * q[i];
    }
    o[r] = oj;
  }
}

void token_v_major(float* S, int K, int V, const float* k, const float* q, const float* v, float decay, float beta,
                   float* o) {
  int j = 0;
  for (; j + 4 <= V; j += 4) rows_v_major<4>(S + j * K, K, k, q, v + j, decay, beta, o + j);
  for (; j < V; ++j) rows_v_major<1>(S + j * K, K, k, q, v + j, decay, beta, o + j);
}

// Value head hv of sequence n's initial state: a token_states row (num_accepted) or an
// initial_state row, as its pool and element offset; data null: none (zeros).
struct HeadRef {
  const void* data;
  int64_t offset;
};
HeadRef initial_head(const ForwardArgs& a, int64_t n, int hv, int64_t head_elems) {
  const TokenStates& ts = a.token_states;
  const int HV = a.problem.num_v_heads;
  if (ts.num_accepted != nullptr) {
    const int64_t c = slots::read_column(ts, ts.num_accepted, n);
    const int64_t row = c < 0 ? -1 : slots::token_row(ts, ts.pool.indices, n, c);
    return row >= 0 ? HeadRef{ts.pool.data, state_offset(ts.pool, row, hv, HV, head_elems)} : HeadRef{nullptr, 0};
  }
  const int64_t row = state_row(a.initial_state, n);
  return row >= 0 ? HeadRef{a.initial_state.data, state_offset(a.initial_state, row, hv, HV, head_elems)}
                  : HeadRef{nullptr, 0};
}

}  // namespace

size_t recurrent_gated_delta_rule_workspace_size(const Problem& p, int num_threads) {
  return static_cast<size_t>(resolve_num_threads(num_threads)) * p.head_k * p.head_v * sizeof(float);
}

void recurrent_gated_delta_rule(const ForwardArgs& a, const Exec& exec) {
  const Problem& p = a.problem;
  const Sequences seqs(p);
  const int K = p.head_k, V = p.head_v, H = p.num_qk_heads, HV = p.num_v_heads;
  const DType qk_dtype = qk_dtype_of(p), o_dtype = o_dtype_of(p);
  const int64_t head_elems = int64_t{K} * V;
  float* scratch = static_cast<float*>(exec.workspace);  // [threads, K, V]
  parallel_for(p.num_seqs * HV, resolve_num_threads(exec.num_threads), [&](int thread, int64_t task) {
    const int64_t n = task / HV;
    const int hv = static_cast<int>(task % HV), hk = hv / (HV / H);
    // An fp32 pool: work in the final row when there is one (in place when it is also the initial
    // row). Otherwise (no final row, or a bf16 / fp16 pool) in the thread's fp32 state of the
    // workspace, converted from the initial row and rounded once into the final row at the end.
    const int64_t out_row = state_row(a.final_state, n);
    const int64_t out_off = out_row >= 0 ? state_offset(a.final_state, out_row, hv, HV, head_elems) : 0;
    const bool in_pool = out_row >= 0 && p.state_dtype == DType::kFloat32;
    float* S = in_pool ? static_cast<float*>(a.final_state.data) + out_off : scratch + thread * head_elems;
    const HeadRef init = initial_head(a, n, hv, head_elems);
    if (init.data == nullptr) {
      for (int64_t i = 0; i < head_elems; ++i) S[i] = 0.0f;
    } else if (!in_pool || init.data != a.final_state.data || init.offset != out_off) {
      load_row(init.data, init.offset, p.state_dtype, static_cast<int>(head_elems), S);
    }
    const TokenStates& ts = a.token_states;
    float k[kMaxDim], q[kMaxDim], v[kMaxDim], o[kMaxDim];
    for (int64_t t = seqs.begin(n); t < seqs.end(n); ++t) {
      // EAGLE trees: continue from the parent's stored state rather than the previous token's.
      const int64_t parent =
          ts.pool.data ? slots::parent_row(ts, ts.pool.indices, ts.parents, n, t - seqs.begin(n)) : -1;
      if (parent >= 0)
        load_row(ts.pool.data, state_offset(ts.pool, parent, hv, HV, head_elems), p.state_dtype,
                 static_cast<int>(head_elems), S);
      load_row(a.k.data, t * a.k.stride_token + hk * a.k.stride_head, qk_dtype, K, k);
      load_row(a.q.data, t * a.q.stride_token + hk * a.q.stride_head, qk_dtype, K, q);
      load_row(a.v.data, t * a.v.stride_token + hv * a.v.stride_head, p.dtype, V, v);
      if (p.use_qk_l2norm) {
        l2norm_row(k, K);
        l2norm_row(q, K);
      }
      float g, beta;
      load_gates(p, a.g, a.beta, a.A_log, a.dt_bias, t, hv, &g, &beta);
      if (p.state_layout == StateLayout::kKMajor)
        token_k_major(S, K, V, k, q, v, std::exp(g), beta, o);
      else
        token_v_major(S, K, V, k, q, v, std::exp(g), beta, o);
      store_row(a.o.data, t * a.o.stride_token + hv * a.o.stride_head, o_dtype, V, o, p.scale);
      // The state after this token, in the state's layout as it is (rounded once to a 16-bit pool;
      // S itself stays fp32).
      const int64_t snap = ts.pool.data ? slots::token_row(ts, ts.pool.indices, n, t - seqs.begin(n)) : -1;
      if (snap >= 0)
        store_row(ts.pool.data, state_offset(ts.pool, snap, hv, HV, head_elems), p.state_dtype,
                  static_cast<int>(head_elems), S, 1.0f);
    }
    if (out_row >= 0 && !in_pool)
      store_row(a.final_state.data, out_off, p.state_dtype, static_cast<int>(head_elems), S, 1.0f);
  });
}

}  // namespace cpu
}  // namespace gdn
