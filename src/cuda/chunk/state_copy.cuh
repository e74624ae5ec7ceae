// bf16 / fp16 state pools on the tensor-core forward. Its fwd_h kernel (fwd_h_wgmma.cuh) reads
// and writes fp32 rows; rather than instantiating them per pool type, the
// launcher (backend.cu) copies the initial rows into a dense fp32 buffer [N, HV, K, V] (the
// layout kept, row n for sequence n, zeros for a sequence without an initial state), runs the
// forward on it, and writes the final rows back with one rounding. The buffer sits at the front of
// the forward's workspace (state_copy_bytes; 0 for fp32 pools, which the kernels read in place).
#pragma once

#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

bool needs_state_copy(const Problem& p);
size_t state_copy_bytes(const Problem& p);  // 256-byte aligned: the forward's workspace follows

// dense[n] = the row that state_row(pool, n) names, converted to fp32 (zeros when none).
void gather_states(const Problem& p, const StateRef& pool, float* dense, cudaStream_t s);  // dense: [N, HV, K, V]
// pool row state_row(pool, n) = dense[n], rounded to p.state_dtype, for every n that has one.
void scatter_states(const Problem& p, const float* dense, const StateRef& pool, cudaStream_t s);

}  // namespace cuda
}  // namespace gdn
