// Stage 0, l2norm: y = x / sqrt(sum(x^2) + 1e-6) per token and head, in fp32. One warp per row.
// The same kernel also packs (and optionally normalizes) q/k/v into the forward's workspace in
// the dtype its later kernels read (bf16 for the tensor-core path, fp32 for the exact path).
#include "cuda/l2norm.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kWarps = 8;

template <typename Tin, typename Tout>
__global__ void __launch_bounds__(kWarps * 32)
    l2norm_kernel(const Tin* __restrict__ x, int64_t x_st, int64_t x_sh, Tout* __restrict__ y, int64_t y_st,
                  int64_t y_sh, int64_t T, int heads, int dim, bool normalize) {
  const int64_t row = (blockIdx.x * int64_t(kWarps)) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= T * heads) return;
  const int64_t t = row / heads;
  const int h = static_cast<int>(row % heads);
  const Tin* xr = x + t * x_st + h * x_sh;
  Tout* yr = y + t * y_st + h * y_sh;
  float v[8];  // dim <= 256
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = lane + 32 * i;
    v[i] = d < dim ? to_f(xr[d]) : 0.f;
  }
  float inv = 1.f;
  if (normalize) {
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    inv = rsqrtf(ss + 1e-6f);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = lane + 32 * i;
    if (d < dim) yr[d] = from_f<Tout>(v[i] * inv);
  }
}

template <typename Tin, typename Tout>
void launch(const void* x, int64_t x_st, int64_t x_sh, void* y, int64_t y_st, int64_t y_sh, int64_t T, int heads,
            int dim, bool normalize, cudaStream_t s) {
  const int64_t rows = T * heads;
  if (rows == 0) return;
  l2norm_kernel<Tin, Tout><<<grid_1d(rows, kWarps), kWarps * 32, 0, s>>>(
      static_cast<const Tin*>(x), x_st, x_sh, static_cast<Tout*>(y), y_st, y_sh, T, heads, dim, normalize);
  GDN_CUDA_LAUNCH_CHECK("l2norm_kernel");
}

template <typename Tout>
void launch_in(DType in, const void* x, int64_t x_st, int64_t x_sh, void* y, int64_t y_st, int64_t y_sh, int64_t T,
               int heads, int dim, bool normalize, cudaStream_t s) {
  switch (in) {
    case DType::kFloat32:
      return launch<float, Tout>(x, x_st, x_sh, y, y_st, y_sh, T, heads, dim, normalize, s);
    case DType::kFloat16:
      return launch<__half, Tout>(x, x_st, x_sh, y, y_st, y_sh, T, heads, dim, normalize, s);
    case DType::kBFloat16:
      return launch<__nv_bfloat16, Tout>(x, x_st, x_sh, y, y_st, y_sh, T, heads, dim, normalize, s);
  }
}

}  // namespace

void convert_rows(DType in, DType out, const void* x, int64_t x_st, int64_t x_sh, void* y, int64_t y_st, int64_t y_sh,
                  int64_t T, int heads, int dim, bool normalize, cudaStream_t s) {
  if (dim > 256) throw Error("gdn cuda l2norm: dim must be <= 256");
  switch (out) {
    case DType::kFloat32:
      return launch_in<float>(in, x, x_st, x_sh, y, y_st, y_sh, T, heads, dim, normalize, s);
    case DType::kFloat16:
      return launch_in<__half>(in, x, x_st, x_sh, y, y_st, y_sh, T, heads, dim, normalize, s);
    case DType::kBFloat16:
      return launch_in<__nv_bfloat16>(in, x, x_st, x_sh, y, y_st, y_sh, T, heads, dim, normalize, s);
  }
}

void l2norm(const L2NormArgs& a, const Exec& exec) {
  convert_rows(a.dtype, a.dtype, a.x.data, a.x.stride_token, a.x.stride_head, a.y.data, a.y.stride_token,
               a.y.stride_head, a.num_tokens, a.num_heads, a.dim, true, stream_of(exec));
}

}  // namespace cuda
}  // namespace gdn
