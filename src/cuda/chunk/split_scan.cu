// The exact split's scan (chunk/split.cuh): the state at the start of every part of a sequence,
// from the parts' affine summaries, sequentially over the parts:
//   S_1 = (part 0's end state, run from the sequence's initial state by the summary pass)
//   S_{p+1} = M_p S_p + B_p,  p = 1 .. parts - 2
// in fp32 (M_p [K x K] and B_p [K x V] come from the wgmma chain's fp32 accumulators).
//
// One block of 256 threads per (sequence, value head, 16 columns of V): 8 blocks per head, so that
// the tensor-parallel slices (4 or 8 value heads, 8-16 parts) still spread over 32-64 SMs; the scan
// is a serial chain of small products, latency-bound. M_p (64 KB) does not depend on the scan, so
// the block copies M_{p+1} into the second of two shared buffers (cp.async) while it multiplies by
// M_p. Rows are padded by 4 floats: 16-byte aligned for cp.async, and the float4 reads of a
// quarter warp (4 rows, 2 threads per row) fall in 16 distinct banks. Thread (row = tid / 2,
// half = tid % 2) accumulates 8 columns of row `row` over the 128 terms in order (j = 0 .. 127,
// one fma each, from B_p): the same sums in the same order for every column slicing. S_{p+1} goes
// to global memory (the chain's initial state of part p + 1) and replaces S_p in shared memory.
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/ptx/copy.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kD = 128;                                                    // K = V
constexpr int kCols = 16;                                                  // columns of V per block
constexpr int kThreads = 256;                                              // 2 threads per row of S
constexpr int kColsPerThread = kCols / 2;                                  // 8
constexpr int kMStride = kD + 4;                                           // floats per row of M in shared memory
constexpr int kMFloats = kD * kMStride;                                    // one M buffer
constexpr size_t kScanSmem = sizeof(float) * (2 * kMFloats + kD * kCols);  // 143,360 B

__global__ void __launch_bounds__(kThreads) chunk_split_scan_kernel(Plan pl, SplitBufs sp, int HV) {
  extern __shared__ __align__(16) float scan_smem[];
  float* Xs = scan_smem + 2 * kMFloats;  // [128][kCols]: the slice of S_p
  const int slices = kD / kCols;
  const int64_t item = blockIdx.x;
  const int c0 = static_cast<int>(item % slices) * kCols;
  const int hv = static_cast<int>((item / slices) % HV);
  const int64_t n = item / (int64_t(slices) * HV);
  const int64_t count = seq_chunks(pl, n).count;
  const int64_t parts = split_parts_of(count, sp.chunks_per_part, sp.max_parts, sp.first_part_chunks);
  const int tid = threadIdx.x, row = tid / 2, col = kColsPerThread * (tid % 2);
  const int64_t DD = int64_t(kD) * kD;
  auto part_base = [&](float* a, int64_t p) { return a + ((n * sp.max_parts + p) * HV + hv) * DD; };
  // M_p [128, 128] -> buffer (p - 1) % 2, as this thread's cp.async group.
  auto copy_m = [&](int64_t p) {
    const float* m = part_base(sp.summary_m, p);
    float* dst = scan_smem + ((p - 1) & 1) * kMFloats;
    for (int i = tid; i < kD * kD / 4; i += kThreads) {
      const int r = i / (kD / 4), q = i % (kD / 4);
      cp_async16(dst + r * kMStride + 4 * q, m + int64_t(r) * kD + 4 * q);
    }
    cp_async_commit();
  };

  if (parts < 3) return;  // S_1 is written by the summary pass; nothing to chain
  copy_m(1);
  // S_1's slice -> shared memory.
  {
    const float* x = part_base(sp.part_state, 1);
    for (int i = tid; i < kD * kCols / 4; i += kThreads) {
      const int r = i / (kCols / 4), q = i % (kCols / 4);
      *reinterpret_cast<float4*>(Xs + r * kCols + 4 * q) =
          *reinterpret_cast<const float4*>(x + int64_t(r) * kD + c0 + 4 * q);
    }
  }
  for (int64_t p = 1; p + 1 < parts; ++p) {
    float acc[kColsPerThread];  // B_p's 8 columns of `row`, read before waiting for M_p
    {
      const float* bp = part_base(sp.summary_b, p) + int64_t(row) * kD + c0 + col;
#pragma unroll
      for (int q = 0; q < kColsPerThread / 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(bp + 4 * q);
        acc[4 * q] = v.x;
        acc[4 * q + 1] = v.y;
        acc[4 * q + 2] = v.z;
        acc[4 * q + 3] = v.w;
      }
    }
    if (p + 2 < parts) {
      copy_m(p + 1);  // into the buffer read in step p - 1 (every read of it ended at its barrier)
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // M_p (every thread's copies) and S_p complete
    const float* mrow = scan_smem + ((p - 1) & 1) * kMFloats + row * kMStride;
#pragma unroll 2
    for (int j = 0; j < kD; j += 4) {
      const float4 m4 = *reinterpret_cast<const float4*>(mrow + j);
      const float mj[4] = {m4.x, m4.y, m4.z, m4.w};
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const float* xr = Xs + (j + jj) * kCols + col;
#pragma unroll
        for (int q = 0; q < kColsPerThread / 4; ++q) {
          const float4 x = *reinterpret_cast<const float4*>(xr + 4 * q);
          acc[4 * q] = fmaf(mj[jj], x.x, acc[4 * q]);
          acc[4 * q + 1] = fmaf(mj[jj], x.y, acc[4 * q + 1]);
          acc[4 * q + 2] = fmaf(mj[jj], x.z, acc[4 * q + 2]);
          acc[4 * q + 3] = fmaf(mj[jj], x.w, acc[4 * q + 3]);
        }
      }
    }
    __syncthreads();  // every read of M_p and S_p done
    float* out = part_base(sp.part_state, p + 1) + int64_t(row) * kD + c0 + col;
#pragma unroll
    for (int q = 0; q < kColsPerThread / 4; ++q) {
      const float4 v = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
      *reinterpret_cast<float4*>(out + 4 * q) = v;
      *reinterpret_cast<float4*>(Xs + row * kCols + col + 4 * q) = v;
    }
  }
}

}  // namespace

void launch_split_scan(const Plan& pl, const SplitBufs& sp, int64_t num_seqs, int HV, cudaStream_t s) {
  auto k = chunk_split_scan_kernel;
  allow_smem(k, kScanSmem);
  k<<<grid_1d(num_seqs * HV * (kD / kCols), 1), kThreads, kScanSmem, s>>>(pl, sp, HV);
  GDN_CUDA_LAUNCH_CHECK("chunk_split_scan_kernel");
}

}  // namespace cuda
}  // namespace gdn
