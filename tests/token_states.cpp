#include "token_states.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "common/host_dtype.h"

#ifdef GDN_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gdn {
namespace test {

std::string SpecCase::name() const {
  std::ostringstream os;
  os << (conv == Convention::kVllm           ? "vllm"
         : conv == Convention::kSglangGroups ? "sglang_groups"
                                             : "sglang_dense")
     << "_N" << N << "_M" << max_tokens << "_K" << K << "_V" << V << "_" << dtype_name(dtype)
     << (layout == StateLayout::kVMajor ? "_vmajor" : "") << (varlen ? "_varlen" : "_fixed")
     << (conv != Convention::kVllm && !disable_state_update ? "_update" : "") << (int64_indices ? "_i64" : "")
     << (tree ? "_tree" : "") << (state_dtype != DType::kFloat32 ? std::string("_state") + dtype_name(state_dtype) : "")
     << (row_pad ? "_rowpad" + std::to_string(row_pad) : "");
  return os.str();
}

namespace {
int64_t written_row(const SpecInputs& s, int64_t n, int64_t t);
}  // namespace

SpecInputs make_spec_inputs(const SpecCase& c, std::mt19937_64& rng) {
  SpecInputs s;
  s.c = c;
  const int64_t N = c.N, M = c.max_tokens;
  std::uniform_int_distribution<int64_t> len_of(1, M);
  // Every fourth sequence is padding: zero-length (vLLM's) or, every eighth, one token (SGLang's
  // fixed batches); a fixed-length batch gives every sequence max_tokens tokens.
  for (int64_t n = 0; n < N; ++n) {
    const bool pad = n % 4 == 3;
    s.padding.push_back(pad);
    s.lens.push_back(!c.varlen ? M : pad ? (n % 8 == 3 ? 0 : 1) : len_of(rng));
  }
  Case hc;
  hc.lens = s.lens;
  hc.varlen = c.varlen;
  hc.H = 2, hc.HV = 4, hc.K = c.K, hc.V = c.V;
  hc.dtype = c.dtype;
  hc.layout = c.layout;
  hc.state_dtype = c.state_dtype;
  hc.initial_state = hc.final_state = false;
  s.in = make_inputs(hc, rng);

  const int64_t head = int64_t{hc.HV} * c.K * c.V;
  std::normal_distribution<float> nd;
  std::bernoulli_distribution quarter(0.25);
  if (c.conv == Convention::kVllm) {
    // Row 0 is the null slot; each real sequence owns max_tokens distinct rows (one in four with a
    // -1 column: that token's state is not stored), padding names row 0 everywhere.
    s.pool_slots = 1 + N * M + 3;
    std::vector<int64_t> rows(s.pool_slots - 1);
    std::iota(rows.begin(), rows.end(), 1);
    std::shuffle(rows.begin(), rows.end(), rng);
    std::uniform_int_distribution<int64_t> col(0, M - 1);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t t = 0; t < M; ++t) s.token_indices.push_back(s.padding[n] ? 0 : rows[n * M + t]);
      if (!s.padding[n] && M > 1 && quarter(rng)) s.token_indices[n * M + col(rng)] = -1;
      s.num_accepted.push_back(s.padding[n] ? 1 : len_of(rng));
    }
  } else {
    s.pool_slots = N + 2;
    std::vector<int64_t> rows(s.pool_slots);
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), rng);
    for (int64_t n = 0; n < N; ++n) s.pool_indices.push_back(s.padding[n] ? -1 : rows[n]);
    if (c.conv == Convention::kSglangGroups) {
      const int64_t groups = N + 1;
      std::vector<int64_t> g(groups);
      std::iota(g.begin(), g.end(), 0);
      std::shuffle(g.begin(), g.end(), rng);
      for (int64_t n = 0; n < N; ++n) s.token_indices.push_back(s.padding[n] ? -1 : g[n]);
      s.buffer_slots = groups * M;
    } else {
      s.buffer_slots = N * M;  // dense: every sequence's tokens are stored, padding's too
    }
    s.buffer.assign(s.buffer_slots * head, std::nanf(""));
  }
  s.pool.resize(s.pool_slots * head);
  for (float& x : s.pool) x = nd(rng);
  // A bf16 / fp16 pool holds the rounded values; the oracle starts from the same ones.
  for (float& x : s.pool) {
    float bits = 0;  // room for any dtype's element
    store_from_float(&bits, 0, c.state_dtype, x);
    x = load_as_float(&bits, 0, c.state_dtype);
  }
  // EAGLE trees: each token's parent drawn among the earlier tokens whose state is stored, or -1.
  for (int64_t n = 0; n < N && c.tree; ++n)
    for (int64_t t = 0; t < M; ++t) {
      std::vector<int64_t> choices{-1};
      for (int64_t p = 0; p < t; ++p)
        if (written_row(s, n, p) >= 0) choices.push_back(p);
      s.parents.push_back(choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)]);
    }
  return s;
}

namespace {

std::vector<uint8_t> index_bytes(const std::vector<int64_t>& x, bool i64) {
  std::vector<uint8_t> b(x.size() * (i64 ? 8 : 4));
  for (size_t i = 0; i < x.size(); ++i) {
    if (i64) {
      std::memcpy(b.data() + 8 * i, &x[i], 8);
    } else {
      const int32_t v = static_cast<int32_t>(x[i]);
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
  }
  return b;
}

// The padding bytes of a padded row (a pattern no kernel writes).
uint8_t pad_byte(size_t b) { return static_cast<uint8_t>(0x5A ^ (b * 37)); }

// Packed fp32 rows of `head` elements as a pool of `dtype` stores them (rows head + pad elements
// apart, the padding filled with pad_byte), and back (packed; the padding checked unchanged).
std::vector<uint8_t> state_bytes(const std::vector<float>& x, DType dtype, int64_t head, int pad) {
  const size_t es = dtype_size(dtype);
  const int64_t rows = static_cast<int64_t>(x.size()) / head, stride = head + pad;
  std::vector<uint8_t> b(rows * stride * es);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < head; ++i) store_from_float(b.data(), r * stride + i, dtype, x[r * head + i]);
    for (size_t j = 0; j < pad * es; ++j) b[(r * stride + head) * es + j] = pad_byte(j);
  }
  return b;
}
std::vector<float> download_states(const Buffer& b, DType dtype, int64_t head, int pad) {
  const std::vector<uint8_t> bytes = b.to_host();
  const size_t es = dtype_size(dtype);
  const int64_t stride = head + pad, rows = static_cast<int64_t>(bytes.size() / es) / stride;
  std::vector<float> x(rows * head);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < head; ++i) x[r * head + i] = load_as_float(bytes.data(), r * stride + i, dtype);
    for (size_t j = 0; j < pad * es; ++j)
      if (bytes[(r * stride + head) * es + j] != pad_byte(j)) {
        ADD_FAILURE() << "row " << r << ": padding byte " << j << " was written";
        break;
      }
  }
  return x;
}

// Element (k, v) of value head hv of row `row` in the case's layout.
int64_t state_at(const SpecCase& c, int64_t row, int hv, int HV, int k, int v) {
  const int64_t h = (row * HV + hv) * int64_t{c.K} * c.V;
  return h + (c.layout == StateLayout::kKMajor ? int64_t{k} * c.V + v : int64_t{v} * c.K + k);
}

// The row sequence n reads from the pool, or -1 (zeros).
int64_t read_row(const SpecInputs& s, int64_t n) {
  if (s.c.conv != Convention::kVllm) return s.pool_indices[n];
  if (s.padding[n]) return -1;
  const int64_t r = s.token_indices[n * s.c.max_tokens + s.num_accepted[n] - 1];
  return r > 0 ? r : -1;
}

// The row that takes the state after token t of sequence n (pool for vLLM, buffer for SGLang), or -1.
int64_t written_row(const SpecInputs& s, int64_t n, int64_t t) {
  const int64_t M = s.c.max_tokens;
  switch (s.c.conv) {
    case Convention::kVllm: {
      const int64_t r = s.token_indices[n * M + t];
      return r > 0 ? r : -1;
    }
    case Convention::kSglangGroups:
      return s.token_indices[n] >= 0 ? s.token_indices[n] * M + t : -1;
    case Convention::kSglangDense:
      break;
  }
  return n * M + t;
}

// Captures call(exec on a new stream) into a CUDA graph and launches it once (CUDA only).
void run_in_graph(Backend backend, Exec exec, const std::function<void(const Exec&)>& call) {
#ifdef GDN_HAS_CUDA
  if (backend != Backend::kCUDA) throw std::logic_error("run_in_graph: CUDA only");
  auto ck = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  };
  cudaStream_t st;
  ck(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  exec.stream = st;
  cudaGraph_t g;
  cudaGraphExec_t gx;
  ck(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  call(exec);
  ck(cudaStreamEndCapture(st, &g), "cudaStreamEndCapture");
  ck(cudaGraphInstantiate(&gx, g, 0), "cudaGraphInstantiate");
  ck(cudaGraphLaunch(gx, st), "cudaGraphLaunch");
  ck(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  cudaGraphExecDestroy(gx);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
#else
  (void)backend, (void)exec, (void)call;
  throw std::logic_error("run_in_graph: built without CUDA");
#endif
}

// EAGLE trees: o and the state after each token by the recurrence along the token's path from the
// sequence's first token (its ancestors through the parents, then itself), one oracle run per token.
void tree_oracle(const SpecInputs& s, const std::vector<double>& q, const std::vector<double>& k,
                 const std::vector<double>& h0, std::vector<double>& o, std::vector<double>& hT,
                 std::vector<double>& tok) {
  const Inputs& in = s.in;
  const int H = in.c.H, HV = in.c.HV, K = in.c.K, V = in.c.V;
  const int64_t M = s.c.max_tokens, head = int64_t{HV} * K * V;
  for (int64_t n = 0; n < s.c.N; ++n)
    for (int64_t t = 0; t < s.lens[n]; ++t) {
      std::vector<int64_t> path;  // global token indices, first token first
      for (int64_t u = t; u >= 0;) {
        path.insert(path.begin(), in.bounds[n] + u);
        const int64_t p = u == 0 ? -1 : s.parents[n * M + u];
        u = u == 0 ? -1 : (p < 0 ? u - 1 : p);
      }
      ref::Dims d = in.dims;
      d.T = static_cast<int64_t>(path.size());
      d.bounds = {0, d.T};
      std::vector<double> pq, pk, pv, pg, pb;
      for (int64_t x : path) {
        pq.insert(pq.end(), q.begin() + x * H * K, q.begin() + (x + 1) * H * K);
        pk.insert(pk.end(), k.begin() + x * H * K, k.begin() + (x + 1) * H * K);
        pv.insert(pv.end(), in.vd.begin() + x * HV * V, in.vd.begin() + (x + 1) * HV * V);
        pg.insert(pg.end(), in.gd.begin() + x * HV, in.gd.begin() + (x + 1) * HV);
        pb.insert(pb.end(), in.betad.begin() + x * HV, in.betad.begin() + (x + 1) * HV);
      }
      const std::vector<double> ph0(h0.begin() + n * head, h0.begin() + (n + 1) * head);
      std::vector<double> po, phT;
      ref::recurrence(d, pq, pk, pv, pg, pb, ph0, 1.0 / std::sqrt(double(K)), po, phT);
      const int64_t x = in.bounds[n] + t;
      std::copy(po.end() - int64_t{HV} * V, po.end(), o.begin() + x * HV * V);
      std::copy(phT.begin(), phT.end(), tok.begin() + x * head);
      if (t + 1 == s.lens[n]) std::copy(phT.begin(), phT.end(), hT.begin() + n * head);
    }
}

}  // namespace

SpecOutputs run_spec(const SpecInputs& s, Backend backend, const std::function<void(ForwardArgs&)>& edit,
                     bool host_copies, Op op, bool graph, const DecodeCall& decode_call) {
  const SpecCase& c = s.c;
  const Inputs& in = s.in;
  ForwardArgs a;
  a.problem = problem_of(in);
  std::vector<int32_t> cu32(in.bounds.begin(), in.bounds.end());
  Buffer cu;
  if (c.varlen) {
    cu = upload_vec(backend, cu32);
    a.problem.cu_seqlens = cu.data();
    a.problem.cu_seqlens_host = host_copies ? cu32.data() : nullptr;
  }
  Buffer q = upload(backend, in.q), k = upload(backend, in.k), v = upload(backend, in.v);
  Buffer g = upload(backend, in.g), beta = upload(backend, in.beta);
  a.q.data = q.data();
  a.k.data = k.data();
  a.v.data = v.data();
  a.g.data = g.data();
  a.beta.data = beta.data();
  Buffer o = upload(backend, encode(std::vector<double>(std::max<int64_t>(in.T, 1) * 4 * c.V, std::nan("")), c.dtype));
  a.o.data = o.data();

  const bool i64 = c.int64_indices;
  const IndexType itype = i64 ? IndexType::kInt64 : IndexType::kInt32;
  const std::vector<uint8_t> tok_host = index_bytes(s.token_indices, i64), acc_host = index_bytes(s.num_accepted, i64),
                             pool_idx_host = index_bytes(s.pool_indices, i64), par_host = index_bytes(s.parents, i64);
  const int64_t head = int64_t{in.c.HV} * c.K * c.V;
  const int64_t row_stride = c.row_pad ? head + c.row_pad : 0;
  Buffer pool = upload(backend, state_bytes(s.pool, c.state_dtype, head, c.row_pad)), buffer, tok, acc, pool_idx;
  StateRef pool_ref;
  pool_ref.data = pool.as<float>();
  pool_ref.num_slots = s.pool_slots;
  pool_ref.row_stride = row_stride;
  TokenStates& ts = a.token_states;
  ts.max_tokens = c.max_tokens;
  if (!s.token_indices.empty()) tok = upload(backend, tok_host);
  if (c.conv == Convention::kVllm) {
    acc = upload(backend, acc_host);
    ts.pool = pool_ref;
    ts.pool.indices = tok.data();
    ts.pool.indices_host = host_copies ? tok_host.data() : nullptr;
    ts.pool.index_type = itype;
    ts.pool.null_slot = 0;  // NULL_BLOCK_ID
    ts.per_token = true;
    ts.num_accepted = acc.data();
    ts.num_accepted_host = host_copies ? acc_host.data() : nullptr;
    ts.num_accepted_type = itype;
  } else {
    pool_idx = upload(backend, pool_idx_host);
    pool_ref.indices = pool_idx.data();
    pool_ref.indices_host = host_copies ? pool_idx_host.data() : nullptr;
    pool_ref.index_type = itype;
    a.initial_state = pool_ref;
    if (!c.disable_state_update) a.final_state = pool_ref;
    buffer = upload(backend, state_bytes(s.buffer, c.state_dtype, head, c.row_pad));
    ts.pool.data = buffer.data();
    ts.pool.num_slots = s.buffer_slots;
    ts.pool.row_stride = row_stride;
    ts.per_token = false;
    if (c.conv == Convention::kSglangGroups) {
      ts.pool.indices = tok.data();
      ts.pool.indices_host = host_copies ? tok_host.data() : nullptr;
      ts.pool.index_type = itype;
    }
  }
  Buffer par;
  if (!s.parents.empty()) {
    par = upload(backend, par_host);
    ts.parents = par.data();
    ts.parents_host = host_copies ? par_host.data() : nullptr;
    ts.parents_type = itype;
  }
  Exec exec;
  exec.backend = backend;
  if (edit) edit(a);
  SpecOutputs out;
  try {
    const size_t bytes = op == Op::kChunk ? chunk_gated_delta_rule_workspace_size(a.problem, exec)
                                          : recurrent_gated_delta_rule_workspace_size(a.problem, exec);
    Buffer ws(backend, bytes);
    exec.workspace = ws.data();
    exec.workspace_bytes = bytes;
    if (graph)
      run_in_graph(backend, exec, [&](const Exec& ex) { recurrent_gated_delta_rule(a, ex); });
    else if (op == Op::kChunk)
      chunk_gated_delta_rule(a, exec);
    else if (decode_call)
      decode_call(a, exec);
    else
      recurrent_gated_delta_rule(a, exec);
    synchronize(backend);
  } catch (const Error& e) {
    out.error = e.what();
  }
  const std::vector<uint8_t> ob = o.to_host();
  out.o = decode(ob.data(), static_cast<size_t>(in.T) * 4 * c.V, c.dtype);
  out.pool = download_states(pool, c.state_dtype, head, c.row_pad);
  if (buffer.bytes()) out.buffer = download_states(buffer, c.state_dtype, head, c.row_pad);
  return out;
}

void expect_spec_close(const SpecInputs& s, const SpecOutputs& out, Backend backend) {
  const SpecCase& c = s.c;
  const Inputs& in = s.in;
  const int HV = in.c.HV;
  const int64_t N = c.N, KV = int64_t{c.K} * c.V, head = HV * KV;
  ASSERT_EQ(out.error, "") << "the call was rejected";
  // The oracle from each sequence's initial state.
  std::vector<double> h0(N * head, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t r = read_row(s, n);
    if (r < 0) continue;
    for (int hv = 0; hv < HV; ++hv)
      for (int x = 0; x < c.K; ++x)
        for (int y = 0; y < c.V; ++y) h0[((n * HV + hv) * c.K + x) * c.V + y] = s.pool[state_at(c, r, hv, HV, x, y)];
  }
  std::vector<double> q = in.qd, k = in.kd, o, hT, tok;
  ref::l2norm(q, c.K);
  ref::l2norm(k, c.K);
  ref::recurrence(in.dims, q, k, in.vd, in.gd, in.betad, h0, 1.0 / std::sqrt(double(c.K)), o, hT, &tok);
  if (c.tree) tree_oracle(s, q, k, h0, o, hT, tok);
  const double tol = tolerance(c.dtype, backend);
  EXPECT_LE(ref::rel_rms_error(out.o.data(), o.data(), static_cast<int64_t>(o.size())), tol) << "o, " << c.name();

  // Every stored state against the oracle; the rows written are marked.
  const bool vllm = c.conv == Convention::kVllm;
  const std::vector<float>& stored = vllm ? out.pool : out.buffer;
  std::vector<bool> written(vllm ? s.pool_slots : s.buffer_slots, false), pool_written(s.pool_slots, false);
  std::vector<double> got, want;
  auto compare = [&](const std::vector<float>& arr, int64_t row, const double* ref_head) {
    for (int hv = 0; hv < HV; ++hv)
      for (int x = 0; x < c.K; ++x)
        for (int y = 0; y < c.V; ++y) {
          got.push_back(arr[state_at(c, row, hv, HV, x, y)]);
          want.push_back(ref_head[(hv * int64_t{c.K} + x) * c.V + y]);
        }
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < s.lens[n]; ++t) {
      const int64_t row = written_row(s, n, t);
      if (row < 0) continue;
      written[row] = true;
      compare(stored, row, &tok[(in.bounds[n] + t) * head]);
    }
  if (!vllm && !c.disable_state_update)
    for (int64_t n = 0; n < N; ++n)
      if (s.pool_indices[n] >= 0) {
        pool_written[s.pool_indices[n]] = true;
        compare(out.pool, s.pool_indices[n], &hT[n * head]);
      }
  ASSERT_FALSE(want.empty());
  EXPECT_LE(ref::rel_rms_error(got.data(), want.data(), static_cast<int64_t>(want.size())),
            state_tolerance(in.c, backend))
      << "stored states, " << c.name();
  // Rows that nothing writes are bitwise unchanged (NaN in the intermediate buffer).
  const std::vector<float>& stored_before = vllm ? s.pool : s.buffer;
  for (size_t r = 0; r < written.size(); ++r) {
    if (written[r]) continue;
    EXPECT_EQ(0, std::memcmp(&stored[r * head], &stored_before[r * head], head * sizeof(float)))
        << (vllm ? "pool" : "buffer") << " row " << r << " was written though no token names it, " << c.name();
  }
  for (int64_t r = 0; r < s.pool_slots && !vllm; ++r) {
    if (pool_written[r]) continue;
    EXPECT_EQ(0, std::memcmp(&out.pool[r * head], &s.pool[r * head], head * sizeof(float)))
        << "pool row " << r << " was written, " << c.name();
  }
}

}  // namespace test
}  // namespace gdn
