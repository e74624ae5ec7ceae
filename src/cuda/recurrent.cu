// The decode step: the token-by-token recurrence, memory-bound on the state (read once, written
// once). One block of 8 warps (16 for K = 256) per (sequence, value head, slice of V); the slice of the fp32 state
// lives in registers, each lane holding VEC contiguous floats of a row of the stored layout so
// that every warp load/store of the state is one contiguous, vectorized run.
//   K-major [K][V]: rows are k (warp w: k = w + 8 i), lanes run along v; reductions over k go
//                   through shared memory across the 8 warps.
//   V-major [V][K]: rows are v, lanes run along k; reductions over k are warp shuffles.
#include "cuda/common.cuh"

namespace gdn {
namespace cuda {
namespace {

struct DecodeArgs {
  const void* q;
  int64_t q_st, q_sh;
  const void* k;
  int64_t k_st, k_sh;
  const void* v;
  int64_t v_st, v_sh;
  void* o;
  int64_t o_st, o_sh;
  DType dt;
  GateArgs gates;
  const void* cu;
  IndexType cu_type;
  int64_t T, N;
  int H, HV;
  float scale;
  bool l2norm;
  StateRef init, fin;
};

template <int VEC>
__device__ __forceinline__ void ld_vec(const float* p, float* r) {
  if constexpr (VEC == 1) {
    r[0] = *p;
  } else if constexpr (VEC == 2) {
    const float2 x = *reinterpret_cast<const float2*>(p);
    r[0] = x.x;
    r[1] = x.y;
  } else {
#pragma unroll
    for (int e = 0; e < VEC; e += 4) {
      const float4 x = *reinterpret_cast<const float4*>(p + e);
      r[e] = x.x;
      r[e + 1] = x.y;
      r[e + 2] = x.z;
      r[e + 3] = x.w;
    }
  }
}
template <int VEC>
__device__ __forceinline__ void st_vec(float* p, const float* r) {
  if constexpr (VEC == 1) {
    *p = r[0];
  } else if constexpr (VEC == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(r[0], r[1]);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; e += 4)
      *reinterpret_cast<float4*>(p + e) = make_float4(r[e], r[e + 1], r[e + 2], r[e + 3]);
  }
}

template <int K, int V, int BV, bool KMAJ, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(DecodeArgs a) {
  constexpr int CONT = KMAJ ? BV : K;  // contiguous run per row
  constexpr int ROWS = KMAJ ? K : BV;  // rows of the tile
  constexpr int VEC = CONT / 32;       // floats per lane per row
  constexpr int RPW = ROWS / kWarps;   // rows per warp
  constexpr int SLICES = V / BV;
  __shared__ float qs[K], ks[K], vsm[BV];
  __shared__ float red[2][kWarps][KMAJ ? BV : 1];
  __shared__ float sc[4];  // inv |q|, inv |k|, q.k (raw), unused

  const int64_t item = blockIdx.x;
  const int sl = static_cast<int>(item % SLICES);
  const int hv = static_cast<int>((item / SLICES) % a.HV);
  const int64_t n = item / (int64_t(SLICES) * a.HV);
  const int hk = hv / (a.HV / a.H);
  const int v0 = sl * BV;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t KV = int64_t(K) * V;

  // Element (row r of this warp's i-th row, lane's e-th float) offset inside one head's state.
  auto off = [&](int i) -> int64_t {
    const int r = warp + kWarps * i;
    return KMAJ ? int64_t(r) * V + v0 + lane * VEC : int64_t(v0 + r) * K + lane * VEC;
  };

  float s[RPW][VEC];
  const int64_t r_in = state_row(a.init, n);
  if (r_in >= 0) {
    const float* base = a.init.data + (r_in * a.HV + hv) * KV;
#pragma unroll
    for (int i = 0; i < RPW; ++i) ld_vec<VEC>(base + off(i), s[i]);
  } else {
#pragma unroll
    for (int i = 0; i < RPW; ++i)
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[i][e] = 0.f;
  }

  int64_t t_begin, t_end;
  {
    const int64_t len = a.N > 0 ? a.T / a.N : 0;
    int64_t b0 = a.cu ? load_index(a.cu, a.cu_type, n) : n * len;
    int64_t b1 = a.cu ? load_index(a.cu, a.cu_type, n + 1) : (n + 1) * len;
    b0 = b0 < 0 ? 0 : (b0 > a.T ? a.T : b0);
    b1 = b1 < b0 ? b0 : (b1 > a.T ? a.T : b1);  // clamped: never outside [0, T]
    t_begin = b0;
    t_end = b1;
  }

  for (int64_t t = t_begin; t < t_end; ++t) {
    __syncthreads();  // the previous token's readers of qs/ks/vsm/red are done
    for (int d = threadIdx.x; d < K; d += blockDim.x) {
      qs[d] = load_dt(a.q, a.dt, t * a.q_st + hk * a.q_sh + d);
      ks[d] = load_dt(a.k, a.dt, t * a.k_st + hk * a.k_sh + d);
    }
    for (int d = threadIdx.x; d < BV; d += blockDim.x) vsm[d] = load_dt(a.v, a.dt, t * a.v_st + hv * a.v_sh + v0 + d);
    float g, beta;
    load_gates(a.gates, t, hv, g, beta);
    __syncthreads();
    if (warp == 0) {
      float sq = 0.f, sk = 0.f, qk = 0.f;
      for (int d = lane; d < K; d += 32) {
        sq += qs[d] * qs[d];
        sk += ks[d] * ks[d];
        qk += qs[d] * ks[d];
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, o);
        sk += __shfl_xor_sync(0xffffffffu, sk, o);
        qk += __shfl_xor_sync(0xffffffffu, qk, o);
      }
      if (lane == 0) {
        sc[0] = a.l2norm ? rsqrtf(sq + 1e-6f) : 1.f;
        sc[1] = a.l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
        sc[2] = qk;
      }
    }
    __syncthreads();
    const float iq = sc[0], ik = sc[1];
    const float kq = sc[2] * iq * ik;  // (normalized k) . (normalized q)
    const float decay = expf(g);
#pragma unroll
    for (int i = 0; i < RPW; ++i)
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[i][e] *= decay;

    if constexpr (KMAJ) {
      float kv[VEC], qv[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) kv[e] = qv[e] = 0.f;
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        const int r = warp + kWarps * i;
        const float kr = ks[r] * ik, qr = qs[r] * iq;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          kv[e] += s[i][e] * kr;
          qv[e] += s[i][e] * qr;
        }
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        red[0][warp][lane * VEC + e] = kv[e];
        red[1][warp][lane * VEC + e] = qv[e];
      }
      __syncthreads();
      float vp[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        float sk = 0.f, sq = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
          sk += red[0][w][lane * VEC + e];
          sq += red[1][w][lane * VEC + e];
        }
        vp[e] = beta * (vsm[lane * VEC + e] - sk);
        if (warp == 0) store_dt(a.o, a.dt, t * a.o_st + hv * a.o_sh + v0 + lane * VEC + e, a.scale * (sq + vp[e] * kq));
      }
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        const float kr = ks[warp + kWarps * i] * ik;
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[i][e] += kr * vp[e];
      }
    } else {
      float kl[VEC], ql[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        kl[e] = ks[lane * VEC + e] * ik;
        ql[e] = qs[lane * VEC + e] * iq;
      }
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        float kv = 0.f, qv = 0.f;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          kv += s[i][e] * kl[e];
          qv += s[i][e] * ql[e];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          kv += __shfl_xor_sync(0xffffffffu, kv, o);
          qv += __shfl_xor_sync(0xffffffffu, qv, o);
        }
        const int r = warp + kWarps * i;
        const float vp = beta * (vsm[r] - kv);
        if (lane == 0) store_dt(a.o, a.dt, t * a.o_st + hv * a.o_sh + v0 + r, a.scale * (qv + vp * kq));
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[i][e] += kl[e] * vp;
      }
    }
  }

  const int64_t r_out = state_row(a.fin, n);
  if (r_out >= 0) {
    float* base = a.fin.data + (r_out * a.HV + hv) * KV;
#pragma unroll
    for (int i = 0; i < RPW; ++i) st_vec<VEC>(base + off(i), s[i]);
  }
}

template <int K, int V>
void launch_kv(const DecodeArgs& a, bool kmaj, cudaStream_t st) {
  // At most 8192 state floats per block (32 a thread): several blocks per SM, so that one
  // block's arithmetic overlaps another's loads.
  constexpr int BV = (K * V > 8192) ? 8192 / K : V;
  constexpr int W = K == 256 ? 16 : 8;  // warps: at most 32 state floats per thread for K = 256
  const int64_t blocks = a.N * a.HV * (V / BV);
  if (kmaj)
    decode_kernel<K, V, BV, true, W><<<grid_1d(blocks, 1), W * 32, 0, st>>>(a);
  else
    decode_kernel<K, V, BV, false, W><<<grid_1d(blocks, 1), W * 32, 0, st>>>(a);
  GDN_CUDA_LAUNCH_CHECK("decode_kernel");
}

template <int K>
void launch_k(const DecodeArgs& a, int V, bool kmaj, cudaStream_t st) {
  if (V == 64)
    launch_kv<K, 64>(a, kmaj, st);
  else if (V == 128)
    launch_kv<K, 128>(a, kmaj, st);
  else
    launch_kv<K, 256>(a, kmaj, st);
}

}  // namespace

GateArgs make_gates(const ForwardArgs& f) {
  GateArgs g;
  g.g = f.g.data;
  g.g_st = f.g.stride_token;
  g.g_sh = f.g.stride_head;
  g.beta = f.beta.data;
  g.b_st = f.beta.stride_token;
  g.b_sh = f.beta.stride_head;
  g.dt = f.problem.gate_dtype;
  g.fused = f.problem.fused_gate;
  g.A_log = f.A_log;
  g.dt_bias = f.dt_bias;
  return g;
}

void recurrent_gated_delta_rule(const ForwardArgs& f, const Exec& exec) {
  const Problem& p = f.problem;
  const int K = p.head_k, V = p.head_v;
  auto ok = [](int d) { return d == 64 || d == 128 || d == 256; };
  if (!ok(K) || !ok(V))
    throw Error("recurrent_gated_delta_rule: head_k and head_v must be 64, 128 or 256 on the CUDA backend");
  DecodeArgs a;
  a.q = f.q.data;
  a.q_st = f.q.stride_token;
  a.q_sh = f.q.stride_head;
  a.k = f.k.data;
  a.k_st = f.k.stride_token;
  a.k_sh = f.k.stride_head;
  a.v = f.v.data;
  a.v_st = f.v.stride_token;
  a.v_sh = f.v.stride_head;
  a.o = f.o.data;
  a.o_st = f.o.stride_token;
  a.o_sh = f.o.stride_head;
  a.dt = p.dtype;
  a.gates = make_gates(f);
  a.cu = p.cu_seqlens;
  a.cu_type = p.cu_seqlens_type;
  a.T = p.num_tokens;
  a.N = p.num_seqs;
  a.H = p.num_qk_heads;
  a.HV = p.num_v_heads;
  a.scale = p.scale;
  a.l2norm = p.use_qk_l2norm;
  a.init = f.initial_state;
  a.fin = f.final_state;
  const bool kmaj = p.state_layout == StateLayout::kKMajor;
  cudaStream_t st = stream_of(exec);
  if (K == 64)
    launch_k<64>(a, V, kmaj, st);
  else if (K == 128)
    launch_k<128>(a, V, kmaj, st);
  else
    launch_k<256>(a, V, kmaj, st);
}

}  // namespace cuda
}  // namespace gdn
