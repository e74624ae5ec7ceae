// The sequence plan: token boundaries and global chunk numbers of every sequence, computed on the
// device from cu_seqlens (which may be unvalidated device data): boundaries are clamped to
// [0, T] and made monotone, so no later kernel can index outside the tensors.
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kPlanThreads = 1024;

// Inclusive block scan of one value per thread (op: max or sum), Hillis-Steele in shared memory.
template <bool kMax>
__device__ int64_t block_scan_incl(int64_t x, int64_t* sh) {
  const int tid = threadIdx.x;
  sh[tid] = x;
  __syncthreads();
  for (int off = 1; off < kPlanThreads; off <<= 1) {
    const int64_t y = tid >= off ? sh[tid - off] : (kMax ? INT64_MIN : 0);
    __syncthreads();
    if (kMax)
      x = x > y ? x : y;
    else
      x += y;
    sh[tid] = x;
    __syncthreads();
  }
  return x;
}

// One block: bounds[0..N] and chunk_off[0..N]. Each thread owns a contiguous range of sequences.
__global__ void __launch_bounds__(kPlanThreads)
    plan_bounds_kernel(const void* cu, IndexType cu_type, int64_t T, int64_t N, int64_t* bounds, int64_t* chunk_off) {
  __shared__ int64_t sh[kPlanThreads];
  const int64_t items = N + 1;
  const int64_t per = (items + kPlanThreads - 1) / kPlanThreads;
  const int64_t lo = threadIdx.x * per;
  const int64_t hi = lo + per < items ? lo + per : items;
  const int64_t fixed_len = N > 0 ? T / N : 0;
  auto raw = [&](int64_t n) {
    int64_t b = cu ? load_index(cu, cu_type, n) : n * fixed_len;
    return b < 0 ? int64_t(0) : (b > T ? T : b);
  };
  // Pass 1: running max so the boundaries never decrease.
  int64_t m = 0;
  for (int64_t n = lo; n < hi; ++n) m = m > raw(n) ? m : raw(n);
  int64_t incl = block_scan_incl<true>(m, sh);  // leaves each thread's inclusive max in sh
  int64_t run = threadIdx.x > 0 ? sh[threadIdx.x - 1] : 0;
  __syncthreads();
  for (int64_t n = lo; n < hi; ++n) {
    const int64_t b = raw(n);
    run = run > b ? run : b;
    bounds[n] = run;
  }
  __syncthreads();
  // Pass 2: chunk counts, exclusive prefix sum.
  int64_t cnt = 0;
  for (int64_t n = lo; n < hi && n < N; ++n) cnt += (bounds[n + 1] - bounds[n] + kChunkSize - 1) / kChunkSize;
  incl = block_scan_incl<false>(cnt, sh);
  int64_t off = incl - cnt;
  for (int64_t n = lo; n < hi; ++n) {
    chunk_off[n] = off;
    if (n < N) off += (bounds[n + 1] - bounds[n] + kChunkSize - 1) / kChunkSize;
  }
}

// chunk_seq[gc]: the sequence n with chunk_off[n] <= gc < chunk_off[n + 1], or -1.
__global__ void plan_chunks_kernel(const int64_t* chunk_off, int64_t N, int64_t max_chunks, int32_t* chunk_seq) {
  const int64_t gc = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (gc >= max_chunks) return;
  if (gc >= chunk_off[N]) {
    chunk_seq[gc] = -1;
    return;
  }
  int64_t lo = 0, hi = N;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (chunk_off[mid] <= gc)
      lo = mid;
    else
      hi = mid;
  }
  chunk_seq[gc] = static_cast<int32_t>(lo);
}

}  // namespace

size_t plan_bytes(int64_t num_tokens, int64_t num_seqs) {
  const int64_t mc = chunk_bound(num_tokens, num_seqs);
  return 2 * align_up(sizeof(int64_t) * (num_seqs + 1)) + align_up(sizeof(int32_t) * mc);
}

Plan build_plan(const Problem& p, void* ws, cudaStream_t stream) {
  Carver c(ws);
  Plan pl;
  int64_t* bounds = c.take<int64_t>(p.num_seqs + 1);
  int64_t* chunk_off = c.take<int64_t>(p.num_seqs + 1);
  pl.max_chunks = chunk_bound(p.num_tokens, p.num_seqs);
  int32_t* chunk_seq = c.take<int32_t>(pl.max_chunks);
  pl.bounds = bounds;
  pl.chunk_off = chunk_off;
  pl.chunk_seq = chunk_seq;
  pl.num_seqs = p.num_seqs;
  plan_bounds_kernel<<<1, kPlanThreads, 0, stream>>>(p.cu_seqlens, p.cu_seqlens_type, p.num_tokens, p.num_seqs, bounds,
                                                     chunk_off);
  GDN_CUDA_LAUNCH_CHECK("plan_bounds_kernel");
  if (pl.max_chunks > 0) {
    plan_chunks_kernel<<<grid_1d(pl.max_chunks, 256), 256, 0, stream>>>(chunk_off, p.num_seqs, pl.max_chunks,
                                                                        chunk_seq);
    GDN_CUDA_LAUNCH_CHECK("plan_chunks_kernel");
  }
  return pl;
}

}  // namespace cuda
}  // namespace gdn
