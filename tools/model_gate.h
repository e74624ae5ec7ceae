// Qwen3-Next's gates as test input: one formula for the case list (tools/cases.h: the CLI, the
// CUDA check), the test harness (tests/: GateKind::kModel) and, in Python, gdn_ref.model_gate_params.
// Header-only, with no generated header behind it (the tests build without the tools).
#pragma once

#include <cmath>
#include <cstdint>

namespace gdn {
namespace tools {

// "model" gates: Qwen3-Next's g = -exp(A_log) softplus(a + dt_bias) with its initialization's
// parameter ranges (A ~ U(0, 16), dt ~ logU(1e-3, 0.1), dt_bias = softplus^-1(dt)), spread
// deterministically over the value heads (A by head index, dt by a golden-ratio sequence), and
// `a` = x, the token's random draw. Per-token decays at a = 0 from 1e-3 to 1.35 by head (median
// 0.07), most far slower than the "normal" gates' ~0.8: the decays a model's heads have. python/tests/gdn_ref.py's
// model_gate_params is the same formula for the Python benchmark.
inline float model_gate(double x, int64_t head, int64_t heads) {
  const double hx = static_cast<double>(head) + 0.5;
  const double A = 16.0 * hx / static_cast<double>(heads);
  const double dt = 1e-3 * std::pow(100.0, std::fmod(hx * 0.6180339887498949, 1.0));
  const double dt_bias = dt + std::log(-std::expm1(-dt));
  const double z = x + dt_bias;
  return static_cast<float>(-A * (z > 20.0 ? z : std::log1p(std::exp(z))));
}

}  // namespace tools
}  // namespace gdn
