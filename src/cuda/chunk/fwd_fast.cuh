// The tensor-core forward (16-bit tensor-core products, fp32 accumulation) for bf16/fp16 inputs,
// K = V = D in {64, 128, 256}. Two or three kernels:
//   kkt_solve (parallel over chunks): gates, cumsum, k k^T, A_s = (I + L)^-1 diag(beta) on the
//            tensor cores (kkt_solve.cu)
//   fwd_h    (sequential over chunks, state on chip): wgmma, v_new = A_s (v - k S) formed on chip,
//            the final state, and o by a second warpgroup (fused) or h and v_new per chunk for
//            fwd_o (fwd_h_wgmma.cuh)
//   fwd_o    (parallel over chunks, D = 128 where the chain stores, 256 always): o    (fwd_o.cu)
// D = 64 runs the same kernels on their 128-wide layout: k and q padded with zero columns (kkt_solve
// and the chain's ring fill only the first 64), the state's rows past 64 zero, one 64-wide V slice
// per head (fwd_h_wgmma.cuh's kDK); always with o fused.
// The 16-bit operand type E of every tensor-core product is the input dtype (bf16 or fp16, as in
// flash-linear-attention): the kernels are templates on E, the mma / wgmma instructions take
// .bf16 or .f16 from it, and the workspace intermediates (A_s, v_new, h) are stored in E; G is
// fp64. q, k and v share one dtype (Problem::qk_dtype = dtype; backend.cu copies mixed dtypes).
// With cfg.fp16_operands (D = 64; D = 128 with GDN_FP16_OPERANDS_D128: heuristics.h), E = fp16 beside
// EI = bf16 inputs:
// the wgmma chain's ring converts q and k to fp16 in place, fwd_o its fragments, v is unpacked from
// bf16, o is stored in bf16, and no chunk takes the lo passes (chain_precise.cuh: fp16's 11 bits
// make them unnecessary there).
// fp16 intermediates can overflow (65504) only with |v| or initial-state entries near it, or with
// keys of norm > 1 (no l2norm); the argument, and what tiny w (strong decays) loses: docs/perf.md v10.
// The tuning choices come in a ChunkForwardConfig (heuristics.h), never from global state.
#pragma once
#include "cuda/chunk/heuristics.h"
#include "cuda/chunk/row_maps.cuh"
#include "cuda/chunk/split.cuh"
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

// The head sizes K = V of the tensor-core forward (its kernels' kDK: 64 padded to 128, 128, 256 on
// two chain warpgroups); fast_path_supported and kkt_solve's launcher ask here.
constexpr bool tensor_core_head(int64_t d) { return d == 64 || d == 128 || d == 256; }
// The wgmma chain's width for head size dk (its k ring, h staging and the split's part states;
// K = V = 64 padded to 128): the kernel's shared memory (chain_layout.cuh) and the workspace.
constexpr int chain_width(int dk) { return dk > 128 ? dk : 128; }
bool fast_path_supported(const Problem& p);
// Workspace of a fast forward run with `cfg` (the split's buffers depend on it).
size_t fast_workspace_size(const Problem& p, const ChunkForwardConfig& cfg);

// Phase timing for the device check: fast_forward records at[0] before the plan and at[i + 1]
// after phase i (plan, q/k copies of unaligned rows, prep, the split's summary pass and scan, h,
// o). The summary pass and the scan are phases of their own only with a scan (3+ parts); with 2
// parts the chain runs beside the summary pass (its programmatic dependent), and h holds both.
struct PhaseEvents {
  static constexpr int kCount = 8;
  cudaEvent_t at[kCount];
};

// The forward with the choices of `cfg` (chunk_forward_heuristics', or a tool's explicit config;
// a config the kernels cannot run throws gdn::Error). Phase events are recorded when given.
// f.initial_state, f.final_state and f.checkpoints are pools of f.problem.state_dtype (fp32, fp16
// or bf16): the chain reads its initial row and writes its final row and checkpoints in it
// (cuda/core/checkpoints.cuh).
void fast_forward(const ForwardArgs& f, const Exec& exec, const ChunkForwardConfig& cfg,
                  const PhaseEvents* phases = nullptr);

// Device pointers of one fast forward; E is the 16-bit operand type of the tensor-core products
// (__nv_bfloat16 or __half), EI the dtype of the inputs q, k, v and of o (E, or bf16 beside fp16
// operands: fp16_operands, heuristics.h).
template <typename E, typename EI = E>
struct FastBufs {
  Plan pl;
  int64_t T;
  int H, HV;
  int dk;  // K = V: 64, 128 or 256 (64 runs padded to the chain's 128, 256 on two chain warpgroups: kDK)
  float scale;
  // q and k as rows of EI with 16-byte aligned pieces: the caller's tensors when aligned, else
  // copies in the workspace. Never normalized: with l2norm the kernels apply the rows' inverse
  // norms in fp32 (to products and scalings), so the 16-bit operands stay the caller's exact values.
  const EI* q;  // [T, H, D] (token stride q_st, head stride q_sh)
  const EI* k;  // [T, H, D]
  int64_t q_st, q_sh, k_st, k_sh;
  // v as rows with 16-byte aligned pieces for the chain (the caller's tensor when aligned, else a
  // copy in u's workspace).
  const EI* v;  // [T, HV, D] (token stride v_st, head stride v_sh)
  int64_t v_st, v_sh;
  RowMaps maps;  // q, k, v above as TMA tensor maps (row_maps.cuh), the chain's copies
  bool l2norm;
  float* rk;   // [H, T] inverse l2 norms of k's rows (written by kkt_solve; 1 without l2norm)
  double* Gt;  // [HV, T] chunk-local cumsum (fp64), head-major (contiguous per chunk)
  // (kkt_solve writes it for the wgmma chain): [HV, T] (exp(G_i), exp(G_last - G_i)) of
  // token i, G_last its chunk's last G, from fp64 G: the chain's decays without fp64 or an
  // exponential in its loop (the o warpgroup's gates: exp(G_i - G_j) = e.y_j / e.y_i).
  float2* eg;
  // The split only (written by kkt_solve): [max_chunks, HV] the log of a bound on the norm
  // of chunk gc's state transition M_c (split.cuh): G_last where every beta of the chunk is in
  // [0, 2] and k is l2-normalized (each token's map is then e^g (I - beta k k^T), of norm <= e^g),
  // else +inf (no bound). Null without a split.
  float* transition_log_bound;
  E* w;  // A_s = (I + L)^-1 diag(beta) as images [max_chunks, HV, 2, 64, 64] (fwd_a_image; the
         // chain applies it: fwd_h_wgmma.cuh)
  E* u;  // [T, HV, D]: the copy of v (EI) when its rows are not aligned
  // o by fwd_o (D = 128, 256): v_new as images [max_chunks, HV, D / 64, 64, 64] (fwd_v_image), its lo part
  // E(v_new - E(v_new)) as the same images, written by the chain for weakly decaying chunks only
  // (precise_state_chunk) and read by fwd_o for those only, and h as images
  // [max_chunks, HV, D / 64, D, 64] (fwd_h_image)
  E* v_new;
  E* v_new_lo;
  E* h;
};

// D = 128 and 256 (the wgmma chain's store mode): h_c and v_new leave the chain as images of its
// shared-memory staging, one per (chunk gc, value head hv, 64-wide V slice sl of D / 64): h_c's
// [D kk][64 vv] (D = 128: 16 KB; 256: 32 KB, rows kk < 128 first, each half laid out as D = 128's
// image) and v_new's [64 tokens][64 vv] (8 KB, rows past the chunk's end zero), both in 128-byte
// rows with the 128-byte swizzle (16-byte piece ch of row r at byte sw128(r, ch)). fwd_o
// un-swizzles on load. Offsets in elements of b.h ([max_chunks, HV, D / 64, D, 64]) and b.v_new
// ([max_chunks, HV, D / 64, 64, 64]); dk = D.
GDN_HOST_DEVICE inline int64_t fwd_h_image(int64_t gc, int hv, int sl, int HV, int dk = 128) {
  return ((gc * static_cast<uint32_t>(HV) + hv) * (dk / 64) + sl) * (int64_t(dk) * 64);
}
GDN_HOST_DEVICE inline int64_t fwd_v_image(int64_t gc, int hv, int sl, int HV, int dk = 128) {
  return ((gc * static_cast<uint32_t>(HV) + hv) * (dk / 64) + sl) * (kChunkSize * 64);
}
// A_s of chunk gc and value head hv goes the other way, kkt_solve -> the chain, as the image of the
// chain's ring stage (one bulk copy, chain_prefetch): its hi part's [64 rows i][64 columns j], then
// its lo part's, in 128-byte rows with the same swizzle; every row written (past the chunk's end:
// zeros). Offset in elements of b.w ([max_chunks, HV, 2, 64, 64]). (HV widened as unsigned in all
// three: the chain runs at up to 255 registers, and HV's sign word carried through it spilled.)
GDN_HOST_DEVICE inline int64_t fwd_a_image(int64_t gc, int hv, int HV) {
  return (gc * static_cast<uint32_t>(HV) + hv) * (2 * kChunkSize * 64);
}

// Whether a tensor of 2-byte elements can be read or written in 16-byte row pieces: an aligned
// base and strides that keep every row's start aligned.
template <class Tensor>
inline bool rows_in_16_byte_pieces(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride_token % 8 == 0 && t.stride_head % 8 == 0;
}

// The launchers, instantiated for E = EI = __nv_bfloat16 and __half, and for E = __half on
// EI = __nv_bfloat16 (fp16 operands: the chain at D = 64; D = 128 and fwd_o with GDN_FP16_OPERANDS_D128).
// The prep on the tensor cores (kkt_solve.cu): G, r and A_s only (A_s in E, from k in EI).
template <typename E, typename EI>
void launch_kkt_solve(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s);
// o after the storing chain (K = V = 128 and 256: 64 always fuses o).
template <typename E, typename EI>
void launch_fwd_o(const FastBufs<E, EI>& b, const ForwardArgs& f, cudaStream_t s);
// fwd_h on wgmma: one warpgroup per (sequence, part, value head, 64-wide V slice);
// one part per sequence without a split (sp.chunks_per_part = 0); it stores h and v_new for fwd_o,
// which runs after it, or computes o itself (cfg.fuse_o). `after_summary`: launched right after the
// split's summary pass as its programmatic dependent (no scan between them: split.cuh).
template <typename E, typename EI>
void launch_fwd_h_wgmma(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f,
                        const ChunkForwardConfig& cfg, cudaStream_t s, bool after_summary);
// The split's scan (split_scan.cu): every part's exact initial state from the summaries, in blocks
// of `cols` (8, 16 or 32: ChunkForwardConfig::split_scan_cols) columns of V (d = K = V).
void launch_split_scan(const Plan& pl, const SplitBufs& sp, int64_t num_seqs, int HV, int d, int cols, cudaStream_t s);
// The split's summary pass (split.cuh): the same chain per (sequence, part, head, slice of V + K).
template <typename E, typename EI>
void launch_fwd_h_wgmma_summary(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f,
                                const ChunkForwardConfig& cfg, cudaStream_t s);

}  // namespace cuda
}  // namespace gdn
