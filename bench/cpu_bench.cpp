// CPU micro-benchmarks (Google Benchmark): the matrix micro-kernel against the core's peak, and
// the forward / decode step on the reference problem (Qwen3-Next shape, fp32).
//   ./build/bench/gdn_cpu_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/gemm.h"
#include "gdn/gdn.h"

namespace {

// A call, as the backend's chunk code makes it: inlined into the loop below, GCC kept some of
// AVX2's 12 accumulators on the stack beside the benchmark's own values (31 GFLOP/s against 70 on
// the same core, session 31); the library's tiles compile out of line, in registers.
__attribute__((noinline)) void chunk_gemm(int M, int N, int D, const float* A, const float* B, float* C) {
  gdn::cpu::gemm(M, N, D, A, D, B, N, C, N, true);
}

// One chunk-sized product, C[M, N] += A[M, D] B[D, N], as the forward issues them.
void BM_ChunkGemm(benchmark::State& state) {
  const int M = int(state.range(0)), N = int(state.range(1)), D = int(state.range(2));
  std::vector<float> A(M * D, 0.01f), B(D * N, 0.02f), C(M * N, 0.0f);
  for (auto _ : state) {
    chunk_gemm(M, N, D, A.data(), B.data(), C.data());
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * D * double(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ChunkGemm)->Args({128, 128, 128})->Args({64, 128, 64})->Args({128, 64, 128});

struct Problem {
  int64_t T, N;
  std::vector<float> q, k, v, g, beta, o, h0, hT;
  std::vector<uint8_t> ws;
  gdn::ForwardArgs a;
  gdn::Exec exec;
  Problem(int64_t tokens, int64_t seqs, int threads) : T(tokens), N(seqs) {
    const int H = 16, HV = 32, K = 128, V = 128;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    auto fill = [&](std::vector<float>& x, size_t n) {
      x.resize(n);
      for (float& f : x) f = nd(rng);
    };
    fill(q, T * H * K);
    fill(k, T * H * K);
    fill(v, T * HV * V);
    fill(h0, N * HV * K * V);
    g.resize(T * HV);
    beta.resize(T * HV);
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = -std::log1p(std::exp(-nd(rng)));
      beta[i] = 1.0f / (1.0f + std::exp(-nd(rng)));
    }
    o.resize(T * HV * V);
    hT.resize(N * HV * K * V);
    gdn::Problem& p = a.problem;
    p.num_tokens = T;
    p.num_seqs = N;
    p.num_qk_heads = H;
    p.num_v_heads = HV;
    p.head_k = K;
    p.head_v = V;
    p.dtype = gdn::DType::kFloat32;
    p.use_qk_l2norm = true;
    a.q = {q.data()};
    a.k = {k.data()};
    a.v = {v.data()};
    a.g = {g.data()};
    a.beta = {beta.data()};
    a.o = {o.data()};
    a.initial_state.data = h0.data();
    a.initial_state.num_slots = N;
    a.final_state.data = hT.data();
    a.final_state.num_slots = N;
    exec.num_threads = threads;
    // One workspace for both benchmarks: the larger of the forward's and the decode step's.
    ws.resize(std::max(gdn::chunk_gated_delta_rule_workspace_size(p, exec),
                       gdn::recurrent_gated_delta_rule_workspace_size(p, exec)));
    exec.workspace = ws.data();
    exec.workspace_bytes = ws.size();
  }
};

void BM_Forward(benchmark::State& state) {
  Problem pb(state.range(0), 1, int(state.range(1)));
  for (auto _ : state) gdn::chunk_gated_delta_rule(pb.a, pb.exec);
  state.counters["tokens/s"] =
      benchmark::Counter(double(pb.T) * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Forward)->Args({4096, 2})->Args({4096, 1})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Decode(benchmark::State& state) {
  Problem pb(state.range(0), state.range(0), 2);
  for (auto _ : state) gdn::recurrent_gated_delta_rule(pb.a, pb.exec);
  const double bytes = 2.0 * double(pb.N) * 32 * 128 * 128 * 4;
  state.counters["GB/s"] =
      benchmark::Counter(bytes * double(state.iterations()), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Decode)->Arg(1)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
