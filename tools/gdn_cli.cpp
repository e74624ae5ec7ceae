// gdn: the main job. Runs the SPEC.md section 6 cases on the best backend present, checks a
// sample of each (one or two value heads, every token) against the double-precision recurrence,
// and prints a table (and JSON with --json).
//
//   gdn [--backend auto|cpu|cuda] [--threads N] [--dtypes bf16,fp32] [--cases 1x4k,8x1k]
//       [--max-tokens N] [--no-decode] [--json FILE]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#ifdef GDN_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef GDN_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

#include "cases.h"
#include "common/host_dtype.h"
#include "gdn/gdn.h"
#include "reference.h"

namespace gdn {
namespace tools {
namespace {

struct Options {
  std::string backend = "auto";
  int threads = 0;
  std::vector<DType> dtypes = {DType::kBFloat16};
  std::vector<std::string> cases;  // empty: all
  int64_t max_tokens = -1;         // -1: the backend's default (CPU: 8192, CUDA: no limit)
  bool decode = true;
  std::string json;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gdn: %s\nusage: gdn [--backend auto|cpu|cuda] [--threads N] [--dtypes bf16,fp16,fp32]\n"
               "           [--cases 1x4k,...] [--max-tokens N] [--no-decode] [--json FILE]\n",
               why);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

DType parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::kBFloat16;
  if (s == "fp16" || s == "float16") return DType::kFloat16;
  if (s == "fp32" || s == "float32") return DType::kFloat32;
  usage(("unknown dtype " + s).c_str());
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--backend")
      o.backend = next();
    else if (a == "--threads")
      o.threads = std::stoi(next());
    else if (a == "--dtypes") {
      o.dtypes.clear();
      for (const std::string& d : split(next())) o.dtypes.push_back(parse_dtype(d));
    } else if (a == "--cases")
      o.cases = split(next());
    else if (a == "--max-tokens")
      o.max_tokens = std::stoll(next());
    else if (a == "--no-decode")
      o.decode = false;
    else if (a == "--json")
      o.json = next();
    else if (a == "-h" || a == "--help")
      usage("help");
    else
      usage(("unknown argument " + a).c_str());
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Inputs: the Qwen3-Next layer shape, random data (never zeros), qk l2norm on, fp32 states.

constexpr int H = 16, HV = 32, K = 128, V = 128;

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
  std::vector<int64_t> lens, bounds;
  int64_t T = 0, N = 0;
  DType dtype = DType::kBFloat16;
  std::vector<uint8_t> q, k, v;  // storage dtype
  std::vector<float> g, beta;    // fp32 gates
  std::vector<float> h0;         // [N, HV, K, V]
};

void fill(std::vector<uint8_t>& out, size_t n, DType dtype, Rng& rng) {
  out.resize(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) store_from_float(out.data(), int64_t(i), dtype, float(rng.symmetric()));
}

HostProblem make_problem(const std::vector<int64_t>& lens, DType dtype, uint64_t seed) {
  HostProblem hp;
  hp.lens = lens;
  hp.N = int64_t(lens.size());
  hp.bounds.assign(1, 0);
  for (int64_t l : lens) hp.bounds.push_back(hp.bounds.back() + l);
  hp.T = hp.bounds.back();
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
    hp.g[i] = float(-std::log1p(std::exp(-x)));
    hp.beta[i] = float(1.0 / (1.0 + std::exp(-3.0 * rng.symmetric())));
  }
  hp.h0.resize(size_t(hp.N) * HV * K * V);
  for (float& x : hp.h0) x = float(0.1 * rng.symmetric());
  return hp;
}

// Rel. RMS error of o and of the final state of value head hv (every sequence) against the
// fp64 recurrence. `o` is [T, HV, V] in the storage dtype, `hT` [N, HV, K, V] (or V-major).
double check_head(const HostProblem& hp, int hv, const std::vector<uint8_t>& o, const std::vector<float>& hT,
                  StateLayout layout, double* state_err) {
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

// ---------------------------------------------------------------------------------------------
// Backend memory and timing.

struct Mem {
  Backend backend;
  void* p = nullptr;
  Mem(Backend b, size_t bytes) : backend(b) {
    bytes = std::max<size_t>(bytes, 64);
#ifdef GDN_HAS_CUDA
    if (b == Backend::kCUDA) {
      if (cudaMalloc(&p, bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
      return;
    }
#endif
    p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  ~Mem() {
#ifdef GDN_HAS_CUDA
    if (backend == Backend::kCUDA) {
      cudaFree(p);
      return;
    }
#endif
    std::free(p);
  }
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
  void put(const void* src, size_t bytes, size_t offset = 0) {
    char* dst = static_cast<char*>(p) + offset;
#ifdef GDN_HAS_CUDA
    if (backend == Backend::kCUDA) {
      cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
      return;
    }
#endif
    std::memcpy(dst, src, bytes);
  }
  void get(void* dst, size_t bytes, size_t offset = 0) const {
    const char* src = static_cast<const char*>(p) + offset;
#ifdef GDN_HAS_CUDA
    if (backend == Backend::kCUDA) {
      cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
      return;
    }
#endif
    std::memcpy(dst, src, bytes);
  }
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median milliseconds of `fn`. CPU: wall clock, at least 3 runs and about a second. CUDA: the
// call captured once in a CUDA graph, replays timed with events.
double time_ms(Backend backend, const std::function<void(void*)>& fn) {
  std::vector<double> ms;
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    fn(stream);  // warm-up
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    fn(stream);
    cudaStreamEndCapture(stream, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; ++i) cudaGraphLaunch(exec, stream);
    for (int i = 0; i < 30; ++i) {
      cudaEventRecord(a, stream);
      cudaGraphLaunch(exec, stream);
      cudaEventRecord(b, stream);
      cudaEventSynchronize(b);
      float t = 0;
      cudaEventElapsedTime(&t, a, b);
      ms.push_back(t);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(stream);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
#endif
  (void)backend;
  fn(nullptr);  // warm-up
  const double start = now_s();
  while (ms.size() < 3 || (now_s() - start < 1.0 && ms.size() < 50)) {
    const double t0 = now_s();
    fn(nullptr);
    ms.push_back((now_s() - t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// fp32 GEMM rate of the BLAS this tool was linked with (OpenBLAS), on `threads` threads.
double blas_gemm_gflops(int threads) {
#ifdef GDN_HAVE_CBLAS
  openblas_set_num_threads(threads);
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  Rng rng(7);
  for (float& x : a) x = float(rng.symmetric());
  for (float& x : b) x = float(rng.symmetric());
  const double ms = time_ms(Backend::kCPU, [&](void*) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  return 2.0 * n * n * double(n) / (ms * 1e-3) / 1e9;
#else
  (void)threads;
  return 0.0;
#endif
}

double copy_bandwidth_GBps(Backend backend) {
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    const size_t bytes = size_t(1) << 30;
    Mem a(backend, bytes), b(backend, bytes);
    cudaMemset(a.p, 1, bytes);
    const double ms = time_ms(backend, [&](void* s) {
      cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s));
    });
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
  }
#endif
  (void)backend;
  return 0.0;
}

// ---------------------------------------------------------------------------------------------

struct Result {
  std::string name, kind;
  int64_t tokens = 0, seqs = 0;
  DType dtype = DType::kBFloat16;
  std::string layout;
  bool scaled = false;
  double ms = 0, tokens_per_s = 0, gflops = 0, GBps = 0, err = 0, state_err = 0;
};

struct Run {
  HostProblem hp;
  Backend backend;
  int threads;
  StateLayout layout = StateLayout::kKMajor;
  std::vector<uint8_t> o;
  std::vector<float> hT;
};

// Runs one problem (chunked prefill, or the decode step in place on a pool) and checks heads.
Result run_case(Run& r, bool decode, int check_heads) {
  HostProblem& hp = r.hp;
  const Backend be = r.backend;
  const size_t head_state = size_t(HV) * K * V;
  Mem q(be, hp.q.size()), k(be, hp.k.size()), v(be, hp.v.size()), g(be, hp.g.size() * 4), b(be, hp.beta.size() * 4);
  Mem o(be, size_t(hp.T) * HV * V * dtype_size(hp.dtype)), cu(be, hp.bounds.size() * 8);
  q.put(hp.q.data(), hp.q.size());
  k.put(hp.k.data(), hp.k.size());
  v.put(hp.v.data(), hp.v.size());
  g.put(hp.g.data(), hp.g.size() * 4);
  b.put(hp.beta.data(), hp.beta.size() * 4);
  cu.put(hp.bounds.data(), hp.bounds.size() * 8);

  ForwardArgs a;
  Problem& p = a.problem;
  p.num_tokens = hp.T;
  p.num_seqs = hp.N;
  p.num_qk_heads = H;
  p.num_v_heads = HV;
  p.head_k = K;
  p.head_v = V;
  p.dtype = hp.dtype;
  p.gate_dtype = DType::kFloat32;
  p.use_qk_l2norm = true;
  p.state_layout = r.layout;
  p.cu_seqlens = cu.p;
  p.cu_seqlens_host = hp.bounds.data();
  p.cu_seqlens_type = IndexType::kInt64;
  a.q.data = q.p;
  a.k.data = k.p;
  a.v.data = v.p;
  a.g.data = g.p;
  a.beta.data = b.p;
  a.o.data = o.p;

  // States in the layout asked for: the prefill reads a dense initial array and writes a
  // separate final one (so timed repeats see the same inputs); the decode step updates rows
  // N..2N-1 of a pool of 2N slots in place.
  std::vector<float> h0 = hp.h0;
  if (r.layout == StateLayout::kVMajor)
    for (int64_t n = 0; n < hp.N * HV; ++n)
      for (int x = 0; x < K; ++x)
        for (int y = 0; y < V; ++y) h0[n * K * V + y * K + x] = hp.h0[n * K * V + x * V + y];
  const int64_t slots = decode ? 2 * hp.N : hp.N;
  Mem s_in(be, slots * head_state * 4), s_out(be, hp.N * head_state * 4), idx(be, hp.N * 8);
  std::vector<int64_t> rows(hp.N);
  for (int64_t n = 0; n < hp.N; ++n) rows[n] = decode ? hp.N + n : n;
  idx.put(rows.data(), rows.size() * 8);
  StateRef in_ref, out_ref;
  in_ref.data = static_cast<float*>(s_in.p);
  in_ref.num_slots = slots;
  in_ref.indices = idx.p;
  in_ref.indices_host = rows.data();
  in_ref.index_type = IndexType::kInt64;
  if (decode) {
    // Pool rows N..2N-1 hold the sequences' states (rows 0..N-1 are other sequences' slots).
    s_in.put(h0.data(), h0.size() * 4, hp.N * head_state * 4);
    out_ref = in_ref;
  } else {
    s_in.put(h0.data(), h0.size() * 4);
    out_ref.data = static_cast<float*>(s_out.p);
    out_ref.num_slots = hp.N;
  }
  a.initial_state = in_ref;
  a.final_state = out_ref;

  Exec exec;
  exec.backend = be;
  exec.num_threads = r.threads;
  size_t ws_bytes =
      decode ? recurrent_gated_delta_rule_workspace_size(p, exec) : chunk_gated_delta_rule_workspace_size(p, exec);
  Mem ws(be, ws_bytes);
  exec.workspace = ws.p;
  exec.workspace_bytes = ws_bytes;

  // The checked run comes first (the decode step then moves the pool on; timing after that
  // measures the same work on other state values).
  auto call = [&](void* stream) {
    Exec e = exec;
    e.stream = stream;
    if (decode)
      recurrent_gated_delta_rule(a, e);
    else
      chunk_gated_delta_rule(a, e);
  };
  call(nullptr);
#ifdef GDN_HAS_CUDA
  if (be == Backend::kCUDA) cudaDeviceSynchronize();
#endif
  r.o.resize(size_t(hp.T) * HV * V * dtype_size(hp.dtype));
  o.get(r.o.data(), r.o.size());
  r.hT.resize(size_t(hp.N) * head_state);
  if (decode) {
    s_in.get(r.hT.data(), r.hT.size() * 4, hp.N * head_state * 4);
  } else {
    s_out.get(r.hT.data(), r.hT.size() * 4);
  }

  Result res;
  res.tokens = hp.T;
  res.seqs = hp.N;
  res.dtype = hp.dtype;
  res.layout = r.layout == StateLayout::kKMajor ? "k-major" : "v-major";
  res.err = 0;
  res.state_err = 0;
  const int heads[2] = {0, HV - 1};
  for (int i = 0; i < check_heads; ++i) {
    double se = 0;
    res.err = std::max(res.err, check_head(hp, heads[i], r.o, r.hT, r.layout, &se));
    res.state_err = std::max(res.state_err, se);
  }
  res.ms = time_ms(be, call);
  res.tokens_per_s = hp.T / (res.ms * 1e-3);
  return res;
}

}  // namespace

int main_impl(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  Backend backend = Backend::kCPU;
  if (opt.backend == "cuda" || (opt.backend == "auto" && cuda_available())) backend = Backend::kCUDA;
  if (opt.backend == "cuda" && !cuda_available()) usage("--backend cuda: no CUDA device (or built without CUDA)");
  if (opt.backend != "auto" && opt.backend != "cpu" && opt.backend != "cuda") usage("unknown backend");
  const int threads = backend == Backend::kCPU ? (opt.threads > 0 ? opt.threads : omp_get_max_threads()) : 0;
  const int64_t max_tokens = opt.max_tokens >= 0 ? opt.max_tokens : (backend == Backend::kCPU ? 8192 : 0);

  std::fprintf(stderr, "gdn: backend %s%s, shape H=%d HV=%d K=%d V=%d, qk l2norm on, fp32 states\n",
               backend_name(backend),
               backend == Backend::kCPU ? (" (" + std::to_string(threads) + " threads)").c_str() : "", H, HV, K, V);
  const double gemm = backend == Backend::kCPU ? blas_gemm_gflops(threads) : 0.0;
  const double copy = copy_bandwidth_GBps(backend);
  if (gemm > 0) std::fprintf(stderr, "gdn: OpenBLAS fp32 GEMM (2048^3, %d threads): %.1f GFLOP/s\n", threads, gemm);
  if (copy > 0) std::fprintf(stderr, "gdn: device copy bandwidth: %.0f GB/s\n", copy);

  struct Job {
    std::string name;
    std::vector<int64_t> lens;
    DType dtype;
    bool decode;
    StateLayout layout;
    bool scaled;
  };
  std::vector<Job> jobs;
  for (DType d : opt.dtypes)
    for (PrefillCase c : spec_prefill_cases()) {
      if (!opt.cases.empty() && std::find(opt.cases.begin(), opt.cases.end(), c.name) == opt.cases.end()) continue;
      const bool scaled = max_tokens > 0 && scale_down(c, max_tokens);
      jobs.push_back({c.name, c.lens, d, false, StateLayout::kKMajor, scaled});
    }
  // Decode batches: a pool of 2N states of 2 MiB each (HV x K x V fp32) is 16 GiB at N = 4096,
  // so the CPU run stops at N = 256.
  std::vector<int64_t> decode_ns = {1, 64, 256, 1024, 4096};
  if (backend == Backend::kCPU) decode_ns = {1, 64, 256};
  if (opt.decode)
    for (int64_t n : decode_ns)
      for (StateLayout l : {StateLayout::kVMajor, StateLayout::kKMajor})
        jobs.push_back({"decode", std::vector<int64_t>(n, 1), opt.dtypes.front(), true, l, false});

  std::vector<Result> results;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    std::fprintf(stderr, "\r[%zu/%zu] %-8s %-8s %s ...        ", j + 1, jobs.size(), job.name.c_str(),
                 dtype_name(job.dtype), job.decode ? (job.layout == StateLayout::kVMajor ? "v-major" : "k-major") : "");
    std::fflush(stderr);
    Run r{make_problem(job.lens, job.dtype, 1234 + j), backend, threads, job.layout, {}, {}};
    const int64_t T = r.hp.T;
    Result res = run_case(r, job.decode, T > 40000 ? 1 : 2);
    res.name = job.name;
    res.kind = job.decode ? "decode" : "prefill";
    res.scaled = job.scaled;
    const double state_bytes = 2.0 * double(r.hp.N) * HV * K * V * 4;
    if (job.decode) {
      res.GBps = state_bytes / (res.ms * 1e-3) / 1e9;
    } else {
      res.gflops = prefill_flops(job.lens, HV, K, V) / (res.ms * 1e-3) / 1e9;
    }
    results.push_back(res);
  }
  std::fprintf(stderr, "\r%80s\r", "");

  std::printf("%-8s %-9s %-8s %9s %10s %12s %9s %8s %10s %10s\n", "case", "kind", "dtype", "tokens", "ms", "tokens/s",
              "GFLOP/s", "GB/s", "err(o)", "err(state)");
  for (const Result& r : results) {
    std::printf("%-8s %-9s %-8s %9lld %10.3f %12.0f %9.1f %8.1f %10.2e %10.2e%s\n", r.name.c_str(),
                r.kind == "decode" ? (r.layout == "v-major" ? "decode-v" : "decode-k") : "prefill", dtype_name(r.dtype),
                static_cast<long long>(r.tokens), r.ms, r.tokens_per_s, r.gflops, r.GBps, r.err, r.state_err,
                r.scaled ? "  (scaled down)" : "");
  }
  if (gemm > 0) std::printf("OpenBLAS fp32 GEMM: %.1f GFLOP/s on %d threads\n", gemm, threads);
  bool any_scaled = false;
  for (const Result& r : results) any_scaled |= r.scaled;
  if (any_scaled)
    std::printf("(scaled down): the case was cut to %lld tokens for a quick CPU run (--max-tokens 0 runs it whole)\n",
                static_cast<long long>(max_tokens));

  if (!opt.json.empty()) {
    std::ofstream js(opt.json);
    const std::time_t t = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    js << "{\n  \"backend\": \"" << backend_name(backend) << "\",\n  \"date\": \"" << date
       << "\",\n  \"threads\": " << threads << ",\n  \"gemm_gflops\": " << gemm << ",\n  \"copy_GBps\": " << copy
       << ",\n  \"shape\": {\"H\": " << H << ", \"HV\": " << HV << ", \"K\": " << K << ", \"V\": " << V
       << "},\n  \"cases\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      js << "    {\"name\": \"" << r.name << "\", \"kind\": \"" << r.kind << "\", \"tokens\": " << r.tokens
         << ", \"seqs\": " << r.seqs << ", \"dtype\": \"" << dtype_name(r.dtype) << "\", \"threads\": " << threads
         << ", \"layout\": \"" << r.layout << "\", \"scaled\": " << (r.scaled ? "true" : "false")
         << ", \"ms\": " << r.ms << ", \"tokens_per_s\": " << r.tokens_per_s << ", \"gflops\": " << r.gflops
         << ", \"GBps\": " << r.GBps << ", \"err\": " << r.err << ", \"state_err\": " << r.state_err << "}"
         << (i + 1 < results.size() ? "," : "") << "\n";
    }
    js << "  ]\n}\n";
    std::fprintf(stderr, "gdn: wrote %s\n", opt.json.c_str());
  }
  // The check is part of the job: fail when a sample is off the SPEC bound.
  for (const Result& r : results) {
    const double bound = r.dtype == DType::kFloat32 ? (backend == Backend::kCUDA ? 2e-3 : 1e-4) : 5e-3;
    if (!(r.err <= bound) || !(r.state_err <= bound)) {
      std::fprintf(stderr, "gdn: %s (%s) is off the reference: err %.3e, state err %.3e > %.0e\n", r.name.c_str(),
                   dtype_name(r.dtype), r.err, r.state_err, bound);
      return 1;
    }
  }
  return 0;
}

}  // namespace tools
}  // namespace gdn

int main(int argc, char** argv) {
  try {
    return gdn::tools::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdn: %s\n", e.what());
    return 1;
  }
}
