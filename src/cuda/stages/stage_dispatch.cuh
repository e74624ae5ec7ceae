// What the exact stage kernels share: element loads, the dtype dispatch of their launchers, the
// (chunk, value head) grid.
#pragma once
#include "cuda/stages/stages.cuh"

namespace gdn {
namespace cuda {
namespace {

template <typename T>
__device__ __forceinline__ float ld(const void* p, int64_t i) {
  return to_f(static_cast<const T*>(p)[i]);
}

template <typename F>
void by_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32:
      f(float{});
      break;
    case DType::kFloat16:
      f(__half{});
      break;
    case DType::kBFloat16:
      f(__nv_bfloat16{});
      break;
  }
}

// Calls f(T{}, TG{}): the input dtype T, and G's type (fp64 G only with fp32 inputs: the exact forward).
template <typename F>
void by_types(DType dt, GPtr G, F&& f) {
  if (G.fp64)
    f(float{}, double{});
  else
    by_dtype(dt, [&](auto tag) { f(tag, float{}); });
}

inline unsigned chunk_blocks(const StageCtx& c) { return grid_1d(c.pl.max_chunks * c.HV, 1); }

}  // namespace
}  // namespace cuda
}  // namespace gdn
