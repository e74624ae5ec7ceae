// Exact stage kernels (fp32 on CUDA cores), one block per (chunk, value head) unless noted.
// Correctness first: these are the oracle-grade path (fp32 inputs must stay within 1e-4); the
// fast bf16 tensor-core forward lives in fwd_*.cu.
// Here the gates' chunk-local sums and the 64 x 64 triangular solve; the products over K and V
// (kkt, w_u, fwd_h, fwd_o: any K and V in [1, 256], register-tiled) are in stages_tiled.cu.
#include "cuda/stages/stage_dispatch.cuh"
#include "cuda/stages/stages.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;

// ---- chunk_local_cumsum: one thread per (chunk, hv) ---------------------------------------------
template <typename TG>
__global__ void stage_cumsum_kernel(Plan pl, int HV, TensorView g, DType gdt, TG* __restrict__ G) {
  const int64_t item = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t gc = item / HV;
  const int hv = static_cast<int>(item % HV);
  int64_t n, t0;
  int len;
  if (!chunk_info(pl, gc, n, t0, len)) return;
  TG acc = 0;
  for (int i = 0; i < len; ++i) {
    const int64_t t = t0 + i;
    acc += load_dt(g.p, gdt, t * g.st + hv * g.sh);
    G[t * HV + hv] = acc;
  }
}

// ---- solve_tril: A = (I + L)^-1 by forward substitution, one thread per column -------------------
__global__ void __launch_bounds__(C)
    stage_solve_tril_kernel(Plan pl, int HV, const float* __restrict__ L, float* __restrict__ A) {
  __shared__ float Ls[C][C + 1];
  __shared__ float As[C][C + 1];
  const int64_t gc = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  int64_t n, t0;
  int len;
  if (!chunk_info(pl, gc, n, t0, len)) return;
  const int c = threadIdx.x;
  for (int i = 0; i < C; ++i) Ls[i][c] = i < len ? L[((t0 + i) * HV + hv) * C + c] : 0.f;
  __syncthreads();
  // Column c of A: A[i][c] = delta_ic - sum_{c <= j < i} L[i][j] A[j][c]. Each thread only reads
  // the column it writes, so no barrier is needed inside the loop.
  for (int i = 0; i < C; ++i) {
    float r = 0.f;
    if (i == c) {
      r = 1.f;
    } else if (i > c) {
      for (int j = c; j < i; ++j) r -= Ls[i][j] * As[j][c];
    }
    As[i][c] = r;
  }
  __syncthreads();
  for (int i = 0; i < len; ++i) A[((t0 + i) * HV + hv) * C + c] = As[i][c];
}

}  // namespace

// G is fp32 (the stage API's format) or fp64 (the exact forward: fp32 loses the small decays
// after a large one, since ulp(1e4) ~ 1e-3).
void run_cumsum(const StageCtx& c, TensorView g, DType gdt, GPtr G) {
  const int64_t items = c.pl.max_chunks * c.HV;
  if (items == 0) return;
  if (G.fp64)
    stage_cumsum_kernel<double><<<grid_1d(items, 128), 128, 0, c.s>>>(c.pl, c.HV, g, gdt, static_cast<double*>(G.p));
  else
    stage_cumsum_kernel<float><<<grid_1d(items, 128), 128, 0, c.s>>>(c.pl, c.HV, g, gdt, static_cast<float*>(G.p));
  GDN_CUDA_LAUNCH_CHECK("stage_cumsum_kernel");
}

void run_solve_tril(const StageCtx& c, const float* L, float* A) {
  if (c.pl.max_chunks == 0) return;
  stage_solve_tril_kernel<<<chunk_blocks(c), C, 0, c.s>>>(c.pl, c.HV, L, A);
  GDN_CUDA_LAUNCH_CHECK("stage_solve_tril_kernel");
}

}  // namespace cuda
}  // namespace gdn
