// The exact split's scan (chunk/split.cuh): the state at the start of every part of a sequence,
// from the parts' affine summaries, sequentially over the parts:
//   S_1 = (part 0's end state, run from the sequence's initial state by the summary pass)
//   S_{p+1} = M_p S_p + B_p,  p = 1 .. parts - 2
// in fp32 (M_p [K x K] and B_p [K x V] come from the wgmma chain's fp32 accumulators); where the
// summary pass found M_p negligible (split.cuh: not stored, flagged), S_{p+1} = B_p.
//
// One block of 256 threads per (sequence, value head, kCols columns of V), kCols = 8, 16 or 32
// (ChunkForwardConfig::split_scan_cols: the narrowest that still fits one block per SM). The scan
// is a serial chain of small products, latency-bound: per step a block's fma work is 128 x kCols x
// 128, so narrow slices shorten every step (the tensor-parallel slices, 4 or 8 value heads, run 64
// or 128 blocks). M_p (64 KB) and B_p's slice do not depend on the scan, so the block copies those
// of part p + 1 into the second of two shared stages (cp.async) while it multiplies by M_p. Rows of
// M are padded by 4 floats: 16-byte aligned for cp.async, and the float4 reads of a quarter warp (4
// rows, 2 threads per row) fall in 16 distinct banks. Thread (row = tid / 2, half = tid % 2)
// accumulates kCols / 2 columns of row `row` over the 128 terms in order (j = 0 .. 127, one fma
// each, from B_p): the same sums in the same order for every kCols. S_{p+1} goes to global memory
// (the chain's initial state of part p + 1) and replaces S_p in shared memory.
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/ptx/copy.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kD = 128;           // the summaries' width (K = V = 64: their top left corner, d below)
constexpr int kThreads = 256;     // 2 threads per row of S
constexpr int kMStride = kD + 4;  // floats per row of M in shared memory

// Shared memory (floats): two stages of [M_p [128][kMStride], B_p's slice [128][kCols]], then the
// slice of S_p [128][kCols]. 147,456 / 159,744 / 184,320 B for kCols = 8 / 16 / 32.
template <int kCols>
constexpr int scan_stage_floats() {
  return kD * kMStride + kD * kCols;
}
template <int kCols>
constexpr size_t scan_smem_bytes() {
  return sizeof(float) * (2 * scan_stage_floats<kCols>() + kD * kCols);
}

template <int kCols>
__global__ void __launch_bounds__(kThreads) chunk_split_scan_kernel(Plan pl, SplitBufs sp, int HV, int d) {
  constexpr int kPer = kCols / 2;  // columns per thread
  constexpr int kStage = scan_stage_floats<kCols>();
  extern __shared__ __align__(16) float scan_smem[];
  float* Xs = scan_smem + 2 * kStage;  // [128][kCols]: the slice of S_p
  const int slices = d / kCols;        // (d = K = V: 64 or 128; rows past d are never written nor read)
  const int64_t item = blockIdx.x;
  const int c0 = static_cast<int>(item % slices) * kCols;
  const int hv = static_cast<int>((item / slices) % HV);
  const int64_t n = item / (int64_t(slices) * HV);
  const int64_t count = seq_chunks(pl, n).count;
  const int64_t parts = split_parts_of(count, sp.chunks_per_part, sp.max_parts, sp.first_part_chunks);
  const int tid = threadIdx.x, row = tid / 2, col = kPer * (tid % 2);
  const int64_t DD = int64_t(kD) * kD;
  auto part_base = [&](float* a, int64_t p) { return a + ((n * sp.max_parts + p) * HV + hv) * DD; };
  auto stage = [&](int64_t p) { return scan_smem + ((p - 1) & 1) * kStage; };
  // Whether the summary pass found M_p negligible (not stored; S_{p+1} = B_p). Uniform per block.
  auto m_negligible = [&](int64_t p) { return sp.m_negligible[(n * sp.max_parts + p) * HV + hv] != 0; };
  // M_p [128, 128] (unless negligible) and B_p [128, c0 .. c0 + kCols) -> stage (p - 1) % 2, as
  // this thread's group.
  auto copy_part = [&](int64_t p) {
    float* ms = stage(p);
    float* bs = ms + kD * kMStride;
    const float* m = part_base(sp.summary_m, p);
    const float* b = part_base(sp.summary_b, p) + c0;
    if (!m_negligible(p))
      for (int i = tid; i < kD * kD / 4; i += kThreads) {
        const int r = i / (kD / 4), q = i % (kD / 4);
        cp_async16(ms + r * kMStride + 4 * q, m + int64_t(r) * kD + 4 * q);
      }
    for (int i = tid; i < kD * kCols / 4; i += kThreads) {
      const int r = i / (kCols / 4), q = i % (kCols / 4);
      cp_async16(bs + r * kCols + 4 * q, b + int64_t(r) * kD + 4 * q);
    }
    cp_async_commit();
  };

  if (parts < 3) return;  // S_1 is written by the summary pass; nothing to chain
  copy_part(1);
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
    const bool m_zero = m_negligible(p);  // (loaded while the copies land)
    if (p + 2 < parts) {
      copy_part(p + 1);  // into the stage read in step p - 1 (every read of it ended at its barrier)
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // M_p, B_p (every thread's copies) and S_p complete
    const float* ms = stage(p);
    float acc[kPer];  // B_p's columns of `row`
#pragma unroll
    for (int q = 0; q < kPer / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(ms + kD * kMStride + row * kCols + col + 4 * q);
      acc[4 * q] = v.x;
      acc[4 * q + 1] = v.y;
      acc[4 * q + 2] = v.z;
      acc[4 * q + 3] = v.w;
    }
    const float* mrow = ms + row * kMStride;
    const bool live = row < d;  // (warp-uniform: a warp's 16 rows)
    if (!m_zero && live) {      // (else S_{p+1} = B_p)
#pragma unroll 2
      for (int j = 0; j < d; j += 4) {  // (M's columns past d are never written)
        const float4 m4 = *reinterpret_cast<const float4*>(mrow + j);
        const float mj[4] = {m4.x, m4.y, m4.z, m4.w};
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          const float* xr = Xs + (j + jj) * kCols + col;
#pragma unroll
          for (int q = 0; q < kPer / 4; ++q) {
            const float4 x = *reinterpret_cast<const float4*>(xr + 4 * q);
            acc[4 * q] = fmaf(mj[jj], x.x, acc[4 * q]);
            acc[4 * q + 1] = fmaf(mj[jj], x.y, acc[4 * q + 1]);
            acc[4 * q + 2] = fmaf(mj[jj], x.z, acc[4 * q + 2]);
            acc[4 * q + 3] = fmaf(mj[jj], x.w, acc[4 * q + 3]);
          }
        }
      }
    }
    __syncthreads();  // every read of stage p and of S_p done
    float* out = part_base(sp.part_state, p + 1) + int64_t(row) * kD + c0 + col;
#pragma unroll
    for (int q = 0; q < kPer / 4 && live; ++q) {
      const float4 v = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
      *reinterpret_cast<float4*>(out + 4 * q) = v;
      *reinterpret_cast<float4*>(Xs + row * kCols + col + 4 * q) = v;
    }
  }
}

template <int kCols>
void launch_scan(const Plan& pl, const SplitBufs& sp, int64_t num_seqs, int HV, int d, cudaStream_t s) {
  auto k = chunk_split_scan_kernel<kCols>;
  allow_smem(k, scan_smem_bytes<kCols>());
  k<<<grid_1d(num_seqs * HV * (d / kCols), 1), kThreads, scan_smem_bytes<kCols>(), s>>>(pl, sp, HV, d);
  GDN_CUDA_LAUNCH_CHECK("chunk_split_scan_kernel");
}

}  // namespace

void launch_split_scan(const Plan& pl, const SplitBufs& sp, int64_t num_seqs, int HV, int d, int cols, cudaStream_t s) {
  if (cols == 8)
    launch_scan<8>(pl, sp, num_seqs, HV, d, s);
  else if (cols == 16)
    launch_scan<16>(pl, sp, num_seqs, HV, d, s);
  else
    launch_scan<32>(pl, sp, num_seqs, HV, d, s);
}

}  // namespace cuda
}  // namespace gdn
