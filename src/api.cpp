// The API layer: validate every call (its arguments, and the problem against the backend's
// capability table, common/capabilities.h; nothing is written when one is rejected), normalize
// it, and dispatch to the backend the caller picked.
#include "backend.h"
#include "common/validate.h"

namespace gdn {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "invalid";
}

size_t dtype_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

const char* backend_name(Backend backend) { return backend == Backend::kCUDA ? "cuda" : "cpu"; }

bool cuda_available() {
#ifdef GDN_WITH_CUDA
  return cuda::device_available();
#else
  return false;
#endif
}

// Calls `fn` on the backend's namespace: the one place a runtime backend becomes a code path.
// Every call is validated first, so the backend is built in and the problem is in its table.
#ifdef GDN_WITH_CUDA
#define GDN_DISPATCH(exec, call) ((exec).backend == Backend::kCUDA ? cuda::call : cpu::call)
#else
#define GDN_DISPATCH(exec, call) cpu::call
#endif

size_t chunk_gated_delta_rule_workspace_size(const Problem& problem, const Exec& exec) {
  validate_problem("chunk_gated_delta_rule_workspace_size", problem, exec.backend, Operation::kForward);
  return GDN_DISPATCH(exec, chunk_gated_delta_rule_workspace_size(problem, exec.num_threads));
}

void chunk_gated_delta_rule(const ForwardArgs& args, const Exec& exec) {
  const char* op = "chunk_gated_delta_rule";
  validate_exec(op, exec, 0);
  const ForwardArgs a = validate_forward(op, Operation::kForward, args, exec);
  validate_exec(op, exec, GDN_DISPATCH(exec, chunk_gated_delta_rule_workspace_size(a.problem, exec.num_threads)));
  if (a.problem.num_tokens == 0 && a.final_state.data == nullptr) return;
  GDN_DISPATCH(exec, chunk_gated_delta_rule(a, exec));
}

size_t recurrent_gated_delta_rule_workspace_size(const Problem& problem, const Exec& exec) {
  validate_problem("recurrent_gated_delta_rule_workspace_size", problem, exec.backend, Operation::kDecode);
  return GDN_DISPATCH(exec, recurrent_gated_delta_rule_workspace_size(problem, exec.num_threads));
}

void recurrent_gated_delta_rule(const ForwardArgs& args, const Exec& exec) {
  const char* op = "recurrent_gated_delta_rule";
  validate_exec(op, exec, 0);
  const ForwardArgs a = validate_forward(op, Operation::kDecode, args, exec);
  validate_exec(op, exec, GDN_DISPATCH(exec, recurrent_gated_delta_rule_workspace_size(a.problem, exec.num_threads)));
  if (a.problem.num_tokens == 0 && a.final_state.data == nullptr) return;
  GDN_DISPATCH(exec, recurrent_gated_delta_rule(a, exec));
}

void l2norm(const L2NormArgs& args, const Exec& exec) {
  validate_exec("l2norm", exec, 0);
  const L2NormArgs a = validate_l2norm(args, exec);
  if (a.num_tokens == 0) return;
  GDN_DISPATCH(exec, l2norm(a, exec));
}

size_t stage_workspace_size(const Problem& problem, const Exec& exec) {
  validate_problem("stage_workspace_size", problem, exec.backend, Operation::kStages);
  return GDN_DISPATCH(exec, stage_workspace_size(problem, exec.num_threads));
}

namespace {

// Validate a stage's buffers, check the workspace, and run it unless there is nothing to do.
template <typename Fn>
void run_stage(const char* op, const Problem& p, const StageBuffers& b, unsigned needs, const Exec& exec,
               bool needs_workspace, Fn&& fn) {
  validate_exec(op, exec, 0);
  const StageBuffers s = validate_stage(op, p, b, needs, exec);
  const Problem np = normalize_problem(p);
  if (needs_workspace) validate_exec(op, exec, GDN_DISPATCH(exec, stage_workspace_size(np, exec.num_threads)));
  // With no tokens only chunk_fwd_h has work: final state = initial state.
  if (np.num_tokens == 0 && !(needs & kNeedStates)) return;
  fn(np, s);
}

}  // namespace

void chunk_local_cumsum(const Problem& p, const StageBuffers& b, const Exec& exec) {
  run_stage("chunk_local_cumsum", p, b, kNeedG | kNeedGcum, exec, true,
            [&](const Problem& np, const StageBuffers& s) { GDN_DISPATCH(exec, chunk_local_cumsum(np, s, exec)); });
}

void chunk_scaled_dot_kkt(const Problem& p, const StageBuffers& b, const Exec& exec) {
  run_stage("chunk_scaled_dot_kkt", p, b, kNeedK | kNeedBeta | kNeedGcum | kNeedL, exec, true,
            [&](const Problem& np, const StageBuffers& s) { GDN_DISPATCH(exec, chunk_scaled_dot_kkt(np, s, exec)); });
}

void solve_tril(const Problem& p, const StageBuffers& b, const Exec& exec) {
  run_stage("solve_tril", p, b, kNeedL | kNeedA, exec, true,
            [&](const Problem& np, const StageBuffers& s) { GDN_DISPATCH(exec, solve_tril(np, s, exec)); });
}

void recompute_w_u(const Problem& p, const StageBuffers& b, const Exec& exec) {
  run_stage("recompute_w_u", p, b, kNeedK | kNeedV | kNeedBeta | kNeedGcum | kNeedA | kNeedW | kNeedU, exec, true,
            [&](const Problem& np, const StageBuffers& s) { GDN_DISPATCH(exec, recompute_w_u(np, s, exec)); });
}

void chunk_fwd_h(const Problem& p, const StageBuffers& b, const Exec& exec) {
  run_stage("chunk_fwd_h", p, b, kNeedK | kNeedW | kNeedU | kNeedGcum | kNeedH | kNeedVNew | kNeedStates, exec, true,
            [&](const Problem& np, const StageBuffers& s) { GDN_DISPATCH(exec, chunk_fwd_h(np, s, exec)); });
}

void chunk_fwd_o(const Problem& p, const StageBuffers& b, const Exec& exec) {
  run_stage("chunk_fwd_o", p, b, kNeedQ | kNeedK | kNeedVNew | kNeedH | kNeedGcum | kNeedO, exec, true,
            [&](const Problem& np, const StageBuffers& s) { GDN_DISPATCH(exec, chunk_fwd_o(np, s, exec)); });
}

}  // namespace gdn
