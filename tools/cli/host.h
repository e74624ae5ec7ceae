// The CLI's host side: one case's random inputs (the layer shape, qk l2-norm on, fp32 gates and
// states) and the check of a value head against the double-precision recurrence.
#pragma once

#include <cstdint>
#include <vector>

#include "cases.h"
#include "gdn/gdn.h"

namespace gdn {
namespace cli {

constexpr int K = 128, V = 128;  // head sizes of every case (bench/cases.txt)

// xorshift64: fast, reproducible, the same stream on every machine.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double symmetric() { return 2.0 * uniform() - 1.0; }                      // [-1, 1)
};

struct HostProblem {
  std::vector<int64_t> lens, bounds;  // [N], [N + 1]
  int64_t T = 0, N = 0;
  int H = 16, HV = 32;
  DType dtype = DType::kBFloat16;
  std::vector<uint8_t> q, k;   // [T, H, K]  storage dtype
  std::vector<uint8_t> v;      // [T, HV, V] storage dtype
  std::vector<float> g, beta;  // [T, HV]    fp32
  std::vector<float> h0;       // [N, HV, K, V] K-major
};

// Random inputs, never zeros; gates kZero give g = 0 exactly.
HostProblem make_problem(const std::vector<int64_t>& lens, int H, int HV, tools::CaseGates gates, DType dtype,
                         uint64_t seed);

// Rel. RMS error of o and (in *state_err) of the final states of value head hv (every sequence)
// against the fp64 recurrence. `o` is [T, HV, V] in the storage dtype, `hT` [N, HV, K, V] in
// `layout`.
double check_head(const HostProblem& hp, int hv, const std::vector<uint8_t>& o, const std::vector<float>& hT,
                  StateLayout layout, double* state_err);

}  // namespace cli
}  // namespace gdn
