// fwd_prep for D = 64 (D = 128: kkt_solve.cu): per (chunk, value head), in parallel over all
// chunks. Computes the gates (fused or plain), G = chunk-local cumsum (fp64),
// L = beta_i (k_i.k_j) exp(G_i - G_j) (j < i) with mma, the unit lower-triangular inverse
// A = (I + L)^-1 in fp32, and then
//   w = A diag(beta exp(G)) k,   u = A diag(beta) v   with mma (fwd_h_mma.cu reads them),
// k normalized (l2norm) by its rows' inverse norms r in fp32: L_ij carries r_i r_j and w's column
// scaling r_j, so the 16-bit k stays the caller's exact values. Writes G (fp64, head-major), r
// (for fwd_h and fwd_o) and w, u (in E, the input dtype: bf16 or fp16).
// Accuracy: the row scalings of k and v are folded into A's columns (in fp32), so the operands k
// and v (E, the inputs' own values) are exact; the scaled A is split as hi + lo in E (~16 or ~22
// bits) and each product runs in two passes (A_hi X + A_lo X): near-fp32 products, so w and u
// carry only their final rounding to E.
// The inverse: the four 16x16 diagonal blocks by forward substitution, one column per thread in
// registers; then block rows I = 1..3: A_IJ = -A_II sum_{J <= K < I} L_IK A_KJ, 4-wide strips.
// 8 warps: warps w and w + 4 own row tiles w and 3 - w of every 64-row product and one half of its
// columns (equal triangular work on each SM sub-partition, w % 4).
#include "cuda/chunk/fwd_fast.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;
constexpr int NW = 8;
constexpr int kThreads = NW * 32;

template <int D, typename E>
struct PrepSmem {
  static constexpr int SK = D + 8;  // 16-bit row stride: +16 bytes keeps ldmatrix conflict-free
  static constexpr int SA = C + 8;
  static constexpr int LS = C + 4;    // fp32 row stride: float4 rows, diagonal blocks in distinct banks
  static constexpr int kNX = C * SA;  // w's and u's scaled A parts
  E k[C * SK];                        // [C][D] k (exact operand)
  E v[C * SK];                        // [C][D] v (exact operand)
  union alignas(16) {                 // float4 rows
    struct {                          // the solve (dead once A is split into its scaled 16-bit parts)
      float L[C * LS];
      float A[C * LS];
      float T[16 * 48];  // sum_K L_IK A_KJ for one block row I, J < I
    } s;
    struct {  // A diag(beta exp(G)) and A diag(beta), hi + lo parts
      E aw_hi[kNX], aw_lo[kNX], au_hi[kNX], au_lo[kNX];
    } x;
  } u;
  double G[C];  // fp64: G_i - G_j keeps its small decays even after a huge one
  float beta[C];
  float coef[C];  // beta_i exp(G_i) (D = 64: w's column scaling)
  float rk[C];    // inverse l2 norms of k's rows (1 without l2norm)
};

// v (E, loaded into registers at the start) -> shared memory (an exact round trip through fp32).
template <typename E, int kGroups, int D, int SK>
__device__ __forceinline__ void store_v(const uint4* vr, E* vs, int tid) {
#pragma unroll
  for (int r = 0; r < kGroups; ++r) {
    const int e = tid + r * kThreads, i = e / (D / 8), c8 = (e % (D / 8)) * 8;
    const E* x = reinterpret_cast<const E*>(&vr[r]);
#pragma unroll
    for (int j = 0; j < 8; j += 2)
      *reinterpret_cast<uint32_t*>(&vs[i * SK + c8 + j]) = pack2<E>(to_f(x[j]), to_f(x[j + 1]));
  }
}

// E: the operand type (w, u and their A parts); EI: the inputs' (k, v: E, or bf16 beside fp16
// operands, whose k k^T runs in bf16 and whose k and v fragments become fp16 for w and u);
// v_async: v has 16-byte aligned rows, copied straight into shared memory.
template <int D, typename E, typename EI, bool v_async>
__global__ void __launch_bounds__(kThreads, v_async ? 3 : 2)
    chunk_fwd_prep_kernel(FastBufs<E, EI> b, GateArgs ga, const EI* __restrict__ v, int64_t v_st, int64_t v_sh) {
  extern __shared__ __align__(16) char smem_raw[];
  using S = PrepSmem<D, E>;  // (k and v hold EI: 16-bit either way)
  constexpr int SK = S::SK, SA = S::SA, LS = S::LS;
  S& sm = *reinterpret_cast<S*>(smem_raw);
  const int HV = b.HV;
  const int64_t gc = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  const int hk = qk_head_of(hv, HV, b.H);
  int64_t n, t0;
  int len;
  if (!chunk_info(b.pl, gc, n, t0, len)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  constexpr int CP = (C / 16) / 2;  // L column-tile pairs per warp
  constexpr int DP = (D / 16) / 2;  // w/u column-tile pairs per warp
  const int half = warp / 4;
  const int m = half == 0 ? warp : 3 - (warp - 4);  // row tile

  // k rows and, when possible, v rows: async, zero-filled past the sequence's end.
  for (int e = tid; e < C * D / 8; e += kThreads) {
    const int i = e / (D / 8), c8 = (e % (D / 8)) * 8;
    const bool ok = i < len;
    const int64_t tt = t0 + (ok ? i : 0);
    cp_async16(&sm.k[i * SK + c8], b.k + tt * b.k_st + hk * b.k_sh + c8, ok ? 16 : 0);
    if constexpr (v_async) cp_async16(&sm.v[i * SK + c8], v + tt * v_st + hv * v_sh + c8, ok ? 16 : 0);
  }
  cp_async_commit();

  // Otherwise v rows into registers now, so that their latency hides behind k k^T and the solve.
  constexpr int kGroups = v_async ? 1 : C * D / 8 / kThreads;
  uint4 vr[kGroups];
  if constexpr (!v_async) {
#pragma unroll
    for (int r = 0; r < kGroups; ++r) {
      const int e = tid + r * kThreads, i = e / (D / 8), c8 = (e % (D / 8)) * 8;
      vr[r] = make_uint4(0, 0, 0, 0);
      if (i < len) {
        const unsigned short* src = reinterpret_cast<const unsigned short*>(v + (t0 + i) * v_st + hv * v_sh + c8);
        unsigned short x[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = src[j];
        vr[r] = make_uint4(x[0] | (uint32_t(x[1]) << 16), x[2] | (uint32_t(x[3]) << 16), x[4] | (uint32_t(x[5]) << 16),
                           x[6] | (uint32_t(x[7]) << 16));
      }
    }
  }

  // Gates and the inclusive cumsum over the chunk.
  chunk_gates_cumsum(ga, t0, len, hv, sm.G, sm.beta, tid, [] { __syncthreads(); });
  __syncthreads();
  if (tid < len) b.Gt[int64_t(hv) * b.T + t0 + tid] = sm.G[tid];
  if (tid < C) sm.coef[tid] = sm.beta[tid] * expf(float(sm.G[tid]));  // w's column scaling

  cp_async_wait<0>();
  __syncthreads();

  // Inverse norms of k's rows: four threads per row, 32 elements each (zero rows past the end
  // get a finite r that multiplies zeros). The first value head of each q/k head writes them.
  {
    const int row = tid / 4, part = tid % 4;
    float ss = 0.f;
#pragma unroll
    for (int q = 0; q < D / 32; ++q) {
      const uint4 x = *reinterpret_cast<const uint4*>(&sm.k[row * SK + part * (D / 4) + 8 * q]);
      const EI* e = reinterpret_cast<const EI*>(&x);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += to_f(e[j]) * to_f(e[j]);
    }
    warp_sum_ascending<1, 4>(ss);
    const float r = b.l2norm ? rsqrtf(ss + float(spec::kL2NormEps)) : 1.f;
    if (part == 0) {
      sm.rk[row] = r;
      if (row < len && first_of_qk_group(hv, HV, b.H)) b.rk[int64_t(hk) * b.T + t0 + row] = r;
    }
  }
  __syncthreads();

  float* Ls = sm.u.s.L;
  float* As = sm.u.s.A;
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
      frag_a(sm.k, SK, 16 * m, 16 * ks, a);
#pragma unroll
      for (int jp = 0; jp < CP; ++jp) {
        const int np = CP * half + jp;
        if (np > m) break;
        uint32_t bb[4];
        frag_b_nk(sm.k, SK, 16 * np, 16 * ks, bb);
        mma16<EI>(acc[2 * jp], a, bb[0], bb[1]);  // (k k^T in the inputs' type: exact products)
        mma16<EI>(acc[2 * jp + 1], a, bb[2], bb[3]);
      }
    }
#pragma unroll
    for (int jt = 0; jt < 2 * CP; ++jt) {
      const int nt = 2 * CP * half + jt;
      if (nt / 2 > m) break;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * m + g + (e / 2) * 8, j = 8 * nt + 2 * t + (e % 2);
        // Mask before exponentiating: G_i - G_j > 0 (overflow) for j > i.
        Ls[i * LS + j] = j < i ? sm.beta[i] * sm.rk[i] * sm.rk[j] * acc[jt][e] * __expf(float(sm.G[i] - sm.G[j])) : 0.f;
      }
    }
  }
  __syncthreads();

  // A = (I + L)^-1 (L strictly lower triangular, so A is unit lower triangular).
  // 1. Diagonal blocks: thread (blk, c) solves (I + L_bb) a = e_c for column c of block blk, in
  //    registers (A's rows above the diagonal inside the block become 0).
  if (tid < 64) {  // warp-uniform: warps 0 and 1
    const int o = 16 * (tid / 16), c = tid % 16;
    float a[16];
    unit_lower_inverse_column<16>(Ls + o * LS + o, LS, c, a);  // (o LS + o and LS: 16-byte multiples)
#pragma unroll
    for (int i = 0; i < 16; ++i) As[(o + i) * LS + o + c] = a[i];
  }
  __syncthreads();
  // 2. Block rows I = 1..3: T_J = sum_{J <= K < I} L_IK A_KJ, then A_IJ = -A_II T_J. One 4-wide
  //    strip (row r, columns c4..c4+3 of block J) per thread.
  float* Ts = sm.u.s.T;  // [16][48]
#pragma unroll
  for (int I = 1; I < 4; ++I) {
    const int J = tid / 64, r = (tid / 4) % 16, c4 = 4 * (tid % 4);
    const bool active = J < I;
    if (active) {
      float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
      const float* lrow = Ls + (16 * I + r) * LS;
      for (int kk = 16 * J; kk < 16 * I; ++kk) {
        const float l = lrow[kk];
        const float4 x = *reinterpret_cast<const float4*>(As + kk * LS + 16 * J + c4);
        s.x = fmaf(l, x.x, s.x);
        s.y = fmaf(l, x.y, s.y);
        s.z = fmaf(l, x.z, s.z);
        s.w = fmaf(l, x.w, s.w);
      }
      *reinterpret_cast<float4*>(Ts + r * 48 + 16 * J + c4) = s;
    }
    __syncthreads();
    if (active) {
      float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
      const float* arow = As + (16 * I + r) * LS + 16 * I;
#pragma unroll
      for (int mm = 0; mm < 16; ++mm) {
        const float a = arow[mm];
        const float4 x = *reinterpret_cast<const float4*>(Ts + mm * 48 + 16 * J + c4);
        s.x = fmaf(a, x.x, s.x);
        s.y = fmaf(a, x.y, s.y);
        s.z = fmaf(a, x.z, s.z);
        s.w = fmaf(a, x.w, s.w);
      }
      *reinterpret_cast<float4*>(As + (16 * I + r) * LS + 16 * J + c4) = make_float4(-s.x, -s.y, -s.z, -s.w);
    }
    __syncthreads();
  }

  // 3. A (pairs of columns, zero above the diagonal) into registers; then, over the dead solve
  //    space, A diag(beta exp(G) r) and A diag(beta) as hi + lo parts in E.
  constexpr int kPairs = C * C / 2 / kThreads;
  float2 ar[kPairs];
#pragma unroll
  for (int r = 0; r < kPairs; ++r) {
    const int p = tid + r * kThreads, i = p / (C / 2), j = 2 * (p % (C / 2));
    const float2 x = *reinterpret_cast<const float2*>(As + i * LS + j);
    ar[r] = make_float2(j <= i ? x.x : 0.f, j + 1 <= i ? x.y : 0.f);
  }
  // w and u.
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kPairs; ++r) {
    const int p = tid + r * kThreads, i = p / (C / 2), j = 2 * (p % (C / 2));
    const float w0 = ar[r].x * (sm.coef[j] * sm.rk[j]), w1 = ar[r].y * (sm.coef[j + 1] * sm.rk[j + 1]);
    const float u0 = ar[r].x * sm.beta[j], u1 = ar[r].y * sm.beta[j + 1];
    const uint32_t wh = pack2<E>(w0, w1), uh = pack2<E>(u0, u1);
    *reinterpret_cast<uint32_t*>(&sm.u.x.aw_hi[i * SA + j]) = wh;
    *reinterpret_cast<uint32_t*>(&sm.u.x.au_hi[i * SA + j]) = uh;
    *reinterpret_cast<uint32_t*>(&sm.u.x.aw_lo[i * SA + j]) = residual2<E>(w0, w1, wh);
    *reinterpret_cast<uint32_t*>(&sm.u.x.au_lo[i * SA + j]) = residual2<E>(u0, u1, uh);
  }
  if constexpr (!v_async) store_v<EI, kGroups, D, SK>(vr, reinterpret_cast<EI*>(sm.v), tid);
  __syncthreads();

  // w = A_w k, u = A_u v: warp rows [16 m, 16 m + 16), its column pairs; only the lower-triangular
  // k-steps (A[i][j] = 0 for j > i) are issued.
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    const E* src = which == 0 ? sm.k : sm.v;
    const E* a_hi = which == 0 ? sm.u.x.aw_hi : sm.u.x.au_hi;
    const E* a_lo = which == 0 ? sm.u.x.aw_lo : sm.u.x.au_lo;
    E* dst = which == 0 ? b.w : b.u;
    float acc[2 * DP][4];
#pragma unroll
    for (int nt = 0; nt < 2 * DP; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      if (ks > m) break;
      uint32_t a[4], al[4];
      frag_a(a_hi, SA, 16 * m, 16 * ks, a);
      frag_a(a_lo, SA, 16 * m, 16 * ks, al);
#pragma unroll
      for (int jp = 0; jp < DP; ++jp) {
        const int np = DP * half + jp;
        uint32_t bb[4];
        frag_b_kn(src, SK, 16 * np, 16 * ks, bb);
        as_operands<E, EI>(bb);  // (k or v: the inputs' type)
        mma16<E>(acc[2 * jp], a, bb[0], bb[1]);
        mma16<E>(acc[2 * jp + 1], a, bb[2], bb[3]);
        mma16<E>(acc[2 * jp], al, bb[0], bb[1]);
        mma16<E>(acc[2 * jp + 1], al, bb[2], bb[3]);
      }
    }
    // The warp's 16 x 16 DP tile leaves through shared memory in 16-byte pieces: stmatrix into k's
    // rows, dead once every warp's w product is done (w: the barrier; u: this warp's own w pieces
    // have left).
    if (which == 0)
      __syncthreads();
    else
      __syncwarp();
    const int r0 = 16 * m, c0 = 16 * DP * half;
    stage_acc(sm.k, SK, r0, c0, acc, 1.f);
    __syncwarp();
    stage_rows_out<E, 16 * DP>(sm.k, SK, r0, c0, len - r0, [&](int i, int c, uint4 x) {
      *reinterpret_cast<uint4*>(dst + ((t0 + r0 + i) * HV + hv) * D + c0 + c) = x;
    });
  }
}

template <int D, typename E, typename EI, bool v_async>
void launch(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s, unsigned blocks, const GateArgs& ga) {
  const size_t smem = sizeof(PrepSmem<D, E>);
  auto k = chunk_fwd_prep_kernel<D, E, EI, v_async>;
  allow_smem(k, smem);
  k<<<blocks, kThreads, smem, s>>>(b, ga, static_cast<const EI*>(f.v.data), f.v.stride_token, f.v.stride_head);
}

}  // namespace

template <int D, typename E, typename EI>
void launch_fwd_prep(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s) {
  if (b.pl.max_chunks == 0) return;
  const unsigned blocks = grid_1d(b.pl.max_chunks * b.HV, 1);
  const GateArgs ga = make_gates(f);
  if (rows_in_16_byte_pieces(f.v))
    launch<D, E, EI, true>(b, f, s, blocks, ga);
  else
    launch<D, E, EI, false>(b, f, s, blocks, ga);
  GDN_CUDA_LAUNCH_CHECK("chunk_fwd_prep_kernel");
}

template void launch_fwd_prep<64>(const FastBufs<__nv_bfloat16>&, const ForwardArgs&, cudaStream_t);
template void launch_fwd_prep<64>(const FastBufs<__half>&, const ForwardArgs&, cudaStream_t);
template void launch_fwd_prep<64>(const FastBufs<__half, __nv_bfloat16>&, const ForwardArgs&, cudaStream_t);

}  // namespace cuda
}  // namespace gdn
