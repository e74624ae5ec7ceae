// Prefill checkpoints (Checkpoints, prefix caching) of the chunked forward: every stored row is
// bitwise the final state of a separate call on the prefix that ends at its boundary (same
// backend, inputs and options), and close to the fp64 recurrence on that prefix; rows no boundary
// names stay bitwise unchanged; o and the final states equal a call without checkpoints. Ragged
// lengths (zero-length padding, a boundary at the very end, partial last chunks), every_chunks 1..3,
// both layouts, all three state dtypes, with and without a slot map. Bad input: clear errors.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace gdn {
namespace test {
namespace {

struct CkCase {
  Case c;
  int64_t every = 1;
  int64_t max_ck = 4;
  bool slot_map = true;
};

// A call's host buffers (the CPU backend reads host memory).
struct Call {
  std::vector<uint8_t> o, s_in, s_out, pool;
  std::vector<int64_t> ck_idx;
  std::vector<int64_t> bounds;
  ForwardArgs a;
};

size_t state_bytes(const Case& c) { return size_t(c.HV) * c.K * c.V * dtype_size(c.state_dtype); }

// The forward on tokens [t0, t0 + lens...) of `in` (sequence boundaries `bounds`, relative), the
// initial state rows `first_seq`.. of in.state0; no checkpoints.
void setup(const Inputs& in, const std::vector<int64_t>& bounds, int64_t first_seq, Call& call) {
  const Case& c = in.c;
  const int64_t N = int64_t(bounds.size()) - 1, T = bounds.back() - bounds.front(), t0 = bounds.front();
  call.bounds = bounds;
  for (int64_t& b : call.bounds) b -= t0;
  ForwardArgs& a = call.a;
  Case cc = c;
  cc.lens.assign(N, 0);
  for (int64_t n = 0; n < N; ++n) cc.lens[n] = call.bounds[n + 1] - call.bounds[n];
  a.problem = problem_of(cc);
  a.problem.cu_seqlens = call.bounds.data();
  a.problem.cu_seqlens_type = IndexType::kInt64;
  const size_t qe = dtype_size(c.dtype), ge = dtype_size(DType::kFloat32);
  a.q.data = in.q.data() + t0 * c.H * c.K * qe;
  a.k.data = in.k.data() + t0 * c.H * c.K * qe;
  a.v.data = in.v.data() + t0 * c.HV * c.V * qe;
  a.g.data = in.g.data() + t0 * c.HV * ge;
  a.beta.data = in.beta.data() + t0 * c.HV * ge;
  call.o = encode(std::vector<double>(std::max<int64_t>(T, 1) * c.HV * c.V, std::nan("")), c.dtype);
  a.o.data = call.o.data();
  const size_t row = state_bytes(c);
  const std::vector<uint8_t> all = encode(std::vector<double>(in.state0.begin(), in.state0.end()), c.state_dtype);
  call.s_in.assign(all.begin() + first_seq * row, all.begin() + (first_seq + N) * row);
  call.s_out = encode(std::vector<double>(N * row / dtype_size(c.state_dtype), std::nan("")), c.state_dtype);
  a.initial_state.data = call.s_in.data();
  a.initial_state.num_slots = N;
  a.final_state.data = call.s_out.data();
  a.final_state.num_slots = N;
}

Exec cpu_exec(const Problem& p, std::vector<uint8_t>& ws) {
  Exec e;
  e.backend = Backend::kCPU;
  ws.resize(chunk_gated_delta_rule_workspace_size(p, e));
  e.workspace = ws.data();
  e.workspace_bytes = ws.size();
  return e;
}

void forward(const ForwardArgs& a) {
  std::vector<uint8_t> ws;
  chunk_gated_delta_rule(a, cpu_exec(a.problem, ws));
}

// A pool row (the case's layout and state dtype) as a K-major [HV, K, V] double array.
std::vector<double> k_major(const Case& c, const uint8_t* bytes) {
  const std::vector<double> x = decode(bytes, size_t(c.HV) * c.K * c.V, c.state_dtype);
  if (c.layout == StateLayout::kKMajor) return x;
  std::vector<double> y(x.size());
  for (int h = 0; h < c.HV; ++h)
    for (int i = 0; i < c.K; ++i)
      for (int j = 0; j < c.V; ++j) y[(size_t(h) * c.K + i) * c.V + j] = x[(size_t(h) * c.V + j) * c.K + i];
  return y;
}

// The fp64 recurrence on the prefix [begin, begin + len) of sequence n: its final state.
std::vector<double> oracle_prefix(const Inputs& in, int64_t n, int64_t len) {
  const Case& c = in.c;
  const int64_t b = in.bounds[n];
  auto slice = [&](const std::vector<double>& x, int64_t width) {
    return std::vector<double>(x.begin() + b * width, x.begin() + (b + len) * width);
  };
  std::vector<double> q = slice(in.qd, c.H * c.K), k = slice(in.kd, c.H * c.K);
  if (c.l2norm) {
    ref::l2norm(q, c.K);
    ref::l2norm(k, c.K);
  }
  ref::Dims d;
  d.T = len;
  d.H = c.H, d.HV = c.HV, d.K = c.K, d.V = c.V;
  d.bounds = {0, len};
  const std::vector<double> h0 = k_major(c, encode(std::vector<double>(in.state0.begin() + n * c.HV * c.K * c.V,
                                                                       in.state0.begin() + (n + 1) * c.HV * c.K * c.V),
                                                   c.state_dtype)
                                                .data());
  std::vector<double> o, hT;
  ref::recurrence(d, q, k, slice(in.vd, c.HV * c.V), slice(in.gd, c.HV), slice(in.betad, c.HV), h0,
                  1.0 / std::sqrt(double(c.K)), o, hT);
  return hT;
}

void run_case(const CkCase& k, uint64_t seed) {
  const Case& c = k.c;
  std::mt19937_64 rng(seed);
  const Inputs in = make_inputs(c, rng);
  const int64_t N = in.dims.N(), M = k.max_ck, S = N * M + 5;
  const size_t row = state_bytes(c);
  SCOPED_TRACE(c.name() + " every " + std::to_string(k.every) + (k.slot_map ? " slot map" : " dense"));

  Call plain, with;
  setup(in, in.bounds, 0, plain);
  forward(plain.a);
  setup(in, in.bounds, 0, with);
  // The pool: a byte pattern (a NaN in every dtype) that rows nobody writes must keep.
  with.pool.assign(S * row, 0xff);
  const std::vector<uint8_t> before = with.pool;
  Checkpoints& ck = with.a.checkpoints;
  ck.pool.data = with.pool.data();
  ck.pool.num_slots = S;
  ck.every_chunks = k.every;
  ck.max_checkpoints = M;
  if (k.slot_map) {  // reversed rows, every third entry none, column j of row n at S - 1 - (n M + j)
    with.ck_idx.resize(N * M);
    for (int64_t i = 0; i < N * M; ++i) with.ck_idx[i] = i % 3 == 2 ? -1 : S - 1 - i;
    ck.pool.indices = with.ck_idx.data();
    ck.pool.index_type = IndexType::kInt64;
  }
  forward(with.a);
  EXPECT_EQ(0, std::memcmp(plain.o.data(), with.o.data(), plain.o.size())) << "o changed by checkpoints";
  EXPECT_EQ(0, std::memcmp(plain.s_out.data(), with.s_out.data(), plain.s_out.size())) << "final state changed";

  std::vector<bool> written(S, false);
  int64_t stored = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = in.bounds[n + 1] - in.bounds[n];
    for (int64_t j = 0; j < M; ++j) {
      const int64_t b = (j + 1) * k.every * kChunkSize;
      const int64_t r = k.slot_map ? with.ck_idx[n * M + j] : n * M + j;
      if (b > len || r < 0) continue;
      written[r] = true;
      ++stored;
      // The separate call on the prefix: its final state, bitwise.
      Call prefix;
      setup(in, {in.bounds[n], in.bounds[n] + b}, n, prefix);
      forward(prefix.a);
      EXPECT_EQ(0, std::memcmp(prefix.s_out.data(), with.pool.data() + r * row, row))
          << "sequence " << n << " boundary " << j << " (token " << b << ") differs from the prefix call's state";
      const std::vector<double> ref = oracle_prefix(in, n, b), got = k_major(c, with.pool.data() + r * row);
      const double err = ref::rel_rms_error(got.data(), ref.data(), int64_t(ref.size()));
      EXPECT_LE(err, state_tolerance(c, Backend::kCPU)) << "sequence " << n << " boundary " << j;
    }
  }
  EXPECT_GT(stored, 0) << "the case stores no checkpoint";
  for (int64_t r = 0; r < S; ++r) {
    if (written[r]) continue;
    EXPECT_EQ(0, std::memcmp(before.data() + r * row, with.pool.data() + r * row, row)) << "row " << r << " changed";
  }
}

TEST(Checkpoints, MatchPrefixCallsBitwise) {
  std::vector<CkCase> cases;
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
    for (DType sd : {DType::kFloat32, DType::kBFloat16, DType::kFloat16})
      for (int64_t every : {1, 2, 3}) {
        CkCase k;
        k.c.lens = {200, 0, 128, 393, 64, 257};
        k.c.layout = layout;
        k.c.state_dtype = sd;
        k.c.dtype = sd == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16;
        k.every = every;
        k.slot_map = every != 2;
        cases.push_back(k);
      }
  CkCase odd;  // head sizes off the 16-float vectors, GQA, fp32 inputs
  odd.c.lens = {130, 320};
  odd.c.H = 1, odd.c.HV = 3, odd.c.K = 60, odd.c.V = 36;
  odd.max_ck = 5;
  cases.push_back(odd);
  uint64_t seed = test_seed();
  for (const CkCase& k : cases) run_case(k, seed++);
}

// Runs a small CPU call with checkpoints, edited by `edit`, and returns the error message ("" if accepted).
std::string error_of(const std::function<void(ForwardArgs&, std::vector<int64_t>&)>& edit,
                     Backend backend = Backend::kCPU) {
  Case c;
  c.lens = {128, 64};
  std::mt19937_64 rng(1);
  const Inputs in = make_inputs(c, rng);
  Call call;
  setup(in, in.bounds, 0, call);
  call.pool.assign(8 * state_bytes(c), 0);
  call.ck_idx = {0, 1, 2, 3};  // [N = 2, 2]
  Checkpoints& ck = call.a.checkpoints;
  ck.pool.data = call.pool.data();
  ck.pool.num_slots = 8;
  ck.pool.index_type = IndexType::kInt64;
  ck.every_chunks = 1;
  ck.max_checkpoints = 2;
  ck.pool.indices = call.ck_idx.data();  // edit may set it null (the dense slot map)
  edit(call.a, call.ck_idx);
  if (ck.pool.indices) ck.pool.indices = ck.pool.indices_host = call.ck_idx.data();
  call.a.problem.cu_seqlens_host = call.bounds.data();
  std::vector<uint8_t> ws;
  Exec e = cpu_exec(call.a.problem, ws);
  e.backend = backend;
  try {
    if (backend == Backend::kCPU) {
      chunk_gated_delta_rule(call.a, e);
    } else {
      e.workspace_bytes = 1u << 30;  // the call is rejected before the workspace is read
      chunk_gated_delta_rule(call.a, e);
    }
  } catch (const Error& err) {
    return err.what();
  }
  return "";
}

void expect_error(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos)
      << "message: \"" << msg << "\"; expected it to contain \"" << part << "\"";
}

TEST(CheckpointErrors, BadInput) {
  EXPECT_EQ(error_of([](ForwardArgs&, std::vector<int64_t>&) {}), "");
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>&) { a.checkpoints.every_chunks = 0; }),
               "checkpoints.every_chunks is 0; expected >= 1");
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>&) { a.checkpoints.max_checkpoints = 0; }),
               "checkpoints.max_checkpoints is 0; expected >= 1");
  expect_error(error_of([](ForwardArgs&, std::vector<int64_t>& idx) { idx[3] = 8; }),
               "checkpoints.pool.indices[1][1] is 8; expected < num_slots = 8");
  // Sequence 1 (64 tokens) stores boundary 0 only: its column 1 may repeat a row; column 0 may not.
  EXPECT_EQ(error_of([](ForwardArgs&, std::vector<int64_t>& idx) { idx[3] = 0; }), "");
  expect_error(error_of([](ForwardArgs&, std::vector<int64_t>& idx) { idx[2] = 1; }),
               "checkpoints: row 1 is written twice (the second time by boundary 0 of sequence 1)");
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>&) {
                 a.checkpoints.pool.indices = nullptr;
                 a.checkpoints.pool.num_slots = 3;
               }),
               "checkpoints.pool.num_slots is 3; expected at least N * max_checkpoints = 2 * 2");
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>&) {
                 a.checkpoints.pool.present = reinterpret_cast<const uint8_t*>(&a);
               }),
               "checkpoints.pool.present is set; expected null");
  // The same pool as the initial or final state: the rows sequences read or write are off limits.
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>& idx) {
                 a.initial_state = a.checkpoints.pool;
                 a.initial_state.indices = nullptr;  // rows 0, 1
                 idx = {2, 1, 3, 4};
               }),
               "checkpoints: row 1 is sequence 1's initial_state row (the same pool) and a checkpoint row");
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>& idx) {
                 a.final_state = a.checkpoints.pool;
                 a.final_state.indices = nullptr;  // rows 0, 1
                 idx = {0, 5, 6, 7};
               }),
               "checkpoints: row 0 is sequence 0's final_state row (the same pool) and a checkpoint row");
  EXPECT_EQ(error_of([](ForwardArgs& a, std::vector<int64_t>& idx) {
              a.final_state = a.checkpoints.pool;
              a.final_state.indices = nullptr;
              idx = {4, 5, 6, 7};
            }),
            "");
}

TEST(CheckpointErrors, DecodeRejects) {
  Case c;
  c.lens = {2};
  std::mt19937_64 rng(2);
  const Inputs in = make_inputs(c, rng);
  Call call;
  setup(in, in.bounds, 0, call);
  call.pool.assign(2 * state_bytes(c), 0);
  call.a.checkpoints.pool.data = call.pool.data();
  call.a.checkpoints.pool.num_slots = 2;
  call.a.checkpoints.every_chunks = 1;
  call.a.checkpoints.max_checkpoints = 1;
  std::vector<uint8_t> ws;
  Exec e;
  ws.resize(recurrent_gated_delta_rule_workspace_size(call.a.problem, e));
  e.workspace = ws.data();
  e.workspace_bytes = ws.size();
  try {
    recurrent_gated_delta_rule(call.a, e);
    ADD_FAILURE() << "accepted";
  } catch (const Error& err) {
    expect_error(err.what(), "checkpoints is given; expected it only with chunk_gated_delta_rule");
  }
}

// The capability table: the CPU backend stores checkpoints, the CUDA backend does not yet, and a
// CUDA call with checkpoints is rejected naming the flag (validation only: nothing reaches the
// device, so this runs in a CUDA build without a device too).
TEST(CheckpointErrors, CudaBackendRejects) {
  EXPECT_TRUE(capabilities(Backend::kCPU).checkpoints);
  EXPECT_FALSE(capabilities(Backend::kCUDA).checkpoints);
  if (!capabilities(Backend::kCUDA).built) GTEST_SKIP() << "built without CUDA";
  expect_error(error_of([](ForwardArgs&, std::vector<int64_t>&) {}, Backend::kCUDA),
               "backend does not store prefill checkpoints (capabilities(backend).checkpoints is false)");
}

}  // namespace
}  // namespace test
}  // namespace gdn
