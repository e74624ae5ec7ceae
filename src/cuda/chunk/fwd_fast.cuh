// The tensor-core forward (bf16 mma.sync, fp32 accumulation) for bf16/fp16 inputs, K = V = D in
// {64, 128}. Three kernels:
//   fwd_prep (parallel over chunks): gates, cumsum, k k^T, (I + L)^-1, w and u      (fwd_prep.cu)
//   fwd_h    (sequential over chunks, state on chip): v_new, h per chunk, final state (fwd_h.cu)
//   fwd_o    (parallel over chunks): o                                               (fwd_o.cu)
// Workspace intermediates are bf16 (w, u, v_new, h) as in flash-linear-attention; G is fp64.
#pragma once
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

bool fast_path_supported(const Problem& p);
size_t fast_workspace_size(const Problem& p);
void fast_forward(const ForwardArgs& f, const Exec& exec);

// Device pointers of one fast forward.
struct FastBufs {
  Plan pl;
  int64_t T;
  int H, HV;
  float scale;
  // q and k as bf16 rows with 16-byte aligned pieces: the caller's tensors when they are bf16 and
  // aligned, else packed copies in the workspace. Never normalized: with l2norm the kernels apply
  // the rows' inverse norms in fp32 (to products and scalings), so the bf16 operands stay exact.
  const __nv_bfloat16* q;  // [T, H, D] (token stride q_st, head stride q_sh)
  const __nv_bfloat16* k;  // [T, H, D]
  int64_t q_st, q_sh, k_st, k_sh;
  bool l2norm;
  float* rk;             // [H, T] inverse l2 norms of k's rows (written by fwd_prep; 1 without l2norm)
  double* Gt;            // [HV, T] chunk-local cumsum (fp64), head-major (contiguous per chunk)
  __nv_bfloat16* w;      // [T, HV, D]
  __nv_bfloat16* u;      // [T, HV, D]
  __nv_bfloat16* v_new;  // [T, HV, D]
  __nv_bfloat16* h;      // [max_chunks, HV, D, D] state at each chunk start, K-major
  // Chunk-level hand-off from fwd_h to fwd_o, which then run at the same time (fwd_o launched
  // with programmatic dependent launch): ready[gc * HV + hv] counts the V slices of (chunk gc, head
  // hv) whose h and v_new fwd_h has stored; fwd_o's block waits for ready_count. fwd_prep zeroes
  // it. Null: fwd_h does not signal, fwd_o runs after it in stream order.
  int* ready;  // [max_chunks, HV]
  int ready_count;
};

// Width of fwd_h's V slices: 32, 64, or 0 (the launcher's choice, the default).
void set_fwd_h_bv(int bv);
// fwd_h for D = 128 on Hopper wgmma (fwd_h_wgmma.cu, the default: true) or on mma.sync (fwd_h.cu,
// false; kept for the A/B timing of the device check). No effect for D = 64.
void set_fwd_h_wgmma(bool on);
// fwd_o overlapping the wgmma fwd_h (b.ready hand-off; the default: true) or after it (false).
void set_fwd_o_overlap(bool on);
// Phase timing for the device check: with 6 events set, fast_forward records one before the plan
// and one after each phase (plan, q/k packing, prep, h, o). Null (the default) records nothing.
void set_fast_timing(cudaEvent_t* events);

template <int D>
void launch_fwd_prep(const FastBufs& b, const ForwardArgs& f, cudaStream_t s);
template <int D>
void launch_fwd_h(const FastBufs& b, const ForwardArgs& f, cudaStream_t s);
template <int D>
void launch_fwd_o(const FastBufs& b, const ForwardArgs& f, cudaStream_t s);
// The wgmma fwd_h (D = 128): one warpgroup per (sequence, value head, 64-wide V slice).
// It signals b.ready per chunk when b.ready is set (fwd_o then overlaps it).
void launch_fwd_h_wgmma(const FastBufs& b, const ForwardArgs& f, int num_sms, cudaStream_t s);
// Whether fwd_o should overlap fwd_h for this problem: launch_fwd_h takes the wgmma kernel (which
// signals b.ready) and its blocks leave SMs idle.
bool fwd_h_signals_ready(const Problem& p);

}  // namespace cuda
}  // namespace gdn
