// launch_fwd_h_wgmma_summary (fwd_fast.cuh): the wgmma chain (fwd_h_wgmma.cuh) as the exact split's
// summary pass (kSummary, split.cuh). Its kernels are instantiated here only. Built with
// GDN_SUMMARY_AHEAD (experimental), K = V = 128 with E = EI runs the look-ahead U's summary pass
// instead (summary_ahead.cuh).
#include "cuda/chunk/fwd_h_wgmma_launch.cuh"
#ifdef GDN_SUMMARY_AHEAD
#include "cuda/chunk/summary_ahead.cuh"
#endif

namespace gdn {
namespace cuda {

template <typename E, typename EI>
void launch_fwd_h_wgmma_summary(const FastBufs<E, EI>& b, const SplitBufs& sp, const ForwardArgs& f,
                                const ChunkForwardConfig& cfg, cudaStream_t s) {
#ifdef GDN_SUMMARY_AHEAD
  // (fp16 with l2norm stays on the summary mode: KK rounds a product of raw k rows to E, and
  // fp16's range does not hold it at row norms above ~256 or resolve it below ~1e-2.)
  if constexpr (std::is_same<E, EI>::value) {
    if (b.dk == kD && (std::is_same<E, __nv_bfloat16>::value || !b.l2norm)) return launch_summary_ahead(b, sp, f, s);
  }
#endif
  if (cfg.split_summary_stages == 4)
    launch_wg<4, ChainMode::kSummary>(b, sp, f, s);
  else
    launch_wg<2, ChainMode::kSummary>(b, sp, f, s);
}

template void launch_fwd_h_wgmma_summary(const FastBufs<__nv_bfloat16>&, const SplitBufs&, const ForwardArgs&,
                                         const ChunkForwardConfig&, cudaStream_t);
template void launch_fwd_h_wgmma_summary(const FastBufs<__half>&, const SplitBufs&, const ForwardArgs&,
                                         const ChunkForwardConfig&, cudaStream_t);
// bf16 inputs on fp16 operands (heuristics.h: K = V = 64 always; 128 with GDN_FP16_OPERANDS_D128)
template void launch_fwd_h_wgmma_summary(const FastBufs<__half, __nv_bfloat16>&, const SplitBufs&, const ForwardArgs&,
                                         const ChunkForwardConfig&, cudaStream_t);

}  // namespace cuda
}  // namespace gdn
