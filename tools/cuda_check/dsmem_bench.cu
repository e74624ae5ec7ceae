// What one exchange through distributed shared memory costs beside a chain (docs/perf.md, the
// K = 256 cluster pair: per chunk each CTA of a pair hands its peer a 64 x 64 fp32 partial product,
// 16 KB, 32 floats a thread of a warpgroup, and adds the peer's). Clusters of two CTAs of one
// warpgroup each, one CTA per SM: per iteration every thread writes its 32 floats to its CTA's
// shared memory (two buffers, alternating), the cluster barrier, then it reads the peer's 32 and
// folds them into its own (a dependent chain: the next write needs them). Beside it the same loop
// with the peer's buffer replaced by its own CTA's (a block barrier, local reads): the difference
// is the cluster's share. The chain's chunk takes ~2.2 us at D = 128.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "check.h"
#include "cuda/core/device.h"
#include "cuda/ptx/copy.cuh"
#include "cuda/ptx/sync.cuh"

namespace gdn {
namespace check {
namespace {

constexpr int kThreads = 128;
constexpr int kVec = 8;  // float4 a thread: 32 floats

// a = (a + p) / 2: the next write depends on what was read.
__device__ __forceinline__ void fold(float4& a, const float4& p) {
  a = make_float4(0.5f * (a.x + p.x), 0.5f * (a.y + p.y), 0.5f * (a.z + p.z), 0.5f * (a.w + p.w));
}

template <bool kCluster>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    dsmem_exchange_kernel(int iters, float* __restrict__ out, long long* __restrict__ cycles) {
  __shared__ float4 part[2][kVec][kThreads];  // [buffer][piece][thread]: 2 x 16 KB
  const int tid = threadIdx.x;
  float4 acc[kVec];
  for (int x = 0; x < kVec; ++x) acc[x] = make_float4(tid + x, blockIdx.x, 1.f, 2.f);
  const uint32_t peer = cuda::cluster_ctarank() ^ 1u;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    float4(*mine)[kThreads] = part[it & 1];
    for (int x = 0; x < kVec; ++x) mine[x][tid] = acc[x];
    if constexpr (kCluster) {
      cuda::cluster_arrive();
      cuda::cluster_wait();
      const uint32_t src = cuda::map_shared_rank(cuda::smem_u32(&mine[0][tid]), peer);
#pragma unroll
      for (int x = 0; x < kVec; ++x) {
        const uint4 p = cuda::ld_shared_cluster16(src + x * kThreads * 16);
        fold(acc[x],
             make_float4(__uint_as_float(p.x), __uint_as_float(p.y), __uint_as_float(p.z), __uint_as_float(p.w)));
      }
    } else {
      __syncthreads();
#pragma unroll
      for (int x = 0; x < kVec; ++x) fold(acc[x], mine[x][tid ^ 32]);  // another warp's: the barrier orders it
    }
  }
  const long long t1 = clock64();
  float s = 0.f;
  for (int x = 0; x < kVec; ++x) s += acc[x].x + acc[x].y + acc[x].z + acc[x].w;
  out[blockIdx.x * kThreads + tid] = s;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
  if constexpr (kCluster) {  // the peer may still read this CTA's buffers
    cuda::cluster_arrive();
    cuda::cluster_wait();
  }
}

template <bool kCluster>
void time_exchange(int ctas, int iters, float* out, long long* cycles) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  dsmem_exchange_kernel<kCluster><<<ctas, kThreads>>>(iters / 10, out, cycles);  // warm-up
  CK(cudaEventRecord(e0));
  dsmem_exchange_kernel<kCluster><<<ctas, kThreads>>>(iters, out, cycles);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaGetLastError());
  float ms = 0.f;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  std::vector<long long> c(ctas);
  CK(cudaMemcpy(c.data(), cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(c.begin(), c.end());
  std::printf("dsmem %-28s %6.1f ns an iteration (events), %6.0f cycles (median CTA)\n",
              kCluster ? "cluster pair, peer's 16 KB" : "one CTA, its own 16 KB", 1e6 * ms / iters,
              double(c[ctas / 2]) / iters);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
}

}  // namespace

void bench_dsmem_exchange() {
  const int ctas = 2 * (cuda::device_props().sms / 2), iters = 20000;
  float* out;
  long long* cycles;
  CK(cudaMalloc(&out, ctas * kThreads * sizeof(float)));
  CK(cudaMalloc(&cycles, ctas * sizeof(long long)));
  time_exchange<false>(ctas, iters, out, cycles);
  time_exchange<true>(ctas, iters, out, cycles);
  CK(cudaFree(out));
  CK(cudaFree(cycles));
}

}  // namespace check
}  // namespace gdn
