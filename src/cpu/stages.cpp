// The stages of the chunked forward on the CPU, each on its own over fp32 intermediates (SPEC.md
// section 3). They share the chunk steps of chunk.h with the fused forward; each task is one
// (sequence, value head), and chunk-parallel stages walk its chunks in order.
#include "backend.h"
#include "cpu/chunk.h"

namespace gdn {
namespace cpu {
namespace {

// Workspace: [chunk offsets, N + 1 int64][per-thread chunk scratch].
int64_t* chunk_offsets(void* workspace) { return static_cast<int64_t*>(workspace); }
void* scratch_base(void* workspace, int64_t num_seqs) {
  return static_cast<char*>(workspace) + align_up((num_seqs + 1) * sizeof(int64_t), 64);
}

void fill_chunk_offsets(const Sequences& seqs, int64_t* offsets) {
  offsets[0] = 0;
  for (int64_t n = 0; n < seqs.num_seqs; ++n) offsets[n + 1] = offsets[n] + seqs.num_chunks(n);
}

// fn(scratch, n, hv) for every (sequence, value head), spread over the threads.
template <typename Fn>
void for_each_sequence_head(const Problem& p, const Exec& exec, Fn&& fn) {
  const int HV = p.num_v_heads;
  void* base = scratch_base(exec.workspace, p.num_seqs);
  parallel_for(p.num_seqs * HV, resolve_num_threads(exec.num_threads), [&](int thread, int64_t task) {
    ChunkScratch s = thread_scratch(base, thread, p.head_k, p.head_v);
    fn(s, task / HV, static_cast<int>(task % HV));
  });
}

// G of one chunk from the [T, HV] buffer; padded rows repeat G_last.
void load_chunk_G(const float* G, int64_t t0, int rows, int HV, int hv, double* dst) {
  for (int i = 0; i < C; ++i) dst[i] = G[(t0 + std::min(i, rows - 1)) * HV + hv];
}

void load_chunk_beta(const Problem& p, const ConstTensor& beta, int64_t t0, int rows, int hv, float* dst) {
  for (int i = 0; i < C; ++i) dst[i] = i < rows ? load_scalar(beta, t0 + i, hv, p.gate_dtype) : 0.0f;
}

// Rows of a [T, HV, 64] matrix buffer (L or A) for one chunk, zero-padded to 64 x 64.
void load_chunk_square(const float* base, int64_t t0, int rows, int HV, int hv, float* dst) {
  load_rows_f32(base, t0, rows, HV, hv, C, C, dst);
}

}  // namespace

size_t stage_workspace_size(const Problem& p, int num_threads) {
  return align_up((p.num_seqs + 1) * sizeof(int64_t), 64) +
         threads_workspace_bytes(resolve_num_threads(num_threads), p.head_k, p.head_v);
}

void l2norm(const L2NormArgs& a, const Exec& exec) {
  const int64_t rows = a.num_tokens * a.num_heads;
  const int64_t block = 256;  // rows per task
  parallel_for((rows + block - 1) / block, resolve_num_threads(exec.num_threads), [&](int, int64_t task) {
    float x[256];  // dim <= 256: the capability table's max_head_size (any dim: scalar loops)
    for (int64_t r = task * block; r < std::min(rows, (task + 1) * block); ++r) {
      const int64_t t = r / a.num_heads;
      const int h = static_cast<int>(r % a.num_heads);
      load_row(a.x.data, t * a.x.stride_token + h * a.x.stride_head, a.dtype, a.dim, x);
      l2norm_row(x, a.dim);
      store_row(a.y.data, t * a.y.stride_token + h * a.y.stride_head, a.dtype, a.dim, x, 1.0f);
    }
  });
}

void chunk_local_cumsum(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Sequences seqs(p);
  const int HV = p.num_v_heads;
  for_each_sequence_head(p, exec, [&](ChunkScratch&, int64_t n, int hv) {
    float acc = 0;
    for (int64_t t = seqs.begin(n); t < seqs.end(n); ++t) {
      if ((t - seqs.begin(n)) % C == 0) acc = 0;
      acc += load_scalar(b.g, t, hv, p.gate_dtype);
      b.G[t * HV + hv] = acc;
    }
  });
}

void chunk_scaled_dot_kkt(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Sequences seqs(p);
  const int K = p.head_k, Kp = padded(K), HV = p.num_v_heads, hk_ratio = HV / p.num_qk_heads;
  for_each_sequence_head(p, exec, [&](ChunkScratch& s, int64_t n, int hv) {
    for (int64_t t0 = seqs.begin(n); t0 < seqs.end(n); t0 += C) {
      const int rows = static_cast<int>(std::min<int64_t>(C, seqs.end(n) - t0));
      load_rows(b.k, p.dtype, t0, rows, hv / hk_ratio, K, Kp, false, s.X);
      load_chunk_G(b.G, t0, rows, HV, hv, s.G);
      load_chunk_beta(p, b.beta, t0, rows, hv, s.beta);
      transpose(C, Kp, s.X, Kp, s.kT, C);
      gemm(C, C, Kp, s.X, Kp, s.kT, C, s.KQ, C, false);
      gate_lower(s.KQ, s.G, s.beta, true);
      store_rows_f32(s.KQ, C, t0, rows, HV, hv, C, b.L);
    }
  });
}

void solve_tril(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Sequences seqs(p);
  const int HV = p.num_v_heads;
  for_each_sequence_head(p, exec, [&](ChunkScratch& s, int64_t n, int hv) {
    for (int64_t t0 = seqs.begin(n); t0 < seqs.end(n); t0 += C) {
      const int rows = static_cast<int>(std::min<int64_t>(C, seqs.end(n) - t0));
      load_chunk_square(b.L, t0, rows, HV, hv, s.KQ);
      // Only the strict lower triangle of L is defined; the padded rows are zero.
      for (int i = 0; i < C; ++i)
        for (int j = i; j < C; ++j) s.KQ[i * C + j] = 0.0f;
      invert_unit_lower(s.KQ, s.A);
      store_rows_f32(s.A, C, t0, rows, HV, hv, C, b.A);
    }
  });
}

void recompute_w_u(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Sequences seqs(p);
  const int K = p.head_k, V = p.head_v, Kp = padded(K), Vp = padded(V), HV = p.num_v_heads;
  const int hk_ratio = HV / p.num_qk_heads;
  for_each_sequence_head(p, exec, [&](ChunkScratch& s, int64_t n, int hv) {
    float* w = s.X + 2 * C * Kp;
    for (int64_t t0 = seqs.begin(n); t0 < seqs.end(n); t0 += C) {
      const int rows = static_cast<int>(std::min<int64_t>(C, seqs.end(n) - t0));
      load_rows(b.k, p.dtype, t0, rows, hv / hk_ratio, K, Kp, false, s.X);
      load_rows(b.v, p.dtype, t0, rows, hv, V, Vp, false, s.vb);
      load_chunk_G(b.G, t0, rows, HV, hv, s.G);
      load_chunk_beta(p, b.beta, t0, rows, hv, s.beta);
      load_chunk_square(b.A, t0, rows, HV, hv, s.A);
      // Entries of A past the diagonal and past the sequence end are not part of the chunk.
      for (int i = 0; i < C; ++i)
        for (int j = i + 1; j < C; ++j) s.A[i * C + j] = 0.0f;
      scale_rows_for_w_u(s.X, s.G, s.beta, Kp, Vp, s.kb, s.vb);
      chunk_w_u(s.A, s.kb, s.vb, Kp, Vp, w, s.u);
      store_rows_f32(w, Kp, t0, rows, HV, hv, K, b.w);
      store_rows_f32(s.u, Vp, t0, rows, HV, hv, V, b.u);
    }
  });
}

void chunk_fwd_h(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Sequences seqs(p);
  const int K = p.head_k, V = p.head_v, Kp = padded(K), Vp = padded(V), HV = p.num_v_heads;
  const int hk_ratio = HV / p.num_qk_heads;
  const int64_t head_elems = int64_t{K} * V;
  int64_t* offsets = chunk_offsets(exec.workspace);
  fill_chunk_offsets(seqs, offsets);
  for_each_sequence_head(p, exec, [&](ChunkScratch& s, int64_t n, int hv) {
    load_initial_state(b.initial_state, p.state_dtype, n, hv, HV, p.state_layout, K, V, Kp, Vp, s.S);
    float* w = s.X + 2 * C * Kp;
    int64_t chunk = offsets[n];
    for (int64_t t0 = seqs.begin(n); t0 < seqs.end(n); t0 += C, ++chunk) {
      const int rows = static_cast<int>(std::min<int64_t>(C, seqs.end(n) - t0));
      store_state(s.S, Vp, StateLayout::kKMajor, K, V, b.h, (chunk * HV + hv) * head_elems, DType::kFloat32);
      load_rows(b.k, p.dtype, t0, rows, hv / hk_ratio, K, Kp, false, s.X);
      load_rows_f32(b.w, t0, rows, HV, hv, K, Kp, w);
      load_rows_f32(b.u, t0, rows, HV, hv, V, Vp, s.u);
      load_chunk_G(b.G, t0, rows, HV, hv, s.G);
      gemm(C, Vp, Kp, w, Kp, s.S, Vp, s.QW, Vp, false);
      for (int i = 0; i < C * Vp; ++i) s.u[i] -= s.QW[i];
      store_rows_f32(s.u, Vp, t0, rows, HV, hv, V, b.v_new);
      transpose(C, Kp, s.X, Kp, s.kT, C);
      chunk_state_update(s.S, s.kT, s.u, s.G, Kp, Vp, s.vd);
    }
    const int64_t out_row = state_row(b.final_state, n);
    if (out_row >= 0)
      store_state(s.S, Vp, p.state_layout, K, V, b.final_state.data,
                  state_offset(b.final_state, out_row, hv, HV, head_elems), p.state_dtype);
  });
}

void chunk_fwd_o(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Sequences seqs(p);
  const int K = p.head_k, V = p.head_v, Kp = padded(K), Vp = padded(V), HV = p.num_v_heads;
  const int hk_ratio = HV / p.num_qk_heads;
  const int64_t head_elems = int64_t{K} * V;
  int64_t* offsets = chunk_offsets(exec.workspace);
  fill_chunk_offsets(seqs, offsets);
  for_each_sequence_head(p, exec, [&](ChunkScratch& s, int64_t n, int hv) {
    float* k = s.X;
    float* q = s.X + C * Kp;
    int64_t chunk = offsets[n];
    for (int64_t t0 = seqs.begin(n); t0 < seqs.end(n); t0 += C, ++chunk) {
      const int rows = static_cast<int>(std::min<int64_t>(C, seqs.end(n) - t0));
      load_rows(b.k, p.dtype, t0, rows, hv / hk_ratio, K, Kp, false, k);
      load_rows(b.q, p.dtype, t0, rows, hv / hk_ratio, K, Kp, false, q);
      load_rows_f32(b.v_new, t0, rows, HV, hv, V, Vp, s.u);
      load_chunk_G(b.G, t0, rows, HV, hv, s.G);
      transpose(C, Kp, k, Kp, s.kT, C);
      gemm(C, C, Kp, q, Kp, s.kT, C, s.KQ, C, false);
      gate_lower(s.KQ, s.G, nullptr, false);
      // h of this chunk: read in place when its rows are whole vectors, else through the
      // zero-padded state scratch.
      const float* h = b.h + (chunk * HV + hv) * head_elems;
      if (Kp != K || Vp != V) {
        load_state(h, 0, DType::kFloat32, StateLayout::kKMajor, K, V, Kp, Vp, s.S);
        h = s.S;
      }
      gemm(C, Vp, Kp, q, Kp, h, Vp, s.QW, Vp, false);
      for (int i = 0; i < C; ++i) {
        const float f = decay_factor(s.G[i]);
        for (int x = 0; x < Vp; ++x) s.QW[i * Vp + x] *= f;
      }
      gemm<Shape::kLowerA>(C, Vp, C, s.KQ, C, s.u, Vp, s.QW, Vp, true);
      for (int i = 0; i < rows; ++i)
        store_row(b.o.data, (t0 + i) * b.o.stride_token + hv * b.o.stride_head, p.dtype, V, s.QW + i * Vp, p.scale);
    }
  });
}

}  // namespace cpu
}  // namespace gdn
