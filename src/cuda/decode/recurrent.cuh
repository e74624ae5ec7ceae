// The decode step's launch configuration: which kernel runs, its block shape and its grid, chosen
// by decode_heuristics from the problem and the device and passed to the launcher as a value (no
// process-wide setting). recurrent_gated_delta_rule(args, exec) of backend.h launches the
// heuristics' choice; a tool that times or inspects a configuration passes its own value to the
// overload below. Only the kernels that production launches are compiled (recurrent.cu).
#pragma once

#include <cstdint>

#include "cuda/core/device.h"  // DeviceProps (host code: tests/test_heuristics.cpp includes this header)

namespace gdn {
namespace cuda {

enum class DecodeKernel {
  kRows,     // decode_rows_kernel: a block per (sequence, value head), the state in registers (K = V = 128)
  kTiles,    // decode_tiles_kernel: persistent warps over 32-value state tiles in shared-memory rings
  kGeneral,  // decode_general_kernel: a block per 32 columns of a (sequence, head), any K, V in [1, 256]
};

struct DecodeConfig {
  DecodeKernel kernel = DecodeKernel::kTiles;
  int warps = 0;          // warps per block
  int ring_stages = 0;    // kTiles: state tiles per warp in its shared-memory ring; kRows, kGeneral: 0
  int blocks_per_sm = 0;  // blocks per SM that the kernel's registers are sized for (__launch_bounds__; kGeneral: 0)
  // blocks launched (kRows: one per (sequence, value head); kTiles: any >= 1; kGeneral: one per
  // (sequence, value head, 32 columns))
  int64_t grid = 0;
  // kRows: the parts of each thread's state that are made fp32 one after the other (1: all at once;
  // bf16 / fp16 pools keep the other parts packed, in registers or staged in shared memory);
  // kTiles, kGeneral: 0
  int parts = 0;
  bool staged = false;  // kRows: the packed state in shared memory (cp.async), not in registers
};

// decode_rows_kernel's shapes: DecodeConfig's parts, staged and blocks_per_sm (the blocks per SM
// that its registers are sized for). A block issues all its state loads at its start, so an SM has
// blocks_per_sm x (the state's bytes) in flight: fp32 pools 2 x 64 KB.
struct RowsShape {
  int parts, blocks_per_sm;
  bool staged;
};
inline constexpr RowsShape kRowsShapeF32 = {1, 2, false};  // the whole fp32 state in registers
// bf16 / fp16 pools (32 KB per state; {1, 2, false}, the fp32 shape, keeps only 64 KB in flight
// per SM and ran at 55-63% of copy): {2, 4, true}, the state staged in shared memory (cp.async,
// 37 KB per block), half of it fp32 at a time, 4 blocks and 128 KB in flight per SM. Timed on an
// H200 beside {4, 3, false} (the packed state in registers, 96 KB in flight) and {4, 5, true}
// (staged, a quarter fp32 at a time, 160 KB), `gdn_cuda_check --decode --bench`, docs/perf.md:
// % of copy and x the fp32 pool at N = 256 / 4096, V-major: 59 / 55% (1.24 / 1.22x), 83 / 89%
// (1.74 / 1.97x), 69 / 74% (1.46 / 1.64x); K-major alike. Kept: {2, 4, true}.
// decode_heuristics takes kRows16Shapes[kRows16Choice] (one entry: what production runs).
inline constexpr RowsShape kRows16Shapes[] = {{2, 4, true}};
inline constexpr int kRows16Choice = 0;

// The configuration of a problem on a device: kRows for K = V = 128 (both state layouts), kTiles
// for the other pairs of K, V in {64, 128, 256}, kGeneral for every other K, V in [1, 256].
// Throws Error for head sizes outside [1, 256]. This is the configuration of a call whose state
// pools pass decode_pools_in_pieces (any allocator's packed pools at the tuned sizes).
DecodeConfig decode_heuristics(const Problem& p, const DeviceProps& dev);

// Whether every state pool of a call (initial_state, final_state, token_states.pool) can be moved
// in pieces of 4 consecutive elements (16 bytes of fp32, 8 of bf16 / fp16), as decode_rows_kernel
// and decode_tiles_kernel move them (float4 / uint2, cp.async of 16 / 8 bytes): the pool's data
// aligned to 4 elements, its row stride (0: HV K V) and K V multiples of 4 elements. Rows that
// start elsewhere (an odd row_stride, a view that starts mid-row) fail it.
bool decode_pools_in_pieces(const ForwardArgs& f);

// The configuration of a call: decode_heuristics of its problem, or kGeneral (element accesses,
// any alignment) when its pools fail decode_pools_in_pieces. A host-known choice: the fast
// kernels keep their vector accesses with no per-element test.
DecodeConfig decode_heuristics(const ForwardArgs& f, const DeviceProps& dev);

// The decode step with an explicit configuration. Throws Error when no kernel of the library
// matches it (decode_heuristics gives the one compiled for each problem): kRows and kTiles for
// their head sizes and pools in 4-element pieces, kGeneral for any call.
void recurrent_gated_delta_rule(const ForwardArgs& f, const Exec& exec, const DecodeConfig& cfg);

}  // namespace cuda
}  // namespace gdn
