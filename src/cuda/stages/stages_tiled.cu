// The exact stages' products, chunk_scaled_dot_kkt, recompute_w_u, chunk_fwd_h and chunk_fwd_o:
// fp32 on the CUDA cores, tiled in registers (each thread a 4 x 4 tile of the output, its operands read from shared
// memory 16 bytes at a time: 64 FMA per 8 loads), over K in pieces of 64 rows. Any K and V in
// [1, 256]: pieces and slices past K and V are zero in shared memory, never stored. Each output
// element sums its terms in a fixed order: bitwise deterministic.
#include "cuda/core/checkpoints.cuh"
#include "cuda/stages/stage_dispatch.cuh"
#include "cuda/stages/stages.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;
constexpr int kPiece = 64;       // rows of K in one shared-memory piece
constexpr int kSlice = 64;       // V columns per fwd_h block and per fwd_o pass
constexpr int kLd = kPiece + 4;  // row stride of a [64][64] tile: 16-byte rows; a warp's two
                                 // row groups (4 rows apart) fall in different banks
constexpr int kThreads = 256;    // 16 x 16 threads, a 4 x 4 tile each: one 64 x 64 output

__host__ __device__ constexpr int padded_k(int K) { return (K + kPiece - 1) / kPiece * kPiece; }

__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float at(const float4& x, int i) { return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w; }

// acc[r][c] += sum_x a[r][x] b[x][c]: a holds 4 rows' values at depths x (rows of A), b 4 depths'
// values at columns c (rows of B).
__device__ __forceinline__ void fma_rows_depth(float (&acc)[4][4], const float4 (&a)[4], const float4 (&b)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const float ar = at(a[r], x);
      acc[r][0] = fmaf(ar, b[x].x, acc[r][0]);
      acc[r][1] = fmaf(ar, b[x].y, acc[r][1]);
      acc[r][2] = fmaf(ar, b[x].z, acc[r][2]);
      acc[r][3] = fmaf(ar, b[x].w, acc[r][3]);
    }
}

// acc[r][c] += sum_x a[r][x] b[c][x]: both operands as rows over the depth (q k^T).
__device__ __forceinline__ void fma_rows_rows(float (&acc)[4][4], const float4 (&a)[4], const float4 (&b)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float s = acc[r][c];
      s = fmaf(a[r].x, b[c].x, s);
      s = fmaf(a[r].y, b[c].y, s);
      s = fmaf(a[r].z, b[c].z, s);
      s = fmaf(a[r].w, b[c].w, s);
      acc[r][c] = s;
    }
}

// acc[r][c] += a[r] b[c] (one depth: the state update's outer products).
__device__ __forceinline__ void fma_outer(float (&acc)[4][4], const float4& a, const float4& b) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float ar = at(a, r);
    acc[r][0] = fmaf(ar, b.x, acc[r][0]);
    acc[r][1] = fmaf(ar, b.y, acc[r][1]);
    acc[r][2] = fmaf(ar, b.z, acc[r][2]);
    acc[r][3] = fmaf(ar, b.w, acc[r][3]);
  }
}

__device__ __forceinline__ void zero(float (&acc)[4][4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.f;
}

// acc += A[64 x 64] B[64 x 64] over one piece: A's rows at a (stride lda), B's rows at b (stride ldb);
// this thread's tile rows tr.., columns tc...
__device__ __forceinline__ void piece_product(float (&acc)[4][4], const float* a, int lda, const float* b, int ldb,
                                              int tr, int tc, int depth) {
  for (int x = 0; x < depth; x += 4) {
    float4 av[4], bv[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) av[r] = lds4(a + (tr + r) * lda + x);
#pragma unroll
    for (int d = 0; d < 4; ++d) bv[d] = lds4(b + (x + d) * ldb + tc);
    fma_rows_depth(acc, av, bv);
  }
}

// ---- chunk_scaled_dot_kkt: one block per (chunk, hv); L = beta_i (k_i . k_j) e^(G_i - G_j), j < i --
template <typename T, typename TG>
__global__ void __launch_bounds__(kThreads)
    stage_kkt_kernel(Plan pl, int H, int HV, int K, TensorView k, TensorView beta, DType gdt, const TG* __restrict__ G,
                     float* __restrict__ L) {
  __shared__ __align__(16) float buf[C * kLd];  // [C][kLd]: a piece of k's columns
  __shared__ TG Gs[C];
  __shared__ float bs[C];
  ChunkHead ch;
  if (!chunk_head(pl, H, HV, ch)) return;
  const int64_t t0 = ch.t0;
  const int hv = ch.hv, hk = ch.hk, len = ch.len;
  const int tid = threadIdx.x;
  const int tr = (tid / 16) * 4, tj = tid % 16;  // rows tr.., columns tj + 16 cc (as fwd_o's q k^T)
  if (tid < C) {
    Gs[tid] = tid < len ? G[(t0 + tid) * HV + hv] : TG(0);
    bs[tid] = tid < len ? load_dt(beta.p, gdt, (t0 + tid) * beta.st + hv * beta.sh) : 0.f;
  }
  float acc[4][4];
  zero(acc);
  for (int p = 0; p < padded_k(K); p += kPiece) {
    __syncthreads();
    for (int e = tid; e < C * kPiece; e += kThreads) {
      const int i = e / kPiece, kk = e % kPiece;
      buf[i * kLd + kk] = i < len && p + kk < K ? ld<T>(k.p, (t0 + i) * k.st + hk * k.sh + p + kk) : 0.f;
    }
    __syncthreads();
    for (int x = 0; x < kPiece; x += 4) {
      float4 av[4], bv[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) av[r] = lds4(buf + (tr + r) * kLd + x);
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) bv[cc] = lds4(buf + (tj + 16 * cc) * kLd + x);
      fma_rows_rows(acc, av, bv);
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = tr + r;
    if (i >= len) continue;
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {  // mask before exponentiating: exp(G_i - G_j) overflows for j > i
      const int j = tj + 16 * cc;
      L[((t0 + i) * HV + hv) * C + j] = j < i ? bs[i] * acc[r][cc] * expf(float(Gs[i] - Gs[j])) : 0.f;
    }
  }
}

// out[i][d0 + ..] = sum_j A[i][j] scale_j x[j][d0 + ..] for one 64-column slice (rows i < len,
// columns d < D): x's rows at x0 + j x_st, out's rows at out + i out_st.
template <typename T>
__device__ __forceinline__ void w_u_slice(const float* As, float* xs, const float* scale, const void* x, int64_t x0,
                                          int64_t x_st, float* out, int64_t out_st, int D, int d0, int len, int depth,
                                          int tr, int tc) {
  __syncthreads();  // xs's last readers are done (the first pass: As and the scales are written)
  for (int e = threadIdx.x; e < C * kSlice; e += kThreads) {
    const int j = e / kSlice, dd = e % kSlice;
    xs[j * kLd + dd] = j < len && d0 + dd < D ? scale[j] * ld<T>(x, x0 + j * x_st + d0 + dd) : 0.f;
  }
  __syncthreads();
  float acc[4][4];
  zero(acc);
  piece_product(acc, As, kLd, xs, kLd, tr, tc, depth);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = tr + r;
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      const int d = d0 + tc + cc;
      if (i < len && d < D) out[i * out_st + d] = acc[r][cc];
    }
  }
}

// ---- recompute_w_u: one block per (chunk, hv); w = A (beta e^G k), u = A (beta v), 64 columns a pass --
template <typename T, typename TG>
__global__ void __launch_bounds__(kThreads)
    stage_w_u_kernel(Plan pl, int H, int HV, int K, int V, TensorView k, TensorView v, TensorView beta, DType gdt,
                     const TG* __restrict__ G, const float* __restrict__ A, float* __restrict__ w,
                     float* __restrict__ u) {
  __shared__ __align__(16) float As[C * kLd];  // [C][kLd]: A, rows past len zero (and A[i][j > i] = 0)
  __shared__ __align__(16) float xs[C * kLd];  // [C][kLd]: 64 columns of beta e^G k or of beta v
  __shared__ float cw[C], cu[C];
  ChunkHead ch;
  if (!chunk_head(pl, H, HV, ch)) return;
  const int64_t t0 = ch.t0;
  const int hv = ch.hv, hk = ch.hk, len = ch.len;
  const int tid = threadIdx.x;
  const int tr = (tid / 16) * 4, tc = (tid % 16) * 4;
  for (int e = tid; e < C * C; e += kThreads) {
    const int i = e / C, j = e % C;
    As[i * kLd + j] = i < len ? A[((t0 + i) * HV + hv) * C + j] : 0.f;
  }
  if (tid < C) {
    const float b = tid < len ? load_dt(beta.p, gdt, (t0 + tid) * beta.st + hv * beta.sh) : 0.f;
    cw[tid] = tid < len ? b * expf(float(G[(t0 + tid) * HV + hv])) : 0.f;
    cu[tid] = b;
  }
  const int depth = (len + 3) & ~3;       // A's columns past len are zero
  for (int d0 = 0; d0 < K; d0 += kSlice)  // w, 64 columns a pass
    w_u_slice<T>(As, xs, cw, k.p, t0 * k.st + hk * k.sh, k.st, w + (t0 * HV + hv) * int64_t(K), int64_t(HV) * K, K, d0,
                 len, depth, tr, tc);
  for (int d0 = 0; d0 < V; d0 += kSlice)  // u
    w_u_slice<T>(As, xs, cu, v.p, t0 * v.st + hv * v.sh, v.st, u + (t0 * HV + hv) * int64_t(V), int64_t(HV) * V, V, d0,
                 len, depth, tr, tc);
}

// ---- chunk_fwd_h: one block per (sequence, hv, 64-wide slice of V), sequential over chunks -------
template <typename T, typename TG>
__global__ void __launch_bounds__(kThreads)
    stage_fwd_h_kernel(Plan pl, int H, int HV, int K, int V, StateLayout layout, DType sdt, TensorView k,
                       const float* __restrict__ w, const float* __restrict__ u, const TG* __restrict__ G,
                       StateRef init, StateRef fin, Checkpoints ck, float* __restrict__ h, float* __restrict__ v_new) {
  extern __shared__ float4 sm4[];
  const int KP = padded_k(K);
  float* S = reinterpret_cast<float*>(sm4);  // [KP][kSlice]: the state's slice, rows past K zero
  float* buf = S + KP * kSlice;              // [C][kLd]: a piece of w or of k (rows: tokens)
  float* vs = buf + C * kLd;                 // [C][kSlice]: v_new_i * exp(G_last - G_i)
  __shared__ TG Gs[C];
  const int slices = (V + kSlice - 1) / kSlice;
  const int64_t item = blockIdx.x;
  const int sl = static_cast<int>(item % slices);
  const int hv = static_cast<int>((item / slices) % HV);
  const int64_t n = item / (int64_t(slices) * HV);
  const int hk = qk_head_of(hv, HV, H);
  const int v0 = sl * kSlice;
  const int cols = min(kSlice, V - v0);  // columns of this slice inside V; the rest stay zero
  const int tid = threadIdx.x;
  const int tr = (tid / 16) * 4, tc = (tid % 16) * 4;  // this thread's 4 x 4 tile
  const bool kmaj = layout == StateLayout::kKMajor;
  const int64_t KV = int64_t(K) * V;
  const int64_t r_in = state_row(init, n);
  for (int e = tid; e < KP * kSlice; e += kThreads) {
    const int kk = e / kSlice, vv = e % kSlice;
    S[e] = r_in >= 0 && kk < K && vv < cols
               ? load_dt(init.data, sdt,
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
    for (int e = tid; e < K * kSlice; e += kThreads) {
      const int kk = e / kSlice, vv = e % kSlice;
      if (vv < cols) h[((gc * HV + hv) * K + kk) * V + v0 + vv] = S[e];
    }
    if (tid < C) Gs[tid] = tid < len ? G[(t0 + tid) * HV + hv] : TG(0);
    float acc[4][4];
    zero(acc);
    // v_new = u - w h: w's columns a piece at a time
    for (int p = 0; p < KP; p += kPiece) {
      __syncthreads();  // buf's last readers are done (and, at p = 0, Gs is written)
      for (int e = tid; e < C * kPiece; e += kThreads) {
        const int i = e / kPiece, kk = e % kPiece;
        buf[i * kLd + kk] = i < len && p + kk < K ? w[((t0 + i) * HV + hv) * K + p + kk] : 0.f;
      }
      __syncthreads();
      piece_product(acc, buf, kLd, S + p * kSlice, kSlice, tr, tc, kPiece);
    }
    const TG g_last = Gs[len - 1];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = tr + r;
      float x4[4];
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
        const int vv = tc + cc;
        float x = 0.f;
        if (i < len && vv < cols) {
          const int64_t o = ((t0 + i) * HV + hv) * V + v0 + vv;
          x = u[o] - acc[r][cc];
          v_new[o] = x;
          x *= expf(float(g_last - Gs[i]));
        }
        x4[cc] = x;
      }
      *reinterpret_cast<float4*>(vs + i * kSlice + tc) = make_float4(x4[0], x4[1], x4[2], x4[3]);
    }
    const float decay = expf(float(g_last));
    // S = decay S + k~^T vs: S's rows a piece at a time (each piece's rows only need its k columns)
    for (int p = 0; p < KP; p += kPiece) {
      __syncthreads();  // buf's readers are done; vs is complete
      for (int e = tid; e < C * kPiece; e += kThreads) {
        const int i = e / kPiece, kk = e % kPiece;
        buf[i * kLd + kk] = i < len && p + kk < K ? ld<T>(k.p, (t0 + i) * k.st + hk * k.sh + p + kk) : 0.f;
      }
      __syncthreads();
      zero(acc);
      for (int i = 0; i < len; ++i) fma_outer(acc, lds4(buf + i * kLd + tr), lds4(vs + i * kSlice + tc));
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        float4* s = reinterpret_cast<float4*>(S + (p + tr + r) * kSlice + tc);
        float4 x = *s;
        x.x = fmaf(decay, x.x, acc[r][0]);
        x.y = fmaf(decay, x.y, acc[r][1]);
        x.z = fmaf(decay, x.z, acc[r][2]);
        x.w = fmaf(decay, x.w, acc[r][3]);
        *s = x;
      }
    }
    __syncthreads();
    // A checkpoint after this chunk: the state as the final-state store below writes it.
    const int64_t r_ck = checkpoint_row_after(ck, n, c, pl.bounds[n + 1] - pl.bounds[n]);
    if (r_ck >= 0) {
      for (int e = tid; e < K * kSlice; e += kThreads) {
        const int kk = e / kSlice, vv = e % kSlice;
        if (vv < cols) store_dt(ck.pool.data, sdt, state_elem(ck.pool, r_ck, hv, HV, K, V, kmaj, kk, v0 + vv), S[e]);
      }
    }
  }
  const int64_t r_out = state_row(fin, n);
  if (r_out >= 0) {
    for (int e = tid; e < K * kSlice; e += kThreads) {
      const int kk = e / kSlice, vv = e % kSlice;
      if (vv < cols)
        store_dt(fin.data, sdt,
                 state_offset(fin, r_out, hv, HV, KV) + (kmaj ? int64_t(kk) * V + v0 + vv : int64_t(v0 + vv) * K + kk),
                 S[e]);  // the one rounding of a bf16 / fp16 pool
    }
  }
}

// ---- chunk_fwd_o: one block per (chunk, hv); o = scale (e^G q h + P v_new), 64 columns a pass ----
template <typename T, typename TO, typename TG>
__global__ void __launch_bounds__(kThreads)
    stage_fwd_o_kernel(Plan pl, int H, int HV, int K, int V, float scale, TensorView q, TensorView k,
                       const float* __restrict__ v_new, const float* __restrict__ h, const TG* __restrict__ G,
                       TO* __restrict__ o, int64_t o_st, int64_t o_sh) {
  extern __shared__ float4 sm4[];
  const int KP = padded_k(K);
  const int QL = KP + 4;                      // q's row stride (16-byte rows, row groups apart in banks)
  float* qs = reinterpret_cast<float*>(sm4);  // [C][QL]: q, zero past len and K
  float* buf = qs + C * QL;                   // [C][kLd]: a piece of k, of h, or v_new's slice
  float* P = buf + C * kLd;                   // [C][kLd]: (q k^T)_ij e^(G_i - G_j), j <= i < len, else 0
  __shared__ TG Gs[C];
  ChunkHead ch;
  if (!chunk_head(pl, H, HV, ch)) return;
  const int64_t gc = ch.gc, t0 = ch.t0;
  const int hv = ch.hv, hk = ch.hk, len = ch.len;
  const int tid = threadIdx.x;
  const int tr = (tid / 16) * 4, tc = (tid % 16) * 4;
  for (int e = tid; e < C * KP; e += kThreads) {
    const int i = e / KP, d = e % KP;
    qs[i * QL + d] = i < len && d < K ? ld<T>(q.p, (t0 + i) * q.st + hk * q.sh + d) : 0.f;
  }
  if (tid < C) Gs[tid] = tid < len ? G[(t0 + tid) * HV + hv] : TG(0);
  // q k^T's tile: rows tr.., columns tj + 16 cc (k's rows 16 apart: a quarter warp's 16-byte reads
  // of 8 consecutive rows fall in distinct banks; 4 apart they would share two)
  const int tj = tid % 16;
  float acc[4][4];
  zero(acc);
  for (int p = 0; p < KP; p += kPiece) {  // q k^T over k's pieces
    __syncthreads();
    for (int e = tid; e < C * kPiece; e += kThreads) {
      const int j = e / kPiece, kk = e % kPiece;
      buf[j * kLd + kk] = j < len && p + kk < K ? ld<T>(k.p, (t0 + j) * k.st + hk * k.sh + p + kk) : 0.f;
    }
    __syncthreads();
    for (int x = 0; x < kPiece; x += 4) {
      float4 av[4], bv[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) av[r] = lds4(qs + (tr + r) * QL + p + x);
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) bv[cc] = lds4(buf + (tj + 16 * cc) * kLd + x);
      fma_rows_rows(acc, av, bv);
    }
  }
  float eg[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = tr + r;
    eg[r] = expf(float(Gs[i]));
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {  // mask before exponentiating: exp(G_i - G_j) overflows for j > i
      const int j = tj + 16 * cc;
      P[i * kLd + j] = j <= i && i < len ? acc[r][cc] * expf(float(Gs[i] - Gs[j])) : 0.f;
    }
  }
  const float* hc = h + (gc * HV + hv) * int64_t(K) * V;  // [K, V]
  for (int vs0 = 0; vs0 < V; vs0 += kSlice) {
    zero(acc);
    for (int p = 0; p < KP; p += kPiece) {  // q h over h's row pieces
      __syncthreads();
      for (int e = tid; e < kPiece * kSlice; e += kThreads) {
        const int kk = e / kSlice, vv = e % kSlice;
        buf[kk * kLd + vv] = p + kk < K && vs0 + vv < V ? hc[int64_t(p + kk) * V + vs0 + vv] : 0.f;
      }
      __syncthreads();
      piece_product(acc, qs + p, QL, buf, kLd, tr, tc, kPiece);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) acc[r][cc] *= eg[r];
    __syncthreads();
    for (int e = tid; e < C * kSlice; e += kThreads) {
      const int j = e / kSlice, vv = e % kSlice;
      buf[j * kLd + vv] = j < len && vs0 + vv < V ? v_new[((t0 + j) * HV + hv) * V + vs0 + vv] : 0.f;
    }
    __syncthreads();
    piece_product(acc, P, kLd, buf, kLd, tr, tc, (len + 3) & ~3);  // P's columns past len are zero
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = tr + r;
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
        const int vv = vs0 + tc + cc;
        if (i < len && vv < V) o[(t0 + i) * o_st + hv * o_sh + vv] = from_f<TO>(scale * acc[r][cc]);
      }
    }
  }
}

size_t fwd_h_smem(int K) { return sizeof(float) * (size_t(padded_k(K)) * kSlice + C * kLd + C * kSlice); }
size_t fwd_o_smem(int K) { return sizeof(float) * (size_t(C) * (padded_k(K) + 4) + 2 * C * kLd); }

}  // namespace

void run_kkt(const StageCtx& c, TensorView k, DType kdt, TensorView beta, DType gdt, GPtr G, float* L) {
  if (c.pl.max_chunks == 0) return;
  by_types(kdt, G, [&](auto tag, auto gtag) {
    using T = decltype(tag);
    using TG = decltype(gtag);
    stage_kkt_kernel<T, TG>
        <<<chunk_blocks(c), kThreads, 0, c.s>>>(c.pl, c.H, c.HV, c.K, k, beta, gdt, static_cast<const TG*>(G.p), L);
    GDN_CUDA_LAUNCH_CHECK("stage_kkt_kernel");
  });
}

void run_w_u(const StageCtx& c, TensorView k, TensorView v, DType kvdt, TensorView beta, DType gdt, GPtr G,
             const float* A, float* w, float* u) {
  if (c.pl.max_chunks == 0) return;
  by_types(kvdt, G, [&](auto tag, auto gtag) {
    using T = decltype(tag);
    using TG = decltype(gtag);
    stage_w_u_kernel<T, TG><<<chunk_blocks(c), kThreads, 0, c.s>>>(c.pl, c.H, c.HV, c.K, c.V, k, v, beta, gdt,
                                                                   static_cast<const TG*>(G.p), A, w, u);
    GDN_CUDA_LAUNCH_CHECK("stage_w_u_kernel");
  });
}

void run_fwd_h(const StageCtx& c, TensorView k, DType kdt, const float* w, const float* u, GPtr G, const StateRef& init,
               const StateRef& fin, const Checkpoints& ck, float* h, float* v_new) {
  const size_t smem = fwd_h_smem(c.K);
  const int64_t blocks = c.pl.num_seqs * c.HV * ((c.V + kSlice - 1) / kSlice);
  by_types(kdt, G, [&](auto tag, auto gtag) {
    using T = decltype(tag);
    using TG = decltype(gtag);
    allow_smem(stage_fwd_h_kernel<T, TG>, smem);
    stage_fwd_h_kernel<T, TG>
        <<<grid_1d(blocks, 1), kThreads, smem, c.s>>>(c.pl, c.H, c.HV, c.K, c.V, c.layout, c.state_dtype, k, w, u,
                                                      static_cast<const TG*>(G.p), init, fin, ck, h, v_new);
    GDN_CUDA_LAUNCH_CHECK("stage_fwd_h_kernel");
  });
}

void run_fwd_o(const StageCtx& c, TensorView q, TensorView k, DType qkdt, const float* v_new, const float* h, GPtr G,
               void* o, int64_t o_st, int64_t o_sh, DType odt) {
  if (c.pl.max_chunks == 0) return;
  const size_t smem = fwd_o_smem(c.K);
  auto go = [&](auto ttag, auto otag, auto gtag) {
    using T = decltype(ttag);
    using TO = decltype(otag);
    using TG = decltype(gtag);
    allow_smem(stage_fwd_o_kernel<T, TO, TG>, smem);
    stage_fwd_o_kernel<T, TO, TG><<<chunk_blocks(c), kThreads, smem, c.s>>>(c.pl, c.H, c.HV, c.K, c.V, c.scale, q, k,
                                                                            v_new, h, static_cast<const TG*>(G.p),
                                                                            static_cast<TO*>(o), o_st, o_sh);
    GDN_CUDA_LAUNCH_CHECK("stage_fwd_o_kernel");
  };
  if (G.fp64) {  // the exact forward: fp32 q/k, o in the input dtype
    by_dtype(odt, [&](auto otag) { go(float{}, otag, double{}); });
  } else {  // stage API: q, k and o share the input dtype
    by_dtype(qkdt, [&](auto tag) { go(tag, tag, float{}); });
  }
}

}  // namespace cuda
}  // namespace gdn
