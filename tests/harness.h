// Test harness: random problems, their inputs in every storage dtype, backend memory (host or
// CUDA), and the double-precision oracle on the same rounded inputs.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gdn/gdn.h"
#include "reference.h"

namespace gdn {
namespace test {

// Fresh random seed per process, printed so that a failure can be replayed (GDN_TEST_SEED=...).
uint64_t test_seed();

// A parameterized test's name, prefix_index_name, with every character gtest rejects (anything
// but letters, digits and '_') replaced by '_'.
inline std::string test_param_name(const std::string& prefix, size_t index, const std::string& name) {
  std::string s = prefix + "_" + std::to_string(index) + "_" + name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Memory on a backend's device; host memory for the CPU backend.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend backend, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t bytes);
  void download(void* dst, size_t bytes) const;
  std::vector<uint8_t> to_host() const;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  Backend backend_ = Backend::kCPU;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

Buffer upload(Backend backend, const std::vector<uint8_t>& host);
template <typename T>
Buffer upload_vec(Backend backend, const std::vector<T>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return upload(backend, bytes);
}
void synchronize(Backend backend);

// Host arrays in a storage dtype, with their values as double.
std::vector<uint8_t> encode(const std::vector<double>& x, DType dtype);
std::vector<double> decode(const uint8_t* bytes, size_t count, DType dtype);
std::vector<double> round_to(const std::vector<double>& x, DType dtype);  // encode + decode

// kMixedExtreme: logsigmoid gates with one token in ten at -1e4 (a reset inside a chunk).
// kModel: Qwen3-Next's gates (tools/model_gate.h), per-head decays from ~1e-3 to ~1.35 a token:
// in one call some heads' history fades within a few chunks and others' lasts hundreds (the
// CUDA split keeps M_p for some heads and finds it negligible for others).
enum class GateKind { kLogSigmoid, kZero, kVeryNegative, kMixedExtreme, kModel };
enum class BetaKind { kSigmoid, kZero, kTwo, kMixed };

struct Case {
  std::vector<int64_t> lens{64};
  bool varlen = true;  // false: fixed-length batch (all lens equal), cu_seqlens null
  int H = 2, HV = 4, K = 64, V = 64;
  DType dtype = DType::kFloat32;
  std::optional<DType> qk_dtype;  // q and k in another dtype than v (Problem::qk_dtype); not with strided
  std::optional<DType> o_dtype;   // o in another dtype than v (Problem::o_dtype)
  bool gate_in_input_dtype = false;
  bool l2norm = true;
  StateLayout layout = StateLayout::kKMajor;
  bool initial_state = true;
  bool final_state = true;
  bool pool = false;  // states in a pool of 2N + 1 slots, some sequences with index -1, in place
  // Dense states, but the final-state array has rows for the even sequences only (the odd ones
  // have final index -1): the CPU decode step then works in its workspace for those.
  bool sparse_final = false;
  int threads = 0;  // exec.num_threads
  // A serving engine's pool (with pool): slot 0 is the null slot (vLLM's padding; several
  // sequences name it: they touch no state), the other sequences read one slot and write another
  // (read rows 1..N, write rows N+1..2N), and the present mask on the initial state starts some
  // of them from zeros while they still write.
  bool serving = false;
  bool fused_gate = false;
  GateKind gate = GateKind::kLogSigmoid;
  double gate_factor = 1.0;
  BetaKind beta = BetaKind::kSigmoid;
  bool strided = false;  // q, k, v as views into a fused [T, (2H K + HV V)] buffer; o padded
  int o_pad = 16;        // strided: o's token stride is HV V + o_pad (odd: rows not 16-byte aligned)
  // The state pools' element type (initial states drawn, then rounded to it: the oracle runs on
  // the rounded values) and a padded row stride: each row (slot) HV K V + row_pad elements long,
  // the padding filled with a pattern that must come back bitwise unchanged. Any row_pad runs on
  // both backends; one that leaves rows off 4-element pieces sends the CUDA decode step's tuned
  // sizes to its general kernel.
  DType state_dtype = DType::kFloat32;
  int row_pad = 0;
  // v and the initial states times this (the errors are relative: the range the kernels' 16-bit
  // operands carry, docs/api.md).
  double v_scale = 1.0;
  std::string name() const;
};

// Host-side inputs for one case: storage bytes and their rounded double values.
struct Inputs {
  Case c;
  int64_t T = 0;
  std::vector<int64_t> bounds;
  ref::Dims dims;
  // Storage: qkv fused buffer when strided, else separate packed arrays.
  std::vector<uint8_t> q, k, v, g, beta;  // packed (or q holds the fused buffer when strided)
  int64_t q_off = 0, k_off = 0, v_off = 0, stride_qk = 0, stride_v = 0;
  std::vector<double> qd, kd, vd, gd, betad;  // as the kernel sees them (before l2norm / fusion)
  std::vector<float> A_log, dt_bias;
  std::vector<float> state0;           // [slots, HV, ...] in the case's layout, rounded to state_dtype (packed)
  std::vector<int32_t> indices;        // [N] when pooled (the read slots of a serving case)
  std::vector<int32_t> final_indices;  // [N] serving: the write slots (0 for the padding)
  std::vector<uint8_t> present;        // [N] serving: the initial state's present mask
  int64_t slots = 0;
  int64_t o_stride_token = 0;  // elements
};

Inputs make_inputs(const Case& c, std::mt19937_64& rng);

// The initial states as the oracle takes them: dense K-major [N, HV, K, V] (zeros for index -1
// rows), or empty when the case has none.
std::vector<double> initial_states(const Inputs& in);

// The oracle on the inputs: o [T, HV, V], final states [N, HV, K, V] K-major (zeros for -1 rows).
struct Expected {
  std::vector<double> o, final_state;
};
Expected reference(const Inputs& in);

// The problem description of a case (cu_seqlens left for the caller to set).
Problem problem_of(const Case& c);
Problem problem_of(const Inputs& in);

// Runs the chunked forward (or the decode step) on a backend; returns o and the pool/final
// state array after the call, as host vectors.
struct Outputs {
  std::vector<double> o;      // [T, HV, V]
  std::vector<float> states;  // the whole final-state array (pool or dense), its layout, packed, as fp32
};
enum class Op { kChunk, kRecurrent };
// A replacement for the decode step's public call (e.g. the CUDA backend with an explicit
// configuration, test_decode_shapes.cpp); null: recurrent_gated_delta_rule.
using DecodeCall = std::function<void(const ForwardArgs&, const Exec&)>;
Outputs run(const Inputs& in, Backend backend, Op op, const DecodeCall& decode_call = nullptr);

// Relative RMS errors of o and of the final states of the sequences that have one, plus the
// check that pool rows nobody owns are untouched.
void expect_close(const Inputs& in, const Expected& ref, const Outputs& out, Backend backend, const char* what);

// A 16-bit pool rounds once, on write: `lo`, the call on a pool of `state_dtype`, has bitwise the o
// of `hi`, the same call on an fp32 pool holding the same (rounded) initial states, and final states
// that are exactly hi's rounded to state_dtype (NaN where nobody writes, in both).
void expect_rounded_once(const Outputs& lo, const Outputs& hi, DType state_dtype, const std::string& what);

// SPEC section 4 bounds for a dtype and backend.
double tolerance(DType dtype, Backend backend);
// The bound of a case: that of its coarsest dtype when q/k, v and o differ.
double tolerance(const Case& c, Backend backend);
// The bound of the final state: that of the inputs, or of the state's own rounding when coarser
// (a bf16 pool: 5e-3, an fp16 pool: 1e-3; docs/api.md).
double state_tolerance(const Case& c, Backend backend);

inline bool backend_ready(Backend b) { return b == Backend::kCPU || cuda_available(); }

#define GDN_SKIP_IF_UNAVAILABLE(backend) \
  if (!::gdn::test::backend_ready(backend)) GTEST_SKIP() << "no CUDA device"

// Skips unless the backend's capability table (gdn::supports) covers the case for `op`.
#define GDN_SKIP_IF_UNSUPPORTED(problem, backend, op)                                      \
  do {                                                                                     \
    std::string gdn_why_;                                                                  \
    if (!::gdn::supports((problem), (backend), (op), &gdn_why_)) GTEST_SKIP() << gdn_why_; \
  } while (0)

}  // namespace test
}  // namespace gdn
