// Every candidate shape of the CUDA decode rows kernel for bf16 / fp16 pools (kRows16Shapes,
// cuda/decode/recurrent.cuh), each run with an explicit configuration rather than only the one
// decode_heuristics picks (the other suites cover that one): against the fp64 oracle (pools in
// both layouts, one-token and multi-token batches, empty sequences, the serving pool's null slot,
// padded rows, dense arrays, no initial state; vLLM's and SGLang's per-token states, an EAGLE
// tree), and bitwise against the fp32 pool's kernel on the same rounded initial states: fp32
// inside, one rounding on write, whatever the shape (its parts sum in the whole state's order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/host_dtype.h"
#include "common/validate.h"
#include "cuda/decode/recurrent.cuh"
#include "harness.h"
#include "token_states.h"

namespace gdn {
namespace test {
namespace {

constexpr int kShapes = static_cast<int>(sizeof(cuda::kRows16Shapes) / sizeof(cuda::RowsShape));

// The decode step on the CUDA backend with shape i of kRows16Shapes, validated and normalized as
// the public call does.
DecodeCall with_shape(int i) {
  return [i](const ForwardArgs& f, const Exec& exec) {
    const ForwardArgs a = validate_forward("recurrent_gated_delta_rule", Operation::kDecode, f, exec);
    cuda::DecodeConfig c = cuda::decode_heuristics(a.problem, cuda::device_props());
    EXPECT_EQ(c.kernel, cuda::DecodeKernel::kRows);
    c.parts = cuda::kRows16Shapes[i].parts;
    c.blocks_per_sm = cuda::kRows16Shapes[i].blocks_per_sm;
    c.staged = cuda::kRows16Shapes[i].staged;
    cuda::recurrent_gated_delta_rule(a, exec, c);
  };
}

std::string shape_name(int i) {
  const cuda::RowsShape& s = cuda::kRows16Shapes[i];
  return std::to_string(s.parts) + "p" + std::to_string(s.blocks_per_sm) + "b" + (s.staged ? "staged" : "regs");
}

// K = V = 128 decode batches on 16-bit pools.
std::vector<Case> pool_cases() {
  std::vector<Case> cs;
  for (DType sd : {DType::kBFloat16, DType::kFloat16})
    for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {
      Case c;
      c.H = 2, c.HV = 4, c.K = c.V = 128;
      c.dtype = DType::kBFloat16;
      c.state_dtype = sd;
      c.layout = layout;
      c.pool = c.serving = true;  // null slot, separate read / write rows, the present mask
      c.row_pad = 24;
      c.lens = {1, 2, 1, 1, 3, 1, 4, 0, 1, 2, 1, 1};
      cs.push_back(c);
      Case d = c;  // one token each (the decode step), many blocks, fixed length
      d.serving = false;
      d.row_pad = 8;
      d.varlen = false;
      d.lens.assign(70, 1);
      d.H = 8, d.HV = 16;  // 1120 blocks: about 2 waves of an H200's 528 slots (bf16 / fp16 rows)
      cs.push_back(d);
    }
  Case e;  // dense arrays, an empty sequence (final = initial), fused gates, no row padding
  e.K = e.V = 128;
  e.dtype = DType::kFloat16;
  e.state_dtype = DType::kBFloat16;
  e.layout = StateLayout::kVMajor;
  e.fused_gate = true;
  e.lens = {1, 0, 5, 1};
  cs.push_back(e);
  e.initial_state = false;  // from zeros
  e.layout = StateLayout::kKMajor;
  e.state_dtype = DType::kFloat16;
  cs.push_back(e);
  return cs;
}

using Param = std::tuple<int, Case>;

class DecodeShapes : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
    shape_ = std::get<0>(GetParam());
    case_ = std::get<1>(GetParam());
    rng_.seed(test_seed() ^ std::hash<std::string>()(case_.name() + shape_name(shape_)));
  }
  int shape_ = 0;
  Case case_;
  std::mt19937_64 rng_;
};

TEST_P(DecodeShapes, MatchesRecurrence) {
  const Inputs in = make_inputs(case_, rng_);
  expect_close(in, reference(in), run(in, Backend::kCUDA, Op::kRecurrent, with_shape(shape_)), Backend::kCUDA,
               ("recurrent_gated_delta_rule, rows shape " + shape_name(shape_)).c_str());
}

// The same call on an fp32 pool holding the same (rounded) initial states, through the fp32
// kernel: bitwise the same o, and final states that are exactly its final states rounded once.
TEST_P(DecodeShapes, RoundsOnceLikeTheFp32Pool) {
  const Inputs in = make_inputs(case_, rng_);
  Inputs in32 = in;
  in32.c.state_dtype = DType::kFloat32;
  in32.c.row_pad = 0;
  expect_rounded_once(run(in, Backend::kCUDA, Op::kRecurrent, with_shape(shape_)),
                      run(in32, Backend::kCUDA, Op::kRecurrent), case_.state_dtype, "rows shape " + shape_name(shape_));
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return test_param_name(shape_name(std::get<0>(info.param)), info.index, std::get<1>(info.param).name());
}

INSTANTIATE_TEST_SUITE_P(CUDA, DecodeShapes,
                         ::testing::Combine(::testing::Range(0, kShapes), ::testing::ValuesIn(pool_cases())),
                         param_name);

// Per-token states on 16-bit pools and buffers (each token's state stored part by part, EAGLE
// parents reloaded part by part), every shape.
std::vector<SpecCase> spec_cases() {
  std::vector<SpecCase> cs;
  SpecCase v;  // vLLM: 2-D slots, the initial state through num_accepted
  v.state_dtype = DType::kBFloat16;
  cs.push_back(v);
  v.layout = StateLayout::kVMajor;
  v.state_dtype = DType::kFloat16;
  cs.push_back(v);
  SpecCase g;  // SGLang: the pool row read and written, the states into a buffer by group
  g.conv = Convention::kSglangGroups;
  g.disable_state_update = false;
  g.state_dtype = DType::kBFloat16;
  g.layout = StateLayout::kVMajor;
  cs.push_back(g);
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor}) {  // EAGLE trees
    SpecCase t;
    t.state_dtype = DType::kBFloat16;
    t.layout = layout;
    t.tree = true;
    t.max_tokens = 6;
    cs.push_back(t);
  }
  return cs;
}

using SpecParam = std::tuple<int, SpecCase>;

class DecodeShapesTokenStates : public ::testing::TestWithParam<SpecParam> {};

TEST_P(DecodeShapesTokenStates, MatchesRecurrence) {
  GDN_SKIP_IF_UNAVAILABLE(Backend::kCUDA);
  const int shape = std::get<0>(GetParam());
  const SpecCase c = std::get<1>(GetParam());
  std::mt19937_64 rng(test_seed() ^ std::hash<std::string>()(c.name() + shape_name(shape)));
  const SpecInputs s = make_spec_inputs(c, rng);
  const SpecOutputs out = run_spec(s, Backend::kCUDA, nullptr, true, Op::kRecurrent, false, with_shape(shape));
  EXPECT_EQ(out.error, "") << "rows shape " << shape_name(shape);
  expect_spec_close(s, out, Backend::kCUDA);
}

std::string spec_param_name(const ::testing::TestParamInfo<SpecParam>& info) {
  return test_param_name(shape_name(std::get<0>(info.param)), info.index, std::get<1>(info.param).name());
}

INSTANTIATE_TEST_SUITE_P(CUDA, DecodeShapesTokenStates,
                         ::testing::Combine(::testing::Range(0, kShapes), ::testing::ValuesIn(spec_cases())),
                         spec_param_name);

}  // namespace
}  // namespace test
}  // namespace gdn
