// Standalone device check of the CUDA backend (no GoogleTest, no API layer): runs the composed
// forward, the stage chain and the decode step on random inputs against an fp64 recurrence, and
// with --bench times the SPEC section 6 cases with CUDA graphs. Exit code 1 on any failure.
// Also runs the backend's alternatives (fwd_o after fwd_h: " seq"; the mma.sync fwd_h: " mma")
// and times them beside the defaults. --decode restricts the run to the decode step and runs and
// times every decode variant (set_decode_variant, names " dv<i>"); --no-check: timings only;
// --case NAME (with --bench --no-check): times that prefill case only, e.g. under ncu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/decode/recurrent.cuh"

using namespace gdn;

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

static int g_fail = 0;
static bool g_profile = false;

static float round_to(DType dt, float x) {
  if (dt == DType::kBFloat16) return __bfloat162float(__float2bfloat16(x));
  if (dt == DType::kFloat16) return __half2float(__float2half(x));
  return x;
}
static size_t dsize(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }

// Uploads host floats (already rounded) as dtype, into an array with a token stride.
static void* upload(const std::vector<float>& x, DType dt, int64_t rows, int64_t row_len, int64_t stride) {
  std::vector<char> buf(static_cast<size_t>(std::max<int64_t>(rows * stride, 1)) * dsize(dt), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < row_len; ++i) {
      const float v = x[r * row_len + i];
      const int64_t o = r * stride + i;
      if (dt == DType::kFloat32)
        reinterpret_cast<float*>(buf.data())[o] = v;
      else if (dt == DType::kFloat16)
        reinterpret_cast<__half*>(buf.data())[o] = __float2half(v);
      else
        reinterpret_cast<__nv_bfloat16*>(buf.data())[o] = __float2bfloat16(v);
    }
  void* d;
  CK(cudaMalloc(&d, buf.size()));
  CK(cudaMemcpy(d, buf.data(), buf.size(), cudaMemcpyHostToDevice));
  return d;
}
static std::vector<float> download(const void* d, DType dt, int64_t rows, int64_t row_len, int64_t stride) {
  std::vector<char> buf(static_cast<size_t>(std::max<int64_t>(rows * stride, 1)) * dsize(dt));
  CK(cudaMemcpy(buf.data(), d, buf.size(), cudaMemcpyDeviceToHost));
  std::vector<float> x(rows * row_len);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < row_len; ++i) {
      const int64_t o = r * stride + i;
      float v;
      if (dt == DType::kFloat32)
        v = reinterpret_cast<float*>(buf.data())[o];
      else if (dt == DType::kFloat16)
        v = __half2float(reinterpret_cast<__half*>(buf.data())[o]);
      else
        v = __bfloat162float(reinterpret_cast<__nv_bfloat16*>(buf.data())[o]);
      x[r * row_len + i] = v;
    }
  return x;
}

struct Case {
  std::string name;
  std::vector<int64_t> lens;
  int H = 2, HV = 4, K = 128, V = 128;
  DType dt = DType::kBFloat16;
  bool gate_in_dtype = false;
  bool l2 = true, fused = true, vmajor = false, pool = true, pad = false;
  bool decode = false;  // recurrent_gated_delta_rule instead of the chunked forward
  bool stages = false;  // run the stage API chain (no l2norm / fusion)
  bool idx32 = false;   // int32 cu_seqlens and pool indices (else int64)
  bool oob = false;     // also pool indices >= num_slots (read as zeros / not written)
  double tol = 5e-3;
  float gscale = 1.f;
};

struct Data {
  int64_t T, N;
  std::vector<int64_t> cu;
  std::vector<float> q, k, v, g, b, A_log, dt_bias, S0;  // S0: [slots, HV, K, V] K-major logical
  std::vector<int64_t> idx_in, idx_out;
  int64_t slots;
};

static Data make_data(const Case& c, std::mt19937& rng) {
  Data d;
  d.N = c.lens.size();
  d.cu.assign(d.N + 1, 0);
  for (int64_t n = 0; n < d.N; ++n) d.cu[n + 1] = d.cu[n] + c.lens[n];
  d.T = d.cu[d.N];
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, int64_t cnt, float s, DType dt) {
    x.resize(cnt);
    for (auto& e : x) e = round_to(dt, s * nd(rng));
  };
  fill(d.q, d.T * c.H * c.K, 1.f, c.dt);
  fill(d.k, d.T * c.H * c.K, 1.f, c.dt);
  if (!c.l2) {  // normalized keys (and queries) in the input dtype
    for (int64_t r = 0; r < d.T * c.H; ++r) {
      double sk = 0, sq = 0;
      for (int i = 0; i < c.K; ++i)
        sk += d.k[r * c.K + i] * d.k[r * c.K + i], sq += d.q[r * c.K + i] * d.q[r * c.K + i];
      for (int i = 0; i < c.K; ++i) {
        d.k[r * c.K + i] = round_to(c.dt, d.k[r * c.K + i] / std::sqrt(sk));
        d.q[r * c.K + i] = round_to(c.dt, d.q[r * c.K + i] / std::sqrt(sq));
      }
    }
  }
  fill(d.v, d.T * c.HV * c.V, 1.f, c.dt);
  const DType gdt = c.gate_in_dtype ? c.dt : DType::kFloat32;
  d.g.resize(d.T * c.HV);
  d.b.resize(d.T * c.HV);
  for (int64_t i = 0; i < d.T * c.HV; ++i) {
    const float x = nd(rng), y = nd(rng);
    if (c.fused) {
      d.g[i] = round_to(gdt, x);
      d.b[i] = round_to(gdt, y);
    } else {
      const float ls = -std::log1p(std::exp(-x));  // logsigmoid
      float g = c.gscale * ls;
      if (i % 97 == 5) g = 0.f;
      if (i % 89 == 7) g = -1e4f;
      d.g[i] = round_to(gdt, g);
      float be = 1.f / (1.f + std::exp(-y));
      if (i % 83 == 3) be = 0.f;
      if (i % 79 == 2) be = 2.f;
      d.b[i] = round_to(gdt, be);
    }
  }
  d.A_log.resize(c.HV);
  d.dt_bias.resize(c.HV);
  for (int h = 0; h < c.HV; ++h) d.A_log[h] = 0.5f * nd(rng), d.dt_bias[h] = 0.5f * nd(rng);
  d.slots = c.pool ? 2 * d.N : d.N;
  fill(d.S0, d.slots * c.HV * c.K * c.V, 0.5f, DType::kFloat32);
  d.idx_in.resize(d.N);
  d.idx_out.resize(d.N);
  for (int64_t n = 0; n < d.N; ++n) {
    if (c.pool) {
      d.idx_in[n] = (n % 5 == 3) ? -1 : 2 * n + 1;  // some sequences start from zero
      if (c.oob && n % 11 == 6) d.idx_in[n] = d.slots + n;
      const bool in_ok = d.idx_in[n] >= 0 && d.idx_in[n] < d.slots;
      d.idx_out[n] = (n % 7 == 4) ? -1 : in_ok ? d.idx_in[n] : 2 * n;  // in place
      if (c.oob && n % 13 == 9) d.idx_out[n] = d.slots + 3 * n;
    } else {
      d.idx_in[n] = d.idx_out[n] = n;
    }
  }
  return d;
}

// fp64 recurrence. Returns o [T, HV, V] and writes final states into S (K-major logical) rows.
static void reference(const Case& c, const Data& d, std::vector<double>& o, std::vector<double>& S,
                      std::vector<double>* hstarts) {
  const int K = c.K, V = c.V, H = c.H, HV = c.HV;
  const double scale = 1.0 / std::sqrt(double(K));
  o.assign(d.T * HV * V, 0.0);
  S.assign(d.S0.begin(), d.S0.end());
  const int64_t total = d.N * HV;
#pragma omp parallel for schedule(dynamic)
  for (int64_t item = 0; item < total; ++item) {
    const int64_t n = item / HV;
    const int hv = item % HV, hk = hv / (HV / H);
    std::vector<double> s(K * V, 0.0), kk(K), qq(K), kv(V), qv(V);
    if (d.idx_in[n] >= 0 && d.idx_in[n] < d.slots)
      for (int i = 0; i < K * V; ++i) s[i] = d.S0[(d.idx_in[n] * HV + hv) * K * V + i];
    int64_t chunk = 0;
    for (int64_t t = d.cu[n]; t < d.cu[n + 1]; ++t) {
      if (hstarts && (t - d.cu[n]) % 64 == 0) {
        // global chunk number
        int64_t gc = 0;
        for (int64_t m = 0; m < n; ++m) gc += (d.cu[m + 1] - d.cu[m] + 63) / 64;
        gc += chunk++;
        for (int i = 0; i < K * V; ++i) (*hstarts)[(gc * HV + hv) * K * V + i] = s[i];
      }
      double nq = 0, nk = 0;
      for (int i = 0; i < K; ++i) {
        qq[i] = d.q[(t * H + hk) * K + i];
        kk[i] = d.k[(t * H + hk) * K + i];
        nq += qq[i] * qq[i];
        nk += kk[i] * kk[i];
      }
      if (c.l2) {
        for (int i = 0; i < K; ++i) qq[i] /= std::sqrt(nq + 1e-6), kk[i] /= std::sqrt(nk + 1e-6);
      }
      double g = d.g[t * HV + hv], be = d.b[t * HV + hv];
      if (c.fused) {
        const double x = g + d.dt_bias[hv];
        const double sp = x > 20 ? x : std::log1p(std::exp(x));
        g = -std::exp(double(d.A_log[hv])) * sp;
        be = 1.0 / (1.0 + std::exp(-be));
      }
      const double a = std::exp(g);
      for (auto& e : s) e *= a;
      std::fill(kv.begin(), kv.end(), 0.0);
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) kv[j] += s[i * V + j] * kk[i];
      for (int j = 0; j < V; ++j) kv[j] = be * (d.v[(t * HV + hv) * V + j] - kv[j]);
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) s[i * V + j] += kk[i] * kv[j];
      std::fill(qv.begin(), qv.end(), 0.0);
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) qv[j] += s[i * V + j] * qq[i];
      for (int j = 0; j < V; ++j) o[(t * HV + hv) * V + j] = scale * qv[j];
    }
    if (d.idx_out[n] >= 0 && d.idx_out[n] < d.slots)
      for (int i = 0; i < K * V; ++i) S[(d.idx_out[n] * HV + hv) * K * V + i] = s[i];
  }
}

static double rel_err(const std::vector<float>& got, const std::vector<double>& ref, bool* bad) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) *bad = true;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

static void run_case(const Case& c, std::mt19937& rng) {
  Data d = make_data(c, rng);
  const int K = c.K, V = c.V, H = c.H, HV = c.HV;
  const int64_t T = d.T, N = d.N;
  Problem p;
  p.num_tokens = T;
  p.num_seqs = N;
  p.num_qk_heads = H;
  p.num_v_heads = HV;
  p.head_k = K;
  p.head_v = V;
  p.dtype = c.dt;
  p.gate_dtype = c.gate_in_dtype ? c.dt : DType::kFloat32;
  p.scale = 1.f / std::sqrt(float(K));
  p.use_qk_l2norm = c.l2;
  p.fused_gate = c.fused;
  p.state_layout = c.vmajor ? StateLayout::kVMajor : StateLayout::kKMajor;
  // Indices as int64, or int32 with c.idx32.
  const IndexType it = c.idx32 ? IndexType::kInt32 : IndexType::kInt64;
  auto upload_idx = [&](const std::vector<int64_t>& x) {
    const size_t w = c.idx32 ? 4 : 8;
    std::vector<char> buf(std::max<size_t>(x.size(), 1) * w);
    for (size_t i = 0; i < x.size(); ++i) {
      if (c.idx32)
        reinterpret_cast<int32_t*>(buf.data())[i] = static_cast<int32_t>(x[i]);
      else
        reinterpret_cast<int64_t*>(buf.data())[i] = x[i];
    }
    void* dp;
    CK(cudaMalloc(&dp, buf.size()));
    CK(cudaMemcpy(dp, buf.data(), buf.size(), cudaMemcpyHostToDevice));
    return dp;
  };
  void* cu_d = upload_idx(d.cu);
  p.cu_seqlens = cu_d;
  p.cu_seqlens_type = it;
  const int64_t qst = H * K + (c.pad ? 8 : 0), vst = HV * V + (c.pad ? 3 : 0), ost = HV * V + (c.pad ? 5 : 0);
  void* q_d = upload(d.q, c.dt, T * H, K, K);
  if (c.pad) {
    CK(cudaFree(q_d));
    q_d = upload(d.q, c.dt, T, H * K, qst);
  }
  void* k_d = upload(d.k, c.dt, T * H, K, K);
  void* v_d = upload(d.v, c.dt, T, HV * V, vst);
  void* g_d = upload(d.g, p.gate_dtype, T * HV, 1, 1);
  void* b_d = upload(d.b, p.gate_dtype, T * HV, 1, 1);
  void* A_d = upload(d.A_log, DType::kFloat32, HV, 1, 1);
  void* dtb_d = upload(d.dt_bias, DType::kFloat32, HV, 1, 1);
  // States on the device in the requested layout.
  const int64_t KV = int64_t(K) * V;
  std::vector<float> S0l(d.S0.size());
  for (int64_t r = 0; r < d.slots * HV; ++r)
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) S0l[r * KV + (c.vmajor ? j * K + i : i * V + j)] = d.S0[r * KV + i * V + j];
  float* S_d = static_cast<float*>(upload(S0l, DType::kFloat32, 1, S0l.size(), S0l.size()));
  void* ii_d = upload_idx(d.idx_in);
  void* io_d = upload_idx(d.idx_out);
  void* o_d;
  const size_t o_bytes = std::max<int64_t>(T * ost, 1) * dsize(c.dt);
  CK(cudaMalloc(&o_d, o_bytes));
  CK(cudaMemset(o_d, 0xff, o_bytes));  // NaN poison

  ForwardArgs f;
  f.problem = p;
  f.q = {q_d, c.pad ? qst : H * K, K};
  f.k = {k_d, H * K, K};
  f.v = {v_d, vst, V};
  f.g = {g_d, HV, 1};
  f.beta = {b_d, HV, 1};
  f.A_log = static_cast<float*>(A_d);
  f.dt_bias = static_cast<float*>(dtb_d);
  f.o = {o_d, ost, V};
  f.initial_state = {S_d, d.slots, ii_d, nullptr, it};
  f.final_state = {S_d, d.slots, io_d, nullptr, it};
  Exec ex;
  ex.backend = Backend::kCUDA;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  ex.stream = st;
  std::vector<double> href;
  const int64_t mc = T / 64 + N;
  float* h_d = nullptr;
  const bool want_h = c.stages;
  if (want_h) href.assign(mc * HV * KV, 0.0);
  void* ws = nullptr;
  try {
    if (c.decode) {
      cuda::recurrent_gated_delta_rule(f, ex);
    } else if (c.stages) {
      StageBuffers sb;
      sb.q = f.q;
      sb.k = f.k;
      sb.v = f.v;
      sb.g = f.g;
      sb.beta = f.beta;
      float *G, *L, *A, *w, *u, *vn;
      CK(cudaMalloc(&G, 4 * T * HV));
      CK(cudaMalloc(&L, 4 * T * HV * 64));
      CK(cudaMalloc(&A, 4 * T * HV * 64));
      CK(cudaMalloc(&w, 4 * T * HV * K));
      CK(cudaMalloc(&u, 4 * T * HV * V));
      CK(cudaMalloc(&vn, 4 * T * HV * V));
      CK(cudaMalloc(&h_d, 4 * mc * HV * KV));
      sb.G = G;
      sb.L = L;
      sb.A = A;
      sb.w = w;
      sb.u = u;
      sb.v_new = vn;
      sb.h = h_d;
      sb.o = f.o;
      sb.initial_state = f.initial_state;
      sb.final_state = f.final_state;
      const size_t wsz = cuda::stage_workspace_size(p, 0);
      CK(cudaMalloc(&ws, wsz));
      ex.workspace = ws;
      ex.workspace_bytes = wsz;
      cuda::chunk_local_cumsum(p, sb, ex);
      cuda::chunk_scaled_dot_kkt(p, sb, ex);
      cuda::solve_tril(p, sb, ex);
      cuda::recompute_w_u(p, sb, ex);
      cuda::chunk_fwd_h(p, sb, ex);
      cuda::chunk_fwd_o(p, sb, ex);
    } else {
      const size_t wsz = cuda::chunk_gated_delta_rule_workspace_size(p, 0);
      CK(cudaMalloc(&ws, std::max<size_t>(wsz, 1)));
      ex.workspace = ws;
      ex.workspace_bytes = wsz;
      cuda::chunk_gated_delta_rule(f, ex);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL %-28s exception: %s\n", c.name.c_str(), e.what());
    ++g_fail;
    return;
  }
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  std::vector<double> oref, Sref;
  reference(c, d, oref, Sref, want_h ? &href : nullptr);
  std::vector<float> o = download(o_d, c.dt, T, HV * V, ost);
  std::vector<float> Sl = download(S_d, DType::kFloat32, 1, S0l.size(), S0l.size());
  std::vector<float> S(Sl.size());
  for (int64_t r = 0; r < d.slots * HV; ++r)
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) S[r * KV + i * V + j] = Sl[r * KV + (c.vmajor ? j * K + i : i * V + j)];
  bool bad = false;
  const double eo = rel_err(o, oref, &bad);
  const double es = rel_err(S, Sref, &bad);
  double eh = 0;
  if (want_h) {
    std::vector<float> h = download(h_d, DType::kFloat32, 1, mc * HV * KV, mc * HV * KV);
    // only chunks that exist
    int64_t tot = 0;
    for (int64_t n = 0; n < N; ++n) tot += (d.cu[n + 1] - d.cu[n] + 63) / 64;
    h.resize(tot * HV * KV);
    std::vector<double> hr(href.begin(), href.begin() + tot * HV * KV);
    eh = rel_err(h, hr, &bad);
  }
  const bool ok = !bad && eo <= c.tol && es <= c.tol && eh <= c.tol;
  if (!ok) ++g_fail;
  std::printf("%s %-28s T=%-7lld N=%-5lld err_o=%.2e err_state=%.2e%s%s\n", ok ? "ok  " : "FAIL", c.name.c_str(),
              (long long)T, (long long)N, eo, es, want_h ? (" err_h=" + std::to_string(eh)).c_str() : "",
              bad ? " NON-FINITE" : "");
  // Determinism: the same inputs twice give bitwise identical o (forward only, fresh states).
  cudaFree(q_d);
  cudaFree(k_d);
  cudaFree(v_d);
  cudaFree(g_d);
  cudaFree(b_d);
  cudaFree(A_d);
  cudaFree(dtb_d);
  cudaFree(S_d);
  cudaFree(ii_d);
  cudaFree(io_d);
  cudaFree(o_d);
  cudaFree(cu_d);
  if (ws) cudaFree(ws);
  if (h_d) cudaFree(h_d);
  cudaStreamDestroy(st);
}

// ---- benchmark ---------------------------------------------------------------------------------
static const char* g_only_case = nullptr;  // --case NAME: bench this prefill case only (for ncu)

// ---- timing -----------------------------------------------------------------------------------
// Median of `reps` event-timed runs of `run` on `st`, after 3 warm-up runs (ms).
template <class F>
static float median_ms(cudaStream_t st, int reps, F run) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps + 3; ++r) {
    cudaEventRecord(e0, st);
    run();
    cudaEventRecord(e1, st);
    CK(cudaEventSynchronize(e1));
    float m;
    cudaEventElapsedTime(&m, e0, e1);
    if (r >= 3) ms.push_back(m);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// `op` run once eagerly, then captured into a CUDA graph whose replays median_ms times.
template <class F>
static float graph_median_ms(cudaStream_t st, int reps, F op) {
  op();
  CK(cudaStreamSynchronize(st));
  cudaGraph_t graph;
  cudaGraphExec_t gx;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  op();
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&gx, graph, 0));
  const float med = median_ms(st, reps, [&] { CK(cudaGraphLaunch(gx, st)); });
  cudaGraphExecDestroy(gx);
  cudaGraphDestroy(graph);
  return med;
}

// ---- the benchmark shape (Qwen3-Next: H 16, HV 32, K = V = 128, bf16, qk l2norm) ------------------
constexpr int kBH = 16, kBHV = 32, kBK = 128, kBV = 128;

// Device inputs of T tokens: q, k, v (bf16, random), g and beta (fp32, given), o (bf16, unset).
struct BenchInputs {
  Problem p;
  void *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr, *o = nullptr;
  cudaStream_t st = nullptr;

  BenchInputs(int64_t T, int64_t N, std::mt19937& rng, std::normal_distribution<float>& nd,
              const std::vector<float>& g_host, const std::vector<float>& beta_host) {
    p.num_tokens = T;
    p.num_seqs = N;
    p.num_qk_heads = kBH;
    p.num_v_heads = kBHV;
    p.head_k = kBK;
    p.head_v = kBV;
    p.dtype = DType::kBFloat16;
    p.gate_dtype = DType::kFloat32;
    p.scale = 1.f / std::sqrt(float(kBK));
    p.use_qk_l2norm = true;
    q = upload(randn(rng, nd, T * kBH * kBK, 1.f), p.dtype, 1, T * kBH * kBK, T * kBH * kBK);
    k = upload(randn(rng, nd, T * kBH * kBK, 1.f), p.dtype, 1, T * kBH * kBK, T * kBH * kBK);
    v = upload(randn(rng, nd, T * kBHV * kBV, 1.f), p.dtype, 1, T * kBHV * kBV, T * kBHV * kBV);
    g = upload(g_host, DType::kFloat32, 1, T * kBHV, T * kBHV);
    beta = upload(beta_host, DType::kFloat32, 1, T * kBHV, T * kBHV);
    CK(cudaMalloc(&o, T * kBHV * kBV * 2));
    CK(cudaStreamCreate(&st));
  }
  ~BenchInputs() {
    for (void* x : {q, k, v, g, beta, o}) cudaFree(x);
    cudaStreamDestroy(st);
  }
  // The op's arguments with the states `states` (read and written in place).
  ForwardArgs args(const StateRef& states) const {
    ForwardArgs f;
    f.problem = p;
    f.q = {q, kBH * kBK, kBK};
    f.k = {k, kBH * kBK, kBK};
    f.v = {v, kBHV * kBV, kBV};
    f.g = {g, kBHV, 1};
    f.beta = {beta, kBHV, 1};
    f.o = {o, kBHV * kBV, kBV};
    f.initial_state = states;
    f.final_state = states;
    return f;
  }
  static std::vector<float> randn(std::mt19937& rng, std::normal_distribution<float>& nd, int64_t count, float s) {
    std::vector<float> x(count);
    for (auto& e : x) e = s * nd(rng);
    return x;
  }
};

static void bench_prefill(const char* name, std::vector<int64_t> lens, FILE* js, bool& first) {
  if (g_only_case && std::strcmp(g_only_case, name) != 0) return;
  const int64_t N = lens.size();
  std::vector<int64_t> cu(N + 1, 0);
  for (int64_t n = 0; n < N; ++n) cu[n + 1] = cu[n] + lens[n];
  const int64_t T = cu[N];
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> g(T * kBHV), b(T * kBHV);
  for (int64_t i = 0; i < T * kBHV; ++i)
    g[i] = -std::log1p(std::exp(-nd(rng))), b[i] = 1.f / (1.f + std::exp(-nd(rng)));
  BenchInputs in(T, N, rng, nd, g, b);
  int64_t* cu_d;
  CK(cudaMalloc(&cu_d, 8 * (N + 1)));
  CK(cudaMemcpy(cu_d, cu.data(), 8 * (N + 1), cudaMemcpyHostToDevice));
  in.p.cu_seqlens = cu_d;
  in.p.cu_seqlens_type = IndexType::kInt64;
  const int64_t state_elems = N * kBHV * kBK * kBV;
  void* S = upload(BenchInputs::randn(rng, nd, state_elems, 0.1f), DType::kFloat32, 1, state_elems, state_elems);
  const ForwardArgs f = in.args({static_cast<float*>(S), N, nullptr, nullptr, IndexType::kInt32});
  const size_t wsz = cuda::chunk_gated_delta_rule_workspace_size(in.p, 0);
  void* ws;
  CK(cudaMalloc(&ws, wsz));
  Exec ex;
  ex.backend = Backend::kCUDA;
  ex.stream = in.st;
  ex.workspace = ws;
  ex.workspace_bytes = wsz;
  const float med = graph_median_ms(in.st, 20, [&] { cuda::chunk_gated_delta_rule(f, ex); });
  std::printf("bench %-8s T=%-7lld %.3f ms  %.1f Mtok/s\n", name, (long long)T, med, T / med / 1e3);
  if (g_profile) {  // phases of the tensor-core forward, plain launches (no graph), median of 9
    cudaEvent_t ev[6];
    for (auto& e : ev) cudaEventCreate(&e);
    cuda::set_fast_timing(ev);
    std::vector<std::vector<float>> ph(5);
    for (int r = 0; r < 11; ++r) {
      cuda::chunk_gated_delta_rule(f, ex);
      CK(cudaEventSynchronize(ev[5]));
      if (r < 2) continue;
      for (int i = 0; i < 5; ++i) {
        float m;
        cudaEventElapsedTime(&m, ev[i], ev[i + 1]);
        ph[i].push_back(m);
      }
    }
    cuda::set_fast_timing(nullptr);
    const char* names[5] = {"plan", "pack", "prep", "h", "o"};
    std::printf("  phases %-8s", name);
    for (int i = 0; i < 5; ++i) {
      std::sort(ph[i].begin(), ph[i].end());
      std::printf("  %s %.3f", names[i], ph[i][ph[i].size() / 2]);
    }
    std::printf(" ms\n");
    for (auto& e : ev) cudaEventDestroy(e);
  }
  std::fprintf(js, "%s{\"name\":\"%s\",\"tokens\":%lld,\"gdn_ms\":%.4f}", first ? "" : ",", name, (long long)T, med);
  first = false;
  cudaFree(S);
  cudaFree(ws);
  cudaFree(cu_d);
}

// variant < 0: the default configuration, unlabelled; else the one that set_decode_variant(variant)
// selected, labelled " dv<variant>" and with a "variant" key.
static void bench_decode(int64_t N, bool vmajor, FILE* js, bool& first, int variant = -1) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  BenchInputs in(N, N, rng, nd, std::vector<float>(N * kBHV, -0.1f), std::vector<float>(N * kBHV, 0.5f));
  in.p.state_layout = vmajor ? StateLayout::kVMajor : StateLayout::kKMajor;
  const int64_t slots = 2 * N;
  const size_t sbytes = size_t(slots) * kBHV * kBK * kBV * 4;
  float* S;
  CK(cudaMalloc(&S, sbytes));
  CK(cudaMemset(S, 0, sbytes));
  std::vector<int32_t> idx(N);
  for (int64_t n = 0; n < N; ++n) idx[n] = int32_t((n * 7919) % slots);  // scattered rows
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  while ((int64_t)idx.size() < N) idx.push_back(idx.back() + 1);
  int32_t* idx_d;
  CK(cudaMalloc(&idx_d, 4 * N));
  CK(cudaMemcpy(idx_d, idx.data(), 4 * N, cudaMemcpyHostToDevice));
  const ForwardArgs f = in.args({S, slots, idx_d, nullptr, IndexType::kInt32});
  Exec ex;
  ex.backend = Backend::kCUDA;
  ex.stream = in.st;
  const float med = graph_median_ms(in.st, 50, [&] { cuda::recurrent_gated_delta_rule(f, ex); });
  const double bytes = 2.0 * N * kBHV * kBK * kBV * 4;
  // copy bandwidth on a buffer of the same size
  void *c0, *c1;
  CK(cudaMalloc(&c0, bytes / 2));
  CK(cudaMalloc(&c1, bytes / 2));
  const float copy_ms =
      median_ms(in.st, 20, [&] { cudaMemcpyAsync(c1, c0, bytes / 2, cudaMemcpyDeviceToDevice, in.st); });
  const double gbps = bytes / (med * 1e6), cbps = bytes / (copy_ms * 1e6);
  const std::string dv = variant < 0 ? "" : " dv" + std::to_string(variant);
  std::printf("decode N=%-5lld %s%s %.4f ms  %.0f GB/s  copy %.0f GB/s  (%.0f%%)%s%s\n", (long long)N,
              vmajor ? "vmajor" : "kmajor", dv.c_str(), med, gbps, cbps, 100 * gbps / cbps, variant < 0 ? "" : "  ",
              variant < 0 ? "" : cuda::decode_variant_name(variant));
  std::fprintf(js, "%s{\"decode_n\":%lld,\"layout\":\"%s\",", first ? "" : ",", (long long)N,
               vmajor ? "vmajor" : "kmajor");
  first = false;
  if (variant >= 0)
    std::fprintf(js, "\"variant\":%d,\"variant_name\":\"%s\",", variant, cuda::decode_variant_name(variant));
  std::fprintf(js, "\"gdn_ms\":%.4f,\"gdn_GBps\":%.1f,\"copy_GBps\":%.1f}", med, gbps, cbps);
  cudaFree(c0);
  cudaFree(c1);
  cudaFree(S);
  cudaFree(idx_d);
}

int main(int argc, char** argv) {
  bool bench = false, quick = false, decode_only = false, no_check = false;
  int only_variant = -1;  // --variant i: the decode variant loops run variant i only
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bench"))
      bench = true;
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--decode"))  // only the decode cases and timings (all variants)
      decode_only = true;
    else if (!std::strcmp(argv[i], "--case") && i + 1 < argc)
      g_only_case = argv[++i];
    else if (!std::strcmp(argv[i], "--variant") && i + 1 < argc)
      only_variant = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-check"))  // timings only (with --bench)
      no_check = true;
    else if (!std::strcmp(argv[i], "--profile"))
      g_profile = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json = argv[++i];
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe even if the run is cut short
  if (!cuda::device_available()) {
    std::printf("no sm_90 CUDA device: skipped\n");
    return 0;
  }
  std::mt19937 rng(12345);
  const std::vector<int64_t> mix = {1, 63, 64, 65, 200, 0, 130, 7, 128};
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(c); };
  {
    Case c;
    c.name = "fast bf16 128 vmajor pool";
    c.lens = mix;
    c.vmajor = true;
    add(c);
  }
  {
    Case c;
    c.name = "fast bf16 128 kmajor plain";
    c.lens = mix;
    c.fused = false;
    c.l2 = false;
    c.gate_in_dtype = true;
    c.pad = true;
    add(c);
  }
  {
    Case c;
    c.name = "fast bf16 128 gates x10";
    c.lens = {300, 17};
    c.fused = false;
    c.gscale = 10.f;
    add(c);
  }
  {
    Case c;
    c.name = "fast bf16 128 gates x0.01";
    c.lens = {300, 17};
    c.fused = false;
    c.gscale = 0.01f;
    c.H = 4;
    add(c);
  }
  {
    Case c;
    c.name = "fast fp16 64 vmajor";
    c.lens = mix;
    c.dt = DType::kFloat16;
    c.K = c.V = 64;
    c.vmajor = true;
    add(c);
  }
  {
    Case c;
    c.name = "fast fp16 128 kmajor";  // fp16 v (3-pass u) and fp16 o with the wgmma fwd_h
    c.lens = mix;
    c.dt = DType::kFloat16;
    add(c);
  }
  {
    Case c;
    c.name = "exact fp32 128";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.tol = 1e-4;
    c.pad = true;
    add(c);
  }
  {
    Case c;
    c.name = "exact fp32 64 vmajor";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.K = c.V = 64;
    c.tol = 1e-4;
    c.vmajor = true;
    add(c);
  }
  {
    Case c;
    c.name = "exact bf16 256";
    c.lens = {70, 5, 129};
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    add(c);
  }
  {
    Case c;
    c.name = "exact bf16 K128 V64";
    c.lens = {70, 5, 129};
    c.V = 64;
    c.vmajor = true;
    add(c);
  }
  // The stage API's G is fp32: after g = -1e4 its small differences keep ~1e-3 absolute error
  // (ulp(1e4)), inherent to that format, hence a looser bound than the forward's 1e-4.
  {
    Case c;
    c.name = "stages fp32 128";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.tol = 5e-4;
    add(c);
  }
  {
    Case c;
    c.name = "exact fp32 128 extreme gates";
    c.lens = mix;
    c.dt = DType::kFloat32;
    c.l2 = false;
    c.fused = false;
    c.tol = 1e-4;
    add(c);
  }
  {
    Case c;
    c.name = "stages bf16 64 vmajor";
    c.lens = mix;
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.K = c.V = 64;
    c.vmajor = true;
    add(c);
  }
  {
    Case c;
    c.name = "stages bf16 256";
    c.lens = {70, 129};
    c.stages = true;
    c.l2 = false;
    c.fused = false;
    c.K = c.V = 256;
    c.H = 1;
    c.HV = 2;
    add(c);
  }
  for (int kd : {64, 128, 256})
    for (bool vm : {false, true}) {
      Case c;
      c.name = "decode bf16 " + std::to_string(kd) + (vm ? " vmajor" : " kmajor");
      c.lens = {1, 1, 3, 0, 1, 2, 1};
      c.K = c.V = kd;
      c.vmajor = vm;
      c.decode = true;
      add(c);
    }
  {
    Case c;
    c.name = "decode fp32 128 plain";
    c.lens = {1, 4, 1};
    c.dt = DType::kFloat32;
    c.decode = true;
    c.fused = false;
    c.tol = 1e-5;
    add(c);
  }
  // Many items per warp (the rings wrap around many times), GVA 4, 0-3 tokens per sequence, pool
  // indices out of range on both sides, int32 and int64 indices.
  for (bool vm : {false, true}) {
    Case c;
    c.name = std::string("decode bf16 128 ") + (vm ? "vmajor" : "kmajor") + " many";
    for (int n = 0; n < 160; ++n) c.lens.push_back(n % 5 == 0 ? 0 : 1 + n % 3);
    c.H = 4;
    c.HV = 16;
    c.vmajor = vm;
    c.decode = true;
    c.oob = true;
    c.idx32 = !vm;
    add(c);
  }
  {
    Case c;
    c.name = "decode fp32 128 vmajor plain many";
    for (int n = 0; n < 64; ++n) c.lens.push_back(n % 4);
    c.H = c.HV = 8;
    c.dt = DType::kFloat32;
    c.vmajor = true;
    c.decode = true;
    c.fused = false;
    c.l2 = false;
    c.oob = true;
    c.tol = 1e-5;
    add(c);
  }
  if (!quick) {
    {
      Case c;
      c.name = "fast bf16 T=131072";
      c.lens = {131072};
      c.H = 1;
      c.HV = 2;
      c.pool = false;
      add(c);
    }
    {
      Case c;
      c.name = "fast bf16 4096 seqs HV=32";
      c.H = 16;
      c.HV = 32;
      c.K = c.V = 64;
      c.pool = false;
      for (int n = 0; n < 4096; ++n) c.lens.push_back(1 + (n * 37) % 16);
      add(c);
    }
    {
      Case c;
      c.name = "decode 4096 pool 8192";
      c.decode = true;
      c.H = 8;
      c.HV = 16;
      c.K = c.V = 64;
      c.lens.assign(4096, 1);
      add(c);
    }
  }
  if (decode_only)
    cases.erase(std::remove_if(cases.begin(), cases.end(), [](const Case& c) { return !c.decode; }), cases.end());
  if (no_check) cases.clear();
  for (auto& c : cases) run_case(c, rng);
  if (!decode_only && !no_check) {
    {
      // More (sequence, head, slice) blocks than SMs: the wgmma launcher's 2-stage ring (the cases
      // above have few blocks and take its 4-stage ring).
      Case c;
      c.name = "fast bf16 128 140 seqs";
      for (int n = 0; n < 140; ++n) c.lens.push_back(1 + (n * 37) % 150);
      c.vmajor = true;
      run_case(c, rng);
    }
    cuda::set_fwd_o_overlap(false);  // fwd_o after fwd_h in stream order
    for (int i = 0; i < 2; ++i) {
      Case c = cases[i];
      c.name += " seq";
      run_case(c, rng);
    }
    cuda::set_fwd_o_overlap(true);
    cuda::set_fwd_h_wgmma(false);  // the mma.sync fwd_h, both slice widths, on the first fast cases
    for (int bv : {32, 64}) {
      cuda::set_fwd_h_bv(bv);
      for (int i = 0; i < 5; ++i) {
        Case c = cases[i];
        c.name += bv == 32 ? " mma bv32" : " mma bv64";
        run_case(c, rng);
      }
    }
    cuda::set_fwd_h_bv(0);
    cuda::set_fwd_h_wgmma(true);
  }
  // Every decode variant on every decode case (variants apply to K = V = 128; other sizes run variant 0).
  const int nvar = cuda::decode_variant_count();
  for (int dv = 0; dv < nvar; ++dv) std::printf("decode variant dv%d: %s\n", dv, cuda::decode_variant_name(dv));
  for (int dv = 0; dv < nvar && decode_only && !no_check; ++dv) {
    if (only_variant >= 0 && dv != only_variant) continue;
    cuda::set_decode_variant(dv);
    for (const Case& c0 : cases)
      if (c0.decode) {
        Case c = c0;
        c.name += " dv" + std::to_string(dv);
        run_case(c, rng);
      }
  }
  cuda::set_decode_variant(-1);
  std::printf("%s: %d failure(s)\n", g_fail ? "FAILED" : "PASSED", g_fail);
  if (bench) {
    FILE* js = std::fopen(json ? json : "/dev/null", "w");
    std::fprintf(js, "[");
    bool first = true;
    std::vector<int64_t> mixed;
    int64_t tot = 0;
    for (int i = 0; i < 15; ++i) {
      const int64_t l = 256 + (i * 3541) % 3841;
      mixed.push_back(l);
      tot += l;
    }
    mixed.push_back(32768 - tot > 0 ? 32768 - tot : 1);
    if (!decode_only) {
      // A/B in the same run: fwd_o after fwd_h (/seq), and the mma.sync fwd_h (/mma).
      cuda::set_fwd_o_overlap(false);
      bench_prefill("1x4k/seq", {4096}, js, first);
      bench_prefill("1x32k/seq", {32768}, js, first);
      bench_prefill("4x8k/seq", std::vector<int64_t>(4, 8192), js, first);
      cuda::set_fwd_o_overlap(true);
      cuda::set_fwd_h_wgmma(false);
      bench_prefill("1x32k/mma", {32768}, js, first);
      bench_prefill("8x1k/mma", std::vector<int64_t>(8, 1024), js, first);
      bench_prefill("256x64/mma", std::vector<int64_t>(256, 64), js, first);
      cuda::set_fwd_h_wgmma(true);
      bench_prefill("1x4k", {4096}, js, first);
      bench_prefill("1x32k", {32768}, js, first);
      bench_prefill("1x128k", {131072}, js, first);
      bench_prefill("4x8k", std::vector<int64_t>(4, 8192), js, first);
      bench_prefill("8x1k", std::vector<int64_t>(8, 1024), js, first);
      bench_prefill("mixed", mixed, js, first);
      bench_prefill("64x256", std::vector<int64_t>(64, 256), js, first);
      bench_prefill("256x64", std::vector<int64_t>(256, 64), js, first);
    }
    for (int64_t n : {1, 64, 256, 1024, 4096})
      for (bool vm : {true, false})
        if (!g_only_case) bench_decode(n, vm, js, first);
    // Every decode variant (with --decode), K = V = 128.
    for (int dv = 0; dv < nvar && decode_only; ++dv) {
      if (only_variant >= 0 && dv != only_variant) continue;
      cuda::set_decode_variant(dv);
      for (int64_t n : {256, 4096})
        for (bool vm : {true, false}) bench_decode(n, vm, js, first, dv);
    }
    cuda::set_decode_variant(-1);
    std::fprintf(js, "]\n");
    std::fclose(js);
  }
  return g_fail ? 1 : 0;
}
