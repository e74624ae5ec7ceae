// Exact splitting of long sequences across SMs (SPEC section 3: "each chunk is an affine map of
// the state"). Chosen by the chunk forward's heuristics when the (sequence, value head) chains
// would leave most SMs idle (the wgmma chain: K = V = 64 and 128; K = V = 256 in two parts of one
// sequence at most, with no scan: its M_p, 256 x 256 fp32, would fit no block's shared memory).
//
// A sequence of `count` chunks is cut into a first part of Q0 = first_part_chunks chunks and
// parts of Q = chunks_per_part after it (the last part shorter): part p >= 1 covers its chunks
// [Q0 + (p - 1) Q, min(Q0 + p Q, count)). Q0 = Q but for two parts of one sequence, where part 0
// runs beside the summary pass (it needs no summary) and is the longer for it (heuristics.h). Each chunk maps the state
// S [K x V] as S -> M_c S + B_c with M_c = e^{G_last} I - k~^T w [K x K] and B_c = k~^T u [K x V]
// (k~_i = e^{G_last - G_i} k_i); a part composes its chunks' maps into (M_p, B_p). Three passes:
//   1. summary (the wgmma chain kernel, summary mode; parts run in parallel): part 0 runs from
//      the sequence's initial state and its end state is S_1; part p in 1 .. parts - 2 runs its
//      chain from zero (-> B_p, V columns) and on the identity with u = 0 (-> M_p, K columns).
//      The last part needs no summary. Where the transitions of a suffix of the part have norm
//      bounds that multiply to below e^-64 (kkt_solve's per-chunk e^G_last: beta in [0, 2], k
//      l2-normalized) and none before it exceeds 1, what entered the state before that suffix
//      cannot matter: M_p is 0 (not computed, not stored: flagged for the scan), and B_p (part 0:
//      S_1) is the chain from zero over the suffix only. The result moves by at most e^-64 times the state dropped
//      (an absolute error under fp32's rounding of any state of comparable size); a NaN or an
//      inf in the dropped history's inputs no longer reaches later parts.
//   2. scan (split_scan.cu): S_{p+1} = M_p S_p + B_p in fp32 (the product on the tensor cores in
//      three tf32 passes, ~2^-21 relative), sequential over the parts (B_p alone where M_p is
//      negligible).
//   3. the chain kernel as without the split, one block per (part, head, slice), each part from
//      its exact initial state S_p; h, v_new per chunk and, from the last part, the final state.
//      Without a scan (2 parts at most) it is a programmatic dependent of the summary pass: its
//      part 0 blocks start at once, the others wait for the summary (griddepcontrol.wait).
// Nothing that can matter is truncated: the result equals the unsplit chain up to rounding (and
// the e^-64 above) for any gates (also g = 0, where nothing decays). No atomics: bitwise
// deterministic.
// Host-compatible (the heuristics' tests include it); the scan's launcher is in fwd_fast.cuh.
#pragma once
#include <cstdint>

#include "common/spec_math.h"

namespace gdn {
namespace cuda {

// SplitBufs::even_first_chunks: the chunks before the middle whose transition bounds decide it.
constexpr int kEvenWindow = 4;

struct SplitBufs {
  int chunks_per_part = 0;    // Q; 0: no split
  int first_part_chunks = 0;  // Q0 (= Q unless the heuristics make part 0 longer)
  // Two parts of one sequence (Q0 ~0.71 of the chunks, sized for a summary pass that runs all
  // of part 0): part 1 begins at this chunk instead (the middle) where, for every value head, the
  // kEvenWindow chunks before it have transition bounds that multiply below e^-64 (the summary
  // pass then computes S_1 from those chunks only); 0: never. Decided on the device, the same in
  // every kernel (split_cut.cuh, first_part_here).
  int even_first_chunks = 0;
  int max_parts = 1;            // parts per sequence that the grids cover (P_max)
  float* part_state = nullptr;  // [N, P_max, HV, K, V] fp32 K-major: exact state at part p's start (p >= 1)
  float* summary_b = nullptr;   // [N, P_max, HV, K, V] fp32 K-major: part p's end state from zero
  float* summary_m = nullptr;   // [N, P_max, HV, K, K] fp32: part p's transition M_p
  // [N, P_max, HV]: 1 where the summary pass found M_p negligible (M_p = 0, not stored: the scan
  // then takes S_{p+1} = B_p), else 0.
  int* m_negligible = nullptr;
};

// Parts of a sequence of `count` chunks (at least 1: an empty sequence is one empty part), with
// parts of chunks_per_part chunks after a first one of first_part_chunks (<= 0: chunks_per_part).
GDN_HOST_DEVICE inline int64_t split_parts_of(int64_t count, int chunks_per_part, int max_parts,
                                              int first_part_chunks = 0) {
  if (chunks_per_part <= 0) return 1;
  const int64_t first = first_part_chunks > 0 ? first_part_chunks : chunks_per_part;
  const int64_t p = count <= first ? 1 : 1 + (count - first + chunks_per_part - 1) / chunks_per_part;
  return p < max_parts ? p : max_parts;
}
// The sequence's chunk where part `part` begins (first_part_chunks <= 0: chunks_per_part). A part
// after the first exists only with chunks_per_part > 0, which is widened as unsigned: the fused
// chain recomputes this past its setmaxnreg, and a sign word carried there from the prologue spilled.
GDN_HOST_DEVICE inline int64_t split_part_begin(int64_t part, int chunks_per_part, int first_part_chunks) {
  const int64_t first = first_part_chunks > 0 ? first_part_chunks : chunks_per_part;
  return part == 0 ? 0 : first + (part - 1) * int64_t(static_cast<uint32_t>(chunks_per_part));
}

}  // namespace cuda
}  // namespace gdn
