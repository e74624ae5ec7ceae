// The exact split's scan (chunk/split.cuh): the state at the start of every part of a sequence,
// from the parts' affine summaries, sequentially over the parts:
//   S_1 = (part 0's end state, run from the sequence's initial state by the summary pass)
//   S_{p+1} = M_p S_p + B_p,  p = 1 .. parts - 2
// in fp32 (M_p [K x K] and B_p [K x V] come from the wgmma chain's fp32 accumulators); where the
// summary pass found M_p negligible (split.cuh: not stored, flagged), S_{p+1} = B_p.
//
// One block of 256 threads per (sequence, value head, kCols columns of V), kCols = 8, 16 or 32
// (ChunkForwardConfig::split_scan_cols: the narrowest that still fits one block per SM). The scan
// is a serial chain of small products, latency-bound: per step a block's work is 128 x kCols x
// 128 multiply-adds, so narrow slices shorten every step (the tensor-parallel slices, 4 or 8 value
// heads, run 64 or 128 blocks). M_p (64 KB) and B_p's slice do not depend on the scan: the block
// copies M_{p+1} into the second of two shared stages (cp.async) while it multiplies by M_p, and
// B_p's slices (4-16 KB) kBRing - 1 parts ahead into a ring of their own, so that where M_p is
// negligible (a step of a few hundred cycles) no step waits for a copy issued one step before it
// (~1.25 us a step, session 47's phases). One cp.async group a step: M_{p+1} and B_{p+kBRing-1}.
// The product runs on the tensor cores (mma.m16n8k8 in tf32, warp w the rows 16 w .. 16 w + 15) in
// three passes, M and S each split into tf32 hi + lo (hi hi + hi lo + lo hi, fp32 accumulation:
// ~2^-21 relative, where the fp32 fma it replaces was ~2^-24; the chain reads the state as 16-bit
// hi + lo parts, ~2^-17). An fma per element and thread was bound by shared memory's 128 bytes a
// cycle (every fma a register delivered: ~2560 cycles a step at kCols = 8, session 49); the mma
// reads each element of M and of S's hi / lo images once a warp. S_p's slice is kept transposed
// ([kCols][kMStride], already split) so that each thread's B elements of four k steps are float4
// reads as its A elements are. Rows of M and of S's image are padded by 4 floats: 16-byte aligned
// for cp.async, and a quarter warp's float4 reads fall in distinct banks. The sums' order is fixed
// and the same for every kCols. S_{p+1} goes to global memory (the chain's initial state of part
// p + 1) and replaces S_p in shared memory.
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/ptx/copy.cuh"
#include "cuda/ptx/mma.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kD = 128;           // the summaries' width (K = V = 64: their top left corner, d below)
constexpr int kThreads = 256;     // 8 warps, 16 rows of S each
constexpr int kMStride = kD + 4;  // floats per row of M (and of S_p's transposed slice) in shared memory

// Shared memory (floats): two stages of M_p [128][kMStride], a ring of kBRing slices of B_p
// [128][kCols], then S_p's slice transposed, as tf32 hi and lo parts [2][kCols][kMStride].
// 176,384 / 217,600 / 218,112 B for kCols = 8 / 16 / 32 (kBRing 8, 8, 3).
template <int kCols>
constexpr int scan_b_ring() {
  return kCols == 32 ? 3 : 8;
}
template <int kCols>
constexpr size_t scan_smem_bytes() {
  return sizeof(float) * (2 * kD * kMStride + scan_b_ring<kCols>() * kD * kCols + 2 * kCols * kMStride);
}

// x as tf32 hi + lo: hi = x to nearest, lo = x - hi (exact), read by the mma as its top 11 bits.
struct Tf32Pair {
  uint32_t hi, lo;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const uint32_t hi = to_tf32(x);
  return {hi, __float_as_uint(x - __uint_as_float(hi))};
}

template <int kCols>
__global__ void __launch_bounds__(kThreads) chunk_split_scan_kernel(Plan pl, SplitBufs sp, int HV, int d) {
  constexpr int kNT = kCols / 8;  // the mma's n-tiles
  constexpr int kBRing = scan_b_ring<kCols>();
  extern __shared__ __align__(16) float scan_smem[];
  float* const Bs = scan_smem + 2 * kD * kMStride;  // [kBRing][128][kCols]: B_p's slices
  float* const Xhi = Bs + kBRing * kD * kCols;      // [kCols][kMStride]: S_p's slice transposed, hi
  float* const Xlo = Xhi + kCols * kMStride;        // and lo (tf32 parts)
  const int slices = d / kCols;                     // (d = K = V: 64 or 128; rows past d are never written nor read)
  const int64_t item = blockIdx.x;
  const int c0 = static_cast<int>(item % slices) * kCols;
  const int hv = static_cast<int>((item / slices) % HV);
  const int64_t n = item / (int64_t(slices) * HV);
  const int64_t count = seq_chunks(pl, n).count;
  const int64_t parts = split_parts_of(count, sp.chunks_per_part, sp.max_parts, sp.first_part_chunks);
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r0 = 16 * (tid / 32);  // this warp's rows of S_{p+1}: r0 + g and r0 + g + 8
  const int64_t DD = int64_t(kD) * kD;
  auto part_base = [&](float* a, int64_t p) { return a + ((n * sp.max_parts + p) * HV + hv) * DD; };
  auto m_stage = [&](int64_t p) { return scan_smem + ((p - 1) & 1) * (kD * kMStride); };
  auto b_slot = [&](int64_t p) { return Bs + ((p - 1) % kBRing) * (kD * kCols); };
  // Whether the summary pass found M_p negligible (not stored; S_{p+1} = B_p). Uniform per block.
  auto m_negligible = [&](int64_t p) { return sp.m_negligible[(n * sp.max_parts + p) * HV + hv] != 0; };
  // M_p [128, 128] (unless negligible) -> its stage, and B_p [128, c0 .. c0 + kCols) -> its slot:
  // this thread's copies of the group being built (p past the last step's part: none).
  auto copy_m = [&](int64_t p) {
    if (p + 1 >= parts || m_negligible(p)) return;
    float* ms = m_stage(p);
    const float* m = part_base(sp.summary_m, p);
    for (int i = tid; i < kD * kD / 4; i += kThreads) {
      const int r = i / (kD / 4), q = i % (kD / 4);
      cp_async16(ms + r * kMStride + 4 * q, m + int64_t(r) * kD + 4 * q);
    }
  };
  auto copy_b = [&](int64_t p) {
    if (p + 1 >= parts) return;
    float* bs = b_slot(p);
    const float* b = part_base(sp.summary_b, p) + c0;
    for (int i = tid; i < kD * kCols / 4; i += kThreads) {
      const int r = i / (kCols / 4), q = i % (kCols / 4);
      cp_async16(bs + r * kCols + 4 * q, b + int64_t(r) * kD + 4 * q);
    }
  };
  // S's element (r, c) of the slice -> the transposed hi / lo images.
  auto put_x = [&](int r, int c, float x) {
    const Tf32Pair v = split_tf32(x);
    Xhi[c * kMStride + r] = __uint_as_float(v.hi);
    Xlo[c * kMStride + r] = __uint_as_float(v.lo);
  };

  if (parts < 3) return;  // S_1 is written by the summary pass; nothing to chain
  // The first group: M_1 and B_1 .. B_{kBRing - 1}.
  copy_m(1);
  for (int64_t p = 1; p < kBRing; ++p) copy_b(p);
  cp_async_commit();
  // S_1's slice -> shared memory (rows < d).
  {
    const float* x = part_base(sp.part_state, 1);
    for (int i = tid; i < d * kCols; i += kThreads) {
      const int r = i / kCols, c = i % kCols;
      put_x(r, c, x[int64_t(r) * kD + c0 + c]);
    }
  }
  const bool live = r0 < d;  // (warp-uniform)
  for (int64_t p = 1; p + 1 < parts; ++p) {
    const bool m_zero = m_negligible(p);  // (loaded while the copies land)
    // M_{p+1} into the stage read in step p - 1 and B_{p + kBRing - 1} into the slot read in step
    // p - 1 (every read of both ended at that step's barrier), one group (empty past the end);
    // then every group but this one: M_p (the previous step's group) and B_p (older) landed.
    copy_m(p + 1);
    copy_b(p + kBRing - 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // M_p, B_p (every thread's copies) and S_p complete
    const float* ms = m_stage(p);
    const float* bs = b_slot(p);
    // M_p S_p on the tensor cores in three tf32 passes (hi hi into `hh`; lo hi and hi lo into
    // `cross`: the lo lo term is below fp32's precision), each split by the k step's parity so that
    // no chain of dependent mma is longer than d / 8 (hi hi's d / 16). The k index is permuted within each 32
    // columns (the sum does not depend on its order but for rounding, the same for every kCols): the
    // mma's k rows t and t + 4 of step s are columns 8 t + s and 8 t + 4 + s, so that each thread's
    // A and B elements of four steps are two float4 reads a row.
    float hh[2][kNT][4], cross[2][kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float2 b_top = *reinterpret_cast<const float2*>(bs + (r0 + g) * kCols + 8 * nt + 2 * t);
      const float2 b_bot = *reinterpret_cast<const float2*>(bs + (r0 + g + 8) * kCols + 8 * nt + 2 * t);
      hh[0][nt][0] = b_top.x;
      hh[0][nt][1] = b_top.y;
      hh[0][nt][2] = b_bot.x;
      hh[0][nt][3] = b_bot.y;
#pragma unroll
      for (int e = 0; e < 4; ++e) hh[1][nt][e] = cross[0][nt][e] = cross[1][nt][e] = 0.f;
    }
    if (!m_zero && live) {  // (else S_{p+1} = B_p)
#pragma unroll 1
      for (int j = 0; j < d; j += 32) {  // (M's columns past d are never written)
        const float* ma = ms + (r0 + g) * kMStride + j + 8 * t;
        float a[2][8];  // rows g and g + 8, columns j + 8 t .. j + 8 t + 7
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 lo4 = *reinterpret_cast<const float4*>(ma + 8 * h * kMStride);
          const float4 hi4 = *reinterpret_cast<const float4*>(ma + 8 * h * kMStride + 4);
          a[h][0] = lo4.x, a[h][1] = lo4.y, a[h][2] = lo4.z, a[h][3] = lo4.w;
          a[h][4] = hi4.x, a[h][5] = hi4.y, a[h][6] = hi4.z, a[h][7] = hi4.w;
        }
        float xh[kNT][8], xl[kNT][8];  // S_p's column 8 nt + g, rows j + 8 t .. j + 8 t + 7
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int at = (8 * nt + g) * kMStride + j + 8 * t;
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const float4 vh = *reinterpret_cast<const float4*>(Xhi + at + 4 * q);
            const float4 vl = *reinterpret_cast<const float4*>(Xlo + at + 4 * q);
            xh[nt][4 * q] = vh.x, xh[nt][4 * q + 1] = vh.y, xh[nt][4 * q + 2] = vh.z, xh[nt][4 * q + 3] = vh.w;
            xl[nt][4 * q] = vl.x, xl[nt][4 * q + 1] = vl.y, xl[nt][4 * q + 2] = vl.z, xl[nt][4 * q + 3] = vl.w;
          }
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const Tf32Pair a0 = split_tf32(a[0][s]), a1 = split_tf32(a[1][s]);
          const Tf32Pair a2 = split_tf32(a[0][4 + s]), a3 = split_tf32(a[1][4 + s]);
          const uint32_t ahi[4] = {a0.hi, a1.hi, a2.hi, a3.hi}, alo[4] = {a0.lo, a1.lo, a2.lo, a3.lo};
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            const uint32_t bh0 = __float_as_uint(xh[nt][s]), bh1 = __float_as_uint(xh[nt][4 + s]);
            const uint32_t bl0 = __float_as_uint(xl[nt][s]), bl1 = __float_as_uint(xl[nt][4 + s]);
            mma_tf32(cross[s & 1][nt], alo, bh0, bh1);
            mma_tf32(cross[s & 1][nt], ahi, bl0, bl1);
            mma_tf32(hh[s & 1][nt], ahi, bh0, bh1);
          }
        }
      }
    }
    __syncthreads();  // every read of stage p, of slot p and of S_p done
    if (live) {
      float* out = part_base(sp.part_state, p + 1) + c0;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = (hh[0][nt][e] + hh[1][nt][e]) + (cross[0][nt][e] + cross[1][nt][e]);
        const int c = 8 * nt + 2 * t;
        *reinterpret_cast<float2*>(out + int64_t(r0 + g) * kD + c) = make_float2(v[0], v[1]);
        *reinterpret_cast<float2*>(out + int64_t(r0 + g + 8) * kD + c) = make_float2(v[2], v[3]);
        put_x(r0 + g, c, v[0]);
        put_x(r0 + g, c + 1, v[1]);
        put_x(r0 + g + 8, c, v[2]);
        put_x(r0 + g + 8, c + 1, v[3]);
      }
    }
  }
  cp_async_wait<0>();  // (no copy outlives the block: the last groups are empty)
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
