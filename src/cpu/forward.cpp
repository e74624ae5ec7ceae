// The fused chunked forward on the CPU. One task per (sequence, q/k head) runs every chunk of
// the sequence in order with the states of its value heads in the thread's scratch (carved from
// the caller's workspace), so each chunk's stages run while its data is in L1/L2 and nothing but
// o and the final state goes back to memory.
#include <algorithm>

#include "backend.h"
#include "common/checkpoint_slots.h"
#include "cpu/chunk.h"

namespace gdn {
namespace cpu {

int resolve_num_threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

// A task owns the HV / H value heads that share one q/k head: q and k are loaded, normalized and
// multiplied (k k^T, q k^T) once per chunk for all of them.
int heads_per_task(const Problem& p) { return p.num_v_heads / p.num_qk_heads; }

// Workspace: [per-thread chunk scratch][N int64: sequences, longest first].
size_t chunk_gated_delta_rule_workspace_size(const Problem& p, int num_threads) {
  return threads_workspace_bytes(resolve_num_threads(num_threads), p.head_k, p.head_v, heads_per_task(p)) +
         size_t(p.num_seqs) * sizeof(int64_t);
}

namespace {

// Brings chunk [t0, t0 + rows) of q/k head hk and its value heads into cache ahead of use.
void prefetch_chunk(const ForwardArgs& a, int64_t t0, int rows, int hk, int ratio) {
  const Problem& p = a.problem;
  const size_t e = dtype_size(p.dtype), qe = dtype_size(qk_dtype_of(p)), ge = dtype_size(p.gate_dtype);
  prefetch_rows(a.q.data, a.q.stride_token, hk * a.q.stride_head, t0, rows, int(p.head_k * qe), qe);
  prefetch_rows(a.k.data, a.k.stride_token, hk * a.k.stride_head, t0, rows, int(p.head_k * qe), qe);
  prefetch_rows(a.v.data, a.v.stride_token, hk * ratio * a.v.stride_head, t0, rows,
                int(((ratio - 1) * a.v.stride_head + p.head_v) * e), e);
  prefetch_rows(a.g.data, a.g.stride_token, hk * ratio * a.g.stride_head, t0, rows, int(ratio * ge), ge);
  prefetch_rows(a.beta.data, a.beta.stride_token, hk * ratio * a.beta.stride_head, t0, rows, int(ratio * ge), ge);
}

void forward_task(const ForwardArgs& a, const Sequences& seqs, int64_t n, int hk, ChunkScratch& s) {
  const Problem& p = a.problem;
  // K, V: the head sizes; Kp, Vp: the row widths of the chunk buffers (chunk.h).
  const int K = p.head_k, V = p.head_v, Kp = padded(K), Vp = padded(V), HV = p.num_v_heads;
  const int ratio = heads_per_task(p);
  const DType qk_dtype = qk_dtype_of(p), o_dtype = o_dtype_of(p);
  const int64_t head_elems = int64_t{Kp} * Vp;

  for (int r = 0; r < ratio; ++r)
    load_initial_state(a.initial_state, p.state_dtype, n, hk * ratio + r, HV, p.state_layout, K, V, Kp, Vp,
                       s.S + r * head_elems);

  float* k = s.X;           // [C, Kp]
  float* q = s.X + C * Kp;  // [C, Kp]
  float* w = q + C * Kp;    // [C, Kp]
  float g[C];
  const int64_t end = seqs.end(n);
  // Prefill checkpoints: the state after chunk c (0-based) when (c + 1) is a multiple of
  // every_chunks and the chunk is whole; the same rounding as the final state below, so the row is
  // bitwise what a call ending at that token would return.
  const Checkpoints& ck = a.checkpoints;
  const int64_t stored = ck.pool.data ? slots::checkpoint_count(ck, end - seqs.begin(n)) : 0;
  int64_t chunk = 0;
  for (int64_t t0 = seqs.begin(n); t0 < end; t0 += C, ++chunk) {
    const int rows = static_cast<int>(std::min<int64_t>(C, end - t0));
    if (t0 + C < end) prefetch_chunk(a, t0 + C, static_cast<int>(std::min<int64_t>(C, end - t0 - C)), hk, ratio);
    load_rows(a.k, qk_dtype, t0, rows, hk, K, Kp, p.use_qk_l2norm, k);
    load_rows(a.q, qk_dtype, t0, rows, hk, K, Kp, p.use_qk_l2norm, q);
    // [k k^T; q k^T] (lower triangles), shared by the value heads of this q/k head.
    transpose(C, Kp, k, Kp, s.kT, C);
    gemm<Shape::kLowerC>(C, C, Kp, k, Kp, s.kT, C, s.KQraw, C, false);
    gemm<Shape::kLowerC>(C, C, Kp, q, Kp, s.kT, C, s.KQraw + C * C, C, false);

    for (int r = 0; r < ratio; ++r) {
      const int hv = hk * ratio + r;
      float* S = s.S + r * head_elems;
      load_rows(a.v, p.dtype, t0, rows, hv, V, Vp, false, s.vb);
      for (int i = 0; i < C; ++i) {
        g[i] = 0.0f;
        s.beta[i] = 0.0f;
        if (i < rows) load_gates(p, a.g, a.beta, a.A_log, a.dt_bias, t0 + i, hv, &g[i], &s.beta[i]);
      }
      chunk_cumsum(g, rows, s.G);

      // L = beta exp(G_i - G_j) k_i.k_j (strict) and A = (I + L)^-1; w = A (beta exp(G) k), u = A (beta v).
      gate_lower_into(s.KQraw, s.KQ, s.G, s.beta, true);
      invert_unit_lower(s.KQ, s.A);
      scale_rows_for_w_u(k, s.G, s.beta, Kp, Vp, s.kb, s.vb);
      chunk_w_u(s.A, s.kb, s.vb, Kp, Vp, w, s.u);

      // [q S; w S] in one product; v_new = u - w S.
      gemm(2 * C, Vp, Kp, q, Kp, S, Vp, s.QW, Vp, false);
      float* qS = s.QW;
      const float* wS = s.QW + C * Vp;
      for (int i = 0; i < C * Vp; ++i) s.u[i] -= wS[i];

      // o = scale (exp(G) q S + P v_new), P = exp(G_i - G_j) q_i.k_j (inclusive).
      float* P = s.KQ + C * C;
      gate_lower_into(s.KQraw + C * C, P, s.G, nullptr, false);
      for (int i = 0; i < C; ++i) {
        const float f = decay_factor(s.G[i]);
        for (int x = 0; x < Vp; ++x) qS[i * Vp + x] *= f;
      }
      gemm<Shape::kLowerA>(C, Vp, C, P, C, s.u, Vp, qS, Vp, true);
      for (int i = 0; i < rows; ++i)
        store_row(a.o.data, (t0 + i) * a.o.stride_token + hv * a.o.stride_head, o_dtype, V, qS + i * Vp, p.scale);

      chunk_state_update(S, s.kT, s.u, s.G, Kp, Vp, s.vd);
    }
    if (stored > 0 && (chunk + 1) % ck.every_chunks == 0 && (chunk + 1) / ck.every_chunks <= stored) {
      const int64_t row = slots::checkpoint_row(ck, ck.pool.indices, n, (chunk + 1) / ck.every_chunks - 1);
      for (int r = 0; row >= 0 && r < ratio; ++r)
        store_state(s.S + r * head_elems, Vp, p.state_layout, K, V, ck.pool.data,
                    state_offset(ck.pool, row, hk * ratio + r, HV, int64_t{K} * V), p.state_dtype);
    }
  }

  const int64_t out_row = state_row(a.final_state, n);
  if (out_row >= 0)
    for (int r = 0; r < ratio; ++r)
      store_state(s.S + r * head_elems, Vp, p.state_layout, K, V, a.final_state.data,
                  state_offset(a.final_state, out_row, hk * ratio + r, HV, int64_t{K} * V), p.state_dtype);
}

}  // namespace

void chunk_gated_delta_rule(const ForwardArgs& a, const Exec& exec) {
  const Problem& p = a.problem;
  const Sequences seqs(p);
  const int threads = resolve_num_threads(exec.num_threads);
  const int H = p.num_qk_heads, K = p.head_k, V = p.head_v, ratio = heads_per_task(p);
  // Longest sequences first, so that the dynamic schedule ends with short tasks (no thread is
  // left alone with a long sequence at the end).
  int64_t* order =
      reinterpret_cast<int64_t*>(static_cast<char*>(exec.workspace) + threads_workspace_bytes(threads, K, V, ratio));
  for (int64_t n = 0; n < p.num_seqs; ++n) order[n] = n;
  std::sort(order, order + p.num_seqs, [&](int64_t x, int64_t y) {  // in place, no allocation
    const int64_t lx = seqs.end(x) - seqs.begin(x), ly = seqs.end(y) - seqs.begin(y);
    return lx != ly ? lx > ly : x < y;
  });
  parallel_for(p.num_seqs * H, threads, [&](int thread, int64_t task) {
    ChunkScratch s = thread_scratch(exec.workspace, thread, K, V, ratio);
    forward_task(a, seqs, order[task / H], static_cast<int>(task % H), s);
  });
}

}  // namespace cpu
}  // namespace gdn
