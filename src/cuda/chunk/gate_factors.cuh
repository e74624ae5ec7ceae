// The gates of a chunk's products, exp(G_i - G_j) for rows i and columns j <= i (L in kkt_solve, P
// in fwd_o and the fused o warpgroup, chain_o.cuh), as a row factor times a column factor about a
// reference gate G_r:
//   exp(G_i - G_j) = exp(G_i - G_r) exp(G_r - G_j)
// 2 row and 2 column exponentials per thread (the columns j = 2 lane + e, then shuffled to the
// lanes that hold them) instead of one exponential of an fp64 difference per element. The
// factors are exact to fp32 rounding while both stay within e^+-span; their product is formed
// first (rf cf, then times the element), so nothing overflows where the element is finite.
// The forms, in order (a warp takes the first whose factors stay in range; every lane agrees):
//   1. G_r the middle of the chunk's gates, span 40: chunks whose gates span up to ~80 (kkt_solve,
//      fwd_o; the fused o warpgroup uses kkt_solve's exp(G_last - G) instead, within e^+-80).
//   2. G_r the warp's first row r0, span 80: rows i >= r0 decay from it (exp(G_i - G_r) <= 1 for
//      gates <= 0), columns j <= r0 too (exp(G_r - G_j) <= 1: underflow only where the element is
//      < e^-87 anyway, so only their upper side is checked); only the columns inside the warp's
//      own 16 rows grow, by at most the span of those rows. A model's fast-decaying heads (per-token
//      decays past ~1.3: chunks spanning more than 80) take it.
//   3. one exponential per element (the callers' own loops): 16 rows spanning more than 80 (a
//      g = -1e4 reset among them). Per element, its fp64 difference and exponential form a serial
//      chain: 1.85x the fused chain's time on the chunks that took it (docs/perf.md, session 21).
#pragma once

namespace gdn {
namespace cuda {

// Form 1 or 2: rf[h] = row_scale[h] exp(G_row[h] - g_ref), c2[e] = col_scale(j) exp(g_ref - G[j])
// for j = 2 lane + e, and whether the warp's factors all stay within e^+-span: rows where row_on,
// columns below col_end (both sides where both_sides, else the upper only).
template <typename ColScale>
__device__ __forceinline__ bool gate_factors(double g_ref, double span, bool both_sides, const double (&g_row)[2],
                                             const bool (&row_on)[2], const float (&row_scale)[2], const double* G,
                                             int lane, int col_end, ColScale col_scale, float (&rf)[2],
                                             float (&c2)[2]) {
  bool near = true;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const double d = g_row[h] - g_ref;
    near &= !row_on[h] || (d >= -span && d <= span);
    rf[h] = row_scale[h] * __expf(float(d));
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int col = 2 * lane + e;
    const double d = g_ref - G[col];
    near &= col >= col_end || (d <= span && (!both_sides || d >= -span));  // (NaN: out of range)
    c2[e] = col_scale(col) * __expf(float(d));
  }
  return __all_sync(0xffffffffu, near);
}

constexpr double kGateSpanMiddle = 40.0;  // form 1's span (about the chunk's middle)
constexpr double kGateSpanRow = 80.0;     // form 2's (about the warp's first row)

}  // namespace cuda
}  // namespace gdn
