// The wgmma chain kernel's launch (fwd_h_wgmma.cuh): its grid, shared memory and the one place
// where the head size becomes the kernel's kDK. Included by the files that instantiate the modes:
// fwd_h_wgmma_store.cu (kStoreBulk; launch_fwd_h_wgmma), fwd_h_wgmma_fused.cu (kFusedO;
// chain::launch_fused), fwd_h_wgmma_serial.cu (kFusedSerial; chain::launch_fused_serial),
// fwd_h_wgmma_summary.cu (kSummary; launch_fwd_h_wgmma_summary).
#pragma once

#include "cuda/chunk/fwd_h_wgmma.cuh"

namespace gdn {
namespace cuda {
namespace {

// One head size's launch (launch_wg below picks kDK).
template <int ST, ChainMode kMode, typename E, typename EI, int kDK>
void launch_wg_d(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f, cudaStream_t s,
                 bool after_summary) {
  constexpr bool kFused = kMode == ChainMode::kFusedO || kMode == ChainMode::kFusedSerial;
  const size_t smem = sizeof(WgSmem<ST, kFused, E, chain_width(kDK)>) + 1024;  // + alignment slack
  const int64_t blocks =
      f.problem.num_seqs * sp.max_parts * b.HV * (kDK / kBV) * (kMode == ChainMode::kSummary ? 2 : 1);
  // o in 16-byte row pieces when the caller's layout allows it (kFusedO), else element by element.
  const OutRef out = {f.o.data, f.o.stride_token, f.o.stride_head, rows_in_16_byte_pieces(f.o)};
  auto k = chunk_fwd_h_wgmma_kernel<ST, kMode, E, EI, kDK>;
  allow_smem(k, smem);
  const LaunchConfig lc(dim3(grid_1d(blocks, 1)), dim3(chain_threads(kMode, kDK)), smem, s, after_summary);
  check(cudaLaunchKernelEx(&lc.cfg, k, b, sp, f.initial_state, f.final_state,
                           f.problem.state_layout == StateLayout::kKMajor, out, checkpoint_out(f)),
        kMode == ChainMode::kSummary  ? "chunk_fwd_h_wgmma_kernel (split summary)"
        : kMode == ChainMode::kFusedO ? "chunk_fwd_h_wgmma_kernel (fused o)"
        : kFused                      ? "chunk_fwd_h_wgmma_kernel (fused o, serial)"
                                      : "chunk_fwd_h_wgmma_kernel");
}

// `after_summary`: launched as a programmatic dependent of the split's summary pass (split.cuh).
// The head size b.dk becomes the kernel's kDK here, the one place (K = V = 64: the fused modes and
// the summary; fast_forward's check_config refuses the store mode there).
template <int ST, ChainMode kMode, typename E, typename EI>
void launch_wg(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f, cudaStream_t s,
               bool after_summary = false) {
  if constexpr (kMode != ChainMode::kStoreBulk) {
    if (b.dk == 64) return launch_wg_d<ST, kMode, E, EI, 64>(b, sp, f, s, after_summary);
  }
  // K = V = 256: the store mode and the summary pass on 2 stages (fast_forward's check_config).
  if constexpr ((kMode == ChainMode::kStoreBulk || (kMode == ChainMode::kSummary && ST == 2)) &&
                std::is_same<E, EI>::value) {
    if (b.dk == 256) return launch_wg_d<ST, kMode, E, EI, 256>(b, sp, f, s, after_summary);
  }
  // (fp16 operands for bf16 inputs at K = V = 128: built with GDN_FP16_OPERANDS_D128 only;
  // fast_forward's check_config refuses them otherwise.)
  if constexpr (std::is_same<E, EI>::value || kFp16OperandsD128)
    launch_wg_d<ST, kMode, E, EI, kD>(b, sp, f, s, after_summary);
  else
    throw Error("chunk_fwd_h_wgmma_kernel: fp16 operands at K = V = 128 are built only with GDN_FP16_OPERANDS_D128");
}

}  // namespace

namespace chain {

// launch_fwd_h_wgmma's fused branch (fwd_h_wgmma_fused.cu): kFusedO with 3 stages and the o
// warpgroup (~221 KiB with the h_lo image; one block per SM; o in EI). Instantiated for E = EI =
// __nv_bfloat16 and __half, and for fp16 operands on bf16 inputs.
template <typename E, typename EI>
void launch_fused(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f, cudaStream_t s,
                  bool after_summary);
// ... its serial form (fwd_h_wgmma_serial.cu, cfg.fuse_o_serial): kFusedSerial, one stage, one
// warpgroup doing each chunk's chain and then its o (~108 KB: two blocks per SM).
template <typename E, typename EI>
void launch_fused_serial(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f, cudaStream_t s,
                         bool after_summary);

}  // namespace chain
}  // namespace cuda
}  // namespace gdn
