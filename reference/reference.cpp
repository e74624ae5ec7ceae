#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/spec_math.h"

namespace gdn {
namespace ref {
namespace {

constexpr int C = 64;

// Calls fn(n, hv, chunk_index, first_token, rows) for every chunk of every sequence and head.
template <typename Fn>
void for_each_chunk(const Dims& d, Fn&& fn) {
  int64_t chunk = 0;
  for (int64_t n = 0; n < d.N(); ++n) {
    const int64_t begin = d.bounds[n], end = d.bounds[n + 1];
    for (int64_t t0 = begin; t0 < end; t0 += C, ++chunk) {
      const int rows = static_cast<int>(std::min<int64_t>(C, end - t0));
      for (int hv = 0; hv < d.HV; ++hv) fn(n, hv, chunk, t0, rows);
    }
  }
}

}  // namespace

void l2norm(Vec& x, int dim) {
  for (size_t r = 0; r < x.size() / dim; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
    const double inv = spec::l2norm_inv(ss);
    for (int i = 0; i < dim; ++i) x[r * dim + i] *= inv;
  }
}

void fused_gates(const Dims& d, const Vec& a, const Vec& A_log, const Vec& dt_bias, const Vec& b, Vec& g, Vec& beta) {
  g.assign(d.T * d.HV, 0.0);
  beta.assign(d.T * d.HV, 0.0);
  for (int64_t t = 0; t < d.T; ++t)
    for (int hv = 0; hv < d.HV; ++hv) {
      const int64_t i = t * d.HV + hv;
      g[i] = spec::fused_gate(a[i], A_log[hv], dt_bias[hv]);
      beta[i] = spec::fused_beta(b[i]);
    }
}

void recurrence(const Dims& d, const Vec& q, const Vec& k, const Vec& v, const Vec& g, const Vec& beta, const Vec& h0,
                double scale, Vec& o, Vec& hT, Vec* token_states) {
  const int H = d.H, HV = d.HV, K = d.K, V = d.V;
  if (token_states) token_states->assign(d.T * HV * K * V, 0.0);
  o.assign(d.T * HV * V, 0.0);
  hT.assign(d.N() * HV * K * V, 0.0);
  // Each (sequence, head) is independent: spread them over threads (big GPU-sized test cases).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < d.N() * HV; ++task) {
    const int64_t n = task / HV;
    const int hv = static_cast<int>(task % HV);
    Vec S(K * V), err(V);
    {
      const int hk = d.qk_head(hv);
      const int64_t state = (n * HV + hv) * K * V;
      for (int i = 0; i < K * V; ++i) S[i] = h0.empty() ? 0.0 : h0[state + i];
      for (int64_t t = d.bounds[n]; t < d.bounds[n + 1]; ++t) {
        const double* qt = &q[(t * H + hk) * K];
        const double* kt = &k[(t * H + hk) * K];
        const double* vt = &v[(t * HV + hv) * V];
        const double decay = std::exp(g[t * HV + hv]), bt = beta[t * HV + hv];
        for (int i = 0; i < K * V; ++i) S[i] *= decay;
        for (int j = 0; j < V; ++j) {
          double kS = 0;
          for (int i = 0; i < K; ++i) kS += kt[i] * S[i * V + j];
          err[j] = bt * (vt[j] - kS);
        }
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) S[i * V + j] += kt[i] * err[j];
        double* ot = &o[(t * HV + hv) * V];
        for (int j = 0; j < V; ++j) {
          double acc = 0;
          for (int i = 0; i < K; ++i) acc += qt[i] * S[i * V + j];
          ot[j] = scale * acc;
        }
        if (token_states)
          for (int i = 0; i < K * V; ++i) (*token_states)[(t * HV + hv) * K * V + i] = S[i];
      }
      for (int i = 0; i < K * V; ++i) hT[state + i] = S[i];
    }
  }
}

int64_t num_chunks(const Dims& d) {
  int64_t total = 0;
  for (int64_t n = 0; n < d.N(); ++n) total += (d.bounds[n + 1] - d.bounds[n] + C - 1) / C;
  return total;
}

void chunk_local_cumsum(const Dims& d, const Vec& g, Vec& G) {
  G.assign(d.T * d.HV, 0.0);
  for_each_chunk(d, [&](int64_t, int hv, int64_t, int64_t t0, int rows) {
    double acc = 0;
    for (int i = 0; i < rows; ++i) {
      acc += g[(t0 + i) * d.HV + hv];
      G[(t0 + i) * d.HV + hv] = acc;
    }
  });
}

void chunk_scaled_dot_kkt(const Dims& d, const Vec& k, const Vec& beta, const Vec& G, Vec& L) {
  L.assign(d.T * d.HV * C, 0.0);
  for_each_chunk(d, [&](int64_t, int hv, int64_t, int64_t t0, int rows) {
    const int hk = d.qk_head(hv);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < i; ++j) {
        const int64_t ti = t0 + i, tj = t0 + j;
        double dot = 0;
        for (int x = 0; x < d.K; ++x) dot += k[(ti * d.H + hk) * d.K + x] * k[(tj * d.H + hk) * d.K + x];
        L[(ti * d.HV + hv) * C + j] = beta[ti * d.HV + hv] * dot * std::exp(G[ti * d.HV + hv] - G[tj * d.HV + hv]);
      }
  });
}

void solve_tril(const Dims& d, const Vec& L, Vec& A) {
  A.assign(d.T * d.HV * C, 0.0);
  for_each_chunk(d, [&](int64_t, int hv, int64_t, int64_t t0, int rows) {
    // Gauss-Jordan on M = I + L (rows x rows), carried out on [M | I].
    std::vector<double> M(rows * rows, 0.0), Inv(rows * rows, 0.0);
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < rows; ++j) M[i * rows + j] = (i == j) ? 1.0 : L[((t0 + i) * d.HV + hv) * C + j];
      Inv[i * rows + i] = 1.0;
    }
    for (int col = 0; col < rows; ++col) {
      const double pivot = M[col * rows + col];
      for (int j = 0; j < rows; ++j) {
        M[col * rows + j] /= pivot;
        Inv[col * rows + j] /= pivot;
      }
      for (int i = 0; i < rows; ++i) {
        if (i == col) continue;
        const double f = M[i * rows + col];
        if (f == 0.0) continue;
        for (int j = 0; j < rows; ++j) {
          M[i * rows + j] -= f * M[col * rows + j];
          Inv[i * rows + j] -= f * Inv[col * rows + j];
        }
      }
    }
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < rows; ++j) A[((t0 + i) * d.HV + hv) * C + j] = Inv[i * rows + j];
  });
}

void recompute_w_u(const Dims& d, const Vec& k, const Vec& v, const Vec& beta, const Vec& G, const Vec& A, Vec& w,
                   Vec& u) {
  w.assign(d.T * d.HV * d.K, 0.0);
  u.assign(d.T * d.HV * d.V, 0.0);
  for_each_chunk(d, [&](int64_t, int hv, int64_t, int64_t t0, int rows) {
    const int hk = d.qk_head(hv);
    for (int i = 0; i < rows; ++i) {
      const int64_t ti = t0 + i;
      for (int j = 0; j < rows; ++j) {
        const int64_t tj = t0 + j;
        const double a = A[(ti * d.HV + hv) * C + j];
        const double bj = beta[tj * d.HV + hv];
        const double gk = a * bj * std::exp(G[tj * d.HV + hv]);
        for (int x = 0; x < d.K; ++x) w[(ti * d.HV + hv) * d.K + x] += gk * k[(tj * d.H + hk) * d.K + x];
        for (int x = 0; x < d.V; ++x) u[(ti * d.HV + hv) * d.V + x] += a * bj * v[(tj * d.HV + hv) * d.V + x];
      }
    }
  });
}

void chunk_fwd_h(const Dims& d, const Vec& k, const Vec& w, const Vec& u, const Vec& G, const Vec& h0, Vec& h,
                 Vec& v_new, Vec& hT) {
  const int K = d.K, V = d.V, HV = d.HV;
  h.assign(num_chunks(d) * HV * K * V, 0.0);
  v_new.assign(d.T * HV * V, 0.0);
  hT.assign(d.N() * HV * K * V, 0.0);
  Vec S(K * V);
  for (int hv = 0; hv < HV; ++hv) {
    const int hk = d.qk_head(hv);
    int64_t chunk = 0;
    for (int64_t n = 0; n < d.N(); ++n) {
      const int64_t state = (n * HV + hv) * K * V;
      for (int i = 0; i < K * V; ++i) S[i] = h0.empty() ? 0.0 : h0[state + i];
      for (int64_t t0 = d.bounds[n]; t0 < d.bounds[n + 1]; t0 += C, ++chunk) {
        const int rows = static_cast<int>(std::min<int64_t>(C, d.bounds[n + 1] - t0));
        for (int i = 0; i < K * V; ++i) h[(chunk * HV + hv) * K * V + i] = S[i];
        for (int r = 0; r < rows; ++r) {
          const int64_t t = t0 + r;
          for (int j = 0; j < V; ++j) {
            double wS = 0;
            for (int x = 0; x < K; ++x) wS += w[(t * HV + hv) * K + x] * S[x * V + j];
            v_new[(t * HV + hv) * V + j] = u[(t * HV + hv) * V + j] - wS;
          }
        }
        const double G_last = G[(t0 + rows - 1) * HV + hv];
        for (int i = 0; i < K * V; ++i) S[i] *= std::exp(G_last);
        for (int r = 0; r < rows; ++r) {
          const int64_t t = t0 + r;
          const double f = std::exp(G_last - G[t * HV + hv]);
          for (int x = 0; x < K; ++x)
            for (int j = 0; j < V; ++j) S[x * V + j] += f * k[(t * d.H + hk) * K + x] * v_new[(t * HV + hv) * V + j];
        }
      }
      for (int i = 0; i < K * V; ++i) hT[state + i] = S[i];
    }
  }
}

void chunk_fwd_o(const Dims& d, const Vec& q, const Vec& k, const Vec& v_new, const Vec& h, const Vec& G, double scale,
                 Vec& o) {
  const int K = d.K, V = d.V, HV = d.HV, H = d.H;
  o.assign(d.T * HV * V, 0.0);
  for_each_chunk(d, [&](int64_t, int hv, int64_t chunk, int64_t t0, int rows) {
    const int hk = d.qk_head(hv);
    const double* hc = &h[(chunk * HV + hv) * K * V];
    for (int i = 0; i < rows; ++i) {
      const int64_t ti = t0 + i;
      const double* qi = &q[(ti * H + hk) * K];
      const double Gi = G[ti * HV + hv];
      for (int j = 0; j < V; ++j) {
        double inter = 0;
        for (int x = 0; x < K; ++x) inter += qi[x] * hc[x * V + j];
        o[(ti * HV + hv) * V + j] = std::exp(Gi) * inter;
      }
      for (int s = 0; s <= i; ++s) {
        const int64_t ts = t0 + s;
        double qk = 0;
        for (int x = 0; x < K; ++x) qk += qi[x] * k[(ts * H + hk) * K + x];
        const double f = qk * std::exp(Gi - G[ts * HV + hv]);
        for (int j = 0; j < V; ++j) o[(ti * HV + hv) * V + j] += f * v_new[(ts * HV + hv) * V + j];
      }
      for (int j = 0; j < V; ++j) o[(ti * HV + hv) * V + j] *= scale;
    }
  });
}

double rel_rms_error(const double* out, const double* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace ref
}  // namespace gdn
