// Every head size and input-dtype mix that flash-linear-attention's forward accepts (issue 12,
// item 8): K and V anywhere in the capability table's [min_head_size, max_head_size], not only
// the sizes with fast kernels, and q/k (and o) in another dtype than v (Problem::qk_dtype,
// o_dtype), for the chunked forward and the decode step against the double-precision recurrence.
#include <functional>

#include "harness.h"

namespace gdn {
namespace test {
namespace {

// State rows that do not start 16-byte aligned: packed pools of small heads (HV K V times the
// element size not a multiple of 16 bytes: K = V = 1 with HV = 2 has 8-byte fp32 rows) and odd
// row strides, dense and pooled, both layouts, fp32 and 16-bit pools, prefill-shaped and
// decode-shaped batches. On CUDA: the exact stages and the general decode kernel (element
// accesses), the tensor-core forward at K = V = 64 / 128 reading fp32 rows (or the fp32 copy of
// 16-bit rows) one element at a time, and the tuned decode kernels' sizes sent to the general
// kernel (decode_heuristics) because their 4-element pieces would be misaligned.
std::vector<Case> unaligned_row_cases() {
  std::vector<Case> cs;
  struct Shape {
    int K, V, H, HV;
    DType dtype, state_dtype;
    int row_pad;
  };
  const Shape shapes[] = {
      {1, 1, 1, 2, DType::kFloat32, DType::kFloat32, 0},       // 8-byte packed rows
      {1, 1, 2, 2, DType::kBFloat16, DType::kFloat16, 1},      // 6-byte rows
      {3, 5, 1, 3, DType::kFloat32, DType::kFloat32, 0},       // 45 elements: 180-byte rows
      {3, 5, 1, 3, DType::kBFloat16, DType::kBFloat16, 0},     // 90-byte rows
      {3, 5, 1, 1, DType::kFloat16, DType::kFloat16, 3},       // 15 + 3 elements: 36-byte rows
      {60, 100, 2, 2, DType::kFloat32, DType::kFloat32, 1},    // the general sizes, odd stride
      {128, 128, 1, 2, DType::kBFloat16, DType::kFloat32, 1},  // tensor-core forward, rows-kernel size
      {128, 128, 2, 2, DType::kFloat16, DType::kBFloat16, 3},  // + the 16-bit copy
      {64, 64, 1, 2, DType::kBFloat16, DType::kFloat32, 2},    // mma.sync forward, tiles-kernel size
      {64, 64, 1, 3, DType::kBFloat16, DType::kFloat16, 1},
      {64, 256, 1, 1, DType::kFloat32, DType::kFloat32, 1},  // tiles size, exact forward
      {256, 64, 1, 1, DType::kBFloat16, DType::kBFloat16, 2},
  };
  for (const Shape& s : shapes)
    for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
      for (bool decode_shaped : {false, true}) {
        Case c;
        c.K = s.K;
        c.V = s.V;
        c.H = s.H;
        c.HV = s.HV;
        c.dtype = s.dtype;
        c.state_dtype = s.state_dtype;
        c.row_pad = s.row_pad;
        c.layout = layout;
        // Pools (rows named by index, some -1) for odd strides and 16-bit states, dense arrays
        // for the packed fp32 ones; serving pools (read and write slots) for decode batches.
        c.pool = s.row_pad != 0 || s.state_dtype != DType::kFloat32 || decode_shaped;
        c.serving = decode_shaped && c.pool;
        c.lens = decode_shaped ? std::vector<int64_t>{1, 2, 1, 0, 3, 1} : std::vector<int64_t>{70, 1, 0, 130};
        cs.push_back(c);
      }
  return cs;
}

// The sizes of fla's test grids (32, 60, 100) and the edges of the table (1, 256), in mixes of
// K and V: multiples of 16, sizes that are not (the CPU's padded rows, the CUDA general path),
// and the fast sizes beside them.
std::vector<Case> head_size_cases() {
  std::vector<Case> cs;
  auto add = [&](std::function<void(Case&)> edit) {
    Case c;  // H=2, HV=4, fp32, l2norm, initial state, K-major
    edit(c);
    cs.push_back(c);
  };
  const int pairs[][2] = {{16, 16},  {32, 32},  {60, 60},  {100, 100}, {192, 192}, {256, 256}, {60, 100},
                          {100, 60}, {32, 256}, {256, 32}, {192, 16},  {16, 192},  {64, 100},  {100, 64},
                          {128, 60}, {1, 1},    {1, 33},   {33, 1},    {255, 17},  {200, 50}};
  for (const auto& kv : pairs)
    add([&](Case& c) {
      c.K = kv[0];
      c.V = kv[1];
      c.lens = {70, 1, 0, 130};
    });
  // Both layouts in pools, the sizes that are not multiples of 16 or 32.
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
    for (const auto& kv : {std::pair<int, int>{60, 100}, {100, 60}, {50, 200}})
      add([&](Case& c) {
        c.K = kv.first;
        c.V = kv.second;
        c.layout = layout;
        c.pool = true;
        c.lens = {65, 0, 1, 130, 20};
      });
  // Low-precision inputs, with and without the qk l2-norm, GVA.
  for (DType d : {DType::kBFloat16, DType::kFloat16})
    for (const auto& kv : {std::pair<int, int>{100, 100}, {32, 32}, {60, 128}})
      add([&](Case& c) {
        c.dtype = d;
        c.K = kv.first;
        c.V = kv.second;
        c.H = 1;
        c.HV = 4;
        c.l2norm = kv.first != 32;
        c.lens = {200, 3};
      });
  // Decode-shaped batches (one or a few tokens per sequence) in a serving pool.
  for (StateLayout layout : {StateLayout::kKMajor, StateLayout::kVMajor})
    add([&](Case& c) {
      c.K = 100;
      c.V = 60;
      c.layout = layout;
      c.pool = c.serving = true;
      c.dtype = DType::kBFloat16;
      c.lens = {1, 2, 1, 1, 3, 1, 4, 1};
    });
  // Mixed input dtypes as fla's tests pass them: q and k fp32 (or another low precision), v in
  // fp16 or bf16; at fast and general sizes; with gates in v's dtype and fused gates.
  const DType mixes[][2] = {{DType::kFloat32, DType::kFloat16},
                            {DType::kFloat32, DType::kBFloat16},
                            {DType::kBFloat16, DType::kFloat32},
                            {DType::kFloat16, DType::kBFloat16}};
  for (const auto& m : mixes)
    for (const auto& kv : {std::pair<int, int>{64, 64}, {128, 128}, {100, 100}, {32, 256}})
      add([&](Case& c) {
        c.qk_dtype = m[0];
        c.dtype = m[1];
        c.K = kv.first;
        c.V = kv.second;
        c.lens = {150, 1, 64};
      });
  // fla's chunked forward returns o in q's dtype: fp32 q, k and o around fp16 or bf16 v.
  for (DType v : {DType::kFloat16, DType::kBFloat16})
    for (const auto& kv : {std::pair<int, int>{128, 128}, {64, 64}, {60, 100}})
      add([&](Case& c) {
        c.qk_dtype = c.o_dtype = DType::kFloat32;
        c.dtype = v;
        c.K = kv.first;
        c.V = kv.second;
        c.pool = true;
        c.layout = kv.first == 64 ? StateLayout::kVMajor : StateLayout::kKMajor;
        c.lens = {1, 2, 1, 70};
      });
  add([](Case& c) {  // o alone in another dtype: fp32 inputs, bf16 o
    c.o_dtype = DType::kBFloat16;
    c.K = c.V = 128;
    c.lens = {100, 3};
  });
  add([](Case& c) {
    c.qk_dtype = DType::kFloat32;
    c.dtype = DType::kFloat16;
    c.gate_in_input_dtype = true;
    c.l2norm = false;
    c.lens = {90};
  });
  add([](Case& c) {
    c.qk_dtype = DType::kFloat32;
    c.dtype = DType::kBFloat16;
    c.fused_gate = true;
    c.K = c.V = 128;
    c.H = 2;
    c.HV = 8;
    c.pool = true;
    c.layout = StateLayout::kVMajor;
    c.lens = {1, 3, 1, 2};
  });
  for (const Case& c : unaligned_row_cases()) cs.push_back(c);
  return cs;
}

using Param = std::tuple<Backend, Case>;

class HeadSizes : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    backend_ = std::get<0>(GetParam());
    case_ = std::get<1>(GetParam());
    GDN_SKIP_IF_UNAVAILABLE(backend_);
    rng_.seed(test_seed() ^ std::hash<std::string>()(case_.name()));
  }
  Backend backend_ = Backend::kCPU;
  Case case_;
  std::mt19937_64 rng_;
};

// No skip on the capability table here: every case is inside it on both backends, and the
// test says so (a size or mix that the table stops covering fails instead of going quiet).
TEST_P(HeadSizes, InTheTable) {
  std::string why;
  EXPECT_TRUE(supports(problem_of(case_), backend_, Operation::kForward, &why)) << why;
  EXPECT_TRUE(supports(problem_of(case_), backend_, Operation::kDecode, &why)) << why;
}

TEST_P(HeadSizes, ChunkedMatchesRecurrence) {
  const Inputs in = make_inputs(case_, rng_);
  expect_close(in, reference(in), run(in, backend_, Op::kChunk), backend_, "chunk_gated_delta_rule");
}

TEST_P(HeadSizes, DecodeMatchesRecurrence) {
  const Inputs in = make_inputs(case_, rng_);
  expect_close(in, reference(in), run(in, backend_, Op::kRecurrent), backend_, "recurrent_gated_delta_rule");
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return test_param_name(backend_name(std::get<0>(info.param)), info.index, std::get<1>(info.param).name());
}

INSTANTIATE_TEST_SUITE_P(CPU, HeadSizes,
                         ::testing::Combine(::testing::Values(Backend::kCPU), ::testing::ValuesIn(head_size_cases())),
                         param_name);
INSTANTIATE_TEST_SUITE_P(CUDA, HeadSizes,
                         ::testing::Combine(::testing::Values(Backend::kCUDA), ::testing::ValuesIn(head_size_cases())),
                         param_name);

// The stage operations and l2norm take the general sizes too (the CPU's padded rows, the CUDA
// stages' masked columns); test_stages.cpp runs each stage against its oracle at these sizes.
// Mixed dtypes are the composed forward's and the decode step's: a stage rejects them, naming
// both dtypes.
TEST(HeadSizesTable, StagesRejectMixedDtypes) {
  Problem p;
  p.head_k = 60;
  p.head_v = 100;
  p.dtype = DType::kBFloat16;
  p.qk_dtype = DType::kFloat32;
  std::string why;
  EXPECT_TRUE(supports(p, Backend::kCPU, Operation::kForward, &why)) << why;
  EXPECT_FALSE(supports(p, Backend::kCPU, Operation::kStages, &why));
  EXPECT_EQ(why, "qk_dtype (float32) differs from dtype (bfloat16); expected the same dtype for a stage");
  p.qk_dtype = DType::kBFloat16;  // the same dtype, spelled out
  EXPECT_TRUE(supports(p, Backend::kCPU, Operation::kStages, &why)) << why;
  p.o_dtype = DType::kFloat16;
  EXPECT_TRUE(supports(p, Backend::kCPU, Operation::kDecode, &why)) << why;
  EXPECT_FALSE(supports(p, Backend::kCPU, Operation::kStages, &why));
  EXPECT_EQ(why, "o_dtype (float16) differs from dtype (bfloat16); expected the same dtype for a stage");
}

}  // namespace
}  // namespace test
}  // namespace gdn
