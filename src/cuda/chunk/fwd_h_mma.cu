// fwd_h for D = K = V = 64 on mma.sync: the sequential part. One block per (sequence, value head,
// BV-wide slice of V, BV = 32 or 64); the fp32 state slice [D][BV] lives in registers (mma
// accumulator layout) across all chunks of the sequence, and the next chunks' w, k, u, G stream into
// shared memory (cp.async, 2 or 3 stages) while the current one is computed. Per chunk:
//   h_c -> workspace (E, for fwd_o);  v_new = u - w h_c  (mma);  v_new -> workspace (E)
//   S = exp(G_last) S + k^T (exp(G_last - G_i) v_new_i)   (mma)
//   at a checkpoint boundary: S -> the checkpoint's pool row (cuda/core/checkpoints.cuh)
// 8 warps split both products (4 warps: a longer serial chain per chunk, measured slower). BV = 64 halves
// the re-reads of w and k (every slice block of a head reads them whole: the kernel is bound by
// L2 bandwidth with BV = 32) but holds one block per SM; BV = 32 suits many short sequences.
// The kernel is written for any D that is a multiple of 16; D = 128 runs on wgmma (fwd_h_wgmma.cuh),
// so only D = 64 is instantiated. BV and the stage count: ChunkForwardConfig (heuristics.h).
// E: the 16-bit operand type (the input dtype, bf16 or fp16; fwd_fast.cuh); EI: the inputs' (k: E,
// or bf16 beside fp16 operands, whose fragments become fp16 for the update).
#include "cuda/chunk/fwd_fast.cuh"
#include "cuda/core/checkpoints.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int C = kChunkSize;

template <int D, int BV, int ST, typename E>
struct HSmem {
  static constexpr int SK = D + 8;
  static constexpr int SV = BV + 8;
  E w[ST][C * SK];  // ST-stage ring of the chunks' operands
  E k[ST][C * SK];
  E u[ST][C * SV];
  double G[ST][C];
  float rk[ST][C];  // inverse l2 norms of k's rows (fwd_prep's), with l2norm
  E h[D * SV];      // h_c as the B operand of w h
  E vs[C * SV];     // decayed v_new as the B operand of the state update
};

template <int D, int BV, int NW, int ST, typename E, typename EI>
__global__ void __launch_bounds__(NW * 32, 1)
    chunk_fwd_h_mma_kernel(FastBufs<E, EI> b, StateRef init, StateRef fin, bool kmajor, CheckpointOut ck) {
  extern __shared__ __align__(16) char smem_raw[];
  using S = HSmem<D, BV, ST, E>;
  S& sm = *reinterpret_cast<S*>(smem_raw);
  constexpr int kThreads = NW * 32;
  // State update [D][BV] += k^T vs: warp = (um, ung) owns UMT m-tiles of 16 state rows and UNP
  // pairs of 8-wide column tiles.
  constexpr int MTILES = D / 16;
  constexpr int UMT = MTILES >= NW ? MTILES / NW : 1;
  constexpr int UNG = MTILES >= NW ? 1 : NW / MTILES;
  constexpr int UNP = (BV / 16) / UNG;
  // v_new [C][BV]: warp = (vm, vng): rows [16 vm, +16), VNP column pairs.
  constexpr int VNG = NW / 4;
  constexpr int VNP = (BV / 16) / VNG;
  static_assert(UNP >= 1 && VNP >= 1, "warp split");
  const int HV = b.HV;
  constexpr int SLICES = D / BV;
  const int64_t item = blockIdx.x;
  const int sl = static_cast<int>(item % SLICES);
  const int hv = static_cast<int>((item / SLICES) % HV);
  int64_t n;  // the plan's longest first
  const SeqChunks sc = ordered_seq_chunks(b.pl, item / (int64_t(SLICES) * HV), n);
  const int hk = qk_head_of(hv, HV, b.H);
  const int v0 = sl * BV;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int um = warp / UNG, ung = warp % UNG;
  const int vm = warp / VNG, vng = warp % VNG;
  const int64_t DD = int64_t(D) * D;

  // State fragment element (mt, nt, e) is S[kk][vv]: kk = 16 (UMT um + mt) + g + 8 (e / 2),
  // vv = 16 UNP ung + 8 nt + 2 t + e % 2 (within the slice).
  auto row_of = [&](int mt, int e) { return 16 * (UMT * um + mt) + g + 8 * (e / 2); };
  auto col_of = [&](int nt, int e) { return 16 * UNP * ung + 8 * nt + 2 * t + e % 2; };
  float st[UMT][2 * UNP][4];
  // The state registers -> row r of a pool of element type dt (the final state: fp32 rows; a
  // checkpoint: the caller's pool, rounded once).
  auto store_state = [&](const StateRef& pool, int64_t r, DType dt) {
#pragma unroll
    for (int mt = 0; mt < UMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2 * UNP; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          store_dt(pool.data, dt, state_elem(pool, r, hv, HV, D, D, kmajor, row_of(mt, e), v0 + col_of(nt, e)),
                   st[mt][nt][e]);
  };
  {
    const int64_t r = state_row(init, n);
    const float* base = r >= 0 ? static_cast<const float*>(init.data) + state_offset(init, r, hv, HV, DD) : nullptr;
#pragma unroll
    for (int mt = 0; mt < UMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2 * UNP; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kk = row_of(mt, e), vv = v0 + col_of(nt, e);
          st[mt][nt][e] = base ? base[kmajor ? int64_t(kk) * D + vv : int64_t(vv) * D + kk] : 0.f;
        }
  }

  const int64_t c0 = sc.c0, nch = sc.count, tb = sc.tb, te = sc.te;

  auto prefetch = [&](int64_t c, int stage) {
    const int64_t t0 = tb + c * C;
    const int len = static_cast<int>(te - t0 < C ? te - t0 : C);
    for (int e = tid; e < C * D / 8; e += kThreads) {
      const int i = e / (D / 8), c8 = (e % (D / 8)) * 8;
      const bool ok = i < len;
      const int64_t tt = t0 + (ok ? i : 0);
      cp_async16(&sm.w[stage][i * S::SK + c8], b.w + (tt * HV + hv) * D + c8, ok ? 16 : 0);
      cp_async16(&sm.k[stage][i * S::SK + c8], b.k + tt * b.k_st + hk * b.k_sh + c8, ok ? 16 : 0);
    }
    for (int e = tid; e < C * BV / 8; e += kThreads) {
      const int i = e / (BV / 8), c8 = (e % (BV / 8)) * 8;
      const bool ok = i < len;
      cp_async16(&sm.u[stage][i * S::SV + c8], b.u + ((t0 + (ok ? i : 0)) * HV + hv) * D + v0 + c8, ok ? 16 : 0);
    }
    if (tid < C) {
      const bool ok = tid < len;
      cp_async8(&sm.G[stage][tid], b.Gt + int64_t(hv) * b.T + t0 + (ok ? tid : 0), ok ? 8 : 0);
    } else if (tid < 2 * C && b.l2norm) {
      const int i = tid - C;
      const bool ok = i < len;
      cp_async4(&sm.rk[stage][i], b.rk + int64_t(hk) * b.T + t0 + (ok ? i : 0), ok ? 4 : 0);
    }
  };

  // Chunks 0 .. ST - 2 in flight before the loop; chunk c + ST - 1 is issued in iteration c,
  // behind the w h product (its stage was last read in iteration c - 1, which ended in a barrier).
  // One commit group per chunk (empty past the end), so that "all but the newest ST - 2 groups
  // complete" means "chunk c has landed".
#pragma unroll
  for (int c = 0; c < ST - 1; ++c) {
    if (c < nch) prefetch(c, c);
    cp_async_commit();
  }
  int stage = 0;
  for (int64_t c = 0; c < nch; ++c) {
    const int64_t gc = c0 + c;
    const int64_t t0 = tb + c * C;
    const int len = static_cast<int>(te - t0 < C ? te - t0 : C);

    // h_c: to shared memory (B operand of w h), then from there to the workspace for fwd_o in
    // 16-byte pieces (whole 32-byte sectors, not the 4-byte fragments).
#pragma unroll
    for (int mt = 0; mt < UMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2 * UNP; ++nt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int kk = row_of(mt, 2 * hf), vv = col_of(nt, 0);
          *reinterpret_cast<uint32_t*>(&sm.h[kk * S::SV + vv]) = pack2<E>(st[mt][nt][2 * hf], st[mt][nt][2 * hf + 1]);
        }
    cp_async_wait<ST - 2>();
    __syncthreads();
    {
      E* hg = b.h + (gc * HV + hv) * DD + v0;  // [D][D] K-major, this slice's columns
      for (int e = tid; e < D * BV / 8; e += kThreads) {
        const int kk = e / (BV / 8), c8 = (e % (BV / 8)) * 8;
        *reinterpret_cast<uint4*>(hg + int64_t(kk) * D + c8) = *reinterpret_cast<const uint4*>(&sm.h[kk * S::SV + c8]);
      }
    }

    const double* Gs = sm.G[stage];
    const double g_last = Gs[len - 1];
    // v_new = u - w h: warp rows [16 vm, 16 vm + 16), column pairs [VNP vng, +VNP).
    {
      float acc[2 * VNP][4];
#pragma unroll
      for (int nt = 0; nt < 2 * VNP; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t a[4];
        frag_a(sm.w[stage], S::SK, 16 * vm, 16 * ks, a);
#pragma unroll
        for (int np = 0; np < VNP; ++np) {
          uint32_t bb[4];
          frag_b_kn(sm.h, S::SV, 16 * (VNP * vng + np), 16 * ks, bb);
          mma16<E>(acc[2 * np], a, bb[0], bb[1]);
          mma16<E>(acc[2 * np + 1], a, bb[2], bb[3]);
        }
      }
      {
        const int64_t cn = c + ST - 1;
        int sn = stage + ST - 1;
        if (sn >= ST) sn -= ST;
        if (cn < nch) prefetch(cn, sn);
        cp_async_commit();
      }
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = 16 * vm + g + 8 * hf;
        const bool ok = i < len;
        // k_i is normalized by r_i: fold it into the update's operand with the decay.
        const float decay = ok ? __expf(float(g_last - Gs[i])) * (b.l2norm ? sm.rk[stage][i] : 1.f) : 0.f;
        E* vrow = b.v_new + ((t0 + (ok ? i : 0)) * HV + hv) * D + v0;
#pragma unroll
        for (int nt = 0; nt < 2 * VNP; ++nt) {
          const int vv = 16 * VNP * vng + 8 * nt + 2 * t;
          const float2 uu = unpack2<E>(*reinterpret_cast<const uint32_t*>(&sm.u[stage][i * S::SV + vv]));
          const float x0 = uu.x - acc[nt][2 * hf], x1 = uu.y - acc[nt][2 * hf + 1];
          if (ok) *reinterpret_cast<uint32_t*>(vrow + vv) = pack2<E>(x0, x1);
          // One rounding for the update's operand: the fp32 v_new, decayed.
          *reinterpret_cast<uint32_t*>(&sm.vs[i * S::SV + vv]) = pack2<E>(x0 * decay, x1 * decay);
        }
      }
    }
    __syncthreads();
    // S = exp(G_last) S + k^T vs; the k-dim is the chunk's tokens.
    {
      const float dl = __expf(float(g_last));
#pragma unroll
      for (int mt = 0; mt < UMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2 * UNP; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) st[mt][nt][e] *= dl;
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        uint32_t bb[UNP][4];
#pragma unroll
        for (int np = 0; np < UNP; ++np) frag_b_kn(sm.vs, S::SV, 16 * (UNP * ung + np), 16 * ks, bb[np]);
#pragma unroll
        for (int mt = 0; mt < UMT; ++mt) {
          uint32_t a[4];
          frag_a_t(sm.k[stage], S::SK, 16 * (UMT * um + mt), 16 * ks, a);
          as_operands<E, EI>(a);  // (k: the inputs' type)
#pragma unroll
          for (int np = 0; np < UNP; ++np) {
            mma16<E>(st[mt][2 * np], a, bb[np][0], bb[np][1]);
            mma16<E>(st[mt][2 * np + 1], a, bb[np][2], bb[np][3]);
          }
        }
      }
    }
    // A checkpoint after this chunk (stores only: off the chain's dependencies).
    {
      const int64_t r_ck = checkpoint_row_after(ck.ck, n, c, te - tb);
      if (r_ck >= 0) store_state(ck.ck.pool, r_ck, ck.dtype);
    }
    __syncthreads();  // stage buffers, h and vs are rewritten next iteration
    if (++stage == ST) stage = 0;
  }
  cp_async_wait<0>();

  const int64_t r = state_row(fin, n);
  if (r >= 0) store_state(fin, r, DType::kFloat32);
}

template <int D, int BV, int NW, int ST, typename E, typename EI>
void launch(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s) {
  const size_t smem = sizeof(HSmem<D, BV, ST, E>);
  const int64_t blocks = f.problem.num_seqs * b.HV * (D / BV);
  auto k = chunk_fwd_h_mma_kernel<D, BV, NW, ST, E, EI>;
  allow_smem(k, smem);
  k<<<grid_1d(blocks, 1), NW * 32, smem, s>>>(b, f.initial_state, f.final_state,
                                              f.problem.state_layout == StateLayout::kKMajor, checkpoint_out(f));
  GDN_CUDA_LAUNCH_CHECK("chunk_fwd_h_mma_kernel");
}

}  // namespace

template <typename E, typename EI>
void launch_fwd_h_mma(const FastBufs<E, EI>& b, const ForwardArgs& f, const ChunkForwardConfig& cfg, cudaStream_t s) {
  constexpr int D = 64;
  const bool three_stages = cfg.fwd_h_stages == 3;  // else 2 (fast_forward checked the config)
  if (cfg.fwd_h_slice_width == 64) {
    if (three_stages)
      launch<D, 64, 8, 3, E, EI>(b, f, s);
    else
      launch<D, 64, 8, 2, E, EI>(b, f, s);
  } else {
    if (three_stages)
      launch<D, 32, 8, 3, E, EI>(b, f, s);
    else
      launch<D, 32, 8, 2, E, EI>(b, f, s);
  }
}

template void launch_fwd_h_mma(const FastBufs<__nv_bfloat16>&, const ForwardArgs&, const ChunkForwardConfig&,
                               cudaStream_t);
template void launch_fwd_h_mma(const FastBufs<__half>&, const ForwardArgs&, const ChunkForwardConfig&, cudaStream_t);
template void launch_fwd_h_mma(const FastBufs<__half, __nv_bfloat16>&, const ForwardArgs&, const ChunkForwardConfig&,
                               cudaStream_t);

}  // namespace cuda
}  // namespace gdn
