#include "cli/host.h"

#include <cmath>

#include "common/host_dtype.h"
#include "reference.h"

namespace gdn {
namespace cli {
namespace {

void fill(std::vector<uint8_t>& out, size_t n, DType dtype, Rng& rng) {
  out.resize(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) store_from_float(out.data(), int64_t(i), dtype, float(rng.symmetric()));
}

}  // namespace

HostProblem make_problem(const std::vector<int64_t>& lens, int H, int HV, tools::CaseGates gates, DType dtype,
                         uint64_t seed) {
  HostProblem hp;
  hp.lens = lens;
  hp.N = int64_t(lens.size());
  hp.bounds.assign(1, 0);
  for (int64_t l : lens) hp.bounds.push_back(hp.bounds.back() + l);
  hp.T = hp.bounds.back();
  hp.H = H;
  hp.HV = HV;
  hp.dtype = dtype;
  Rng rng(seed);
  fill(hp.q, size_t(hp.T) * H * K, dtype, rng);
  fill(hp.k, size_t(hp.T) * H * K, dtype, rng);
  fill(hp.v, size_t(hp.T) * HV * V, dtype, rng);
  hp.g.resize(size_t(hp.T) * HV);
  hp.beta.resize(size_t(hp.T) * HV);
  for (size_t i = 0; i < hp.g.size(); ++i) {
    // logsigmoid of a spread-out draw, and a sigmoid for beta, as models produce them.
    const double x = 3.0 * rng.symmetric();
    hp.g[i] = tools::case_gate(gates, x, int64_t(i % size_t(HV)), HV);
    hp.beta[i] = float(1.0 / (1.0 + std::exp(-3.0 * rng.symmetric())));
  }
  hp.h0.resize(size_t(hp.N) * HV * K * V);
  for (float& x : hp.h0) x = float(0.1 * rng.symmetric());
  return hp;
}

double check_head(const HostProblem& hp, int hv, const std::vector<uint8_t>& o, const std::vector<float>& hT,
                  StateLayout layout, double* state_err) {
  const int H = hp.H, HV = hp.HV;
  ref::Dims d;
  d.T = hp.T;
  d.H = d.HV = 1;
  d.K = K;
  d.V = V;
  d.bounds = hp.bounds;
  const int hk = hv / (HV / H);
  std::vector<double> q(hp.T * K), k(hp.T * K), v(hp.T * V), g(hp.T), beta(hp.T), h0(hp.N * K * V);
  for (int64_t t = 0; t < hp.T; ++t) {
    for (int i = 0; i < K; ++i) {
      q[t * K + i] = load_as_float(hp.q.data(), (t * H + hk) * K + i, hp.dtype);
      k[t * K + i] = load_as_float(hp.k.data(), (t * H + hk) * K + i, hp.dtype);
    }
    for (int i = 0; i < V; ++i) v[t * V + i] = load_as_float(hp.v.data(), (t * HV + hv) * V + i, hp.dtype);
    g[t] = hp.g[t * HV + hv];
    beta[t] = hp.beta[t * HV + hv];
  }
  for (int64_t n = 0; n < hp.N; ++n)
    for (int i = 0; i < K * V; ++i) h0[n * K * V + i] = hp.h0[(n * HV + hv) * int64_t{K} * V + i];
  ref::l2norm(q, K);
  ref::l2norm(k, K);
  std::vector<double> ro, rT;
  ref::recurrence(d, q, k, v, g, beta, h0, 1.0 / std::sqrt(double(K)), ro, rT);
  std::vector<double> go(hp.T * V), gT(hp.N * K * V);
  for (int64_t t = 0; t < hp.T; ++t)
    for (int i = 0; i < V; ++i) go[t * V + i] = load_as_float(o.data(), (t * HV + hv) * V + i, hp.dtype);
  for (int64_t n = 0; n < hp.N; ++n)
    for (int x = 0; x < K; ++x)
      for (int y = 0; y < V; ++y) {
        const int64_t head = (n * HV + hv) * int64_t{K} * V;
        gT[(n * K + x) * V + y] = hT[head + (layout == StateLayout::kKMajor ? x * V + y : y * K + x)];
      }
  *state_err = ref::rel_rms_error(gT.data(), rT.data(), int64_t(rT.size()));
  return ref::rel_rms_error(go.data(), ro.data(), int64_t(ro.size()));
}

}  // namespace cli
}  // namespace gdn
