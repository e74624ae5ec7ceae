// Multi-token decode cases (TokenStates): a speculative-decoding verify batch in vLLM's convention
// (2-D slot indices, the initial state read through num_accepted) or SGLang's (the pool row read,
// the per-token states into an intermediate buffer by group or densely, disable_state_update), run
// on a backend and checked against the fp64 recurrence. Shared by test_token_states.cpp (the
// results) and test_token_states_errors.cpp (bad input).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness.h"

namespace gdn {
namespace test {

enum class Convention { kVllm, kSglangGroups, kSglangDense };

struct SpecCase {
  Convention conv = Convention::kVllm;
  int K = 128, V = 128;
  DType dtype = DType::kBFloat16;
  StateLayout layout = StateLayout::kKMajor;
  // The pools' (state pool and intermediate buffer) element type: values drawn, then rounded to it;
  // the stored states are checked against the state bound (harness.h: state_tolerance).
  DType state_dtype = DType::kFloat32;
  // Elements of padding after each row of the pool and of the buffer (StateRef::row_stride =
  // HV K V + row_pad; 0: packed), filled with a pattern that must come back unchanged. An odd one
  // leaves rows off the CUDA tuned kernels' 4-element pieces (the general kernel runs).
  int row_pad = 0;
  // false: a fixed-length batch [N, max_tokens] (cu_seqlens null): padding entries have tokens.
  bool varlen = true;
  bool disable_state_update = true;  // SGLang: the pool rows are not written (else updated in place)
  bool int64_indices = false;
  bool tree = false;  // EAGLE trees: random parents among the stored earlier tokens
  int N = 9;
  int max_tokens = 4;
  std::string name() const;
};

// A case's inputs and its state arrays before the call.
struct SpecInputs {
  SpecCase c;
  Inputs in;                  // q, k, v, g, beta and the boundaries (harness Inputs)
  std::vector<int64_t> lens;  // [N]
  std::vector<bool> padding;  // [N]: touches no state
  std::vector<float> pool;    // [pool_slots, HV, K, V] in the case's layout
  int64_t pool_slots = 0;
  std::vector<int64_t> pool_indices;  // SGLang: [N] read (and write) rows, -1 for padding
  std::vector<float> buffer;          // SGLang: the intermediate buffer [buffer_slots, HV, K, V], NaN
  int64_t buffer_slots = 0;
  std::vector<int64_t> token_indices;  // vLLM: [N, max_tokens]; SGLang groups: [N]; dense: empty
  std::vector<int64_t> num_accepted;   // vLLM: [N]
  std::vector<int64_t> parents;        // tree: [N, max_tokens] (-1: the previous token)
};

SpecInputs make_spec_inputs(const SpecCase& c, std::mt19937_64& rng);

// The pool and buffer after a call, and o; `error`: the message of a rejected call ("" if none).
struct SpecOutputs {
  std::vector<double> o;  // [T, HV, V]
  std::vector<float> pool, buffer;
  std::string error;
};

// Builds the call (indices in int32 or int64 as the case says, with host copies unless
// host_copies is false), lets `edit` change it, runs it (the decode step, or the chunked forward
// with Op::kChunk) and returns the arrays after the call, or after its rejection. graph (CUDA):
// the call is captured into a CUDA graph on a stream of its own and the graph launched once.
// decode (not with graph): replaces the decode step's public call.
SpecOutputs run_spec(const SpecInputs& s, Backend backend, const std::function<void(ForwardArgs&)>& edit = nullptr,
                     bool host_copies = true, Op op = Op::kRecurrent, bool graph = false,
                     const DecodeCall& decode_call = nullptr);

// Checks o, every stored token state and the final states against the oracle, and that every row
// that no token (nor final state) writes is bitwise unchanged.
void expect_spec_close(const SpecInputs& s, const SpecOutputs& out, Backend backend);

}  // namespace test
}  // namespace gdn
