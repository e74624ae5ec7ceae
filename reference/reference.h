// The double-precision reference: the token-by-token recurrence (the oracle of every test and of
// the CLI's check), and each stage of the chunked algorithm written as plain loops from its
// definition in SPEC.md section 3. Kept apart from the backends on purpose: the only code it shares
// with them is the scalar formulas and constants of SPEC section 1 (src/common/spec_math.h, here
// instantiated in double). Every array is packed and double; states are K-major [N, HV, K, V].
#pragma once

#include <cstdint>
#include <vector>

namespace gdn {
namespace ref {

struct Dims {
  int64_t T = 0;
  int H = 0, HV = 0, K = 0, V = 0;
  std::vector<int64_t> bounds;  // [N + 1] sequence boundaries
  int64_t N() const { return static_cast<int64_t>(bounds.size()) - 1; }
  int qk_head(int hv) const { return hv / (HV / H); }
};

using Vec = std::vector<double>;

// x / sqrt(sum(x^2) + spec::kL2NormEps) over each row of `dim` elements.
void l2norm(Vec& x, int dim);

// g = spec::fused_gate(a, A_log[hv], dt_bias[hv]), beta = spec::fused_beta(b) = sigmoid(b).
void fused_gates(const Dims& d, const Vec& a, const Vec& A_log, const Vec& dt_bias, const Vec& b, Vec& g, Vec& beta);

// The recurrence. h0: [N, HV, K, V] or empty (zeros). Outputs o [T, HV, V] and hT [N, HV, K, V].
// token_states, when given: the state after every token, [T, HV, K, V] (speculative decoding's
// per-token states).
void recurrence(const Dims& d, const Vec& q, const Vec& k, const Vec& v, const Vec& g, const Vec& beta, const Vec& h0,
                double scale, Vec& o, Vec& hT, Vec* token_states = nullptr);

// Stage definitions (chunk C = 64, chunks numbered globally in sequence order).
int64_t num_chunks(const Dims& d);
void chunk_local_cumsum(const Dims& d, const Vec& g, Vec& G);                                   // [T, HV]
void chunk_scaled_dot_kkt(const Dims& d, const Vec& k, const Vec& beta, const Vec& G, Vec& L);  // [T, HV, 64]
void solve_tril(const Dims& d, const Vec& L, Vec& A);  // direct inverse of (I + L) per chunk, [T, HV, 64]
void recompute_w_u(const Dims& d, const Vec& k, const Vec& v, const Vec& beta, const Vec& G, const Vec& A, Vec& w,
                   Vec& u);
// h: [num_chunks, HV, K, V]; v_new: [T, HV, V]; hT: [N, HV, K, V].
void chunk_fwd_h(const Dims& d, const Vec& k, const Vec& w, const Vec& u, const Vec& G, const Vec& h0, Vec& h,
                 Vec& v_new, Vec& hT);
void chunk_fwd_o(const Dims& d, const Vec& q, const Vec& k, const Vec& v_new, const Vec& h, const Vec& G, double scale,
                 Vec& o);

// Relative RMS error ||out - ref|| / ||ref||; infinity if out holds a NaN or Inf.
double rel_rms_error(const double* out, const double* ref, int64_t n);

}  // namespace ref
}  // namespace gdn
