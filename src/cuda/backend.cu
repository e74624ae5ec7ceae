// gdn::cuda entry points: device discovery, workspace sizes, the stage API (exact kernels of
// stages.cu) and the composed forward. With K = V = 128 or 64 the forward takes the tensor-core
// path (fwd_fast.cu): in place for bf16 / fp16 inputs (q, k and o in the dtype of v), and through
// 16-bit copies otherwise (fp32 inputs, and mixed dtypes: fp16 copies without bf16, bf16 copies
// with it). Every other head size in [1, 256] (the stages mask the columns past V) chains the
// exact stage kernels (each tensor read or written in its own dtype; the work is fp32).
#include "backend.h"
#include "cuda/chunk/fwd_fast.cuh"
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

// The tensor-core forward reads q, k, v and writes o in one dtype: with q/k or o in another, it
// runs on 16-bit copies (copies_dtype) or the exact path runs.
bool takes_fast_path(const Problem& p) {
  return qk_dtype_of(p) == p.dtype && o_dtype_of(p) == p.dtype && fast_path_supported(p);
}

// The dtype of the copies that a problem off the in-place path runs on. fp16 where no input is
// bf16: fp32 inputs then run at tf32's precision class (fp16 operands carry tf32's 11-bit
// significand, so SPEC section 4's tf32 bound, 2e-3, applies) at the fp16 path's speed (H200, 1x32k:
// the exact stages 94 ms and fla 6.2 in bench/results/h200_fp32.json, the copies 1.44 in
// bench/results/h200_s35_call2_summary.txt).
// The range is fp16's: v, o and the states' operands past ~6e4 overflow (docs/api.md). With a
// bf16 input, bf16 copies: its range stays, and the error is the bf16 class that the coarser input
// is held to anyway.
DType copies_dtype(const Problem& p) {
  return p.dtype == DType::kBFloat16 || qk_dtype_of(p) == DType::kBFloat16 ? DType::kBFloat16 : DType::kFloat16;
}
// Whether q and k are copied (and then l2-normalized in fp32 by their copies, so the inner forward
// normalizes nothing); q and k already in the copies' dtype are read in place.
bool copies_qk(const Problem& p) { return qk_dtype_of(p) != copies_dtype(p); }

// The problem that the copies run as: one 16-bit dtype for q, k, v and o.
Problem copies_problem(const Problem& p) {
  Problem h = p;
  h.dtype = copies_dtype(p);
  h.qk_dtype.reset();
  h.o_dtype.reset();
  if (copies_qk(p)) h.use_qk_l2norm = false;
  return h;  // (gate_dtype stays: fp32 or the caller's input dtype; the kernels read either)
}

bool takes_copies(const Problem& p) { return !takes_fast_path(p) && fast_path_supported(copies_problem(p)); }

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

// The rest of exec's workspace past its first `used` bytes (what an inner step runs in).
Exec workspace_after(const Exec& exec, size_t used) {
  Exec rest = exec;
  rest.workspace = static_cast<char*>(exec.workspace) + used;
  rest.workspace_bytes = exec.workspace_bytes - used;
  return rest;
}

// The copies' workspace (copies_problem's dtype), then the inner forward's (fast_workspace_size of
// copies_problem). A null pointer: that tensor is read or written in place.
struct Copies {
  void *q, *k, *v, *o;  // [T, H, K], [T, H, K], [T, HV, V], [T, HV, V]
};
size_t copies_ws(const Problem& p, void* base, Copies* out) {
  const int64_t T = p.num_tokens, H = p.num_qk_heads, HV = p.num_v_heads, K = p.head_k, V = p.head_v;
  const DType e = copies_dtype(p);
  Carver c(base);
  Copies w;
  // (2-byte elements either way: uint16_t carves them.)
  w.q = copies_qk(p) ? c.take<uint16_t>(T * H * K) : nullptr;
  w.k = copies_qk(p) ? c.take<uint16_t>(T * H * K) : nullptr;
  w.v = p.dtype != e ? c.take<uint16_t>(T * HV * V) : nullptr;
  w.o = o_dtype_of(p) != e ? c.take<uint16_t>(T * HV * V) : nullptr;
  if (out) *out = w;
  return c.used;
}

void copies_forward(const ForwardArgs& f, const Exec& exec, const ChunkForwardConfig& cfg) {
  const Problem& p = f.problem;
  const cudaStream_t s = stream_of(exec);
  const int64_t T = p.num_tokens;
  const int H = p.num_qk_heads, HV = p.num_v_heads, K = p.head_k, V = p.head_v;
  const DType e = copies_dtype(p);
  Copies w;
  const size_t used = copies_ws(p, exec.workspace, &w);
  ForwardArgs h = f;
  h.problem = copies_problem(p);
  if (w.q) {
    const DType qk = qk_dtype_of(p);
    convert_rows(qk, e, f.q.data, f.q.stride_token, f.q.stride_head, w.q, int64_t(H) * K, K, T, H, K, p.use_qk_l2norm,
                 s);
    convert_rows(qk, e, f.k.data, f.k.stride_token, f.k.stride_head, w.k, int64_t(H) * K, K, T, H, K, p.use_qk_l2norm,
                 s);
    h.q = ConstTensor{w.q, int64_t(H) * K, K};
    h.k = ConstTensor{w.k, int64_t(H) * K, K};
  }
  if (w.v) {
    convert_rows(p.dtype, e, f.v.data, f.v.stride_token, f.v.stride_head, w.v, int64_t(HV) * V, V, T, HV, V, false, s);
    h.v = ConstTensor{w.v, int64_t(HV) * V, V};
  }
  if (w.o) h.o = MutTensor{w.o, int64_t(HV) * V, V};
  fast_forward(h, workspace_after(exec, used), cfg);
  if (w.o)
    convert_rows(e, o_dtype_of(p), w.o, int64_t(HV) * V, V, f.o.data, f.o.stride_token, f.o.stride_head, T, HV, V,
                 false, s);
}

// The forward's path and its workspace, from one place (the size query and the call agree).
enum class ForwardPath { kFast, kCopies, kExact };
struct ForwardPlan {
  ForwardPath path = ForwardPath::kExact;
  ChunkForwardConfig cfg;  // of the problem the tensor-core forward runs (copies_problem for copies)
  size_t workspace = 0;
};
ForwardPlan plan_forward(const Problem& p) {
  ForwardPlan fp;
  if (takes_fast_path(p)) {
    fp.path = ForwardPath::kFast;
    fp.cfg = chunk_forward_heuristics(p, device_props());
    fp.workspace = fast_workspace_size(p, fp.cfg);
  } else if (takes_copies(p)) {
    const Problem h = copies_problem(p);
    fp.path = ForwardPath::kCopies;
    fp.cfg = chunk_forward_heuristics(h, device_props());
    fp.workspace = copies_ws(p, nullptr, nullptr) + fast_workspace_size(h, fp.cfg);
  } else {
    fp.workspace = exact_ws(p, nullptr, nullptr, nullptr);
  }
  return fp;
}

}  // namespace

size_t stage_workspace_size(const Problem& p, int /*num_threads*/) { return plan_bytes(p.num_tokens, p.num_seqs); }

size_t chunk_gated_delta_rule_workspace_size(const Problem& p, int /*num_threads*/) {
  check_dims("chunk_gated_delta_rule_workspace_size", p);
  return plan_forward(p).workspace;
}

void chunk_gated_delta_rule(const ForwardArgs& f, const Exec& exec) {
  const Problem& p = f.problem;
  check_dims("chunk_gated_delta_rule", p);
  // The choices are made once: the workspace this call needs follows from the same config.
  const ForwardPlan fp = plan_forward(p);
  if (fp.workspace > 0 && (exec.workspace == nullptr || exec.workspace_bytes < fp.workspace))
    throw Error("chunk_gated_delta_rule: exec.workspace must hold chunk_gated_delta_rule_workspace_size() bytes");
  switch (fp.path) {
    case ForwardPath::kFast:
      return fast_forward(f, exec, fp.cfg);
    case ForwardPath::kCopies:
      return copies_forward(f, exec, fp.cfg);
    case ForwardPath::kExact:
      return exact_forward(f, exec);
  }
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
