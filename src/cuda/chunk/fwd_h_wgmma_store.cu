// launch_fwd_h_wgmma (fwd_fast.cuh): the wgmma chain (fwd_h_wgmma.cuh) in its store mode, h and
// v_new per chunk for fwd_o, which runs after it (kStoreBulk, ST = 2), or the fused modes'
// launchers (fwd_h_wgmma_fused.cu, fwd_h_wgmma_serial.cu). The store kernels are instantiated here only.
#include "cuda/chunk/fwd_h_wgmma_launch.cuh"

namespace gdn {
namespace cuda {

template <typename E, typename EI>
void launch_fwd_h_wgmma(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f,
                        const ChunkForwardConfig& cfg, cudaStream_t s, bool after_summary) {
  if (cfg.fuse_o) {
    if (cfg.fuse_o_serial)
      chain::launch_fused_serial(b, sp, f, s, after_summary);
    else
      chain::launch_fused(b, sp, f, s, after_summary);
    return;
  }
  // fwd_o after this kernel: h and v_new leave by bulk copies; 2 stages (107.5 KB, two blocks per
  // SM): the heuristics store only in several waves (fast_forward checked the config).
  launch_wg<2, ChainMode::kStoreBulk>(b, sp, f, s, after_summary);
}

template void launch_fwd_h_wgmma(const FastBufs<__nv_bfloat16>&, const SplitBufs&, const ForwardArgs&,
                                 const ChunkForwardConfig&, cudaStream_t, bool);
template void launch_fwd_h_wgmma(const FastBufs<__half>&, const SplitBufs&, const ForwardArgs&,
                                 const ChunkForwardConfig&, cudaStream_t, bool);
// bf16 inputs on fp16 operands (heuristics.h: K = V = 64 always; 128 with GDN_FP16_OPERANDS_D128)
template void launch_fwd_h_wgmma(const FastBufs<__half, __nv_bfloat16>&, const SplitBufs&, const ForwardArgs&,
                                 const ChunkForwardConfig&, cudaStream_t, bool);

}  // namespace cuda
}  // namespace gdn
