// TMA tensor maps of the chain's row inputs: k and q [T, H, D], v [T, HV, D] (D = 64 or 128), each a
// 3-d tensor (D elements, heads, tokens) with the caller's strides, read in boxes of 64 elements
// x 1 head x 64 tokens with the 128-byte swizzle: one box is one [64 tokens][128 B] atom of the
// chain's ring stage (chain_layout.cuh), so thread 0 fills a stage with five copies (k's and q's two
// atoms, v's slice; D = 64: three) instead of every thread issuing 16-byte cp.async with their addresses.
// Tokens past T read as zeros; tokens past a sequence's end but before T are the next sequence's,
// which the chain zeroes in its partial chunks (chain_zero_rows).
#pragma once
#include <cuda.h>  // CUtensorMap (the type only: the encoder comes through the runtime's entry point)

#include <cstdint>

#include "gdn/gdn.h"

namespace gdn {
namespace cuda {

struct RowMaps {
  CUtensorMap k, q, v;  // q only where the chain computes o (kFusedO); v unused by the summary's M_p
};

// Encodes the map of rows [T, heads, width] (width 64, 128 or 256) of a 16-bit dtype at `base` with token
// stride `st` and head stride `sh` (elements). False where TMA cannot address them (base or a
// stride not a multiple of 16 bytes, a stride past 2^40 bytes): the caller copies the rows into a
// packed buffer and encodes that, which always succeeds.
bool encode_row_map(CUtensorMap* map, DType dtype, const void* base, int64_t T, int64_t heads, int64_t width,
                    int64_t st, int64_t sh);

}  // namespace cuda
}  // namespace gdn
