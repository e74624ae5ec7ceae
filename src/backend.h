// The interface every backend implements. The API layer (src/api.cpp) validates each call and
// normalizes it before it gets here: the problem is in the backend's capability table
// (common/capabilities.h: head sizes, dtypes, layout), strides are explicit (never 0),
// problem.scale is set (never 0), and for the CPU backend cu_seqlens and state indices were
// checked. Backends may
// therefore trust shapes and strides; the CUDA backend must still clamp device-side indices that
// could not be checked on the host (see docs/api.md).
#pragma once

#include "gdn/gdn.h"

#define GDN_BACKEND_OPS                                                                 \
  void l2norm(const L2NormArgs& args, const Exec& exec);                                \
  void chunk_local_cumsum(const Problem& p, const StageBuffers& b, const Exec& exec);   \
  void chunk_scaled_dot_kkt(const Problem& p, const StageBuffers& b, const Exec& exec); \
  void solve_tril(const Problem& p, const StageBuffers& b, const Exec& exec);           \
  void recompute_w_u(const Problem& p, const StageBuffers& b, const Exec& exec);        \
  void chunk_fwd_h(const Problem& p, const StageBuffers& b, const Exec& exec);          \
  void chunk_fwd_o(const Problem& p, const StageBuffers& b, const Exec& exec);          \
  size_t stage_workspace_size(const Problem& p, int num_threads);                       \
  size_t chunk_gated_delta_rule_workspace_size(const Problem& p, int num_threads);      \
  size_t recurrent_gated_delta_rule_workspace_size(const Problem& p, int num_threads);  \
  void chunk_gated_delta_rule(const ForwardArgs& args, const Exec& exec);               \
  void recurrent_gated_delta_rule(const ForwardArgs& args, const Exec& exec);

namespace gdn {
namespace cpu {
GDN_BACKEND_OPS
int resolve_num_threads(int requested);
}  // namespace cpu
#ifdef GDN_WITH_CUDA
namespace cuda {
GDN_BACKEND_OPS
bool device_available();
}  // namespace cuda
#endif
}  // namespace gdn
