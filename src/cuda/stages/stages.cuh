// The exact (fp32 CUDA-core) stage kernels: the stage API runs them one by one, and the forward
// uses them for the inputs the tensor-core path does not take (fp32 inputs, K != V or K != 128).
#pragma once
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

struct TensorView {  // [T, heads, dim] with element strides
  const void* p;
  int64_t st, sh;
};

// G: fp32 (stage API) or fp64 (the exact forward's own workspace).
struct GPtr {
  void* p;
  bool fp64;
};

struct StageCtx {
  Plan pl;
  int64_t T;
  int H, HV, K, V;
  float scale;
  StateLayout layout;
  DType state_dtype;  // the state pools' element type (fwd_h reads and writes them)
  cudaStream_t s;
};

// G[t, hv] = chunk-local cumulative sum of g (gates of dtype gdt).
void run_cumsum(const StageCtx& c, TensorView g, DType gdt, GPtr G);
// L[t, hv, :] (row of its chunk). k of dtype kdt.
void run_kkt(const StageCtx& c, TensorView k, DType kdt, TensorView beta, DType gdt, GPtr G, float* L);
void run_solve_tril(const StageCtx& c, const float* L, float* A);
void run_w_u(const StageCtx& c, TensorView k, TensorView v, DType kvdt, TensorView beta, DType gdt, GPtr G,
             const float* A, float* w, float* u);
// ck: prefill checkpoints stored after the chunks that end on a boundary (cuda/core/checkpoints.cuh;
// pool.data null for none), in the pools' layout and state_dtype like the final state.
void run_fwd_h(const StageCtx& c, TensorView k, DType kdt, const float* w, const float* u, GPtr G, const StateRef& init,
               const StateRef& fin, const Checkpoints& ck, float* h, float* v_new);
// q, k of dtype qkdt; o of dtype odt with strides (o_st, o_sh).
void run_fwd_o(const StageCtx& c, TensorView q, TensorView k, DType qkdt, const float* v_new, const float* h, GPtr G,
               void* o, int64_t o_st, int64_t o_sh, DType odt);

}  // namespace cuda
}  // namespace gdn
