// fwd_prep: per (chunk, value head), in parallel over all chunks. Computes the gates (fused or
// plain), G = chunk-local cumsum, L = beta_i (k_i.k_j) exp(G_i - G_j) (j < i) with mma, the
// unit lower-triangular inverse A = (I + L)^-1 by forward substitution in fp32, and
// w = A (beta exp(G) k), u = A (beta v) with mma. Writes G (fp64, head-major) and w, u (bf16).
// The w/u products run in three bf16 passes (A_hi X_hi + A_lo X_hi + A_hi X_lo, each operand
// split as x = hi + lo): near-fp32 products, so w and u carry only their final bf16 rounding.
// NW = 4 warps: warp w owns row tile w of every 64-row product, all columns. NW = 8: warps w and
// w + 4 own row tiles w and 3 - w and one half of the columns each (equal triangular work on
// each SM sub-partition, w % 4).
#include "cuda/fwd_fast.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;
int g_warps = 4;

template <int D>
struct PrepSmem {
  static constexpr int SK = D + 8;  // bf16 row stride: +16 bytes keeps ldmatrix conflict-free
  static constexpr int SA = C + 8;
  __nv_bfloat16 k[C * SK];  // k, later hi part of beta exp(G) k
  __nv_bfloat16 v[C * SK];  // hi part of beta v
  union {
    struct {  // the solve (dead once A is split into Ahi / Alo)
      float L[C * (C + 1)];
      float A[C * (C + 1)];
      float T[16 * 48];  // block forward substitution: sum_K L_IK A_KJ for one block row
    } s;
    struct {  // then the lo parts of the w/u operands
      __nv_bfloat16 klo[C * SK];
      __nv_bfloat16 vlo[C * SK];
    } x;
  } u;
  __nv_bfloat16 Ahi[C * SA];
  __nv_bfloat16 Alo[C * SA];
  double G[C];  // fp64: G_i - G_j keeps its small decays even after a huge one
  float beta[C];
  float coef[C];  // beta_i exp(G_i)
};

template <int D, typename TV, int NW>
__global__ void __launch_bounds__(NW * 32)
    fwd_prep_kernel(FastBufs b, GateArgs ga, const TV* __restrict__ v, int64_t v_st, int64_t v_sh, bool v_aligned) {
  extern __shared__ __align__(16) char smem_raw[];
  using S = PrepSmem<D>;
  S& sm = *reinterpret_cast<S*>(smem_raw);
  const int HV = b.HV;
  const int64_t gc = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  const int hk = hv / (HV / b.H);
  int64_t n, t0;
  int len;
  if (!chunk_info(b.pl, gc, n, t0, len)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  constexpr int kThreads = NW * 32;
  constexpr int HALVES = NW / 4;         // column groups
  constexpr int CP = (C / 16) / HALVES;  // L column-tile pairs per warp
  constexpr int DP = (D / 16) / HALVES;  // w/u column-tile pairs per warp
  const int half = warp / 4;
  const int m = half == 0 ? warp : 3 - (warp - 4);  // row tile

  // k rows (bf16, packed): async, zero-filled past the end of the sequence.
  for (int e = tid; e < C * D / 8; e += kThreads) {
    const int i = e / (D / 8), c8 = (e % (D / 8)) * 8;
    const bool ok = i < len;
    cp_async16(&sm.k[i * S::SK + c8], b.kb + ((t0 + (ok ? i : 0)) * b.H + hk) * D + c8, ok ? 16 : 0);
  }
  cp_async_commit();

  // v rows into registers now (8 elements per group, 16-byte loads when v's rows are aligned),
  // so that their latency hides behind k k^T and the solve.
  constexpr int kGroups = C * D / 8 / kThreads;
  uint4 vr[kGroups];
#pragma unroll
  for (int r = 0; r < kGroups; ++r) {
    const int e = tid + r * kThreads, i = e / (D / 8), c8 = (e % (D / 8)) * 8;
    vr[r] = make_uint4(0, 0, 0, 0);
    if (i < len) {
      const TV* src = v + (t0 + i) * v_st + hv * v_sh + c8;
      if (v_aligned) {
        vr[r] = *reinterpret_cast<const uint4*>(src);
      } else {
        unsigned short x[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = reinterpret_cast<const unsigned short*>(src)[j];
        vr[r] = make_uint4(x[0] | (uint32_t(x[1]) << 16), x[2] | (uint32_t(x[3]) << 16), x[4] | (uint32_t(x[5]) << 16),
                           x[6] | (uint32_t(x[7]) << 16));
      }
    }
  }

  // Gates and the inclusive cumsum over the chunk (2 warps, shuffle scan).
  if (tid < C) {
    float g = 0.f, be = 0.f;
    if (tid < len) load_gates(ga, t0 + tid, hv, g, be);
    double x = g;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    sm.G[tid] = x;  // per-warp inclusive scan
    sm.beta[tid] = be;
  }
  __syncthreads();
  if (tid >= 32 && tid < C) sm.G[tid] += sm.G[31];
  __syncthreads();
  if (tid < len) b.Gt[int64_t(hv) * b.T + t0 + tid] = sm.G[tid];
  if (tid < C) sm.coef[tid] = sm.beta[tid] * expf(float(sm.G[tid]));

  cp_async_wait<0>();
  __syncthreads();

  // L = k k^T (lower part only: column tiles up to the diagonal block of this warp's rows).
  {
    float acc[2 * CP][4];
#pragma unroll
    for (int nt = 0; nt < 2 * CP; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[4];
      frag_a(sm.k, S::SK, 16 * m, 16 * ks, a);
#pragma unroll
      for (int jp = 0; jp < CP; ++jp) {
        const int np = CP * half + jp;
        if (np > m) break;
        uint32_t bb[4];
        frag_b_nk(sm.k, S::SK, 16 * np, 16 * ks, bb);
        mma_bf16(acc[2 * jp], a, bb[0], bb[1]);
        mma_bf16(acc[2 * jp + 1], a, bb[2], bb[3]);
      }
    }
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int jt = 0; jt < 2 * CP; ++jt) {
      const int nt = 2 * CP * half + jt;
      if (nt / 2 > m) break;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * m + g + (e / 2) * 8, j = 8 * nt + 2 * t + (e % 2);
        // Mask before exponentiating: G_i - G_j > 0 (overflow) for j > i.
        sm.u.s.L[i * (C + 1) + j] = j < i ? sm.beta[i] * acc[jt][e] * __expf(float(sm.G[i] - sm.G[j])) : 0.f;
      }
    }
  }
  // A's columns start as identity columns.
  for (int e = tid; e < C * C; e += kThreads) {
    const int i = e / C, j = e % C;
    sm.u.s.A[i * (C + 1) + j] = i == j ? 1.f : 0.f;
  }
  __syncthreads();

  // A = (I + L)^-1 by blocks of 16 (L strictly lower triangular, so A is unit lower triangular).
  // 1. The four diagonal blocks by forward substitution: a thread pair per (block, column),
  //    even / odd j combined by a shuffle; a column is read only by its own pair.
  float* Ls = sm.u.s.L;
  float* As = sm.u.s.A;
  constexpr int LS = C + 1;
  if (tid < 128) {  // warp-uniform: the first four warps
    const int task = tid / 2, p = tid % 2, blk = task / 16, c = task % 16, o = 16 * blk;
    for (int i = 1; i < 16; ++i) {
      float s = 0.f;
      for (int j = c + p; j < i; j += 2) s += Ls[(o + i) * LS + o + j] * As[(o + j) * LS + o + c];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      if (p == 0 && i > c) As[(o + i) * LS + o + c] = -s;
      __syncwarp();
    }
  }
  __syncthreads();
  // 2. Block rows I = 1..3: A_IJ = -A_II sum_{J <= K < I} L_IK A_KJ for J < I.
  float* Ts = sm.u.s.T;  // [16][48]
  for (int I = 1; I < 4; ++I) {
    for (int e = tid; e < I * 256; e += kThreads) {
      const int J = e / 256, r = (e / 16) % 16, c = e % 16;
      float s = 0.f;
      for (int k = 16 * J; k < 16 * I; ++k) s += Ls[(16 * I + r) * LS + k] * As[k * LS + 16 * J + c];
      Ts[r * 48 + 16 * J + c] = s;
    }
    __syncthreads();
    for (int e = tid; e < I * 256; e += kThreads) {
      const int J = e / 256, r = (e / 16) % 16, c = e % 16;
      float s = 0.f;
#pragma unroll
      for (int m = 0; m < 16; ++m) s += As[(16 * I + r) * LS + 16 * I + m] * Ts[m * 48 + 16 * J + c];
      As[(16 * I + r) * LS + 16 * J + c] = -s;
    }
    __syncthreads();
  }
  for (int e = tid; e < C * C; e += kThreads) {
    const int i = e / C, j = e % C;
    const float a = sm.u.s.A[i * (C + 1) + j];
    const __nv_bfloat16 hi = __float2bfloat16_rn(a);
    sm.Ahi[i * S::SA + j] = hi;
    sm.Alo[i * S::SA + j] = __float2bfloat16_rn(a - __bfloat162float(hi));
  }
  __syncthreads();  // L and A are dead: their space takes the lo parts
  // k <- beta exp(G) k (in place, hi part) and beta v, split into hi + lo.
  for (int e = tid; e < C * D; e += kThreads) {
    const int i = e / D, d = e % D;
    const float xk = __bfloat162float(sm.k[i * S::SK + d]) * sm.coef[i];
    const __nv_bfloat16 hk = __float2bfloat16_rn(xk);
    sm.k[i * S::SK + d] = hk;
    sm.u.x.klo[i * S::SK + d] = __float2bfloat16_rn(xk - __bfloat162float(hk));
  }
#pragma unroll
  for (int r = 0; r < kGroups; ++r) {
    const int e = tid + r * kThreads, i = e / (D / 8), c8 = (e % (D / 8)) * 8;
    const TV* x = reinterpret_cast<const TV*>(&vr[r]);
    const float be = sm.beta[i];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float xv = to_f(x[j]) * be;
      const __nv_bfloat16 hi = __float2bfloat16_rn(xv);
      sm.v[i * S::SK + c8 + j] = hi;
      sm.u.x.vlo[i * S::SK + c8 + j] = __float2bfloat16_rn(xv - __bfloat162float(hi));
    }
  }
  __syncthreads();

  // w = A kb, u = A vb: warp rows [16 m, 16 m + 16), its column pairs; only the lower-triangular
  // k-steps (A[i][j] = 0 for j > i) are issued.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    const __nv_bfloat16* src = which == 0 ? sm.k : sm.v;
    const __nv_bfloat16* src_lo = which == 0 ? sm.u.x.klo : sm.u.x.vlo;
    __nv_bfloat16* dst = which == 0 ? b.w : b.u;
    float acc[2 * DP][4];
#pragma unroll
    for (int nt = 0; nt < 2 * DP; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      if (ks > m) break;
      uint32_t a[4], al[4];
      frag_a(sm.Ahi, S::SA, 16 * m, 16 * ks, a);
      frag_a(sm.Alo, S::SA, 16 * m, 16 * ks, al);
#pragma unroll
      for (int jp = 0; jp < DP; ++jp) {
        const int np = DP * half + jp;
        uint32_t bb[4], bl[4];
        frag_b_kn(src, S::SK, 16 * np, 16 * ks, bb);
        frag_b_kn(src_lo, S::SK, 16 * np, 16 * ks, bl);
        mma_bf16(acc[2 * jp], a, bb[0], bb[1]);
        mma_bf16(acc[2 * jp + 1], a, bb[2], bb[3]);
        mma_bf16(acc[2 * jp], al, bb[0], bb[1]);
        mma_bf16(acc[2 * jp + 1], al, bb[2], bb[3]);
        mma_bf16(acc[2 * jp], a, bl[0], bl[1]);
        mma_bf16(acc[2 * jp + 1], a, bl[2], bl[3]);
      }
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = 16 * m + g + hf * 8;
      if (i < len) {
        uint32_t* row = reinterpret_cast<uint32_t*>(dst + ((t0 + i) * HV + hv) * D + 16 * DP * half);
#pragma unroll
        for (int nt = 0; nt < 2 * DP; ++nt) row[(8 * nt + 2 * t) / 2] = pack_bf16(acc[nt][2 * hf], acc[nt][2 * hf + 1]);
      }
    }
  }
}

template <int D, typename TV, int NW>
void launch(const FastBufs& b, const ForwardArgs& f, cudaStream_t s, unsigned blocks, const GateArgs& ga,
            bool v_aligned) {
  const size_t smem = sizeof(PrepSmem<D>);
  auto k = fwd_prep_kernel<D, TV, NW>;
  allow_smem(k, smem);
  k<<<blocks, NW * 32, smem, s>>>(b, ga, static_cast<const TV*>(f.v.data), f.v.stride_token, f.v.stride_head,
                                  v_aligned);
}

template <int D, typename TV>
void launch_nw(const FastBufs& b, const ForwardArgs& f, cudaStream_t s, unsigned blocks, const GateArgs& ga,
               bool v_aligned) {
  if (g_warps == 8)
    launch<D, TV, 8>(b, f, s, blocks, ga, v_aligned);
  else
    launch<D, TV, 4>(b, f, s, blocks, ga, v_aligned);
}

}  // namespace

void set_fwd_prep_warps(int nw) { g_warps = nw == 8 ? 8 : 4; }

template <int D>
void launch_fwd_prep(const FastBufs& b, const ForwardArgs& f, cudaStream_t s) {
  if (b.pl.max_chunks == 0) return;
  const unsigned blocks = grid_1d(b.pl.max_chunks * b.HV, 1);
  const GateArgs ga = make_gates(f);
  const bool v_aligned =
      reinterpret_cast<uintptr_t>(f.v.data) % 16 == 0 && f.v.stride_token % 8 == 0 && f.v.stride_head % 8 == 0;
  if (f.problem.dtype == DType::kBFloat16)
    launch_nw<D, __nv_bfloat16>(b, f, s, blocks, ga, v_aligned);
  else
    launch_nw<D, __half>(b, f, s, blocks, ga, v_aligned);
  GDN_CUDA_LAUNCH_CHECK("fwd_prep_kernel");
}

template void launch_fwd_prep<64>(const FastBufs&, const ForwardArgs&, cudaStream_t);
template void launch_fwd_prep<128>(const FastBufs&, const ForwardArgs&, cudaStream_t);

}  // namespace cuda
}  // namespace gdn
