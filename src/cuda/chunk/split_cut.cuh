// The split's two decisions on the device (split.cuh), made by the wgmma chain kernel
// (fwd_h_wgmma.cuh) from kkt_solve's per-chunk transition bounds (FastBufs::transition_log_bound:
// G_last where every beta is in [0, 2] and k is l2-normalized, so that the chunk's map of the state
// has norm <= e^G_last; else +inf): where a part's history cannot matter, and where part 1 of two
// begins. In an anonymous namespace like the kernel (each file that includes it keeps its own copy).
#pragma once

#include <cstdint>

#include "cuda/chunk/split.cuh"

namespace gdn {
namespace cuda {
namespace {

// The split's summary pass: the history of a part that cannot matter (split.cuh). The first chunk
// of the shortest suffix of the sequence's chunks [cb, ce) whose transitions have norm bounds
// (FastBufs::transition_log_bound, sequence chunk c at global chunk c_seq + c) that multiply to at
// most e^-kNegligibleLogNorm, where every chunk before it has a bound <= 0 (so that the history
// it drops did not grow the state); else -1 (NaN or +inf bounds never count as small; null
// bounds, no split: -1). Whatever entered the state before that chunk reaches the part's end
// scaled by at most e^-64. Warp 0 walks back from ce, 32 chunks a step (on the bench's gates the
// first step ends it), then checks the chunks before; every thread of the block calls it, once.
constexpr float kNegligibleLogNorm = 64.f;
__device__ __forceinline__ int64_t negligible_history_start(const float* bound, int64_t c_seq, int64_t cb, int64_t ce,
                                                            int hv, int HV) {
  if (bound == nullptr) return -1;
  __shared__ int64_t start_shared;
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    int64_t start = -1;
    float after = 0.f;  // the bounds' sum over the chunks after this step's window
    for (int64_t end = ce; end > cb; end -= 32) {
      const int64_t c = end - 1 - lane;  // lane 0: the window's last chunk
      float x = c >= cb ? bound[(c_seq + c) * HV + hv] : 0.f;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
      }
      // x: the sum over chunks c .. end - 1; the lowest lane that reaches the bound, the shortest suffix.
      const unsigned hit = __ballot_sync(0xffffffffu, c >= cb && after + x <= -kNegligibleLogNorm);
      if (hit) {
        start = end - __ffs(hit);
        break;
      }
      after += __shfl_sync(0xffffffffu, x, 31);
    }
    // The dropped history must not have grown the state either: every chunk before the suffix
    // bounded with G_last <= 0 (beta in [0, 2], no positive net gate), else no cut.
    for (int64_t end = start; start >= 0 && end > cb; end -= 32) {
      const int64_t c = end - 1 - lane;
      if (__any_sync(0xffffffffu, c >= cb && !(bound[(c_seq + c) * HV + hv] <= 0.f))) start = -1;
    }
    if (lane == 0) start_shared = start;
  }
  __syncthreads();
  return start_shared;
}

// Two parts of one sequence: where part 1 begins (SplitBufs::even_first_chunks): the middle where,
// for every value head, the kEvenWindow chunks before it have transition bounds that multiply
// below e^-kNegligibleLogNorm (the summary pass's S_1 then runs those chunks only), else
// first_part_chunks. One decision for all heads (the chain's part 1 waits for the whole summary
// grid, so one slow head makes equal parts slower for all), from data kkt_solve wrote before any
// of these kernels ran; each warp decides for itself, the same sums in the same order, so every
// warp of every kernel agrees. No barrier (a block-wide vote here made ptxas serialize the chain's
// wgmmas, C7520). Every thread calls it, before any returns.
__device__ __forceinline__ int first_part_here(const SplitBufs& sp, const float* bound, int64_t c_seq, int64_t count,
                                               int HV) {
  if (sp.even_first_chunks <= 0 || bound == nullptr || count <= sp.even_first_chunks) return sp.first_part_chunks;
  // Each lane of a warp sums a head's window (32 heads a step); every warp decides alike.
  const int lane = static_cast<int>(threadIdx.x % 32);
  bool slow = false;
  for (int h0 = 0; h0 < HV; h0 += 32) {
    float x = 0.f;
    if (h0 + lane < HV)
      for (int i = 1; i <= kEvenWindow; ++i) x += bound[(c_seq + sp.even_first_chunks - i) * HV + h0 + lane];
    slow |= __any_sync(0xffffffffu, h0 + lane < HV && !(x <= -kNegligibleLogNorm));  // (NaN: slow)
  }
  return slow ? sp.first_part_chunks : sp.even_first_chunks;
}

}  // namespace
}  // namespace cuda
}  // namespace gdn
