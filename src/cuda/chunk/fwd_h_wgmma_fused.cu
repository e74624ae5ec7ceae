// The wgmma chain (fwd_h_wgmma.cuh) with o fused (kFusedO): launch_fwd_h_wgmma's branch for
// cfg.fuse_o. Its kernels are instantiated here only.
#include "cuda/chunk/fwd_h_wgmma_launch.cuh"

namespace gdn {
namespace cuda {
namespace chain {

template <typename E, typename EI>
void launch_fused(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f, cudaStream_t s,
                  bool after_summary) {
  // 3 stages and the o warpgroup: ~221 KiB (bf16 and fp16), one block per SM.
  launch_wg<3, ChainMode::kFusedO>(b, sp, f, s, after_summary);
}

template void launch_fused(const FastBufs<__nv_bfloat16>&, const SplitBufs&, const ForwardArgs&, cudaStream_t, bool);
template void launch_fused(const FastBufs<__half>&, const SplitBufs&, const ForwardArgs&, cudaStream_t, bool);
// bf16 inputs on fp16 operands (heuristics.h: K = V = 64 always; 128 with GDN_FP16_OPERANDS_D128)
template void launch_fused(const FastBufs<__half, __nv_bfloat16>&, const SplitBufs&, const ForwardArgs&, cudaStream_t,
                           bool);

}  // namespace chain
}  // namespace cuda
}  // namespace gdn
