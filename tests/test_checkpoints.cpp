// Prefill checkpoints (Checkpoints, prefix caching) of the chunked forward, on the CPU and every
// CUDA forward path: every stored row is bitwise the final state of a separate call on the prefix
// that ends at its boundary (same backend, inputs and options; CUDA calls that take the exact split:
// within tolerance, docs/api.md), and close to the fp64 recurrence on that prefix; rows no boundary
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
  // Each stored row bitwise against the prefix call's final state (else the fp64 oracle only: a
  // CUDA call that takes the exact split, docs/api.md).
  bool bitwise = true;
  bool host_copies = true;  // indices_host and cu_seqlens_host given (CUDA validates on the host)
};

// The backend's copies of a case's inputs (host memory for the CPU).
struct DeviceInputs {
  Buffer q, k, v, g, beta;
  DeviceInputs(const Inputs& in, Backend be)
      : q(upload(be, in.q)), k(upload(be, in.k)), v(upload(be, in.v)), g(upload(be, in.g)), beta(upload(be, in.beta)) {}
};

// One call's buffers on the backend.
struct Call {
  Buffer o, s_in, s_out, pool, ck_idx, cu;
  std::vector<int64_t> bounds, ck_idx_host;  // host copies (cu_seqlens_host, indices_host)
  ForwardArgs a;
};

size_t state_bytes(const Case& c) { return size_t(c.HV) * c.K * c.V * dtype_size(c.state_dtype); }

const uint8_t* at(const Buffer& b, size_t bytes) { return static_cast<const uint8_t*>(b.data()) + bytes; }

// The forward on tokens [t0, t0 + lens...) of `in` (sequence boundaries `bounds`, relative), the
// initial state rows `first_seq`.. of in.state0; no checkpoints.
void setup(const Inputs& in, const DeviceInputs& dev, Backend be, const std::vector<int64_t>& bounds, int64_t first_seq,
           Call& call) {
  const Case& c = in.c;
  const int64_t N = int64_t(bounds.size()) - 1, T = bounds.back() - bounds.front(), t0 = bounds.front();
  call.bounds = bounds;
  for (int64_t& b : call.bounds) b -= t0;
  call.cu = upload_vec(be, call.bounds);
  ForwardArgs& a = call.a;
  Case cc = c;
  cc.lens.assign(N, 0);
  for (int64_t n = 0; n < N; ++n) cc.lens[n] = call.bounds[n + 1] - call.bounds[n];
  a.problem = problem_of(cc);
  a.problem.cu_seqlens = call.cu.data();
  a.problem.cu_seqlens_host = call.bounds.data();
  a.problem.cu_seqlens_type = IndexType::kInt64;
  const size_t qe = dtype_size(c.dtype), ge = dtype_size(DType::kFloat32);
  a.q.data = at(dev.q, t0 * c.H * c.K * qe);
  a.k.data = at(dev.k, t0 * c.H * c.K * qe);
  a.v.data = at(dev.v, t0 * c.HV * c.V * qe);
  a.g.data = at(dev.g, t0 * c.HV * ge);
  a.beta.data = at(dev.beta, t0 * c.HV * ge);
  call.o = upload(be, encode(std::vector<double>(std::max<int64_t>(T, 1) * c.HV * c.V, std::nan("")), c.dtype));
  a.o.data = call.o.data();
  const size_t row = state_bytes(c);
  const std::vector<uint8_t> all = encode(std::vector<double>(in.state0.begin(), in.state0.end()), c.state_dtype);
  call.s_in = upload(be, std::vector<uint8_t>(all.begin() + first_seq * row, all.begin() + (first_seq + N) * row));
  call.s_out =
      upload(be, encode(std::vector<double>(N * row / dtype_size(c.state_dtype), std::nan("")), c.state_dtype));
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

void forward(const ForwardArgs& a, Backend be) {
  Exec e;
  e.backend = be;
  Buffer ws(be, chunk_gated_delta_rule_workspace_size(a.problem, e));
  e.workspace = ws.data();
  e.workspace_bytes = ws.bytes();
  chunk_gated_delta_rule(a, e);
  synchronize(be);
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

// The fp64 recurrence over tokens [from, to) of sequence n (offsets from its start), from the
// K-major state h0: the state after token to - 1.
std::vector<double> oracle_segment(const Inputs& in, int64_t n, int64_t from, int64_t to,
                                   const std::vector<double>& h0) {
  const Case& c = in.c;
  const int64_t b = in.bounds[n] + from, len = to - from;
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
  std::vector<double> o, hT;
  ref::recurrence(d, q, k, slice(in.vd, c.HV * c.V), slice(in.gd, c.HV), slice(in.betad, c.HV), h0,
                  1.0 / std::sqrt(double(c.K)), o, hT);
  return hT;
}

// Sequence n's initial state as the forward reads it (rounded to the pool's dtype), K-major.
std::vector<double> oracle_initial(const Inputs& in, int64_t n) {
  const Case& c = in.c;
  const int64_t e = int64_t(c.HV) * c.K * c.V;
  return k_major(
      c, encode(std::vector<double>(in.state0.begin() + n * e, in.state0.begin() + (n + 1) * e), c.state_dtype).data());
}

void run_case(const CkCase& k, uint64_t seed, Backend be) {
  const Case& c = k.c;
  std::mt19937_64 rng(seed);
  const Inputs in = make_inputs(c, rng);
  const DeviceInputs dev(in, be);
  const int64_t N = in.dims.N(), M = k.max_ck, S = N * M + 5;
  const size_t row = state_bytes(c);
  SCOPED_TRACE(c.name() + " every " + std::to_string(k.every) + (k.slot_map ? " slot map" : " dense") +
               (k.host_copies ? "" : " device indices only") + " on " + backend_name(be));

  Call plain, with;
  setup(in, dev, be, in.bounds, 0, plain);
  forward(plain.a, be);
  setup(in, dev, be, in.bounds, 0, with);
  // The pool: a byte pattern (a NaN in every dtype) that rows nobody writes must keep.
  const std::vector<uint8_t> before(S * row, 0xff);
  with.pool = upload(be, before);
  Checkpoints& ck = with.a.checkpoints;
  ck.pool.data = with.pool.data();
  ck.pool.num_slots = S;
  ck.every_chunks = k.every;
  ck.max_checkpoints = M;
  if (k.slot_map) {  // reversed rows, every third entry none, column j of row n at S - 1 - (n M + j)
    with.ck_idx_host.resize(N * M);
    for (int64_t i = 0; i < N * M; ++i) with.ck_idx_host[i] = i % 3 == 2 ? -1 : S - 1 - i;
    with.ck_idx = upload_vec(be, with.ck_idx_host);
    ck.pool.indices = with.ck_idx.data();
    ck.pool.indices_host = with.ck_idx_host.data();
    ck.pool.index_type = IndexType::kInt64;
  }
  if (!k.host_copies) {
    ck.pool.indices_host = nullptr;
    with.a.problem.cu_seqlens_host = nullptr;
  }
  forward(with.a, be);
  EXPECT_TRUE(plain.o.to_host() == with.o.to_host()) << "o changed by checkpoints";
  EXPECT_TRUE(plain.s_out.to_host() == with.s_out.to_host()) << "final state changed";
  const std::vector<uint8_t> pool = with.pool.to_host();

  std::vector<bool> written(S, false);
  int64_t stored = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = in.bounds[n + 1] - in.bounds[n];
    std::vector<double> h = oracle_initial(in, n);
    int64_t done = 0;  // tokens of sequence n the oracle state h has seen
    for (int64_t j = 0; j < M; ++j) {
      const int64_t b = (j + 1) * k.every * kChunkSize;
      const int64_t r = k.slot_map ? with.ck_idx_host[n * M + j] : n * M + j;
      if (b > len) break;
      h = oracle_segment(in, n, done, b, h);
      done = b;
      if (r < 0) continue;
      written[r] = true;
      ++stored;
      if (k.bitwise) {  // the separate call on the prefix: its final state, bitwise
        Call prefix;
        setup(in, dev, be, {in.bounds[n], in.bounds[n] + b}, n, prefix);
        forward(prefix.a, be);
        EXPECT_EQ(0, std::memcmp(prefix.s_out.to_host().data(), pool.data() + r * row, row))
            << "sequence " << n << " boundary " << j << " (token " << b << ") differs from the prefix call's state";
      }
      const std::vector<double> got = k_major(c, pool.data() + r * row);
      const double err = ref::rel_rms_error(got.data(), h.data(), int64_t(h.size()));
      EXPECT_LE(err, state_tolerance(c, be)) << "sequence " << n << " boundary " << j;
    }
  }
  EXPECT_GT(stored, 0) << "the case stores no checkpoint";
  for (int64_t r = 0; r < S; ++r) {
    if (written[r]) continue;
    EXPECT_EQ(0, std::memcmp(before.data() + r * row, pool.data() + r * row, row)) << "row " << r << " changed";
  }
}

// Both layouts x the three pool dtypes x every_chunks 1..3 (dense buffer for 2) on ragged lengths:
// zero-length padding, a boundary at the very end (128, 64), partial last chunks.
std::vector<CkCase> layout_dtype_cases(int K, DType bf16_or_f32) {
  std::vector<CkCase> cases;
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
    for (DType sd : {DType::kFloat32, DType::kBFloat16, DType::kFloat16})
      for (int64_t every : {1, 2, 3}) {
        CkCase k;
        k.c.lens = {200, 0, 128, 393, 64, 257};
        k.c.K = k.c.V = K;
        k.c.layout = layout;
        k.c.state_dtype = sd;
        k.c.dtype = sd == DType::kFloat16 && bf16_or_f32 == DType::kBFloat16 ? DType::kFloat16 : bf16_or_f32;
        k.every = every;
        k.slot_map = every != 2;
        cases.push_back(k);
      }
  return cases;
}

TEST(Checkpoints, MatchPrefixCallsBitwise) {
  std::vector<CkCase> cases = layout_dtype_cases(64, DType::kBFloat16);
  CkCase odd;  // head sizes off the 16-float vectors, GQA, fp32 inputs
  odd.c.lens = {130, 320};
  odd.c.H = 1, odd.c.HV = 3, odd.c.K = 60, odd.c.V = 36;
  odd.max_ck = 5;
  cases.push_back(odd);
  uint64_t seed = test_seed();
  for (const CkCase& k : cases) run_case(k, seed++, Backend::kCPU);
}

// Every CUDA forward path (the choices of src/cuda/backend.cu and chunk/heuristics.h on an H200,
// 132 SMs), none of them split, so every row is bitwise the prefix call's final state (that call
// has one sequence: it may run another mode of the same chain, whose state arithmetic is the same):
//   K = V = 64 bf16 / fp16: the wgmma chain padded to 128 columns; 16-bit pools through its fp32 copy
//   of the initial and final rows, the checkpoints rounded on write;
//   K = V = 128: the wgmma chain with o fused (24 chains: 48 blocks; 40 chains: 80 blocks) and
//   with bulk stores, fwd_o after it (80 chains: 160 blocks, under 4 chunks per sequence);
//   fp32 inputs and K = 60, V = 36: the exact stages.
TEST(CUDACheckpoints, MatchPrefixCallsBitwise) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  std::vector<CkCase> cases = layout_dtype_cases(64, DType::kBFloat16);
  for (const CkCase& k : layout_dtype_cases(128, DType::kBFloat16)) cases.push_back(k);
  for (int64_t seqs : {10, 20}) {  // fused o; bulk stores
    for (DType sd : {DType::kFloat32, DType::kBFloat16}) {
      CkCase k;
      k.c.K = k.c.V = 128;
      k.c.dtype = DType::kBFloat16;
      k.c.state_dtype = sd;
      k.c.layout = sd == DType::kFloat32 ? StateLayout::kKMajor : StateLayout::kVMajor;
      k.c.lens.clear();  // HV = 4 chains per sequence, padding among them
      for (int64_t n = 0; n < seqs; ++n) k.c.lens.push_back(n % 7 == 3 ? 0 : 64 * (1 + n % 4) + 17 * (n % 3));
      k.every = seqs == 10 ? 1 : 2;
      k.max_ck = 3;
      cases.push_back(k);
    }
  }
  for (const CkCase& k : layout_dtype_cases(64, DType::kFloat32)) cases.push_back(k);
  CkCase odd;
  odd.c.lens = {130, 320};
  odd.c.H = 1, odd.c.HV = 3, odd.c.K = 60, odd.c.V = 36;
  odd.max_ck = 5;
  cases.push_back(odd);
  CkCase device_only = cases[3];  // bf16 pool, slot map; no host copies: the device clamps the indices
  device_only.host_copies = false;
  cases.push_back(device_only);
  uint64_t seed = test_seed();
  for (const CkCase& k : cases) run_case(k, seed++, Backend::kCUDA);
}

// The exact split of long sequences (chunk/split.cuh): H = 2, HV = 4, one sequence of 4096 tokens
// on 132 SMs splits into 8 parts of 8 chunks (heuristics.h). The boundaries every 10 chunks fall in
// parts 1 .. 7, whose chains start from the scan's states: against the fp64 oracle (the prefix
// call splits differently, so not bitwise); o and the final state still bitwise as without.
TEST(CUDACheckpoints, SplitLongSequence) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  uint64_t seed = test_seed();
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
    for (DType sd : {DType::kFloat32, DType::kBFloat16}) {
      CkCase k;
      k.c.lens = {4096};
      k.c.K = k.c.V = 128;
      k.c.dtype = DType::kBFloat16;
      k.c.layout = layout;
      k.c.state_dtype = sd;
      k.every = 10;
      k.max_ck = 6;
      k.bitwise = false;
      run_case(k, seed++, Backend::kCUDA);
    }
}

// Two parts of one sequence (H = 16, HV = 32: 64 chain blocks on 132 SMs; 4200 tokens = 66 chunks
// in a first part of 47 and a second of 19, heuristics.h): part 0 of the chain runs beside the
// summary pass. Boundaries every 10 chunks fall in both parts (the one after chunk 49 is part 1's
// third); every 47, exactly on the seam (after part 0's last chunk).
TEST(CUDACheckpoints, SplitTwoUnequalParts) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  uint64_t seed = test_seed() ^ 0x2u;
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {
    CkCase k;
    k.c.lens = {4200};
    k.c.H = 16, k.c.HV = 32;
    k.c.K = k.c.V = 128;
    k.c.dtype = DType::kBFloat16;
    k.c.layout = layout;
    k.c.state_dtype = layout == StateLayout::kKMajor ? DType::kFloat32 : DType::kBFloat16;
    k.every = layout == StateLayout::kKMajor ? 10 : 47;
    k.max_ck = 7;
    k.bitwise = false;
    run_case(k, seed++, Backend::kCUDA);
  }
}

// Runs a small call with checkpoints on host buffers, edited by `edit`, and returns the error
// message ("" if accepted). On the CUDA backend only for calls that validation rejects.
std::string error_of(const std::function<void(ForwardArgs&, std::vector<int64_t>&)>& edit,
                     Backend backend = Backend::kCPU) {
  Case c;
  c.lens = {128, 64};
  std::mt19937_64 rng(1);
  const Inputs in = make_inputs(c, rng);
  const DeviceInputs host(in, Backend::kCPU);
  Call call;
  setup(in, host, Backend::kCPU, in.bounds, 0, call);
  call.pool = upload(Backend::kCPU, std::vector<uint8_t>(8 * state_bytes(c), 0));
  call.ck_idx_host = {0, 1, 2, 3};  // [N = 2, 2]
  Checkpoints& ck = call.a.checkpoints;
  ck.pool.data = call.pool.data();
  ck.pool.num_slots = 8;
  ck.pool.index_type = IndexType::kInt64;
  ck.every_chunks = 1;
  ck.max_checkpoints = 2;
  ck.pool.indices = call.ck_idx_host.data();  // edit may set it null (the dense slot map)
  edit(call.a, call.ck_idx_host);
  if (ck.pool.indices) ck.pool.indices = ck.pool.indices_host = call.ck_idx_host.data();
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
  const DeviceInputs host(in, Backend::kCPU);
  Call call;
  setup(in, host, Backend::kCPU, in.bounds, 0, call);
  call.pool = upload(Backend::kCPU, std::vector<uint8_t>(2 * state_bytes(c), 0));
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

// The capability table: both backends store checkpoints. A CUDA call validates them on its host
// copies before anything reaches the device (so this runs in a CUDA build without a device too).
TEST(CheckpointErrors, CudaValidates) {
  EXPECT_TRUE(capabilities(Backend::kCPU).checkpoints);
  EXPECT_TRUE(capabilities(Backend::kCUDA).checkpoints);
  if (!capabilities(Backend::kCUDA).built) GTEST_SKIP() << "built without CUDA";
  expect_error(error_of([](ForwardArgs&, std::vector<int64_t>& idx) { idx[2] = 1; }, Backend::kCUDA),
               "checkpoints: row 1 is written twice (the second time by boundary 0 of sequence 1)");
  expect_error(error_of([](ForwardArgs& a, std::vector<int64_t>&) { a.checkpoints.every_chunks = 0; }, Backend::kCUDA),
               "checkpoints.every_chunks is 0; expected >= 1");
}

}  // namespace
}  // namespace test
}  // namespace gdn
