// The fused chunked forward on the CPU. One task per (sequence, value head) runs every chunk of
// the sequence in order with the state in the thread's scratch, so each chunk's stages run while
// its data is in L1/L2 and nothing but o and the final state goes back to memory.
#include "backend.h"
#include "cpu/chunk.h"

namespace gdn {
namespace cpu {

int resolve_num_threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

size_t chunk_gated_delta_rule_workspace_size(const Problem& p, int num_threads) {
  return threads_workspace_bytes(resolve_num_threads(num_threads), p.head_k, p.head_v);
}

namespace {

void forward_task(const ForwardArgs& a, const Sequences& seqs, int64_t n, int hv, ChunkScratch& s) {
  const Problem& p = a.problem;
  const int K = p.head_k, V = p.head_v, H = p.num_qk_heads, HV = p.num_v_heads;
  const int hk = hv / (HV / H);
  const int64_t state_elems = int64_t{HV} * K * V;

  const int64_t in_row = state_row(a.initial_state, n);
  if (in_row >= 0) {
    load_state(a.initial_state.data + in_row * state_elems + hv * int64_t{K} * V, p.state_layout, K, V, s.S);
  } else {
    for (int64_t i = 0; i < int64_t{K} * V; ++i) s.S[i] = 0.0f;
  }

  float* k = s.X;          // [C, K]
  float* q = s.X + C * K;  // [C, K]
  float* w = q + C * K;    // [C, K]
  float g[C];
  for (int64_t t0 = seqs.begin(n); t0 < seqs.end(n); t0 += C) {
    const int rows = static_cast<int>(std::min<int64_t>(C, seqs.end(n) - t0));
    load_rows(a.k, p.dtype, t0, rows, hk, K, p.use_qk_l2norm, k);
    load_rows(a.q, p.dtype, t0, rows, hk, K, p.use_qk_l2norm, q);
    load_rows(a.v, p.dtype, t0, rows, hv, V, false, s.vb);
    for (int i = 0; i < C; ++i) {
      g[i] = 0.0f;
      s.beta[i] = 0.0f;
      if (i < rows) load_gates(p, a.g, a.beta, a.A_log, a.dt_bias, t0 + i, hv, &g[i], &s.beta[i]);
    }
    chunk_cumsum(g, rows, s.G);

    // [k k^T; q k^T] in one product, then L (strict, times beta) and P (inclusive) in place.
    transpose(C, K, k, K, s.kT, C);
    gemm(2 * C, C, K, s.X, K, s.kT, C, s.KQ, C, false);
    gate_lower(s.KQ, s.G, s.beta, true);
    invert_unit_lower(s.KQ, s.A);
    scale_rows_for_w_u(k, s.G, s.beta, K, V, s.kb, s.vb);
    chunk_w_u(s.A, s.kb, s.vb, K, V, w, s.u);

    // [q S; w S] in one product; v_new = u - w S.
    gemm(2 * C, V, K, q, K, s.S, V, s.QW, V, false);
    float* qS = s.QW;
    const float* wS = s.QW + C * V;
    for (int i = 0; i < C * V; ++i) s.u[i] -= wS[i];

    // o = scale (exp(G) q S + P v_new)
    float* P = s.KQ + C * C;
    gate_lower(P, s.G, nullptr, false);
    for (int i = 0; i < C; ++i) {
      const float f = std::exp(s.G[i]);
      for (int x = 0; x < V; ++x) qS[i * V + x] *= f;
    }
    gemm<Shape::kLowerA>(C, V, C, P, C, s.u, V, qS, V, true);
    for (int i = 0; i < rows; ++i)
      store_row(a.o.data, (t0 + i) * a.o.stride_token + hv * a.o.stride_head, p.dtype, V, qS + i * V, p.scale);

    chunk_state_update(s.S, s.kT, s.u, s.G, K, V, s.vd);
  }

  const int64_t out_row = state_row(a.final_state, n);
  if (out_row >= 0)
    store_state(s.S, p.state_layout, K, V, a.final_state.data + out_row * state_elems + hv * int64_t{K} * V);
}

}  // namespace

void chunk_gated_delta_rule(const ForwardArgs& a, const Exec& exec) {
  const Problem& p = a.problem;
  const Sequences seqs(p);
  const int threads = resolve_num_threads(exec.num_threads);
  const int HV = p.num_v_heads;
  parallel_for(p.num_seqs * HV, threads, [&](int thread, int64_t task) {
    ChunkScratch s = thread_scratch(exec.workspace, thread, p.head_k, p.head_v);
    forward_task(a, seqs, task / HV, static_cast<int>(task % HV), s);
  });
}

}  // namespace cpu
}  // namespace gdn
