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

// A block of that grid: its chunk gc and value head hv, hv's q / k head hk, and where the chunk
// lives (chunk_info: sequence n, first token t0, valid rows len). False for a block past the
// plan's chunks (it returns at once).
struct ChunkHead {
  int64_t gc, n, t0;
  int hv, hk, len;
};
__device__ __forceinline__ bool chunk_head(const Plan& pl, int H, int HV, ChunkHead& c) {
  c.gc = blockIdx.x / HV;
  c.hv = static_cast<int>(blockIdx.x % HV);
  c.hk = qk_head_of(c.hv, HV, H);
  return chunk_info(pl, c.gc, c.n, c.t0, c.len);
}

}  // namespace
}  // namespace cuda
}  // namespace gdn
