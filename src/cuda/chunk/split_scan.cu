// The exact split's scan (chunk/split.cuh): the state at the start of every part of a sequence,
// from the parts' affine summaries, sequentially over the parts:
//   S_1 = (part 0's end state, run from the sequence's initial state by the summary pass)
//   S_{p+1} = M_p S_p + B_p,  p = 1 .. parts - 2
// in fp32 (M_p [K x K] and B_p [K x V] come from the wgmma chain's fp32 accumulators).
//
// One block of 256 threads per (sequence, value head, 32 columns of V). Per part the block loads
// M_p into shared memory (64 KB, rows padded by one float: the 16 rows a warp reads at one column
// fall in 16 banks), keeps the 128 x 32 slice of S_p in shared memory, and thread (row = tid / 2,
// half = tid % 2) accumulates 16 columns of row `row` over the 128 terms. S_{p+1} goes to global
// memory (the chain's initial state of part p + 1) and replaces S_p in shared memory.
#include "cuda/chunk/fwd_fast.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kD = 128;    // K = V
constexpr int kCols = 32;  // columns of V per block
constexpr int kMStride = kD + 1;

__global__ void __launch_bounds__(256) chunk_split_scan_kernel(Plan pl, SplitBufs sp, int HV) {
  extern __shared__ float scan_smem[];
  float* Ms = scan_smem;                  // [128][129]
  float* Xs = scan_smem + kD * kMStride;  // [128][32]
  const int slices = kD / kCols;
  const int64_t item = blockIdx.x;
  const int c0 = static_cast<int>(item % slices) * kCols;
  const int hv = static_cast<int>((item / slices) % HV);
  const int64_t n = item / (int64_t(slices) * HV);
  const int64_t count = seq_chunks(pl, n).count;
  const int64_t parts = split_parts_of(count, sp.chunks_per_part, sp.max_parts, sp.first_part_chunks);
  const int tid = threadIdx.x, row = tid / 2, half = tid % 2;
  const int64_t DD = int64_t(kD) * kD;
  auto part_base = [&](float* a, int64_t p) { return a + ((n * sp.max_parts + p) * HV + hv) * DD; };

  if (parts < 3) return;  // S_1 is written by the summary pass; nothing to chain
  // S_1's slice -> shared memory.
  {
    const float* x = part_base(sp.part_state, 1);
    for (int i = tid; i < kD * kCols / 4; i += 256) {
      const int r = i / (kCols / 4), q = i % (kCols / 4);
      *reinterpret_cast<float4*>(Xs + r * kCols + 4 * q) =
          *reinterpret_cast<const float4*>(x + int64_t(r) * kD + c0 + 4 * q);
    }
  }
  for (int64_t p = 1; p + 1 < parts; ++p) {
    {
      const float* m = part_base(sp.summary_m, p);
      for (int i = tid; i < kD * kD / 4; i += 256) {
        const int r = i / (kD / 4), q = i % (kD / 4);
        const float4 v = *reinterpret_cast<const float4*>(m + int64_t(r) * kD + 4 * q);
        float* d = Ms + r * kMStride + 4 * q;
        d[0] = v.x;
        d[1] = v.y;
        d[2] = v.z;
        d[3] = v.w;
      }
    }
    __syncthreads();  // M_p and S_p complete
    float acc[16];
    {
      const float* bp = part_base(sp.summary_b, p) + int64_t(row) * kD + c0 + 16 * half;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(bp + 4 * q);
        acc[4 * q] = v.x;
        acc[4 * q + 1] = v.y;
        acc[4 * q + 2] = v.z;
        acc[4 * q + 3] = v.w;
      }
    }
    const float* mrow = Ms + row * kMStride;
#pragma unroll 4
    for (int j = 0; j < kD; ++j) {
      const float mj = mrow[j];
      const float* xr = Xs + j * kCols + 16 * half;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 x = *reinterpret_cast<const float4*>(xr + 4 * q);
        acc[4 * q] = fmaf(mj, x.x, acc[4 * q]);
        acc[4 * q + 1] = fmaf(mj, x.y, acc[4 * q + 1]);
        acc[4 * q + 2] = fmaf(mj, x.z, acc[4 * q + 2]);
        acc[4 * q + 3] = fmaf(mj, x.w, acc[4 * q + 3]);
      }
    }
    __syncthreads();  // every read of M_p and S_p done
    float* out = part_base(sp.part_state, p + 1) + int64_t(row) * kD + c0 + 16 * half;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 v = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
      *reinterpret_cast<float4*>(out + 4 * q) = v;
      *reinterpret_cast<float4*>(Xs + row * kCols + 16 * half + 4 * q) = v;
    }
  }
}

}  // namespace

void launch_split_scan(const Plan& pl, const SplitBufs& sp, int64_t num_seqs, int HV, cudaStream_t s) {
  const size_t smem = sizeof(float) * (kD * kMStride + kD * kCols);
  auto k = chunk_split_scan_kernel;
  allow_smem(k, smem);
  k<<<grid_1d(num_seqs * HV * (kD / kCols), 1), 256, smem, s>>>(pl, sp, HV);
  GDN_CUDA_LAUNCH_CHECK("chunk_split_scan_kernel");
}

}  // namespace cuda
}  // namespace gdn
