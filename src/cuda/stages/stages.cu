// Exact stage kernels (fp32 on CUDA cores), one block per (chunk, value head) unless noted.
// Correctness first: these are the oracle-grade path (fp32 inputs must stay within 1e-4); the
// fast bf16 tensor-core forward lives in fwd_*.cu.
// Any K and V in [1, 256] (the capability table): kkt and w_u loop over K and V at run time;
// fwd_h runs ceil(V / 64) slices of 64 columns and fwd_o the thread layout of the next size up
// (64, 128 or 256), both with the columns past V masked (loaded as zero, never stored).
#include "cuda/core/checkpoints.cuh"
#include "cuda/stages/stages.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;

template <typename T>
__device__ __forceinline__ float ld(const void* p, int64_t i) {
  return to_f(static_cast<const T*>(p)[i]);
}

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

// ---- chunk_scaled_dot_kkt ------------------------------------------------------------------------
template <typename T, typename TG>
__global__ void __launch_bounds__(256) stage_kkt_kernel(Plan pl, int H, int HV, int K, TensorView k, TensorView beta,
                                                        DType gdt, const TG* __restrict__ G, float* __restrict__ L) {
  extern __shared__ float sm[];
  const int KP = K + 1;  // padded row: lanes reading different rows hit different banks
  float* ks = sm;        // [C][K + 1]
  float* bs = ks + C * KP;
  __shared__ TG Gs[C];
  const int64_t gc = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  const int hk = qk_head_of(hv, HV, H);
  int64_t n, t0;
  int len;
  if (!chunk_info(pl, gc, n, t0, len)) return;
  for (int e = threadIdx.x; e < C * K; e += blockDim.x) {
    const int i = e / K, d = e % K;
    ks[i * KP + d] = i < len ? ld<T>(k.p, (t0 + i) * k.st + hk * k.sh + d) : 0.f;
  }
  if (threadIdx.x < C) {
    const int i = threadIdx.x;
    Gs[i] = i < len ? G[(t0 + i) * HV + hv] : TG(0);
    bs[i] = i < len ? load_dt(beta.p, gdt, (t0 + i) * beta.st + hv * beta.sh) : 0.f;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < len * C; e += blockDim.x) {
    const int i = e / C, j = e % C;
    float r = 0.f;
    if (j < i) {  // mask before exponentiating: exp(G_i - G_j) overflows for j > i
      float dot = 0.f;
      for (int d = 0; d < K; ++d) dot += ks[i * KP + d] * ks[j * KP + d];
      r = bs[i] * dot * expf(float(Gs[i] - Gs[j]));
    }
    L[((t0 + i) * HV + hv) * C + j] = r;
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

// ---- recompute_w_u: w = A (beta exp(G) k), u = A (beta v); a thread per output column --------------
template <typename T, typename TG>
__global__ void __launch_bounds__(256)
    stage_w_u_kernel(Plan pl, int H, int HV, int K, int V, TensorView k, TensorView v, TensorView beta, DType gdt,
                     const TG* __restrict__ G, const float* __restrict__ A, float* __restrict__ w,
                     float* __restrict__ u) {
  __shared__ float As[C][C + 1];
  __shared__ float cw[C], cu[C];
  const int64_t gc = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  const int hk = qk_head_of(hv, HV, H);
  int64_t n, t0;
  int len;
  if (!chunk_info(pl, gc, n, t0, len)) return;
  for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
    const int i = e / C, j = e % C;
    As[i][j] = i < len ? A[((t0 + i) * HV + hv) * C + j] : 0.f;
  }
  if (threadIdx.x < C) {
    const int i = threadIdx.x;
    const float b = i < len ? load_dt(beta.p, gdt, (t0 + i) * beta.st + hv * beta.sh) : 0.f;
    cw[i] = i < len ? b * expf(float(G[(t0 + i) * HV + hv])) : 0.f;
    cu[i] = b;
  }
  __syncthreads();
  // Item = (output column, half of the rows): 32 accumulators per thread keep it in registers.
  for (int item = threadIdx.x; item < 2 * (K + V); item += blockDim.x) {
    const int col = item >> 1, r0 = (item & 1) * (C / 2);
    const bool is_w = col < K;
    const int d = is_w ? col : col - K;
    float acc[C / 2];
#pragma unroll
    for (int i = 0; i < C / 2; ++i) acc[i] = 0.f;
    const int jend = min(len, r0 + C / 2);  // A[i][j] = 0 for j > i
    for (int j = 0; j < jend; ++j) {
      const float x = is_w ? cw[j] * ld<T>(k.p, (t0 + j) * k.st + hk * k.sh + d)
                           : cu[j] * ld<T>(v.p, (t0 + j) * v.st + hv * v.sh + d);
#pragma unroll
      for (int i = 0; i < C / 2; ++i) acc[i] += As[r0 + i][j] * x;
    }
    float* out = is_w ? w : u;
    const int D = is_w ? K : V;
#pragma unroll
    for (int i = 0; i < C / 2; ++i)
      if (r0 + i < len) out[((t0 + r0 + i) * HV + hv) * D + d] = acc[i];
  }
}

// ---- chunk_fwd_h: one block per (sequence, hv, 64-wide slice of V), sequential over chunks -------
constexpr int kHSlice = 64;

template <typename T, typename TG>
__global__ void __launch_bounds__(256)
    stage_fwd_h_kernel(Plan pl, int H, int HV, int K, int V, StateLayout layout, DType sdt, TensorView k,
                       const float* __restrict__ w, const float* __restrict__ u, const TG* __restrict__ G,
                       StateRef init, StateRef fin, Checkpoints ck, float* __restrict__ h, float* __restrict__ v_new) {
  extern __shared__ float sm[];
  float* S = sm;                // [K][kHSlice]
  float* vs = S + K * kHSlice;  // [C][kHSlice]: v_new_i * exp(G_last - G_i)
  __shared__ TG Gs[C];
  const int slices = (V + kHSlice - 1) / kHSlice;
  const int64_t item = blockIdx.x;
  const int sl = static_cast<int>(item % slices);
  const int hv = static_cast<int>((item / slices) % HV);
  const int64_t n = item / (int64_t(slices) * HV);
  const int hk = qk_head_of(hv, HV, H);
  const int v0 = sl * kHSlice;
  const int cols = min(kHSlice, V - v0);  // columns of this slice inside V; the rest stay zero
  const int tid = threadIdx.x;
  const bool kmaj = layout == StateLayout::kKMajor;
  const int64_t KV = int64_t(K) * V;
  const int64_t r_in = state_row(init, n);
  for (int e = tid; e < K * kHSlice; e += blockDim.x) {
    const int kk = e / kHSlice, vv = e % kHSlice;
    S[e] = r_in >= 0 && vv < cols ? load_dt(init.data, sdt,
                                            state_offset(init, r_in, hv, HV, KV) +
                                                (kmaj ? int64_t(kk) * V + v0 + vv : int64_t(v0 + vv) * K + kk))
                                  : 0.f;
  }
  __syncthreads();
  const int64_t c0 = pl.chunk_off[n];
  const int64_t nch = pl.chunk_off[n + 1] - c0;
  for (int64_t c = 0; c < nch && c0 + c < pl.max_chunks; ++c) {
    const int64_t gc = c0 + c;
    const int64_t t0 = pl.bounds[n] + c * C;
    const int len = static_cast<int>(pl.bounds[n + 1] - t0 < C ? pl.bounds[n + 1] - t0 : C);
    for (int e = tid; e < K * kHSlice; e += blockDim.x) {
      const int kk = e / kHSlice, vv = e % kHSlice;
      if (vv < cols) h[((gc * HV + hv) * K + kk) * V + v0 + vv] = S[e];
    }
    if (tid < C) Gs[tid] = tid < len ? G[(t0 + tid) * HV + hv] : TG(0);
    __syncthreads();
    const TG g_last = Gs[len - 1];
    {  // v_new = u - w h for this slice; thread: column vv, rows ig + 4 r
      const int vv = tid % kHSlice, ig = tid / kHSlice;
      float acc[C / 4];
#pragma unroll
      for (int r = 0; r < C / 4; ++r) acc[r] = 0.f;
      for (int kk = 0; kk < K; ++kk) {
        const float s = S[kk * kHSlice + vv];
#pragma unroll
        for (int r = 0; r < C / 4; ++r) {
          const int i = ig + 4 * r;
          if (i < len) acc[r] += w[((t0 + i) * HV + hv) * K + kk] * s;
        }
      }
#pragma unroll
      for (int r = 0; r < C / 4; ++r) {
        const int i = ig + 4 * r;
        float x = 0.f;
        if (i < len && vv < cols) {
          const int64_t o = ((t0 + i) * HV + hv) * V + v0 + vv;
          x = u[o] - acc[r];
          v_new[o] = x;
          x *= expf(float(g_last - Gs[i]));
        }
        vs[i * kHSlice + vv] = x;
      }
    }
    __syncthreads();
    const float decay = expf(float(g_last));
    for (int e = tid; e < K * kHSlice; e += blockDim.x) {
      const int kk = e / kHSlice, vv = e % kHSlice;
      float acc = decay * S[e];
      for (int i = 0; i < len; ++i) acc += ld<T>(k.p, (t0 + i) * k.st + hk * k.sh + kk) * vs[i * kHSlice + vv];
      S[e] = acc;
    }
    __syncthreads();
    // A checkpoint after this chunk: the state as the final-state store below writes it.
    const int64_t r_ck = checkpoint_row_after(ck, n, c, pl.bounds[n + 1] - pl.bounds[n]);
    if (r_ck >= 0) {
      for (int e = tid; e < K * kHSlice; e += blockDim.x) {
        const int kk = e / kHSlice, vv = e % kHSlice;
        if (vv < cols) store_dt(ck.pool.data, sdt, state_elem(ck.pool, r_ck, hv, HV, K, V, kmaj, kk, v0 + vv), S[e]);
      }
    }
  }
  const int64_t r_out = state_row(fin, n);
  if (r_out >= 0) {
    for (int e = tid; e < K * kHSlice; e += blockDim.x) {
      const int kk = e / kHSlice, vv = e % kHSlice;
      if (vv < cols)
        store_dt(fin.data, sdt,
                 state_offset(fin, r_out, hv, HV, KV) + (kmaj ? int64_t(kk) * V + v0 + vv : int64_t(v0 + vv) * K + kk),
                 S[e]);  // the one rounding of a bf16 / fp16 pool
    }
  }
}

// ---- chunk_fwd_o -----------------------------------------------------------------------------------
// VT: the thread layout's width (64, 128 or 256), V <= VT the head size; columns past V are masked.
template <typename T, typename TO, int VT, typename TG>
__global__ void __launch_bounds__(256)
    stage_fwd_o_kernel(Plan pl, int H, int HV, int K, int V, float scale, TensorView q, TensorView k,
                       const float* __restrict__ v_new, const float* __restrict__ h, const TG* __restrict__ G,
                       TO* __restrict__ o, int64_t o_st, int64_t o_sh) {
  extern __shared__ float sm[];
  const int KP = K + 1;
  float* qs = sm;           // [C][K + 1]
  float* ks = qs + C * KP;  // [C][K + 1]
  float* P = ks + C * KP;   // [C][C + 1]
  __shared__ TG Gs[C];
  const int64_t gc = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  const int hk = qk_head_of(hv, HV, H);
  int64_t n, t0;
  int len;
  if (!chunk_info(pl, gc, n, t0, len)) return;
  const int tid = threadIdx.x;
  for (int e = tid; e < C * K; e += blockDim.x) {
    const int i = e / K, d = e % K;
    const bool ok = i < len;
    qs[i * KP + d] = ok ? ld<T>(q.p, (t0 + i) * q.st + hk * q.sh + d) : 0.f;
    ks[i * KP + d] = ok ? ld<T>(k.p, (t0 + i) * k.st + hk * k.sh + d) : 0.f;
  }
  if (tid < C) Gs[tid] = tid < len ? G[(t0 + tid) * HV + hv] : TG(0);
  __syncthreads();
  for (int e = tid; e < C * C; e += blockDim.x) {
    const int i = e / C, j = e % C;
    float r = 0.f;
    if (j <= i && i < len) {
      float dot = 0.f;
      for (int d = 0; d < K; ++d) dot += qs[i * KP + d] * ks[j * KP + d];
      r = dot * expf(float(Gs[i] - Gs[j]));
    }
    P[i * (C + 1) + j] = r;
  }
  __syncthreads();
  constexpr int kGroups = 256 / VT;   // row groups
  constexpr int kRows = C / kGroups;  // rows per thread
  const int vv = tid % VT, ig = tid / VT;
  const bool col = vv < V;  // a column of o (else: masked, computes zeros)
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  const float* hc = h + (gc * HV + hv) * int64_t(K) * V;
  for (int kk = 0; kk < K; ++kk) {
    const float hval = col ? hc[int64_t(kk) * V + vv] : 0.f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] += qs[(ig * kRows + r) * KP + kk] * hval;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] *= expf(float(Gs[ig * kRows + r]));
  for (int j = 0; j < len; ++j) {
    const float x = col ? v_new[((t0 + j) * HV + hv) * V + vv] : 0.f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] += P[(ig * kRows + r) * (C + 1) + j] * x;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = ig * kRows + r;
    if (i < len && col) o[(t0 + i) * o_st + hv * o_sh + vv] = from_f<TO>(scale * acc[r]);
  }
}

template <typename F>
void by_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32:
      f(float{});
      break;
    case DType::kFloat16:
      f(__half{});
      break;
    case DType::kBFloat16:
      f(__nv_bfloat16{});
      break;
  }
}

unsigned chunk_blocks(const StageCtx& c) { return grid_1d(c.pl.max_chunks * c.HV, 1); }

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

// Calls f(T{}, TG{}): the input dtype T, and G's type (fp64 G only with fp32 inputs: the exact forward).
template <typename F>
void by_types(DType dt, GPtr G, F&& f) {
  if (G.fp64)
    f(float{}, double{});
  else
    by_dtype(dt, [&](auto tag) { f(tag, float{}); });
}

void run_kkt(const StageCtx& c, TensorView k, DType kdt, TensorView beta, DType gdt, GPtr G, float* L) {
  if (c.pl.max_chunks == 0) return;
  const size_t smem = sizeof(float) * (C * (c.K + 1) + C);
  by_types(kdt, G, [&](auto tag, auto gtag) {
    using T = decltype(tag);
    using TG = decltype(gtag);
    allow_smem(stage_kkt_kernel<T, TG>, smem);
    stage_kkt_kernel<T, TG>
        <<<chunk_blocks(c), 256, smem, c.s>>>(c.pl, c.H, c.HV, c.K, k, beta, gdt, static_cast<const TG*>(G.p), L);
    GDN_CUDA_LAUNCH_CHECK("stage_kkt_kernel");
  });
}

void run_solve_tril(const StageCtx& c, const float* L, float* A) {
  if (c.pl.max_chunks == 0) return;
  stage_solve_tril_kernel<<<chunk_blocks(c), C, 0, c.s>>>(c.pl, c.HV, L, A);
  GDN_CUDA_LAUNCH_CHECK("stage_solve_tril_kernel");
}

void run_w_u(const StageCtx& c, TensorView k, TensorView v, DType kvdt, TensorView beta, DType gdt, GPtr G,
             const float* A, float* w, float* u) {
  if (c.pl.max_chunks == 0) return;
  by_types(kvdt, G, [&](auto tag, auto gtag) {
    using T = decltype(tag);
    using TG = decltype(gtag);
    stage_w_u_kernel<T, TG><<<chunk_blocks(c), 256, 0, c.s>>>(c.pl, c.H, c.HV, c.K, c.V, k, v, beta, gdt,
                                                              static_cast<const TG*>(G.p), A, w, u);
    GDN_CUDA_LAUNCH_CHECK("stage_w_u_kernel");
  });
}

void run_fwd_h(const StageCtx& c, TensorView k, DType kdt, const float* w, const float* u, GPtr G, const StateRef& init,
               const StateRef& fin, const Checkpoints& ck, float* h, float* v_new) {
  const size_t smem = sizeof(float) * (size_t(c.K) * kHSlice + C * kHSlice);
  const int64_t blocks = c.pl.num_seqs * c.HV * ((c.V + kHSlice - 1) / kHSlice);
  by_types(kdt, G, [&](auto tag, auto gtag) {
    using T = decltype(tag);
    using TG = decltype(gtag);
    allow_smem(stage_fwd_h_kernel<T, TG>, smem);
    stage_fwd_h_kernel<T, TG>
        <<<grid_1d(blocks, 1), 256, smem, c.s>>>(c.pl, c.H, c.HV, c.K, c.V, c.layout, c.state_dtype, k, w, u,
                                                 static_cast<const TG*>(G.p), init, fin, ck, h, v_new);
    GDN_CUDA_LAUNCH_CHECK("stage_fwd_h_kernel");
  });
}

void run_fwd_o(const StageCtx& c, TensorView q, TensorView k, DType qkdt, const float* v_new, const float* h, GPtr G,
               void* o, int64_t o_st, int64_t o_sh, DType odt) {
  if (c.pl.max_chunks == 0) return;
  const size_t smem = sizeof(float) * (2 * C * (c.K + 1) + C * (C + 1));
  auto go = [&](auto ttag, auto otag, auto vtag, auto gtag) {
    using T = decltype(ttag);
    using TO = decltype(otag);
    using TG = decltype(gtag);
    constexpr int VT = decltype(vtag)::value;
    allow_smem(stage_fwd_o_kernel<T, TO, VT, TG>, smem);
    stage_fwd_o_kernel<T, TO, VT, TG><<<chunk_blocks(c), 256, smem, c.s>>>(c.pl, c.H, c.HV, c.K, c.V, c.scale, q, k,
                                                                           v_new, h, static_cast<const TG*>(G.p),
                                                                           static_cast<TO*>(o), o_st, o_sh);
    GDN_CUDA_LAUNCH_CHECK("stage_fwd_o_kernel");
  };
  auto with_v = [&](auto ttag, auto otag, auto gtag) {  // the next instantiated width up
    if (c.V <= 64)
      go(ttag, otag, std::integral_constant<int, 64>{}, gtag);
    else if (c.V <= 128)
      go(ttag, otag, std::integral_constant<int, 128>{}, gtag);
    else
      go(ttag, otag, std::integral_constant<int, 256>{}, gtag);
  };
  if (G.fp64) {  // the exact forward: fp32 q/k, o in the input dtype
    by_dtype(odt, [&](auto otag) { with_v(float{}, otag, double{}); });
  } else {  // stage API: q, k and o share the input dtype
    by_dtype(qkdt, [&](auto tag) { with_v(tag, tag, float{}); });
  }
}

}  // namespace cuda
}  // namespace gdn
