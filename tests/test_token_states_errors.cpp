// Bad TokenStates input: the call throws gdn::Error whose message names the argument and the
// expected value, and nothing is written (o keeps its NaN fill, the pool and the buffer their
// values). On the CPU, and on CUDA with host copies of the device-side indices.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "token_states.h"

namespace gdn {
namespace test {
namespace {

class TokenStatesErrors : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { GDN_SKIP_IF_UNAVAILABLE(GetParam()); }

  // A small valid case of `conv` (K = V = 64, 6 sequences of up to 4 tokens; exactly 4 unless varlen).
  SpecInputs inputs(Convention conv, bool varlen = true, uint64_t seed = 0) {
    std::mt19937_64 rng(test_seed() ^ (static_cast<uint64_t>(conv) + 16 * seed));
    SpecCase c;
    c.conv = conv;
    c.varlen = varlen;
    c.K = c.V = 64;
    c.dtype = DType::kFloat32;
    c.N = 6;
    return make_spec_inputs(c, rng);
  }

  // A vLLM pool row that no index names.
  static int64_t unused_row(const SpecInputs& s) {
    for (int64_t r = 1; r < s.pool_slots; ++r)
      if (std::find(s.token_indices.begin(), s.token_indices.end(), r) == s.token_indices.end()) return r;
    return -1;
  }

  // Runs `s` (after `edit`) and expects a rejection mentioning every piece, with nothing written.
  void expect_rejected(const SpecInputs& s, const std::function<void(ForwardArgs&)>& edit,
                       const std::vector<std::string>& pieces, Op op = Op::kRecurrent) {
    const SpecOutputs out = run_spec(s, GetParam(), edit, true, op);
    ASSERT_NE(out.error, "") << "no error; expected one mentioning '" << pieces.front() << "'";
    for (const std::string& p : pieces)
      EXPECT_NE(out.error.find(p), std::string::npos) << "message '" << out.error << "' lacks '" << p << "'";
    for (double x : out.o) ASSERT_TRUE(std::isnan(x)) << "o was written by a rejected call";
    EXPECT_EQ(0, std::memcmp(out.pool.data(), s.pool.data(), s.pool.size() * sizeof(float)))
        << "the pool was written by a rejected call";
    EXPECT_EQ(out.buffer.size(), s.buffer.size());
    for (size_t i = 0; i < out.buffer.size(); ++i) ASSERT_TRUE(std::isnan(out.buffer[i])) << "the buffer was written";
  }
};

TEST_P(TokenStatesErrors, ValidCasesRun) {
  for (Convention conv : {Convention::kVllm, Convention::kSglangGroups, Convention::kSglangDense}) {
    const SpecInputs s = inputs(conv);
    EXPECT_EQ(run_spec(s, GetParam()).error, "");
  }
}

TEST_P(TokenStatesErrors, NumAcceptedOutOfRange) {
  SpecInputs s = inputs(Convention::kVllm);
  s.num_accepted[1] = 0;
  expect_rejected(s, nullptr, {"token_states.num_accepted[1] is 0; expected in [1, max_tokens = 4]"});
  s.num_accepted[1] = 5;
  expect_rejected(s, nullptr, {"token_states.num_accepted[1] is 5; expected in [1, max_tokens = 4]"});
}

TEST_P(TokenStatesErrors, SlotOutOfRange) {
  SpecInputs s = inputs(Convention::kVllm);
  s.token_indices[0 * 4 + 0] = s.pool_slots;  // sequence 0 always has a first token
  expect_rejected(s, nullptr,
                  {"token_states.pool.indices[0][0] is " + std::to_string(s.pool_slots), "expected < num_slots"});
  SpecInputs g = inputs(Convention::kSglangGroups);
  g.token_indices[0] = g.buffer_slots / 4;  // one group past the end
  expect_rejected(g, nullptr, {"token_states.pool.indices[0] is ", "end past num_slots"});
}

TEST_P(TokenStatesErrors, TwoTokensWriteOneRow) {
  SpecInputs s = inputs(Convention::kVllm);
  const int64_t R = unused_row(s);
  s.token_indices[0 * 4 + 0] = R;  // sequences 0 and 1 (both have a token 0) store token 0 in row R
  s.token_indices[1 * 4 + 0] = R;
  expect_rejected(s, nullptr,
                  {"token_states: row " + std::to_string(R) +
                   " is written twice (the second time by token 0 of "
                   "sequence 1)"});
  SpecInputs g = inputs(Convention::kSglangGroups);
  g.token_indices[1] = g.token_indices[0];
  expect_rejected(g, nullptr, {"is written twice"});
}

TEST_P(TokenStatesErrors, ReadRowWrittenByAnotherSequence) {
  // Sequence 1 reads (num_accepted) a column past its own tokens, which names the row of
  // sequence 0's first token.
  SpecInputs s;
  for (uint64_t seed = 0; s.lens.empty() || s.lens[1] == 4; ++seed) s = inputs(Convention::kVllm, true, seed);
  const int64_t R = unused_row(s), c = s.lens[1];
  s.token_indices[0 * 4 + 0] = R;
  s.token_indices[1 * 4 + c] = R;
  s.num_accepted[1] = c + 1;
  expect_rejected(s, nullptr,
                  {"token_states: sequence 1 reads row " + std::to_string(R) +
                   ", which another sequence's token "
                   "writes"});
}

TEST_P(TokenStatesErrors, SequenceLongerThanMaxTokens) {
  const SpecInputs s = inputs(Convention::kSglangDense, false);  // 4 tokens each
  expect_rejected(s, [](ForwardArgs& a) { a.token_states.max_tokens = 0; }, {"token_states.max_tokens is 0"});
  expect_rejected(s, [](ForwardArgs& a) { a.token_states.max_tokens = 1; },
                  {"sequence 0 has 4 tokens; expected at most token_states.max_tokens = 1"});
}

TEST_P(TokenStatesErrors, OnlyForTheDecodeStep) {
  const SpecInputs s = inputs(Convention::kSglangDense);
  expect_rejected(s, nullptr, {"token_states is given; expected it only with recurrent_gated_delta_rule"}, Op::kChunk);
}

TEST_P(TokenStatesErrors, InitialStateWithNumAccepted) {
  const SpecInputs s = inputs(Convention::kVllm);
  expect_rejected(s, [](ForwardArgs& a) { a.initial_state = a.token_states.pool; },
                  {"initial_state is given with token_states.num_accepted"});
  expect_rejected(s, [](ForwardArgs& a) { a.token_states.pool.data = nullptr; },
                  {"token_states.num_accepted is given without token_states.pool.data"});
}

TEST_P(TokenStatesErrors, FinalStateRowAlsoATokenRow) {
  SpecInputs s = inputs(Convention::kVllm);
  const int64_t R = unused_row(s);
  s.token_indices[0] = R;  // sequence 0's token 0 and (below) its final state
  // final_state: the same pool with the first N indices, so sequence 0's final row is R.
  expect_rejected(s, [](ForwardArgs& a) { a.final_state = a.token_states.pool; },
                  {"final_state row " + std::to_string(R) + " of sequence 0 is also written by token_states"});
}

TEST_P(TokenStatesErrors, BadParents) {
  SpecInputs s = inputs(Convention::kVllm, false);  // 4 tokens each
  s.parents.assign(6 * 4, -1);
  s.parents[0 * 4 + 2] = 2;
  expect_rejected(s, nullptr, {"token_states.parents[0][2] is 2; expected a token before 2"});
  s.parents[0 * 4 + 2] = 0;
  s.token_indices[0 * 4 + 0] = -1;  // token 0's state is not stored: no parent to continue from
  expect_rejected(s, nullptr,
                  {"token_states.parents[0][2] is 0, but the state after token 0 of sequence 0 is not stored"});
  expect_rejected(s, [](ForwardArgs& a) { a.token_states.pool.data = nullptr, a.token_states.num_accepted = nullptr; },
                  {"token_states.parents is given without token_states.pool.data"});
}

TEST_P(TokenStatesErrors, MaskOnTokenStates) {
  const SpecInputs s = inputs(Convention::kSglangDense);
  static const uint8_t mask[6] = {1, 1, 1, 1, 1, 1};
  expect_rejected(s, [](ForwardArgs& a) { a.token_states.pool.present = mask; },
                  {"token_states.pool.present is set; expected null"});
}

INSTANTIATE_TEST_SUITE_P(CPU, TokenStatesErrors, ::testing::Values(Backend::kCPU));
INSTANTIATE_TEST_SUITE_P(CUDA, TokenStatesErrors, ::testing::Values(Backend::kCUDA));

}  // namespace
}  // namespace test
}  // namespace gdn
