// Timings of the device check: CUDA-graph replays of the prefill cases (tools/cases.h) and of the
// decode step, in the benchmark shape of Qwen3-Next (H 16, HV 32, K = V = 128, bf16, qk l2norm).
#include <algorithm>
#include <cmath>

#include "backend.h"
#include "check.h"
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/decode/recurrent.cuh"

namespace gdn {
namespace check {
namespace {

constexpr int kBH = 16, kBHV = 32, kBK = 128, kBV = 128;  // the decode's shape (prefill: the case's heads)

// Median of `reps` event-timed runs of `run` on `st`, after 3 warm-up runs (ms).
template <class F>
float median_ms(cudaStream_t st, int reps, F run) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps + 3; ++r) {
    CK(cudaEventRecord(e0, st));
    run();
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float m;
    CK(cudaEventElapsedTime(&m, e0, e1));
    if (r >= 3) ms.push_back(m);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// `op` run once eagerly, then captured into a CUDA graph whose replays median_ms times.
template <class F>
float graph_median_ms(cudaStream_t st, int reps, F op) {
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

std::vector<float> randn(std::mt19937& rng, std::normal_distribution<float>& nd, int64_t count, float s) {
  std::vector<float> x(count);
  for (auto& e : x) e = s * nd(rng);
  return x;
}

// Device inputs of T tokens, H q/k heads and HV value heads: q, k, v (bf16, random), g and beta
// (fp32, given, [T, HV]), o (bf16, unset).
struct BenchInputs {
  Problem p;
  int64_t H, HV, D;  // D: the head size of q, k and v (K = V)
  void *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr, *o = nullptr;
  cudaStream_t st = nullptr;

  BenchInputs(int64_t T, int64_t N, int64_t heads_qk, int64_t heads_v, std::mt19937& rng,
              std::normal_distribution<float>& nd, const std::vector<float>& g_host,
              const std::vector<float>& beta_host, DType dtype = DType::kBFloat16, int64_t head = kBK)
      : H(heads_qk), HV(heads_v), D(head) {
    p.num_tokens = T;
    p.num_seqs = N;
    p.num_qk_heads = H;
    p.num_v_heads = HV;
    p.head_k = D;
    p.head_v = D;
    p.dtype = dtype;  // q, k, v and o
    p.gate_dtype = DType::kFloat32;
    p.scale = 1.f / std::sqrt(float(D));
    p.use_qk_l2norm = true;
    q = upload(randn(rng, nd, T * H * D, 1.f), p.dtype, 1, T * H * D, T * H * D);
    k = upload(randn(rng, nd, T * H * D, 1.f), p.dtype, 1, T * H * D, T * H * D);
    v = upload(randn(rng, nd, T * HV * D, 1.f), p.dtype, 1, T * HV * D, T * HV * D);
    g = upload(g_host, DType::kFloat32, 1, T * HV, T * HV);
    beta = upload(beta_host, DType::kFloat32, 1, T * HV, T * HV);
    CK(cudaMalloc(&o, std::max<int64_t>(T * HV * D * dtype_bytes(dtype), 1)));
    CK(cudaStreamCreate(&st));
  }
  ~BenchInputs() {
    for (void* x : {q, k, v, g, beta, o}) cudaFree(x);
    cudaStreamDestroy(st);
  }
  BenchInputs(const BenchInputs&) = delete;
  BenchInputs& operator=(const BenchInputs&) = delete;
  // The op's arguments with the states `states` (read and written in place).
  ForwardArgs args(const StateRef& states) const {
    ForwardArgs f;
    f.problem = p;
    f.q = {q, H * D, D};
    f.k = {k, H * D, D};
    f.v = {v, HV * D, D};
    f.g = {g, HV, 1};
    f.beta = {beta, HV, 1};
    f.o = {o, HV * D, D};
    f.initial_state = states;
    f.final_state = states;
    return f;
  }
};

void json_object(BenchOptions& o, const std::string& fields) {
  if (!o.json) return;
  std::fprintf(o.json, "%s{%s}", o.first ? "" : ",", fields.c_str());
  o.first = false;
}

// The phases of the tensor-core forward with config `cfg`: plain launches (no graph), median of 9
// after 2 warm-up runs.
void print_phases(const std::string& label, const ForwardArgs& f, const Exec& ex, const cuda::ChunkForwardConfig& cfg) {
  cuda::PhaseEvents ev;
  for (auto& e : ev.at) CK(cudaEventCreate(&e));
  constexpr int kPhases = cuda::PhaseEvents::kCount - 1;
  std::vector<std::vector<float>> ph(kPhases);
  for (int r = 0; r < 11; ++r) {
    cuda::fast_forward(f, ex, cfg, &ev);
    CK(cudaEventSynchronize(ev.at[kPhases]));
    if (r < 2) continue;
    for (int i = 0; i < kPhases; ++i) {
      float m;
      CK(cudaEventElapsedTime(&m, ev.at[i], ev.at[i + 1]));
      ph[i].push_back(m);
    }
  }
  const char* names[kPhases] = {"plan", "pack", "prep", "sum", "scan", "h", "o"};
  std::printf("  phases %-8s", label.c_str());
  for (int i = 0; i < kPhases; ++i) {
    std::sort(ph[i].begin(), ph[i].end());
    std::printf("  %s %.3f", names[i], ph[i][ph[i].size() / 2]);
  }
  std::printf(" ms\n");
  for (auto& e : ev.at) cudaEventDestroy(e);
}

}  // namespace

void bench_prefill(const tools::PrefillCase& c, const std::string& case_label, PrefillVariant variant,
                   BenchOptions& o) {
  // (--case LABEL/scanNN: check_main strips the suffix to find LABEL; the lines keep it.)
  const std::string label = o.scan_cols > 0 ? case_label + "/scan" + std::to_string(o.scan_cols) : case_label;
  const std::vector<int64_t>& lens = c.lens;
  const int64_t N = lens.size(), HV = c.HV;
  std::vector<int64_t> cu(N + 1, 0);
  for (int64_t n = 0; n < N; ++n) cu[n + 1] = cu[n] + lens[n];
  const int64_t T = cu[N];
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> g(T * HV), b(T * HV);
  for (int64_t i = 0; i < T * HV; ++i) {
    g[i] = tools::case_gate(c.gates, nd(rng), i % HV, HV);
    b[i] = 1.f / (1.f + std::exp(-nd(rng)));
  }
  const DType dtype = variant == PrefillVariant::kFp16   ? DType::kFloat16
                      : variant == PrefillVariant::kFp32 ? DType::kFloat32
                                                         : DType::kBFloat16;
  const int64_t D = variant == PrefillVariant::kD64 ? 64 : variant == PrefillVariant::kD256 ? 256 : kBK;
  BenchInputs in(T, N, c.H, HV, rng, nd, g, b, dtype, D);
  void* cu_d = upload_indices(cu, IndexType::kInt64);
  in.p.cu_seqlens = cu_d;
  // (As the Python benchmark passes cu_seqlens_cpu: the heuristics read it.)
  in.p.cu_seqlens_host = variant == PrefillVariant::kNoHostLengths ? nullptr : cu.data();
  in.p.cu_seqlens_type = IndexType::kInt64;
  const int64_t state_elems = N * HV * D * D;
  // (/bf16state: the states in a bf16 pool, as an engine's 16-bit cache holds them; /vstate: V-major,
  // as vLLM and SGLang lay their pools out; /bf16vstate: both.)
  if (variant == PrefillVariant::kBf16State || variant == PrefillVariant::kBf16VState)
    in.p.state_dtype = DType::kBFloat16;
  if (variant == PrefillVariant::kVState || variant == PrefillVariant::kBf16VState)
    in.p.state_layout = StateLayout::kVMajor;
  void* S = upload(randn(rng, nd, state_elems, 0.1f), in.p.state_dtype, 1, state_elems, state_elems);
  ForwardArgs f = in.args({S, N, nullptr, nullptr, IndexType::kInt32});
  // kCheckpoints: a boundary every 16 chunks, stored into a dense fp32 buffer [N, M, HV, K, V]
  // (M: the longest sequence's boundaries), the way an engine caches prefixes.
  void* ck = nullptr;
  if (variant == PrefillVariant::kCheckpoints) {
    constexpr int64_t kEvery = 16;
    const int64_t M = std::max<int64_t>(1, *std::max_element(lens.begin(), lens.end()) / (kEvery * kChunkSize));
    CK(cudaMalloc(&ck, N * M * HV * D * D * sizeof(float)));
    f.checkpoints.pool = {static_cast<float*>(ck), N * M, nullptr, nullptr, IndexType::kInt32};
    f.checkpoints.every_chunks = kEvery;
    f.checkpoints.max_checkpoints = M;
  }
  // The library's choices, or the variant's explicit config (whose workspace may be larger).
  cuda::ChunkForwardConfig cfg = cuda::chunk_forward_heuristics(in.p, cuda::device_props());
  // (The variants that change the config below; the others only change the inputs.)
  const bool explicit_cfg = variant == PrefillVariant::kOAfter || variant == PrefillVariant::kFusedO ||
                            variant == PrefillVariant::kFusedSerial || variant == PrefillVariant::kCut ||
                            variant == PrefillVariant::kParts || variant == PrefillVariant::kBf16Operands ||
                            o.scan_cols > 0;
  if (variant == PrefillVariant::kOAfter || variant == PrefillVariant::kFusedO ||
      variant == PrefillVariant::kFusedSerial) {
    cfg.fuse_o = variant != PrefillVariant::kOAfter;  // (/seq: fwd_o after the chain)
    cfg.fuse_o_serial = variant == PrefillVariant::kFusedSerial;
  }
  // A variant this case cannot run: its line says why, and nothing is timed.
  auto skipped = [&](const char* why) {
    std::printf("bench %-8s skipped: %s\n", label.c_str(), why);
    cudaFree(S);
    cudaFree(cu_d);
  };
  if (variant == PrefillVariant::kCut) {  // (heuristics.h, choose_split: two parts of one sequence)
    if (cfg.split_max_parts != 2 || cfg.split_first_part_chunks <= 0 || o.cut_percent <= 0 || o.cut_percent >= 100)
      return skipped("no two-part split of one sequence here, or a cut outside 1 .. 99%");
    const int64_t n = cuda::average_chunks(in.p);
    const int64_t first = (n * o.cut_percent + 99) / 100;
    cfg.split_first_part_chunks = static_cast<int>(first);
    cfg.split_chunks_per_part = static_cast<int>(n - first);
  }
  if (variant == PrefillVariant::kParts) {  // (heuristics.h, set_split_parts: the config of q-chunk parts)
    const int64_t n = cuda::average_chunks(in.p);
    if (o.parts < 2 || o.parts > n || in.p.head_v == 256)
      return skipped("parts outside 2 .. the average sequence's chunks, or K = V = 256");
    cfg.split_even_first_chunks = 0;
    cuda::set_split_parts(in.p, cuda::device_props(), cfg, (n + o.parts - 1) / o.parts, 0);
    cfg.fuse_o = true;
    cfg.fuse_o_serial = false;
  }
  if (variant == PrefillVariant::kBf16Operands) cfg.fp16_operands = false;
  if (o.scan_cols > 0) {  // (heuristics.h: the narrowest slices that fit one block per SM)
    if (variant == PrefillVariant::kFp32) return skipped("/scanNN with fp32 inputs (their fp16 copies)");
    cfg.split_scan_cols = o.scan_cols;  // (fast_forward rejects anything but 8, 16 and 32)
  }
  const size_t wsz = std::max(cuda::chunk_gated_delta_rule_workspace_size(in.p, 0),
                              explicit_cfg ? cuda::fast_workspace_size(in.p, cfg) : size_t(0));
  void* ws;
  CK(cudaMalloc(&ws, std::max<size_t>(wsz, 1)));
  Exec ex;
  ex.backend = Backend::kCUDA;
  ex.stream = in.st;
  ex.workspace = ws;
  ex.workspace_bytes = wsz;
  const float med = graph_median_ms(in.st, 20, [&] {
    if (explicit_cfg)
      cuda::fast_forward(f, ex, cfg);
    else
      cuda::chunk_gated_delta_rule(f, ex);
  });
  std::printf("bench %-8s T=%-7lld %.3f ms  %.1f Mtok/s\n", label.c_str(), (long long)T, med, T / med / 1e3);
  // (The phases time fast_forward itself, which fp32 inputs reach only through their fp16 copies.)
  if (o.profile && variant != PrefillVariant::kFp32) print_phases(label, f, ex, cfg);
  char fields[256];
  std::snprintf(fields, sizeof fields, "\"name\":\"%s\",\"tokens\":%lld,\"gdn_ms\":%.4f", label.c_str(), (long long)T,
                med);
  json_object(o, fields);
  cudaFree(S);
  cudaFree(ws);
  cudaFree(cu_d);
  cudaFree(ck);
}

std::string rows_shape_name(int i) {
  const cuda::RowsShape& s = cuda::kRows16Shapes[i];
  return "{" + std::to_string(s.parts) + "," + std::to_string(s.blocks_per_sm) + "," + (s.staged ? "staged" : "regs") +
         "}";
}

float bench_decode(int64_t N, bool vmajor, DType state_dtype, BenchOptions& o, float ref_ms) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  BenchInputs in(N, N, kBH, kBHV, rng, nd, std::vector<float>(N * kBHV, -0.1f), std::vector<float>(N * kBHV, 0.5f));
  in.p.state_layout = vmajor ? StateLayout::kVMajor : StateLayout::kKMajor;
  in.p.state_dtype = state_dtype;
  const int64_t slots = 2 * N;
  const size_t es = dtype_bytes(state_dtype);
  const size_t sbytes = size_t(slots) * kBHV * kBK * kBV * es;
  void* S;
  CK(cudaMalloc(&S, sbytes));
  CK(cudaMemset(S, 0, sbytes));
  std::vector<int64_t> idx(N);
  for (int64_t n = 0; n < N; ++n) idx[n] = (n * 7919) % slots;  // scattered rows
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  while ((int64_t)idx.size() < N) idx.push_back(idx.back() + 1);
  void* idx_d = upload_indices(idx, IndexType::kInt32);
  const ForwardArgs f = in.args({S, slots, idx_d, nullptr, IndexType::kInt32});
  Exec ex;
  ex.backend = Backend::kCUDA;
  ex.stream = in.st;
  const float med = graph_median_ms(in.st, 50, [&] { cuda::recurrent_gated_delta_rule(f, ex); });
  const double bytes = 2.0 * N * kBHV * kBK * kBV * es;  // the states read and written
  // copy bandwidth on a buffer of the same size
  void *c0, *c1;
  CK(cudaMalloc(&c0, bytes / 2));
  CK(cudaMalloc(&c1, bytes / 2));
  const float copy_ms =
      median_ms(in.st, 20, [&] { CK(cudaMemcpyAsync(c1, c0, bytes / 2, cudaMemcpyDeviceToDevice, in.st)); });
  const double gbps = bytes / (med * 1e6), cbps = bytes / (copy_ms * 1e6);
  const char* layout = vmajor ? "vmajor" : "kmajor";
  const char* sname = dtype_str(state_dtype);
  std::printf("decode N=%-5lld %s %-8s %.4f ms  %.0f GB/s  copy %.0f GB/s  (%.0f%%)", (long long)N, layout, sname, med,
              gbps, cbps, 100 * gbps / cbps);
  if (ref_ms > 0) std::printf("  %.2fx fp32", ref_ms / med);
  std::printf("\n");
  char fields[384];
  std::snprintf(fields, sizeof fields,
                "\"decode_n\":%lld,\"layout\":\"%s\",\"state_dtype\":\"%s\",\"gdn_ms\":%.4f,"
                "\"gdn_GBps\":%.1f,\"copy_GBps\":%.1f,\"speedup_fp32\":%.3f",
                (long long)N, layout, sname, med, gbps, cbps, ref_ms > 0 ? ref_ms / med : 0.0);
  json_object(o, fields);
  cudaFree(c0);
  cudaFree(c1);
  cudaFree(S);
  cudaFree(idx_d);
  return med;
}

void bench_spec_decode(int64_t N, int T, bool vmajor, bool sglang, BenchOptions& o) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  const int64_t tokens = N * T;
  BenchInputs in(tokens, N, kBH, kBHV, rng, nd, std::vector<float>(tokens * kBHV, -0.1f),
                 std::vector<float>(tokens * kBHV, 0.5f));
  in.p.state_layout = vmajor ? StateLayout::kVMajor : StateLayout::kKMajor;
  const int64_t head = int64_t{kBHV} * kBK * kBV;
  // vLLM: one pool of 1 + N T rows (row 0 the null slot), T scattered rows per sequence, the
  // initial state read at column num_accepted - 1. SGLang: a pool of N rows read (not written:
  // disable_state_update) and a dense buffer [N, T, HV, K, V] for the token states.
  const int64_t slots = sglang ? N : 1 + N * T;
  const int64_t buffer_slots = sglang ? N * T : 0;
  float *S, *B = nullptr;
  CK(cudaMalloc(&S, size_t(slots) * head * 4));
  CK(cudaMemset(S, 0, size_t(slots) * head * 4));
  if (sglang) CK(cudaMalloc(&B, size_t(buffer_slots) * head * 4));
  std::vector<int64_t> rows(N * T), accepted(N);
  for (int64_t i = 0; i < N * T; ++i) rows[i] = 1 + (i * 7919) % (N * T);  // a permutation when N T is prime to 7919
  for (int64_t n = 0; n < N; ++n) accepted[n] = 1 + n % T;
  void* rows_d = upload_indices(rows, IndexType::kInt32);
  void* acc_d = upload_indices(accepted, IndexType::kInt32);
  ForwardArgs f = in.args({S, slots, nullptr, nullptr, IndexType::kInt32});
  f.token_states.max_tokens = T;
  if (sglang) {
    f.final_state = StateRef{};
    f.token_states.pool.data = B;
    f.token_states.pool.num_slots = buffer_slots;
  } else {
    f.initial_state = f.final_state = StateRef{};
    f.token_states.pool.data = S;
    f.token_states.pool.num_slots = slots;
    f.token_states.pool.indices = rows_d;
    f.token_states.pool.null_slot = 0;
    f.token_states.num_accepted = acc_d;
  }
  Exec ex;
  ex.backend = Backend::kCUDA;
  ex.stream = in.st;
  const float med = graph_median_ms(in.st, 50, [&] { cuda::recurrent_gated_delta_rule(f, ex); });
  const double bytes = double(1 + T) * N * head * 4;  // one state read, T states written
  void *c0, *c1;
  CK(cudaMalloc(&c0, size_t(bytes / 2)));
  CK(cudaMalloc(&c1, size_t(bytes / 2)));
  const float copy_ms =
      median_ms(in.st, 20, [&] { CK(cudaMemcpyAsync(c1, c0, size_t(bytes / 2), cudaMemcpyDeviceToDevice, in.st)); });
  const double gbps = bytes / (med * 1e6), cbps = bytes / (copy_ms * 1e6);
  const char* layout = vmajor ? "vmajor" : "kmajor";
  const char* conv = sglang ? "sglang" : "vllm";
  std::printf("verify N=%-5lld T=%d %s %s %.4f ms  %.0f GB/s  copy %.0f GB/s  (%.0f%%)\n", (long long)N, T, conv,
              layout, med, gbps, cbps, 100 * gbps / cbps);
  char fields[320];
  std::snprintf(fields, sizeof fields,
                "\"verify_n\":%lld,\"verify_t\":%d,\"convention\":\"%s\",\"layout\":\"%s\",\"gdn_ms\":%.4f,"
                "\"gdn_GBps\":%.1f,\"copy_GBps\":%.1f",
                (long long)N, T, conv, layout, med, gbps, cbps);
  json_object(o, fields);
  for (void* x : {c0, c1, static_cast<void*>(S), static_cast<void*>(B), rows_d, acc_d}) cudaFree(x);
}

}  // namespace check
}  // namespace gdn
