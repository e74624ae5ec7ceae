// The harness's random inputs for a Case (make_inputs): q, k, v, gates, pools and indices drawn
// from the case's seed, rounded to the dtypes the backends read (harness.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "common/host_dtype.h"
#include "harness.h"
#include "model_gate.h"  // tools/: GateKind::kModel

namespace gdn {
namespace test {

namespace {

std::vector<double> randn(std::mt19937_64& rng, size_t n) {
  std::normal_distribution<double> d;
  std::vector<double> x(n);
  for (double& v : x) v = d(rng);
  return x;
}

void normalize_rows(std::vector<double>& x, int dim) { ref::l2norm(x, dim); }

}  // namespace

Inputs make_inputs(const Case& c, std::mt19937_64& rng) {
  Inputs in;
  in.c = c;
  const int64_t N = static_cast<int64_t>(c.lens.size());
  in.bounds.assign(1, 0);
  for (int64_t l : c.lens) in.bounds.push_back(in.bounds.back() + l);
  in.T = in.bounds.back();
  const int64_t T = in.T;
  in.dims.T = T;
  in.dims.H = c.H;
  in.dims.HV = c.HV;
  in.dims.K = c.K;
  in.dims.V = c.V;
  in.dims.bounds = in.bounds;

  // q and k: normalized rows unless the kernel normalizes them.
  std::vector<double> q = randn(rng, T * c.H * c.K), k = randn(rng, T * c.H * c.K), v = randn(rng, T * c.HV * c.V);
  if (!c.l2norm) {
    normalize_rows(q, c.K);
    normalize_rows(k, c.K);
  }
  const DType qk_dtype = c.qk_dtype.value_or(c.dtype);
  in.qd = round_to(q, qk_dtype);
  in.kd = round_to(k, qk_dtype);
  for (double& x : v) x *= c.v_scale;
  in.vd = round_to(v, c.dtype);

  const DType gate_dtype = c.gate_in_input_dtype ? c.dtype : DType::kFloat32;
  std::vector<double> g(T * c.HV), beta(T * c.HV);
  std::normal_distribution<double> nd;
  std::uniform_int_distribution<int> pick(0, 2);
  for (size_t i = 0; i < g.size(); ++i) {
    if (c.fused_gate) {
      g[i] = nd(rng);     // a
      beta[i] = nd(rng);  // b, before the sigmoid
      continue;
    }
    const double x = nd(rng);
    const double logsigmoid = -std::log1p(std::exp(-x));
    g[i] = c.gate == GateKind::kZero           ? 0.0
           : c.gate == GateKind::kVeryNegative ? -1e4
           : c.gate == GateKind::kModel ? tools::model_gate(x, static_cast<int64_t>(i % c.HV), c.HV) * c.gate_factor
                                        : logsigmoid * c.gate_factor;
    if (c.gate == GateKind::kMixedExtreme && pick(rng) == 0 && nd(rng) > 1.0) g[i] = -1e4;
    const double sig = 1.0 / (1.0 + std::exp(-nd(rng)));
    switch (c.beta) {
      case BetaKind::kSigmoid:
        beta[i] = sig;
        break;
      case BetaKind::kZero:
        beta[i] = 0.0;
        break;
      case BetaKind::kTwo:
        beta[i] = 2.0;
        break;
      case BetaKind::kMixed: {
        const int p = pick(rng);
        beta[i] = p == 0 ? sig : p == 1 ? 0.0 : 2.0;
        break;
      }
    }
  }
  in.gd = round_to(g, gate_dtype);
  in.betad = round_to(beta, gate_dtype);
  in.g = encode(in.gd, gate_dtype);
  in.beta = encode(in.betad, gate_dtype);
  if (c.fused_gate) {
    std::uniform_real_distribution<double> u(1.0, 16.0);
    for (int h = 0; h < c.HV; ++h) {
      in.A_log.push_back(float(std::log(u(rng))));
      in.dt_bias.push_back(float(0.5 * nd(rng)));
    }
  }

  if (c.strided) {
    if (c.qk_dtype && *c.qk_dtype != c.dtype) throw std::logic_error("a strided case has one dtype (no qk_dtype)");
    // One fused row per token: [q (H K) | k (H K) | v (HV V)], as a projection would produce.
    const int64_t row = 2 * int64_t{c.H} * c.K + int64_t{c.HV} * c.V;
    std::vector<double> fused(T * row);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < int64_t{c.H} * c.K; ++i) {
        fused[t * row + i] = in.qd[t * c.H * c.K + i];
        fused[t * row + c.H * c.K + i] = in.kd[t * c.H * c.K + i];
      }
      for (int64_t i = 0; i < int64_t{c.HV} * c.V; ++i) fused[t * row + 2 * c.H * c.K + i] = in.vd[t * c.HV * c.V + i];
    }
    in.q = encode(fused, c.dtype);
    in.stride_qk = in.stride_v = row;
    in.q_off = 0;
    in.k_off = int64_t{c.H} * c.K;
    in.v_off = 2 * int64_t{c.H} * c.K;
    in.o_stride_token = int64_t{c.HV} * c.V + c.o_pad;
  } else {
    in.q = encode(in.qd, qk_dtype);
    in.k = encode(in.kd, qk_dtype);
    in.v = encode(in.vd, c.dtype);
    in.o_stride_token = int64_t{c.HV} * c.V;
  }

  in.slots = c.pool ? 2 * N + 1 : N;
  // Drawn as doubles and rounded (the same values as before this skipped the double copy); not
  // drawn when nothing reads them (no pool, no initial state).
  if (c.pool || c.initial_state) {
    std::normal_distribution<double> d;
    in.state0.resize(in.slots * c.HV * c.K * c.V);
    for (float& x : in.state0) x = static_cast<float>(d(rng) * c.v_scale);
    // A bf16 / fp16 pool holds the rounded values; the oracle starts from the same ones.
    if (c.state_dtype != DType::kFloat32)
      for (float& x : in.state0) {
        float bits = 0;  // room for any dtype's element
        store_from_float(&bits, 0, c.state_dtype, x);
        x = load_as_float(&bits, 0, c.state_dtype);
      }
  }
  if (c.pool && c.serving) {
    // Read rows 1..N and write rows N+1..2N, each a shuffle; a quarter of the sequences are
    // padding (slot 0, the null slot, in both), a quarter of the others start from zeros.
    std::vector<int32_t> reads(N), writes(N);
    std::iota(reads.begin(), reads.end(), 1);
    std::iota(writes.begin(), writes.end(), static_cast<int32_t>(N + 1));
    std::shuffle(reads.begin(), reads.end(), rng);
    std::shuffle(writes.begin(), writes.end(), rng);
    std::bernoulli_distribution quarter(0.25);
    for (int64_t n = 0; n < N; ++n) {
      const bool padding = quarter(rng);
      in.indices.push_back(padding ? 0 : reads[n]);
      in.final_indices.push_back(padding ? 0 : writes[n]);
      in.present.push_back(quarter(rng) ? 0 : 1);
    }
  } else if (c.pool) {
    std::vector<int32_t> rows(in.slots);
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), rng);
    std::bernoulli_distribution none(0.25);
    for (int64_t n = 0; n < N; ++n) in.indices.push_back(none(rng) ? -1 : rows[n]);
  }
  return in;
}

}  // namespace test
}  // namespace gdn
