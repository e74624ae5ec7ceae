// Stage 0, l2norm: y = x / sqrt(sum(x^2) + eps) per token and head (eps: spec::kL2NormEps), in
// fp32. One warp per row.
// The same kernel also packs (and optionally normalizes) q/k/v into the forward's workspace in
// the dtype its later kernels read (bf16 for the tensor-core path, fp32 for the exact path).
#include "cuda/stages/l2norm.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kWarps = 8;

template <typename Tin, typename Tout>
__global__ void __launch_bounds__(kWarps * 32)
    stage_l2norm_kernel(const Tin* __restrict__ x, int64_t x_st, int64_t x_sh, Tout* __restrict__ y, int64_t y_st,
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
    warp_sum(ss);
    inv = rsqrtf(ss + float(spec::kL2NormEps));
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = lane + 32 * i;
    if (d < dim) yr[d] = from_f<Tout>(v[i] * inv);
  }
}

// Eight consecutive elements of a row as fp32 (one 16-byte load for 16-bit types, two for fp32).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* f) {
  if constexpr (sizeof(T) == 4) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    const uint4 r = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = to_f(e[i]);
  }
}
template <typename T>
__device__ __forceinline__ void store8(T* p, const float* f) {
  if constexpr (sizeof(T) == 4) {
    reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
  } else {
    uint4 r;
    T* e = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = from_f<T>(f[i]);
    *reinterpret_cast<uint4*>(p) = r;
  }
}

// The same for rows whose pieces of 8 elements are 16-byte aligned (the common case): LPR = dim / 8
// lanes per row, 8 elements per lane, 32 / LPR rows per warp; fewer instructions per byte, so the
// packing runs at memory speed.
template <typename Tin, typename Tout, int LPR>
__global__ void __launch_bounds__(kWarps * 32)
    stage_l2norm_vec_kernel(const Tin* __restrict__ x, int64_t x_st, int64_t x_sh, Tout* __restrict__ y, int64_t y_st,
                            int64_t y_sh, int64_t T, int heads, bool normalize) {
  constexpr int kRowsPerWarp = 32 / LPR;
  const int lane = threadIdx.x % 32;
  const int64_t row = (blockIdx.x * int64_t(kWarps) + threadIdx.x / 32) * kRowsPerWarp + lane / LPR;
  const bool valid = row < T * heads;
  const int64_t t = valid ? row / heads : 0;
  const int h = valid ? static_cast<int>(row % heads) : 0;
  const int d0 = 8 * (lane % LPR);
  float v[8];
  if (valid) {
    load8(x + t * x_st + h * x_sh + d0, v);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0.f;
  }
  float inv = 1.f;
  if (normalize) {
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
    warp_sum<LPR>(ss);
    inv = rsqrtf(ss + float(spec::kL2NormEps));
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] *= inv;
  if (valid) store8(y + t * y_st + h * y_sh + d0, v);
}

template <typename Tin, typename Tout, int LPR>
void launch_vec(const void* x, int64_t x_st, int64_t x_sh, void* y, int64_t y_st, int64_t y_sh, int64_t T, int heads,
                bool normalize, cudaStream_t s) {
  const int64_t rows = T * heads;
  stage_l2norm_vec_kernel<Tin, Tout, LPR><<<grid_1d(rows, kWarps * (32 / LPR)), kWarps * 32, 0, s>>>(
      static_cast<const Tin*>(x), x_st, x_sh, static_cast<Tout*>(y), y_st, y_sh, T, heads, normalize);
  GDN_CUDA_LAUNCH_CHECK("stage_l2norm_vec_kernel");
}

template <typename Tin, typename Tout>
void launch(const void* x, int64_t x_st, int64_t x_sh, void* y, int64_t y_st, int64_t y_sh, int64_t T, int heads,
            int dim, bool normalize, cudaStream_t s) {
  const int64_t rows = T * heads;
  if (rows == 0) return;
  auto aligned = [](const void* p, int64_t st, int64_t sh, size_t elem) {
    const int64_t per16 = static_cast<int64_t>(16 / elem);  // elements per 16 bytes
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && st % per16 == 0 && sh % per16 == 0;
  };
  if (aligned(x, x_st, x_sh, sizeof(Tin)) && aligned(y, y_st, y_sh, sizeof(Tout)) &&
      (dim == 64 || dim == 128 || dim == 256)) {
    if (dim == 64) return launch_vec<Tin, Tout, 8>(x, x_st, x_sh, y, y_st, y_sh, T, heads, normalize, s);
    if (dim == 128) return launch_vec<Tin, Tout, 16>(x, x_st, x_sh, y, y_st, y_sh, T, heads, normalize, s);
    return launch_vec<Tin, Tout, 32>(x, x_st, x_sh, y, y_st, y_sh, T, heads, normalize, s);
  }
  stage_l2norm_kernel<Tin, Tout><<<grid_1d(rows, kWarps), kWarps * 32, 0, s>>>(
      static_cast<const Tin*>(x), x_st, x_sh, static_cast<Tout*>(y), y_st, y_sh, T, heads, dim, normalize);
  GDN_CUDA_LAUNCH_CHECK("stage_l2norm_kernel");
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
