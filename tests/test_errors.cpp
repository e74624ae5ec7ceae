// Every bad-input case of SPEC.md section 5: the call throws gdn::Error whose message names the
// argument and the expected value, and nothing is written (o keeps its NaN fill, the pool its
// values). Runs on the CPU, and on CUDA with host copies of the device-side indices.
#include <algorithm>
#include <cmath>
#include <functional>

#include "harness.h"

namespace gdn {
namespace test {
namespace {

// A small valid problem on a backend: 2 sequences (4 and 6 tokens), H=2, HV=4, K=V=64, pooled
// states updated in place.
struct Fixture {
  Backend be;
  std::vector<int32_t> cu_host{0, 4, 10};
  std::vector<int32_t> idx_host{3, 0};
  std::vector<uint8_t> present_host{1, 1};
  Buffer q, k, v, g, beta, o, cu, pool, idx, present, ws, A_log, dt_bias;
  std::vector<float> pool_before;
  ForwardArgs a;
  Exec exec;

  explicit Fixture(Backend backend) : be(backend) {
    const int64_t T = 10;
    std::mt19937_64 rng(test_seed());
    std::normal_distribution<float> nd;
    auto rnd = [&](size_t n) {
      std::vector<float> x(n);
      for (float& f : x) f = nd(rng);
      return x;
    };
    q = upload_vec(be, rnd(T * 2 * 64));
    k = upload_vec(be, rnd(T * 2 * 64));
    v = upload_vec(be, rnd(T * 4 * 64));
    g = upload_vec(be, std::vector<float>(T * 4, -0.1f));
    beta = upload_vec(be, std::vector<float>(T * 4, 0.5f));
    o = upload_vec(be, std::vector<float>(T * 4 * 64, std::nanf("")));
    cu = upload_vec(be, cu_host);
    pool_before = rnd(5 * 4 * 64 * 64);
    pool = upload_vec(be, pool_before);
    idx = upload_vec(be, idx_host);
    present = upload_vec(be, present_host);
    A_log = upload_vec(be, std::vector<float>(4, 0.0f));
    dt_bias = upload_vec(be, std::vector<float>(4, 0.0f));
    Problem& p = a.problem;
    p.num_tokens = T;
    p.num_seqs = 2;
    p.num_qk_heads = 2;
    p.num_v_heads = 4;
    p.head_k = 64;
    p.head_v = 64;
    p.dtype = DType::kFloat32;
    p.gate_dtype = DType::kFloat32;
    p.use_qk_l2norm = true;
    p.cu_seqlens = cu.data();
    p.cu_seqlens_host = cu_host.data();
    a.q.data = q.data();
    a.k.data = k.data();
    a.v.data = v.data();
    a.g.data = g.data();
    a.beta.data = beta.data();
    a.o.data = o.data();
    StateRef s;
    s.data = pool.as<float>();
    s.num_slots = 5;
    s.indices = idx.data();
    s.indices_host = idx_host.data();
    a.initial_state = s;
    a.final_state = s;
    exec.backend = be;
    size_workspace();
  }

  // The workspace both ops need for the problem as it stands (again after an edit that changes the
  // path, e.g. a 16-bit state pool on fp32 inputs).
  void size_workspace() {
    const Problem& p = a.problem;
    const size_t bytes =
        std::max(chunk_gated_delta_rule_workspace_size(p, exec), recurrent_gated_delta_rule_workspace_size(p, exec));
    ws = Buffer(be, bytes);
    exec.workspace = ws.data();
    exec.workspace_bytes = bytes;
  }

  // Nothing was written: o is all NaN and the pool is bitwise unchanged.
  void expect_untouched() const {
    std::vector<float> ov(o.bytes() / 4), pv(pool.bytes() / 4);
    o.download(ov.data(), o.bytes());
    pool.download(pv.data(), pool.bytes());
    for (float x : ov) ASSERT_TRUE(std::isnan(x)) << "o was written by a rejected call";
    EXPECT_EQ(0, std::memcmp(pv.data(), pool_before.data(), pool.bytes())) << "pool was written by a rejected call";
  }
};

// Calls `op` (both the chunked forward and the decode step) after `edit`, expecting an error
// whose message contains every piece of `expected`.
void expect_rejected(Backend be, const std::function<void(Fixture&)>& edit, std::vector<std::string> expected) {
  for (int op = 0; op < 2; ++op) {
    Fixture f(be);
    edit(f);
    try {
      if (op == 0)
        chunk_gated_delta_rule(f.a, f.exec);
      else
        recurrent_gated_delta_rule(f.a, f.exec);
      synchronize(be);
      // The decode step needs no workspace on CUDA, so there a workspace-only error applies to the
      // forward alone.
      if (op == 1 && be == Backend::kCUDA && expected.front() == "exec.workspace") continue;
      ADD_FAILURE() << "no error; expected one mentioning '" << expected.front() << "'";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& piece : expected)
        EXPECT_NE(msg.find(piece), std::string::npos) << "message '" << msg << "' lacks '" << piece << "'";
    }
    f.expect_untouched();
  }
}

class Errors : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { GDN_SKIP_IF_UNAVAILABLE(GetParam()); }
};

TEST_P(Errors, ValidFixtureRuns) {
  Fixture f(GetParam());
  EXPECT_NO_THROW(chunk_gated_delta_rule(f.a, f.exec));
  synchronize(GetParam());
}

TEST_P(Errors, HeadsNotMultiple) {
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.num_qk_heads = 3; },
                  {"num_v_heads (HV = 4) must be a multiple of num_qk_heads (H = 3)"});
}

TEST_P(Errors, UnsupportedHeadSize) {
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.head_k = 257; },
                  {"head_k (K = 257) is unsupported", "expected an integer in [1, 256]"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.head_k = 0; }, {"head_k (K = 0) is unsupported"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.head_v = 512; }, {"head_v (V = 512) is unsupported"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.head_v = -3; }, {"head_v (V = -3) is unsupported"});
}

// q/k or o in a dtype outside the table.
TEST_P(Errors, BadQkDtype) {
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.qk_dtype = static_cast<DType>(9); },
                  {"qk_dtype is invalid; expected one of float32, float16, bfloat16"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.o_dtype = static_cast<DType>(-1); },
                  {"o_dtype is invalid; expected one of float32, float16, bfloat16"});
}

// The rejection names the table's values, in the words gdn::supports gives.
TEST_P(Errors, UnsupportedHeadSizeMessageComesFromTheTable) {
  Fixture probe(GetParam());
  Problem p = probe.a.problem;
  p.head_v = 300;
  std::string why;
  ASSERT_FALSE(supports(p, GetParam(), Operation::kDecode, &why));
  EXPECT_NE(why.find("head_v (V = 300) is unsupported; expected "), std::string::npos) << why;
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.head_v = 300; }, {why});
}

TEST_P(Errors, BadDtypes) {
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.dtype = static_cast<DType>(7); }, {"dtype is invalid"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.a.problem.dtype = DType::kBFloat16;
                    f.a.problem.gate_dtype = DType::kFloat16;
                  },
                  {"gate_dtype is float16", "expected float32 or the input dtype (bfloat16)"});
}

TEST_P(Errors, NullPointers) {
  expect_rejected(GetParam(), [](Fixture& f) { f.a.q.data = nullptr; }, {"q is null", "[T, 2, 64]"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.v.data = nullptr; }, {"v is null", "[T, 4, 64]"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.beta.data = nullptr; }, {"beta is null"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.o.data = nullptr; }, {"o is null"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.a.problem.fused_gate = true;
                    f.a.A_log = nullptr;
                    f.a.dt_bias = f.dt_bias.as<float>();
                  },
                  {"A_log is null", "fused_gate"});
}

TEST_P(Errors, BadSequenceBoundaries) {
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.cu_host = {1, 4, 10};
                    f.a.problem.cu_seqlens_host = f.cu_host.data();
                    if (f.be == Backend::kCPU) f.cu.upload(f.cu_host.data(), 12);
                  },
                  {"cu_seqlens[0] is 1; expected 0"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.cu_host = {0, 6, 4};
                    f.a.problem.cu_seqlens_host = f.cu_host.data();
                    if (f.be == Backend::kCPU) f.cu.upload(f.cu_host.data(), 12);
                  },
                  {"cu_seqlens[2] is 4, less than cu_seqlens[1] = 6"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.cu_host = {0, 4, 9};
                    f.a.problem.cu_seqlens_host = f.cu_host.data();
                    if (f.be == Backend::kCPU) f.cu.upload(f.cu_host.data(), 12);
                  },
                  {"cu_seqlens[N = 2] is 9; expected num_tokens (T = 10)"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.a.problem.cu_seqlens = nullptr;
                    f.a.problem.num_seqs = 3;
                  },
                  {"num_tokens (T = 10) is not a multiple of num_seqs (N = 3)"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.num_seqs = 0; }, {"num_seqs (N) is 0"});
}

TEST_P(Errors, BadPoolIndices) {
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.idx_host = {3, 9};
                    if (f.be == Backend::kCPU) f.idx.upload(f.idx_host.data(), 8);
                  },
                  {"initial_state.indices[1] is 9; expected < num_slots = 5"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.idx_host = {2, 2};
                    if (f.be == Backend::kCPU) f.idx.upload(f.idx_host.data(), 8);
                  },
                  {"indices[1] repeats row 2", "distinct"});
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.a.initial_state.indices = nullptr;
                    f.a.initial_state.num_slots = 1;
                  },
                  {"initial_state.num_slots is 1; expected at least N = 2"});
  // Rows past the first 64 Ki slots (the validation's bitmap covers the pool window by window).
  // The call is rejected before it reads the pool, so num_slots may exceed the buffer here.
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.idx_host = {70001, 70001};
                    if (f.be == Backend::kCPU) f.idx.upload(f.idx_host.data(), 8);
                    f.a.initial_state.num_slots = f.a.final_state.num_slots = 200000;
                  },
                  {"indices[1] repeats row 70001", "distinct"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.final_state.data = static_cast<char*>(f.a.final_state.data) + 2; },
                  {"final_state.data is not aligned to its element size (4 bytes for float32)"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.initial_state.null_slot = 5; },
                  {"initial_state.null_slot is 5; expected -1 (none) or a row in [0, num_slots = 5)"});
  // A row named by two sequences is still a repeat when only one of them is masked absent on a
  // different StateRef (the mask belongs to its own StateRef).
  expect_rejected(GetParam(),
                  [](Fixture& f) {
                    f.idx_host = {2, 2};
                    if (f.be == Backend::kCPU) f.idx.upload(f.idx_host.data(), 8);
                    f.present_host = {0, 1};
                    f.present.upload(f.present_host.data(), 2);
                    f.a.initial_state.present = f.present.as<uint8_t>();
                    f.a.initial_state.present_host = f.present_host.data();
                  },
                  {"final_state.indices[1] repeats row 2", "two sequences would write one row"});
}

// Padding: several sequences may name the null slot (vLLM pads with slot 0), and a sequence
// masked absent does not count; the padding touches no state.
TEST_P(Errors, NullSlotAndAbsentSequencesMayRepeat) {
  for (int op = 0; op < 2; ++op) {
    Fixture f(GetParam());
    f.idx_host = {2, 2};
    f.idx.upload(f.idx_host.data(), 8);
    f.a.initial_state.null_slot = f.a.final_state.null_slot = 2;
    if (op == 0)
      chunk_gated_delta_rule(f.a, f.exec);
    else
      recurrent_gated_delta_rule(f.a, f.exec);
    synchronize(f.be);
    std::vector<float> pool(f.pool_before.size());
    f.pool.download(pool.data(), pool.size() * sizeof(float));
    EXPECT_EQ(0, std::memcmp(pool.data(), f.pool_before.data(), pool.size() * sizeof(float)))
        << "a padding sequence (the null slot) touched the pool";
  }
  // Both sequences absent in the masks of both StateRefs: accepted, nothing read or written.
  Fixture f(GetParam());
  f.idx_host = {1, 1};
  f.idx.upload(f.idx_host.data(), 8);
  f.present_host = {0, 0};
  f.present.upload(f.present_host.data(), 2);
  for (StateRef* s : {&f.a.initial_state, &f.a.final_state}) {
    s->present = f.present.as<uint8_t>();
    s->present_host = f.present_host.data();
  }
  chunk_gated_delta_rule(f.a, f.exec);
  synchronize(f.be);
  std::vector<float> pool(f.pool_before.size());
  f.pool.download(pool.data(), pool.size() * sizeof(float));
  EXPECT_EQ(0, std::memcmp(pool.data(), f.pool_before.data(), pool.size() * sizeof(float)))
      << "sequences masked absent touched the pool";
}

TEST_P(Errors, BadStrides) {
  expect_rejected(GetParam(), [](Fixture& f) { f.a.k.stride_head = 32; }, {"k.stride_head (32) overlaps rows"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.v.stride_token = -256; }, {"v has a negative stride"});
}

// State pools: the element type against the table, the row stride against the row size. Rows
// that are not 16-byte aligned are accepted on both backends (test_head_sizes.cpp checks their
// results).
TEST_P(Errors, BadStateDtypeAndRowStride) {
  const char* backend = GetParam() == Backend::kCUDA ? "CUDA" : "CPU";
  expect_rejected(GetParam(), [](Fixture& f) { f.a.problem.state_dtype = static_cast<DType>(9); },
                  {"state_dtype is invalid; expected one of float32, float16, bfloat16 on the ",
                   std::string(backend) + " backend"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.initial_state.row_stride = 4 * 64 * 64 - 4; },
                  {"initial_state.row_stride is 16380; expected 0 (packed) or >= HV * K * V = 16384"});
  expect_rejected(GetParam(), [](Fixture& f) { f.a.final_state.row_stride = -16384; },
                  {"final_state.row_stride is -16384; expected 0 (packed) or >= HV * K * V = 16384"});
  // Any row stride and any element-aligned start run: 16385 fp32 elements (4 rows fit in the
  // fixture's 5 packed ones), the pool one element in, bf16 rows 8 (16 bytes) or 1 and 4 elements
  // (2 and 8 bytes) apart (5 rows of 16392 bf16 fit in the fixture's 5 fp32 rows).
  auto accepted = [&](const std::function<void(Fixture&)>& edit) {
    Fixture f(GetParam());
    edit(f);
    f.size_workspace();
    EXPECT_NO_THROW(chunk_gated_delta_rule(f.a, f.exec));
    EXPECT_NO_THROW(recurrent_gated_delta_rule(f.a, f.exec));
    synchronize(GetParam());
  };
  accepted([](Fixture& f) {
    for (StateRef* s : {&f.a.initial_state, &f.a.final_state}) {
      s->num_slots = 4;
      s->row_stride = 4 * 64 * 64 + 1;
    }
  });
  accepted([](Fixture& f) {
    for (StateRef* s : {&f.a.initial_state, &f.a.final_state}) {
      s->data = static_cast<float*>(s->data) + 1;
      s->num_slots = 4;
    }
  });
  for (int64_t pad : {8, 1, 4})
    accepted([pad](Fixture& f) {
      f.a.problem.state_dtype = DType::kBFloat16;
      for (StateRef* s : {&f.a.initial_state, &f.a.final_state}) s->row_stride = 4 * 64 * 64 + pad;
    });
}

TEST_P(Errors, WorkspaceTooSmall) {
  expect_rejected(GetParam(), [](Fixture& f) { f.exec.workspace_bytes = 16; },
                  {"exec.workspace", "holds 16 bytes; expected at least"});
}

TEST_P(Errors, StageArguments) {
  Fixture f(GetParam());
  StageBuffers b;
  b.g = f.a.g;
  f.a.problem.use_qk_l2norm = false;
  try {
    chunk_local_cumsum(f.a.problem, b, f.exec);
    ADD_FAILURE() << "no error for a null G";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("buffer G; expected fp32 [T, HV] (it is null)"), std::string::npos)
        << e.what();
  }
  f.a.problem.use_qk_l2norm = true;
  try {
    solve_tril(f.a.problem, b, f.exec);
    ADD_FAILURE() << "no error for use_qk_l2norm on a stage";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use_qk_l2norm is set; expected false for a stage"), std::string::npos)
        << e.what();
  }
  L2NormArgs l;
  l.num_tokens = 4;
  l.num_heads = 2;
  l.dim = 257;
  l.x.data = f.q.data();
  l.y.data = f.o.data();
  try {
    l2norm(l, f.exec);
    ADD_FAILURE() << "no error for dim 257";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dim (257) is unsupported; expected an integer in [1, 256]"),
              std::string::npos)
        << e.what();
  }
  f.expect_untouched();
}

// The capability table states what the backends are built for (src/common/capabilities.h).
TEST(Capabilities, TableStatesTheBackends) {
  const Capabilities& cpu = capabilities(Backend::kCPU);
  EXPECT_TRUE(cpu.built);
  for (int d = -1; d <= 512; ++d) EXPECT_EQ(cpu.has_head_size(d), d >= 1 && d <= 256) << "CPU head size " << d;
  const Capabilities& cuda = capabilities(Backend::kCUDA);
#ifdef GDN_HAS_CUDA
  EXPECT_TRUE(cuda.built);
#else
  EXPECT_FALSE(cuda.built);
#endif
  for (int d = -1; d <= 512; ++d) EXPECT_EQ(cuda.has_head_size(d), d >= 1 && d <= 256) << "CUDA head size " << d;
  for (const Capabilities* c : {&cpu, &cuda}) {
    EXPECT_TRUE(c->mixed_dtypes);
    for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) EXPECT_TRUE(c->has_dtype(d));
    EXPECT_FALSE(c->has_dtype(static_cast<DType>(7)));
    for (StateLayout l : {StateLayout::kKMajor, StateLayout::kVMajor}) EXPECT_TRUE(c->has_state_layout(l));
    for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) EXPECT_TRUE(c->has_state_dtype(d));
    EXPECT_FALSE(c->has_state_dtype(static_cast<DType>(7)));
    for (Operation op : {Operation::kForward, Operation::kDecode, Operation::kStages, Operation::kL2Norm})
      EXPECT_TRUE(c->has_operation(op));
  }
  EXPECT_FALSE(capabilities(static_cast<Backend>(5)).built);
}

TEST(Capabilities, SupportsExplainsWhy) {
  Problem p;
  p.num_tokens = 4, p.num_seqs = 1, p.num_qk_heads = 1, p.num_v_heads = 1, p.head_k = 60, p.head_v = 100;
  std::string why;
  EXPECT_TRUE(supports(p, Backend::kCPU, Operation::kForward, &why)) << why;
#ifdef GDN_HAS_CUDA
  EXPECT_TRUE(supports(p, Backend::kCUDA, Operation::kForward, &why)) << why;
  p.head_k = 257;
  EXPECT_FALSE(supports(p, Backend::kCUDA, Operation::kForward, &why));
  EXPECT_EQ(why, "head_k (K = 257) is unsupported; expected an integer in [1, 256] on the CUDA backend");
#else
  EXPECT_FALSE(supports(p, Backend::kCUDA, Operation::kForward, &why));
  EXPECT_EQ(why, "exec.backend is kCUDA, but gdn was built without CUDA");
#endif
  p.head_k = 272;
  EXPECT_FALSE(supports(p, Backend::kCPU, Operation::kStages, &why));
  EXPECT_EQ(why, "head_k (K = 272) is unsupported; expected an integer in [1, 256] on the CPU backend");
  p.head_k = 64;
  p.dtype = DType::kBFloat16;
  p.gate_dtype = DType::kFloat16;
  EXPECT_FALSE(supports(p, Backend::kCPU, Operation::kDecode, &why));
  EXPECT_EQ(why, "gate_dtype is float16; expected float32 or the input dtype (bfloat16)");
  p.gate_dtype = DType::kBFloat16;
  EXPECT_TRUE(supports(p, Backend::kCPU, Operation::kDecode));
  p.state_dtype = static_cast<DType>(4);
  EXPECT_FALSE(supports(p, Backend::kCPU, Operation::kForward, &why));
  EXPECT_EQ(why, "state_dtype is invalid; expected one of float32, float16, bfloat16 on the CPU backend");
  p.state_dtype = DType::kFloat16;
  EXPECT_TRUE(supports(p, Backend::kCPU, Operation::kForward));
  EXPECT_FALSE(supports(p, static_cast<Backend>(5), Operation::kDecode, &why));
  EXPECT_EQ(why, "exec.backend is invalid");
}

#ifndef GDN_HAS_CUDA
TEST(ErrorsNoCuda, CudaBackendWithoutCuda) {
  Fixture f(Backend::kCPU);
  f.exec.backend = Backend::kCUDA;
  try {
    chunk_gated_delta_rule(f.a, f.exec);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gdn was built without CUDA"), std::string::npos) << e.what();
  }
  f.expect_untouched();
}
#endif

INSTANTIATE_TEST_SUITE_P(CPU, Errors, ::testing::Values(Backend::kCPU),
                         [](const auto& info) { return std::string(backend_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(CUDA, Errors, ::testing::Values(Backend::kCUDA),
                         [](const auto& info) { return std::string(backend_name(info.param)); });

}  // namespace
}  // namespace test
}  // namespace gdn
