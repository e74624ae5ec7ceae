// gdn::cuda entry points: device discovery, workspace sizes, the stage API (exact kernels of
// stages.cu) and the composed forward, which takes the tensor-core path (fwd_fast.cu) for
// bf16/fp16 inputs with K = V = 128 or 64 (q/k in the dtype of v) and otherwise chains the exact
// stage kernels: fp32 inputs, every other head size in [1, 256] (the stages mask the columns past
// V) and q/k or o in another dtype than v (each is read or written in its own dtype; the work is
// fp32).
#include "backend.h"
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/chunk/state_copy.cuh"
#include "cuda/stages/l2norm.cuh"
#include "cuda/stages/stages.cuh"

namespace gdn {
namespace cuda {

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  return major == 9;  // the kernels are built for sm_90a only
}

namespace {

// The API layer validates head sizes against the capability table first; this guards direct
// calls of the backend (the kernels keep rows of at most 256 in shared memory and registers).
void check_dims(const char* op, const Problem& p) {
  auto ok = [](int d) { return d >= 1 && d <= 256; };
  if (!ok(p.head_k) || !ok(p.head_v))
    throw Error(std::string(op) + ": head_k = " + std::to_string(p.head_k) + ", head_v = " + std::to_string(p.head_v) +
                " unsupported on the CUDA backend; expected [1, 256]");
}

// The tensor-core forward reads q, k, v and writes o in one dtype: with q/k or o in another, the
// exact path runs.
bool takes_fast_path(const Problem& p) {
  return qk_dtype_of(p) == p.dtype && o_dtype_of(p) == p.dtype && fast_path_supported(p);
}

TensorView tv(const ConstTensor& t) { return TensorView{t.data, t.stride_token, t.stride_head}; }

StageCtx make_ctx(const Problem& p, const Plan& pl, cudaStream_t s) {
  StageCtx c;
  c.pl = pl;
  c.T = p.num_tokens;
  c.H = p.num_qk_heads;
  c.HV = p.num_v_heads;
  c.K = p.head_k;
  c.V = p.head_v;
  c.scale = p.scale;
  c.layout = p.state_layout;
  c.state_dtype = p.state_dtype;
  c.s = s;
  return c;
}

Plan stage_plan(const char* op, const Problem& p, const Exec& exec) {
  check_dims(op, p);
  if (exec.workspace == nullptr || exec.workspace_bytes < plan_bytes(p.num_tokens, p.num_seqs))
    throw Error(std::string(op) + ": exec.workspace must hold stage_workspace_size() bytes");
  return build_plan(p, exec.workspace, stream_of(exec));
}

// Workspace of the exact (chained stages) forward, carved in this order.
struct ExactWs {
  Plan pl;
  float *q, *k, *v, *g, *beta;
  double* G;  // fp64: see run_cumsum
  float *L, *A, *w, *u, *h, *v_new;
};
size_t exact_ws(const Problem& p, void* base, ExactWs* out, cudaStream_t s) {
  const int64_t T = p.num_tokens, HV = p.num_v_heads, H = p.num_qk_heads, K = p.head_k, V = p.head_v;
  const int64_t mc = chunk_bound(T, p.num_seqs);
  Carver c(base);
  char* plan_mem = c.take<char>(plan_bytes(T, p.num_seqs));
  float* q = c.take<float>(T * H * K);
  float* k = c.take<float>(T * H * K);
  float* v = c.take<float>(T * HV * V);
  float* g = c.take<float>(T * HV);
  float* beta = c.take<float>(T * HV);
  double* G = c.take<double>(T * HV);
  float* L = c.take<float>(T * HV * kChunkSize);
  float* A = c.take<float>(T * HV * kChunkSize);
  float* w = c.take<float>(T * HV * K);
  float* u = c.take<float>(T * HV * V);
  float* v_new = c.take<float>(T * HV * V);
  float* h = c.take<float>(mc * HV * K * V);
  if (out) {
    *out = ExactWs{build_plan(p, plan_mem, s), q, k, v, g, beta, G, L, A, w, u, h, v_new};
  }
  return c.used;
}

// Packs fp32 g and beta (fused gates applied) into [T, HV].
__global__ void exact_gates_kernel(GateArgs ga, int64_t T, int HV, float* __restrict__ g, float* __restrict__ beta) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= T * HV) return;
  const int64_t t = i / HV;
  const int hv = static_cast<int>(i % HV);
  load_gates(ga, t, hv, g[i], beta[i]);
}

void exact_forward(const ForwardArgs& f, const Exec& exec) {
  const Problem& p = f.problem;
  cudaStream_t s = stream_of(exec);
  ExactWs ws;
  exact_ws(p, exec.workspace, &ws, s);
  const int64_t T = p.num_tokens;
  const int H = p.num_qk_heads, HV = p.num_v_heads, K = p.head_k, V = p.head_v;
  const DType qk_dtype = qk_dtype_of(p);
  convert_rows(qk_dtype, DType::kFloat32, f.q.data, f.q.stride_token, f.q.stride_head, ws.q, int64_t(H) * K, K, T, H, K,
               p.use_qk_l2norm, s);
  convert_rows(qk_dtype, DType::kFloat32, f.k.data, f.k.stride_token, f.k.stride_head, ws.k, int64_t(H) * K, K, T, H, K,
               p.use_qk_l2norm, s);
  convert_rows(p.dtype, DType::kFloat32, f.v.data, f.v.stride_token, f.v.stride_head, ws.v, int64_t(HV) * V, V, T, HV,
               V, false, s);
  if (T * HV > 0) {
    exact_gates_kernel<<<grid_1d(T * HV, 256), 256, 0, s>>>(make_gates(f), T, HV, ws.g, ws.beta);
    GDN_CUDA_LAUNCH_CHECK("exact_gates_kernel");
  }
  const StageCtx c = make_ctx(p, ws.pl, s);
  const TensorView q{ws.q, int64_t(H) * K, K}, k{ws.k, int64_t(H) * K, K}, v{ws.v, int64_t(HV) * V, V};
  const TensorView g{ws.g, HV, 1}, beta{ws.beta, HV, 1};
  const GPtr G{ws.G, true};
  run_cumsum(c, g, DType::kFloat32, G);
  run_kkt(c, k, DType::kFloat32, beta, DType::kFloat32, G, ws.L);
  run_solve_tril(c, ws.L, ws.A);
  run_w_u(c, k, v, DType::kFloat32, beta, DType::kFloat32, G, ws.A, ws.w, ws.u);
  run_fwd_h(c, k, DType::kFloat32, ws.w, ws.u, G, f.initial_state, f.final_state, f.checkpoints, ws.h, ws.v_new);
  run_fwd_o(c, q, k, DType::kFloat32, ws.v_new, ws.h, G, f.o.data, f.o.stride_token, f.o.stride_head, o_dtype_of(p));
}

// The tensor-core forward on a bf16 / fp16 pool: through a dense fp32 copy of the rows at the
// front of the workspace (state_copy.cuh). Sequence n reads and writes row n of the copy. The
// checkpoints go to the caller's pool directly (the kernels round them on write: they need no
// copy), so the problem keeps the caller's state_dtype (fast_forward's contract, fwd_fast.cuh).
void fast_forward_copied_states(const ForwardArgs& f, const Exec& exec, const ChunkForwardConfig& cfg) {
  const Problem& p = f.problem;
  const cudaStream_t s = stream_of(exec);
  const size_t copy = state_copy_bytes(p);
  float* dense = static_cast<float*>(exec.workspace);  // [N, HV, K, V], the pools' layout
  StateRef dense_ref;
  dense_ref.data = dense;
  dense_ref.num_slots = p.num_seqs;
  dense_ref.row_stride = int64_t(p.num_v_heads) * p.head_k * p.head_v;
  ForwardArgs g = f;
  if (f.initial_state.data) {
    gather_states(p, f.initial_state, dense, s);
    g.initial_state = dense_ref;
  }
  if (f.final_state.data) g.final_state = dense_ref;
  Exec inner = exec;
  inner.workspace = static_cast<char*>(exec.workspace) + copy;
  inner.workspace_bytes = exec.workspace_bytes - copy;
  fast_forward(g, inner, cfg);
  if (f.final_state.data) scatter_states(p, dense, f.final_state, s);
}

}  // namespace

size_t stage_workspace_size(const Problem& p, int /*num_threads*/) { return plan_bytes(p.num_tokens, p.num_seqs); }

size_t chunk_gated_delta_rule_workspace_size(const Problem& p, int /*num_threads*/) {
  check_dims("chunk_gated_delta_rule_workspace_size", p);
  if (takes_fast_path(p))
    return state_copy_bytes(p) + fast_workspace_size(p, chunk_forward_heuristics(p, device_props()));
  return exact_ws(p, nullptr, nullptr, nullptr);
}

void chunk_gated_delta_rule(const ForwardArgs& f, const Exec& exec) {
  const Problem& p = f.problem;
  check_dims("chunk_gated_delta_rule", p);
  // The choices are made once: the workspace this call needs follows from the same config.
  const bool fast = takes_fast_path(p);
  const ChunkForwardConfig cfg = fast ? chunk_forward_heuristics(p, device_props()) : ChunkForwardConfig{};
  const size_t need = fast ? state_copy_bytes(p) + fast_workspace_size(p, cfg) : exact_ws(p, nullptr, nullptr, nullptr);
  if (need > 0 && (exec.workspace == nullptr || exec.workspace_bytes < need))
    throw Error("chunk_gated_delta_rule: exec.workspace must hold chunk_gated_delta_rule_workspace_size() bytes");
  if (fast && needs_state_copy(p))
    fast_forward_copied_states(f, exec, cfg);
  else if (fast)
    fast_forward(f, exec, cfg);
  else
    exact_forward(f, exec);
}

void chunk_local_cumsum(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Plan pl = stage_plan("chunk_local_cumsum", p, exec);
  run_cumsum(make_ctx(p, pl, stream_of(exec)), tv(b.g), p.gate_dtype, GPtr{b.G, false});
}

void chunk_scaled_dot_kkt(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Plan pl = stage_plan("chunk_scaled_dot_kkt", p, exec);
  run_kkt(make_ctx(p, pl, stream_of(exec)), tv(b.k), p.dtype, tv(b.beta), p.gate_dtype, GPtr{b.G, false}, b.L);
}

void solve_tril(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Plan pl = stage_plan("solve_tril", p, exec);
  run_solve_tril(make_ctx(p, pl, stream_of(exec)), b.L, b.A);
}

void recompute_w_u(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Plan pl = stage_plan("recompute_w_u", p, exec);
  run_w_u(make_ctx(p, pl, stream_of(exec)), tv(b.k), tv(b.v), p.dtype, tv(b.beta), p.gate_dtype, GPtr{b.G, false}, b.A,
          b.w, b.u);
}

void chunk_fwd_h(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Plan pl = stage_plan("chunk_fwd_h", p, exec);
  run_fwd_h(make_ctx(p, pl, stream_of(exec)), tv(b.k), p.dtype, b.w, b.u, GPtr{b.G, false}, b.initial_state,
            b.final_state, Checkpoints{}, b.h, b.v_new);
}

void chunk_fwd_o(const Problem& p, const StageBuffers& b, const Exec& exec) {
  const Plan pl = stage_plan("chunk_fwd_o", p, exec);
  run_fwd_o(make_ctx(p, pl, stream_of(exec)), tv(b.q), tv(b.k), p.dtype, b.v_new, b.h, GPtr{b.G, false}, b.o.data,
            b.o.stride_token, b.o.stride_head, p.dtype);
}

}  // namespace cuda
}  // namespace gdn
