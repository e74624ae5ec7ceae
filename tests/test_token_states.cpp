// The multi-token decode step with per-token states (TokenStates, speculative decoding's verify)
// against the fp64 recurrence: vLLM's convention (2-D slot indices with the null slot 0, the
// initial state through num_accepted) and SGLang's (the pool row read, the states into an
// intermediate buffer by group or densely, with and without disable_state_update), ragged 1..T
// tokens with padding entries (zero-length and with tokens), fixed [N, T] batches, both state
// layouts, both index types, NaN-filled o and buffers; rows nothing writes stay bitwise unchanged.
#include <cmath>
#include <cstring>

#include "token_states.h"

namespace gdn {
namespace test {
namespace {

std::vector<SpecCase> spec_cases() {
  std::vector<SpecCase> cases;
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense})
    for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
      for (int d : {128, 64}) {  // CUDA: the rows kernel (128) and the tiles kernel (64)
        SpecCase c;
        c.conv = conv;
        c.layout = layout;
        c.K = c.V = d;
        cases.push_back(c);
      }
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense})
    for (int d : {128, 64}) {  // EAGLE trees
      SpecCase c;
      c.conv = conv;
      c.K = c.V = d;
      c.layout = d == 64 ? StateLayout::kVMajor : StateLayout::kKMajor;
      c.max_tokens = 6;
      c.tree = true;
      c.disable_state_update = conv != Convention::kSglangGroups;
      cases.push_back(c);
    }
  // Head sizes without a tuned kernel (CUDA: the general decode kernel; CPU: any size).
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense})
    for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {
      SpecCase g;
      g.conv = conv;
      g.layout = layout;
      g.K = layout == StateLayout::kKMajor ? 100 : 60;
      g.V = layout == StateLayout::kKMajor ? 60 : 100;
      g.tree = conv == Convention::kVllm;  // EAGLE parents through the general kernel too
      g.max_tokens = g.tree ? 6 : g.max_tokens;
      cases.push_back(g);
    }
  SpecCase c;
  c.varlen = false;  // a fixed [N, T] batch: every sequence max_tokens long, padding with tokens
  cases.push_back(c);
  c.conv = Convention::kSglangGroups;
  c.disable_state_update = false;  // the pool rows take the last token's state
  cases.push_back(c);
  c.varlen = true;
  c.dtype = DType::kFloat32;
  c.int64_indices = true;
  c.K = 64, c.V = 256;
  c.max_tokens = 16;
  c.N = 12;
  cases.push_back(c);
  c.conv = Convention::kVllm;
  c.layout = StateLayout::kVMajor;
  c.K = 256, c.V = 128;
  c.dtype = DType::kFloat16;
  c.max_tokens = 7;
  cases.push_back(c);
  c.K = c.V = 128;
  c.N = 1;  // one sequence
  c.max_tokens = 1;
  cases.push_back(c);
  // bf16 / fp16 pools and buffers: every stored state rounded once, the running state fp32; both
  // kernels (128: rows, 64: tiles) and both layouts; an EAGLE tree (reloads read rounded states).
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense})
    for (DType sd : {DType::kBFloat16, DType::kFloat16}) {
      SpecCase l;
      l.conv = conv;
      l.state_dtype = sd;
      l.disable_state_update = conv == Convention::kSglangDense;
      cases.push_back(l);
      l.K = l.V = 64;
      l.layout = StateLayout::kVMajor;
      cases.push_back(l);
    }
  SpecCase t;
  t.state_dtype = DType::kBFloat16;
  t.tree = true;
  t.max_tokens = 6;
  cases.push_back(t);
  // Pool and buffer rows off 16-byte alignment (odd row strides): on CUDA the tuned sizes (128:
  // rows, 64: tiles) go to the general kernel, which also takes small heads (K = 3, V = 5) and
  // EAGLE reloads; fp32 and 16-bit pools, both layouts.
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense})
    for (const auto& kv : {std::pair<int, int>{128, 128}, {64, 64}, {3, 5}}) {
      SpecCase u;
      u.conv = conv;
      u.K = kv.first;
      u.V = kv.second;
      u.row_pad = kv.first == 64 ? 2 : 1;
      u.layout = kv.first == 128 ? StateLayout::kKMajor : StateLayout::kVMajor;
      u.state_dtype = conv == Convention::kSglangGroups ? DType::kFloat16 : DType::kFloat32;
      u.disable_state_update = conv == Convention::kSglangDense;
      u.tree = kv.first == 3;
      u.max_tokens = u.tree ? 5 : u.max_tokens;
      cases.push_back(u);
      u.layout = u.layout == StateLayout::kKMajor ? StateLayout::kVMajor : StateLayout::kKMajor;
      u.state_dtype = DType::kBFloat16;
      u.row_pad = 3;
      cases.push_back(u);
    }
  return cases;
}

using Param = std::tuple<Backend, SpecCase>;

class TokenStatesTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    backend_ = std::get<0>(GetParam());
    case_ = std::get<1>(GetParam());
    GDN_SKIP_IF_UNAVAILABLE(backend_);
    Problem p;
    p.num_qk_heads = 2, p.num_v_heads = 4, p.head_k = case_.K, p.head_v = case_.V, p.dtype = case_.dtype;
    p.state_layout = case_.layout;
    GDN_SKIP_IF_UNSUPPORTED(p, backend_, Operation::kDecode);
    rng_.seed(test_seed() ^ std::hash<std::string>()(case_.name()));
  }
  Backend backend_ = Backend::kCPU;
  SpecCase case_;
  std::mt19937_64 rng_;
};

TEST_P(TokenStatesTest, MatchesRecurrence) {
  const SpecInputs s = make_spec_inputs(case_, rng_);
  expect_spec_close(s, run_spec(s, backend_), backend_);
}

// The same call twice gives bitwise identical o and states.
TEST_P(TokenStatesTest, Deterministic) {
  const SpecInputs s = make_spec_inputs(case_, rng_);
  const SpecOutputs a = run_spec(s, backend_), b = run_spec(s, backend_);
  EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(double)));
  EXPECT_EQ(0, std::memcmp(a.pool.data(), b.pool.data(), a.pool.size() * sizeof(float)));
  EXPECT_EQ(a.buffer.size(), b.buffer.size());
  EXPECT_EQ(0, std::memcmp(a.buffer.data(), b.buffer.data(), a.buffer.size() * sizeof(float)));
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return test_param_name(backend_name(std::get<0>(info.param)), info.index, std::get<1>(info.param).name());
}

INSTANTIATE_TEST_SUITE_P(CPU, TokenStatesTest,
                         ::testing::Combine(::testing::Values(Backend::kCPU), ::testing::ValuesIn(spec_cases())),
                         param_name);
INSTANTIATE_TEST_SUITE_P(CUDA, TokenStatesTest,
                         ::testing::Combine(::testing::Values(Backend::kCUDA), ::testing::ValuesIn(spec_cases())),
                         param_name);

// The two conventions are one mechanism: the vLLM call's pool after the call, read at each
// sequence's columns, equals SGLang's dense buffer on the same inputs and initial states.
TEST(CPUTokenStates, ConventionsAgree) {
  std::mt19937_64 rng(test_seed() ^ 0x7e5);
  SpecCase c;
  c.K = c.V = 64;
  c.dtype = DType::kFloat32;
  SpecInputs v = make_spec_inputs(c, rng);
  // SGLang, dense, on the same tokens: each sequence reads the row vLLM reads.
  SpecInputs sg = v;
  sg.c.conv = Convention::kSglangDense;
  sg.pool_indices.clear();
  for (int64_t n = 0; n < c.N; ++n) {
    const int64_t r = v.padding[n] ? -1 : v.token_indices[n * c.max_tokens + v.num_accepted[n] - 1];
    sg.pool_indices.push_back(r > 0 ? r : -1);
  }
  sg.token_indices.clear();
  sg.buffer_slots = c.N * c.max_tokens;
  const int64_t head = 4 * int64_t{c.K} * c.V;
  sg.buffer.assign(sg.buffer_slots * head, std::nanf(""));
  const SpecOutputs a = run_spec(v, Backend::kCPU), b = run_spec(sg, Backend::kCPU);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(b.error, "");
  EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(double))) << "o differs";
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t t = 0; t < v.lens[n]; ++t) {
      const int64_t r = v.token_indices[n * c.max_tokens + t];
      if (r <= 0) continue;
      EXPECT_EQ(0, std::memcmp(&a.pool[r * head], &b.buffer[(n * c.max_tokens + t) * head], head * sizeof(float)))
          << "sequence " << n << " token " << t;
    }
}

// Each convention's call captured into a CUDA graph and launched equals the eager call, bitwise.
TEST(CUDATokenStates, GraphEqualsEager) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  std::mt19937_64 rng(test_seed() ^ 0x9a7);
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense})
    for (int d : {128, 64}) {
      SpecCase c;
      c.conv = conv;
      c.K = c.V = d;
      c.disable_state_update = conv != Convention::kSglangGroups;
      const SpecInputs s = make_spec_inputs(c, rng);
      const SpecOutputs eager = run_spec(s, Backend::kCUDA);
      const SpecOutputs graph = run_spec(s, Backend::kCUDA, nullptr, true, Op::kRecurrent, /*graph=*/true);
      ASSERT_EQ(graph.error, "");
      EXPECT_EQ(0, std::memcmp(eager.o.data(), graph.o.data(), eager.o.size() * sizeof(double))) << c.name();
      EXPECT_EQ(0, std::memcmp(eager.pool.data(), graph.pool.data(), eager.pool.size() * sizeof(float))) << c.name();
      EXPECT_EQ(0, std::memcmp(eager.buffer.data(), graph.buffer.data(), eager.buffer.size() * sizeof(float)))
          << c.name();
      expect_spec_close(s, graph, Backend::kCUDA);
    }
}

// Without host copies the device clamps: slot indices outside the pool and num_accepted outside
// [1, max_tokens] read zeros and write nothing, so nothing outside the named rows changes and no
// access leaves the arrays (run under compute-sanitizer memcheck on the device).
TEST(CUDATokenStates, UncheckedIndicesAreClamped) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  std::mt19937_64 rng(test_seed() ^ 0xc1a);
  for (int d : {128, 64}) {
    SpecCase c;
    c.K = c.V = d;
    SpecInputs s = make_spec_inputs(c, rng);
    for (int64_t& x : s.token_indices) x = x % 3 == 0 ? x + 1000000 : -x - 5;  // none in range
    for (size_t n = 0; n < s.num_accepted.size(); ++n) s.num_accepted[n] = n % 2 ? 0 : c.max_tokens + 3;
    const SpecOutputs out = run_spec(s, Backend::kCUDA, nullptr, /*host_copies=*/false);
    ASSERT_EQ(out.error, "");
    EXPECT_EQ(0, std::memcmp(out.pool.data(), s.pool.data(), s.pool.size() * sizeof(float)))
        << "the pool was written through out-of-range indices, K = V = " << d;
    // Every sequence ran from zeros: o is finite.
    for (double x : out.o) ASSERT_TRUE(std::isfinite(x)) << "o not written, K = V = " << d;
  }
}

}  // namespace
}  // namespace test
}  // namespace gdn
