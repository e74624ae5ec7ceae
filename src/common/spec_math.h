// The scalar formulas and constants of SPEC.md section 1, written once for every backend (host and
// device) and for the fp64 oracle (templated on the arithmetic type).
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define GDN_HOST_DEVICE __host__ __device__
#else
#define GDN_HOST_DEVICE
#endif

namespace gdn {
namespace spec {

// qk l2-norm: x <- x / sqrt(sum(x^2) + kL2NormEps), per token and head, in fp32 (fp64 in the oracle).
constexpr double kL2NormEps = 1e-6;
// softplus(x) = x above this threshold (as torch.nn.functional.softplus with threshold 20).
constexpr double kSoftplusThreshold = 20.0;

// Fused gate: g = -exp(A_log) * softplus(a + dt_bias).
template <typename T>
GDN_HOST_DEVICE inline T fused_gate(T a, T A_log, T dt_bias) {
  using std::exp;
  using std::log1p;
  const T x = a + dt_bias;
  const T softplus = x > T(kSoftplusThreshold) ? x : log1p(exp(x));
  return -exp(A_log) * softplus;
}

// Fused beta: beta = sigmoid(b).
template <typename T>
GDN_HOST_DEVICE inline T fused_beta(T b) {
  using std::exp;
  return T(1) / (T(1) + exp(-b));
}

// 1 / sqrt(sum of squares + eps): the qk l2-norm's row scaling.
template <typename T>
GDN_HOST_DEVICE inline T l2norm_inv(T sum_sq) {
  using std::sqrt;
  return T(1) / sqrt(sum_sq + T(kL2NormEps));
}

}  // namespace spec
}  // namespace gdn
