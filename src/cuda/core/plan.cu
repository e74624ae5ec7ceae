// The sequence plan: token boundaries and global chunk numbers of every sequence, computed on the
// device from cu_seqlens (which may be unvalidated device data): boundaries are clamped to
// [0, T] and made monotone, so no later kernel can index outside the tensors.
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kPlanThreads = 1024;  // 32 warps
// The longest-first order sorts the sequences by chunk count into this many buckets (counts past
// the last share it: sequences of 65k tokens and more), one per thread.
constexpr int kOrderBuckets = kPlanThreads;

// Block scan of one value per thread (op: max or sum; every value >= 0, so 0 is the identity of
// both): shuffles within each warp, then one warp scans the 32 warp totals (`part`, 32 entries in
// shared memory). Returns the inclusive scan; `excl` gets the exclusive one. Three barriers.
template <bool kMax>
__device__ int64_t block_scan(int64_t x, int64_t* part, int64_t& excl) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto op = [](int64_t a, int64_t b) { return kMax ? (a > b ? a : b) : a + b; };
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x = op(x, y);
  }
  int64_t before = __shfl_up_sync(0xffffffffu, x, 1);  // the warp's exclusive scan (lane 0: none)
  if (lane == 31) part[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int64_t p = part[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t y = __shfl_up_sync(0xffffffffu, p, o);
      if (lane >= o) p = op(p, y);
    }
    part[lane] = p;
  }
  __syncthreads();
  const int64_t prefix = warp > 0 ? part[warp - 1] : 0;
  excl = lane > 0 ? op(before, prefix) : prefix;
  __syncthreads();  // part can be reused
  return op(x, prefix);
}

// Chunks of the tokens [b0, b1).
__device__ int64_t chunks_between(int64_t b0, int64_t b1) { return (b1 - b0 + kChunkSize - 1) / kChunkSize; }

// The longest-first order (Plan::longest_first) of the N sequences with boundaries bounds[0..N] and
// first chunks chunk_off[0..N) (this block's stores, before a barrier): a counting sort of their chunk counts into
// kOrderBuckets buckets, the longest bucket first; within a bucket in the order the atomics come
// (the order decides only which blocks compute a sequence, never what they compute), and the
// identity where all fall in one bucket (equal lengths keep their blocks in order). Each thread
// takes its own sequences [lo, hi) and one bucket; `part` as block_scan's.
__device__ void sort_longest_first(const int64_t* bounds, const int64_t* chunk_off, int64_t N, int64_t lo, int64_t hi,
                                   int64_t* part, OrderedSeq* longest_first) {
  __shared__ int bucket_next[kOrderBuckets];
  __shared__ bool one_bucket;  // every sequence in one bucket: the identity
  auto bucket_of = [&](int64_t n) {
    const int64_t count = chunks_between(bounds[n], bounds[n + 1]);
    return static_cast<int>(count < kOrderBuckets ? count : kOrderBuckets - 1);
  };
  bucket_next[threadIdx.x] = 0;
  if (threadIdx.x == 0) one_bucket = false;
  __syncthreads();
  for (int64_t n = lo; n < hi && n < N; ++n) atomicAdd(&bucket_next[bucket_of(n)], 1);
  __syncthreads();
  if (N > 0 && bucket_next[threadIdx.x] == N) one_bucket = true;  // (one bucket can: one writer)
  {
    // Thread i takes bucket kOrderBuckets - 1 - i: the exclusive sum over the longer buckets.
    const int b = kOrderBuckets - 1 - static_cast<int>(threadIdx.x);
    int64_t first;
    block_scan<false>(bucket_next[b], part, first);  // (its barriers order the reads before the writes)
    bucket_next[b] = static_cast<int>(first);
  }
  __syncthreads();
  for (int64_t n = lo; n < hi && n < N; ++n)
    longest_first[one_bucket ? n : atomicAdd(&bucket_next[bucket_of(n)], 1)] = {bounds[n], bounds[n + 1], chunk_off[n],
                                                                                n};
}

// One block, one launch: bounds[0..N], chunk_off[0..N], chunk_seq[0..max_chunks) and, unless null,
// longest_first[0..N). Each thread owns a contiguous range [lo, hi) of the N + 1 boundaries.
__global__ void __launch_bounds__(kPlanThreads, 1)
    plan_kernel(const void* cu, IndexType cu_type, int64_t T, int64_t N, int64_t max_chunks, int64_t* bounds,
                int64_t* chunk_off, int32_t* chunk_seq, int64_t* chunk_rows, OrderedSeq* longest_first) {
  __shared__ int64_t part[32];
  const int64_t items = N + 1;
  const int64_t per = (items + kPlanThreads - 1) / kPlanThreads;
  const int64_t lo = threadIdx.x * per;
  const int64_t hi = lo + per < items ? lo + per : items;
  const int64_t fixed_len = N > 0 ? T / N : 0;
  auto raw = [&](int64_t n) {
    int64_t b = cu ? load_index(cu, cu_type, n) : n * fixed_len;
    return b < 0 ? int64_t(0) : (b > T ? T : b);
  };
  // Pass 1: the boundaries made monotone by a running max, from the ranges before this one.
  int64_t m = 0;
  for (int64_t n = lo; n < hi; ++n) m = m > raw(n) ? m : raw(n);
  int64_t run;
  const int64_t run_end = block_scan<true>(m, part, run);
  // Pass 2: chunk counts (the boundary after this range, bounds[hi], is max(run_end, raw(hi))),
  // their exclusive prefix sum.
  int64_t cnt = 0;
  {
    int64_t b = run;
    for (int64_t n = lo; n < hi; ++n) {
      const int64_t r = raw(n);
      const int64_t bn = b > r ? b : r;
      bounds[n] = bn;
      if (n > lo) cnt += chunks_between(b, bn);
      b = bn;
    }
    if (hi > lo && hi < items) {
      const int64_t r = raw(hi);
      cnt += chunks_between(b, run_end > r ? run_end : r);
    }
  }
  int64_t off;
  block_scan<false>(cnt, part, off);
  for (int64_t n = lo; n < hi; ++n) {
    chunk_off[n] = off;
    if (n + 1 < hi) off += chunks_between(bounds[n], bounds[n + 1]);  // this thread's own stores
  }
  __syncthreads();  // chunk_off complete (global memory, visible to the block after the barrier)
  // The longest-first order, where wanted (the whole block skips it otherwise).
  if (longest_first != nullptr) sort_longest_first(bounds, chunk_off, N, lo, hi, part, longest_first);
  // Pass 3: chunk_seq[gc] = the sequence n with chunk_off[n] <= gc < chunk_off[n + 1], or -1.
  const int64_t total = chunk_off[N];
  for (int64_t gc = threadIdx.x; gc < max_chunks; gc += kPlanThreads) {
    if (gc >= total) {
      chunk_seq[gc] = -1;
      chunk_rows[gc] = 0;
      continue;
    }
    int64_t a = 0, z = N;  // answer in [a, z)
    while (z - a > 1) {
      const int64_t mid = (a + z) / 2;
      if (chunk_off[mid] <= gc)
        a = mid;
      else
        z = mid;
    }
    chunk_seq[gc] = static_cast<int32_t>(a);
    static_assert(kChunkSize < 128, "len takes the word's low 7 bits");
    const int64_t t0 =
        bounds[a] + (gc - chunk_off[a]) * kChunkSize;  // (bounds: this block's stores, before the barrier)
    const int64_t rem = bounds[a + 1] - t0;
    chunk_rows[gc] = t0 * 128 + (rem < kChunkSize ? rem : kChunkSize);
  }
}

}  // namespace

size_t plan_bytes(int64_t num_tokens, int64_t num_seqs) {
  const int64_t mc = chunk_bound(num_tokens, num_seqs);
  return 2 * align_up(sizeof(int64_t) * (num_seqs + 1)) + align_up(sizeof(int32_t) * mc) +
         align_up(sizeof(int64_t) * mc) + align_up(sizeof(OrderedSeq) * num_seqs);
}

Plan build_plan(const Problem& p, void* ws, cudaStream_t stream, bool longest_first) {
  Carver c(ws);
  Plan pl;
  int64_t* bounds = c.take<int64_t>(p.num_seqs + 1);
  int64_t* chunk_off = c.take<int64_t>(p.num_seqs + 1);
  pl.max_chunks = chunk_bound(p.num_tokens, p.num_seqs);
  int32_t* chunk_seq = c.take<int32_t>(pl.max_chunks);
  int64_t* chunk_rows = c.take<int64_t>(pl.max_chunks);
  OrderedSeq* order = c.take<OrderedSeq>(p.num_seqs);
  pl.bounds = bounds;
  pl.chunk_off = chunk_off;
  pl.chunk_seq = chunk_seq;
  pl.chunk_rows = chunk_rows;
  if (!longest_first) order = nullptr;  // (the plan kernel skips the sort)
  pl.longest_first = order;
  pl.num_seqs = p.num_seqs;
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(p.cu_seqlens, p.cu_seqlens_type, p.num_tokens, p.num_seqs, pl.max_chunks,
                                              bounds, chunk_off, chunk_seq, chunk_rows, order);
  GDN_CUDA_LAUNCH_CHECK("plan_kernel");
  return pl;
}

}  // namespace cuda
}  // namespace gdn
