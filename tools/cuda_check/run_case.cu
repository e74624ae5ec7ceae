// One correctness case of the device check: random inputs (rounded to the storage dtype), the
// backend's run on them, and the fp64 oracle of reference/ on the same rounded values.
#include <algorithm>
#include <cmath>
#include <exception>

#include "backend.h"
#include "check.h"
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/decode/recurrent.cuh"
#include "reference.h"

namespace gdn {
namespace check {
namespace {

// Host inputs of a case, already rounded to the dtypes the device reads.
struct Data {
  int64_t T, N;
  std::vector<int64_t> cu;
  std::vector<float> q, k, v, g, b, A_log, dt_bias, S0;  // S0: [slots, HV, K, V] K-major logical
  std::vector<int64_t> idx_in, idx_out;
  int64_t slots;
  std::vector<int64_t> idx_tok, accepted;  // spec_tokens: [N, M] rows per token, [N] num_accepted
  std::vector<int64_t> ck_idx;             // ck_every: [N, kCheckpointsMax] checkpoint rows
  int64_t ck_slots = 0;
};

Data make_data(const Case& c, std::mt19937& rng) {
  Data d;
  d.N = c.lens.size();
  d.cu.assign(d.N + 1, 0);
  for (int64_t n = 0; n < d.N; ++n) d.cu[n + 1] = d.cu[n] + c.lens[n];
  d.T = d.cu[d.N];
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, int64_t cnt, float s, DType dt) {
    x.resize(cnt);
    for (auto& e : x) e = round_to(dt, s * nd(rng));
  };
  fill(d.q, d.T * c.H * c.K, 1.f, c.dt);
  fill(d.k, d.T * c.H * c.K, 1.f, c.dt);
  if (c.key_set > 0) {  // keys from key_set vectors per head (tokens cycle through them)
    std::vector<float> base(int64_t(c.key_set) * c.H * c.K);
    for (auto& e : base) e = nd(rng);
    for (int64_t t = 0; t < d.T; ++t)
      for (int h = 0; h < c.H; ++h) {
        const int64_t s = (t * 7) % c.key_set;
        for (int i = 0; i < c.K; ++i)
          d.k[(t * c.H + h) * c.K + i] = round_to(c.dt, base[(s * c.H + h) * c.K + i] + c.key_noise * nd(rng));
      }
  }
  if (!c.l2) {  // normalized keys (and queries) in the input dtype
    for (int64_t r = 0; r < d.T * c.H; ++r) {
      double sk = 0, sq = 0;
      for (int i = 0; i < c.K; ++i)
        sk += d.k[r * c.K + i] * d.k[r * c.K + i], sq += d.q[r * c.K + i] * d.q[r * c.K + i];
      for (int i = 0; i < c.K; ++i) {
        d.k[r * c.K + i] = round_to(c.dt, d.k[r * c.K + i] / std::sqrt(sk));
        d.q[r * c.K + i] = round_to(c.dt, d.q[r * c.K + i] / std::sqrt(sq));
      }
    }
  }
  fill(d.v, d.T * c.HV * c.V, 1.f, c.dt);
  const DType gdt = c.gate_in_dtype ? c.dt : DType::kFloat32;
  d.g.resize(d.T * c.HV);
  d.b.resize(d.T * c.HV);
  for (int64_t i = 0; i < d.T * c.HV; ++i) {
    const float x = nd(rng), y = nd(rng);
    if (c.fused) {
      d.g[i] = round_to(gdt, x);
      d.b[i] = round_to(gdt, y);
    } else {
      const float ls = -std::log1p(std::exp(-x));  // logsigmoid
      float g = c.gscale * ls;
      if (c.gate_extremes && i % 97 == 5) g = 0.f;
      if (c.gate_extremes && i % 89 == 7) g = -1e4f;
      d.g[i] = round_to(gdt, g);
      float be = 1.f / (1.f + std::exp(-y));
      if (c.gate_extremes && i % 83 == 3) be = 0.f;
      if (c.gate_extremes && i % 79 == 2) be = 2.f;
      d.b[i] = round_to(gdt, be);
    }
  }
  d.A_log.resize(c.HV);
  d.dt_bias.resize(c.HV);
  for (int h = 0; h < c.HV; ++h) d.A_log[h] = 0.5f * nd(rng), d.dt_bias[h] = 0.5f * nd(rng);
  const int64_t M = c.spec_tokens;
  d.slots = M > 0 ? 1 + d.N * M + 2 : c.pool ? 2 * d.N : d.N;
  fill(d.S0, d.slots * c.HV * c.K * c.V, 0.5f, c.sdt);
  d.idx_in.resize(d.N);
  d.idx_out.resize(d.N);
  for (int64_t n = 0; n < d.N; ++n) {
    if (c.pool) {
      d.idx_in[n] = (n % 5 == 3) ? -1 : 2 * n + 1;  // some sequences start from zero
      if (c.oob && n % 11 == 6) d.idx_in[n] = d.slots + n;
      const bool in_ok = d.idx_in[n] >= 0 && d.idx_in[n] < d.slots;
      d.idx_out[n] = (n % 7 == 4) ? -1 : in_ok ? d.idx_in[n] : 2 * n;  // in place
      if (c.oob && n % 13 == 9) d.idx_out[n] = d.slots + 3 * n;
    } else {
      d.idx_in[n] = d.idx_out[n] = n;
    }
  }
  for (int64_t n = 0; n < d.N && M > 0; ++n) {  // spec: a permutation of rows 1..N M, padding on row 0
    const bool pad = n % 5 == 3;
    for (int64_t t = 0; t < M; ++t) {
      int64_t row = pad ? 0 : 1 + ((n * M + t) * 7919) % (d.N * M);
      if (c.oob && n % 6 == 1 && t == 1) row = n % 12 == 1 ? -7 : d.slots + 5 * n;  // out of range: not stored
      d.idx_tok.push_back(row);
    }
    d.accepted.push_back(pad ? 1 : 1 + n % M);
    if (c.oob && n % 7 == 2) d.accepted[n] = n % 2 ? 0 : M + 1;  // out of range: start from zeros
  }
  if (c.ck_every > 0) {  // reversed rows (row 0 never named: it must stay as it was), some none
    const int64_t cells = d.N * kCheckpointsMax;
    d.ck_slots = cells + 1;
    for (int64_t i = 0; i < cells; ++i)
      d.ck_idx.push_back(i % 5 == 2 ? -1 : c.oob && i % 7 == 4 ? d.ck_slots + i : cells - i);
  }
  return d;
}

// Row of the state after token t of sequence n in a spec case, or -1 (the slot map of TokenStates:
// common/token_slots.h, written out here for the oracle).
int64_t spec_row(const Data& d, int M, int64_t n, int64_t t) {
  if (t < 0 || t >= M) return -1;
  const int64_t r = d.idx_tok[n * M + t];
  return r > 0 && r < d.slots ? r : -1;
}

// What the case must produce, from the fp64 oracle (reference/reference.h).
struct Expected {
  ref::Vec o;   // [T, HV, V]
  ref::Vec S;   // the pool after the call: [slots, HV, K, V] K-major
  ref::Vec h;   // with c.stages: the state at each chunk start, [num_chunks, HV, K, V]
  ref::Vec ck;  // with c.ck_every: the checkpoint pool after the call, [ck_slots, HV, K, V] K-major, NaN unwritten
};

Expected oracle(const Case& c, const Data& d) {
  ref::Dims dims;
  dims.T = d.T;
  dims.H = c.H;
  dims.HV = c.HV;
  dims.K = c.K;
  dims.V = c.V;
  dims.bounds = d.cu;
  auto vec = [](const std::vector<float>& x) { return ref::Vec(x.begin(), x.end()); };
  ref::Vec q = vec(d.q), k = vec(d.k), v = vec(d.v), g = vec(d.g), beta = vec(d.b);
  if (c.l2) {
    ref::l2norm(q, c.K);
    ref::l2norm(k, c.K);
  }
  if (c.fused) ref::fused_gates(dims, vec(d.g), vec(d.A_log), vec(d.dt_bias), vec(d.b), g, beta);
  // Initial states gathered from the pool (an index outside [0, slots): zeros).
  const int64_t KV = int64_t(c.K) * c.V, per_seq = c.HV * KV;
  auto in_pool = [&](int64_t row) { return row >= 0 && row < d.slots; };
  const int M = c.spec_tokens;
  auto read_row = [&](int64_t n) {
    if (M == 0) return in_pool(d.idx_in[n]) ? d.idx_in[n] : int64_t(-1);
    return spec_row(d, M, n, d.accepted[n] - 1);
  };
  ref::Vec h0(d.N * per_seq, 0.0);
  for (int64_t n = 0; n < d.N; ++n)
    if (read_row(n) >= 0)
      std::copy(d.S0.begin() + read_row(n) * per_seq, d.S0.begin() + (read_row(n) + 1) * per_seq,
                h0.begin() + n * per_seq);
  Expected e;
  ref::Vec hT, tok;
  ref::recurrence(dims, q, k, v, g, beta, h0, 1.0 / std::sqrt(double(c.K)), e.o, hT, M > 0 ? &tok : nullptr);
  e.S = vec(d.S0);
  for (int64_t n = 0; n < d.N && M == 0; ++n)
    if (in_pool(d.idx_out[n]))
      std::copy(hT.begin() + n * per_seq, hT.begin() + (n + 1) * per_seq, e.S.begin() + d.idx_out[n] * per_seq);
  for (int64_t n = 0; n < d.N && M > 0; ++n)
    for (int64_t t = 0; t < d.cu[n + 1] - d.cu[n]; ++t)
      if (spec_row(d, M, n, t) >= 0)
        std::copy(tok.begin() + (d.cu[n] + t) * per_seq, tok.begin() + (d.cu[n] + t + 1) * per_seq,
                  e.S.begin() + spec_row(d, M, n, t) * per_seq);
  if (c.ck_every > 0) {  // the recurrence run up to each boundary, segment by segment
    e.ck.assign(d.ck_slots * per_seq, std::nan(""));
    for (int64_t n = 0; n < d.N; ++n) {
      ref::Vec h(h0.begin() + n * per_seq, h0.begin() + (n + 1) * per_seq);
      int64_t done = 0;
      for (int64_t j = 0; j < kCheckpointsMax; ++j) {
        const int64_t b = (j + 1) * c.ck_every * kChunkSize, t0 = d.cu[n] + done, len = b - done;
        if (b > d.cu[n + 1] - d.cu[n]) break;
        ref::Dims sd = dims;
        sd.T = len;
        sd.bounds = {0, len};
        auto sl = [&](const ref::Vec& x, int64_t w) {
          return ref::Vec(x.begin() + t0 * w, x.begin() + (t0 + len) * w);
        };
        ref::Vec o, hb;
        ref::recurrence(sd, sl(q, c.H * c.K), sl(k, c.H * c.K), sl(v, c.HV * c.V), sl(g, c.HV), sl(beta, c.HV), h,
                        1.0 / std::sqrt(double(c.K)), o, hb);
        h = hb;
        done = b;
        const int64_t r = d.ck_idx[n * kCheckpointsMax + j];
        if (r >= 0 && r < d.ck_slots) std::copy(h.begin(), h.end(), e.ck.begin() + r * per_seq);
      }
    }
  }
  if (c.stages) {  // the chunk-start states by the oracle's stage chain
    ref::Vec G, L, A, w, u, v_new, hT_chunked;
    ref::chunk_local_cumsum(dims, g, G);
    ref::chunk_scaled_dot_kkt(dims, k, beta, G, L);
    ref::solve_tril(dims, L, A);
    ref::recompute_w_u(dims, k, v, beta, G, A, w, u);
    ref::chunk_fwd_h(dims, k, w, u, G, h0, e.h, v_new, hT_chunked);
  }
  return e;
}

// Relative RMS error of a float result (infinity when it holds a NaN or Inf).
double error_of(const std::vector<float>& got, const ref::Vec& want) {
  const ref::Vec x(got.begin(), got.end());
  return ref::rel_rms_error(x.data(), want.data(), static_cast<int64_t>(want.size()));
}

}  // namespace

bool run_case(const Case& c, std::mt19937& rng) {
  Data d = make_data(c, rng);
  const int K = c.K, V = c.V, H = c.H, HV = c.HV;
  const int64_t T = d.T, N = d.N;
  Problem p;
  p.num_tokens = T;
  p.num_seqs = N;
  p.num_qk_heads = H;
  p.num_v_heads = HV;
  p.head_k = K;
  p.head_v = V;
  p.dtype = c.dt;
  p.gate_dtype = c.gate_in_dtype ? c.dt : DType::kFloat32;
  p.scale = 1.f / std::sqrt(float(K));
  p.use_qk_l2norm = c.l2;
  p.fused_gate = c.fused;
  p.state_layout = c.vmajor ? StateLayout::kVMajor : StateLayout::kKMajor;
  p.state_dtype = c.sdt;
  const IndexType it = c.idx32 ? IndexType::kInt32 : IndexType::kInt64;
  void* cu_d = upload_indices(d.cu, it);
  p.cu_seqlens = cu_d;
  p.cu_seqlens_type = it;
  // With c.pad, q, v and o rows carry gaps (strides no multiple of 8: the unaligned paths).
  const int64_t qst = H * K + (c.pad ? 8 : 0), vst = HV * V + (c.pad ? 3 : 0), ost = HV * V + (c.pad ? 5 : 0);
  void* q_d = c.pad ? upload(d.q, c.dt, T, H * K, qst) : upload(d.q, c.dt, T * H, K, K);
  void* k_d = upload(d.k, c.dt, T * H, K, K);
  void* v_d = upload(d.v, c.dt, T, HV * V, vst);
  void* g_d = upload(d.g, p.gate_dtype, T * HV, 1, 1);
  void* b_d = upload(d.b, p.gate_dtype, T * HV, 1, 1);
  void* A_d = upload(d.A_log, DType::kFloat32, HV, 1, 1);
  void* dtb_d = upload(d.dt_bias, DType::kFloat32, HV, 1, 1);
  // States on the device in the requested layout.
  const int64_t KV = int64_t(K) * V;
  std::vector<float> S0l(d.S0.size());
  for (int64_t r = 0; r < d.slots * HV; ++r)
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) S0l[r * KV + (c.vmajor ? j * K + i : i * V + j)] = d.S0[r * KV + i * V + j];
  const int64_t row_elems = HV * KV, row_stride = row_elems + c.row_pad;
  void* S_d = upload(S0l, c.sdt, d.slots, row_elems, row_stride);
  void* ii_d = upload_indices(d.idx_in, it);
  void* io_d = upload_indices(d.idx_out, it);
  void* o_d;
  const size_t o_bytes = std::max<int64_t>(T * ost, 1) * (c.dt == DType::kFloat32 ? 4 : 2);
  CK(cudaMalloc(&o_d, o_bytes));
  CK(cudaMemset(o_d, 0xff, o_bytes));  // NaN poison

  ForwardArgs f;
  f.problem = p;
  f.q = {q_d, c.pad ? qst : H * K, K};
  f.k = {k_d, H * K, K};
  f.v = {v_d, vst, V};
  f.g = {g_d, HV, 1};
  f.beta = {b_d, HV, 1};
  f.A_log = static_cast<float*>(A_d);
  f.dt_bias = static_cast<float*>(dtb_d);
  f.o = {o_d, ost, V};
  f.initial_state = {S_d, d.slots, ii_d, nullptr, it};
  f.final_state = {S_d, d.slots, io_d, nullptr, it};
  f.initial_state.row_stride = f.final_state.row_stride = row_stride;
  void *tok_d = nullptr, *acc_d = nullptr;
  if (c.spec_tokens > 0) {  // vLLM's verify: the pool takes every token's state; no other states
    tok_d = upload_indices(d.idx_tok, it);
    acc_d = upload_indices(d.accepted, it);
    f.initial_state = f.final_state = StateRef{};
    f.token_states.pool = {S_d, d.slots, tok_d, nullptr, it};
    f.token_states.pool.row_stride = row_stride;
    f.token_states.pool.null_slot = 0;
    f.token_states.max_tokens = c.spec_tokens;
    f.token_states.num_accepted = acc_d;
    f.token_states.num_accepted_type = it;
  }
  void *ck_d = nullptr, *cki_d = nullptr;
  if (c.ck_every > 0) {  // a NaN-poisoned pool of its own (rows nobody names must stay NaN)
    ck_d = upload(std::vector<float>(d.ck_slots * row_elems, std::nanf("")), c.sdt, d.ck_slots, row_elems, row_stride);
    cki_d = upload_indices(d.ck_idx, it);
    f.checkpoints.pool = {ck_d, d.ck_slots, cki_d, nullptr, it};
    f.checkpoints.pool.row_stride = row_stride;
    f.checkpoints.every_chunks = c.ck_every;
    f.checkpoints.max_checkpoints = kCheckpointsMax;
  }
  Exec ex;
  ex.backend = Backend::kCUDA;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  ex.stream = st;
  const int64_t mc = T / kChunkSize + N;  // max_num_chunks
  std::vector<void*> scratch;             // stage buffers and workspace, freed at the end
  auto device_alloc = [&](size_t bytes) {
    void* x;
    CK(cudaMalloc(&x, std::max<size_t>(bytes, 1)));
    scratch.push_back(x);
    return x;
  };
  float* h_d = nullptr;
  bool launched = true;
  try {
    if (c.decode && c.rows_shape >= 0) {  // a candidate shape of the rows kernel (16-bit pools)
      cuda::DecodeConfig cfg = cuda::decode_heuristics(p, cuda::device_props());
      const cuda::RowsShape& s = cuda::kRows16Shapes[c.rows_shape];
      cfg.parts = s.parts;
      cfg.blocks_per_sm = s.blocks_per_sm;
      cfg.staged = s.staged;
      cuda::recurrent_gated_delta_rule(f, ex, cfg);
    } else if (c.decode) {
      cuda::recurrent_gated_delta_rule(f, ex);
    } else if (c.stages) {
      StageBuffers sb;
      sb.q = f.q;
      sb.k = f.k;
      sb.v = f.v;
      sb.g = f.g;
      sb.beta = f.beta;
      sb.G = static_cast<float*>(device_alloc(4 * T * HV));
      sb.L = static_cast<float*>(device_alloc(4 * T * HV * kChunkSize));
      sb.A = static_cast<float*>(device_alloc(4 * T * HV * kChunkSize));
      sb.w = static_cast<float*>(device_alloc(4 * T * HV * K));
      sb.u = static_cast<float*>(device_alloc(4 * T * HV * V));
      sb.v_new = static_cast<float*>(device_alloc(4 * T * HV * V));
      h_d = static_cast<float*>(device_alloc(4 * mc * HV * KV));
      sb.h = h_d;
      sb.o = f.o;
      sb.initial_state = f.initial_state;
      sb.final_state = f.final_state;
      ex.workspace_bytes = cuda::stage_workspace_size(p, 0);
      ex.workspace = device_alloc(ex.workspace_bytes);
      cuda::chunk_local_cumsum(p, sb, ex);
      cuda::chunk_scaled_dot_kkt(p, sb, ex);
      cuda::solve_tril(p, sb, ex);
      cuda::recompute_w_u(p, sb, ex);
      cuda::chunk_fwd_h(p, sb, ex);
      cuda::chunk_fwd_o(p, sb, ex);
    } else {
      ex.workspace_bytes = cuda::chunk_gated_delta_rule_workspace_size(p, 0);
      ex.workspace = device_alloc(ex.workspace_bytes);
      if (c.fwd_o_after || c.fuse_o) {  // an explicit config: the heuristics' choices but for o
        if (!cuda::fast_path_supported(p)) throw Error("fwd_o_after / fuse_o need a tensor-core forward case");
        cuda::ChunkForwardConfig cfg = cuda::chunk_forward_heuristics(p, cuda::device_props());
        cfg.fuse_o = c.fuse_o;
        cfg.fuse_o_serial = c.fuse_o && c.fuse_o_serial;
        ex.workspace_bytes = cuda::fast_workspace_size(p, cfg);
        ex.workspace = device_alloc(ex.workspace_bytes);
        cuda::fast_forward(f, ex, cfg);
      } else {
        cuda::chunk_gated_delta_rule(f, ex);
      }
    }
  } catch (const std::exception& e) {
    std::printf("FAIL %-28s exception: %s\n", c.name.c_str(), e.what());
    launched = false;
  }
  bool ok = false;
  if (launched) {
    CK(cudaStreamSynchronize(st));
    CK(cudaGetLastError());
    const Expected want = oracle(c, d);
    const std::vector<float> o = download(o_d, c.dt, T, HV * V, ost);
    const std::vector<float> Sl = download(S_d, c.sdt, d.slots, row_elems, row_stride);
    std::vector<float> S(Sl.size());
    for (int64_t r = 0; r < d.slots * HV; ++r)
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) S[r * KV + i * V + j] = Sl[r * KV + (c.vmajor ? j * K + i : i * V + j)];
    const double eo = error_of(o, want.o), es = error_of(S, want.S);
    double eh = 0;
    if (c.stages) {  // the chunks that exist (want.h's), of the max_num_chunks the buffer holds
      std::vector<float> h = download(h_d, DType::kFloat32, 1, want.h.size(), want.h.size());
      eh = error_of(h, want.h);
    }
    double ec = 0;  // checkpoints: the error over the written rows; a row nobody names must stay NaN
    if (c.ck_every > 0) {
      const std::vector<float> Cl = download(ck_d, c.sdt, d.ck_slots, row_elems, row_stride);
      std::vector<float> got;
      ref::Vec expect;
      for (int64_t r = 0; r < d.ck_slots * HV; ++r)
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) {
            const float x = Cl[r * KV + (c.vmajor ? j * K + i : i * V + j)];
            const double w = want.ck[r * KV + i * V + j];
            if (std::isnan(w) && !std::isnan(x)) ec = INFINITY;  // written, but no boundary names the row
            if (!std::isnan(w)) got.push_back(x), expect.push_back(w);
          }
      if (expect.empty()) ec = INFINITY;  // the case must store some
      if (std::isfinite(ec)) ec = error_of(got, expect);
    }
    const bool finite = std::isfinite(eo) && std::isfinite(es) && std::isfinite(eh) && std::isfinite(ec);
    ok = finite && eo <= c.tol && es <= c.tol && eh <= c.tol && ec <= c.tol;
    std::printf("%s %-28s T=%-7lld N=%-5lld err_o=%.2e err_state=%.2e%s%s%s\n", ok ? "ok  " : "FAIL", c.name.c_str(),
                (long long)T, (long long)N, eo, es, c.stages ? (" err_h=" + std::to_string(eh)).c_str() : "",
                c.ck_every > 0 ? (" err_ckpt=" + std::to_string(ec)).c_str() : "", finite ? "" : " NON-FINITE");
  }
  for (void* x : {q_d, k_d, v_d, g_d, b_d, A_d, dtb_d, S_d, ii_d, io_d, o_d, cu_d, tok_d, acc_d, ck_d, cki_d})
    cudaFree(x);
  for (void* x : scratch) cudaFree(x);
  cudaStreamDestroy(st);
  return ok;
}

}  // namespace check
}  // namespace gdn
