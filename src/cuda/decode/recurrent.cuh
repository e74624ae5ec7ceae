// The decode step's configurations (recurrent.cu), selectable at run time so that the device check
// can time them all in one run. Process-wide and not thread-safe: for the check and benchmarks.
#pragma once
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

// The variants apply to K = V = 128 only (other sizes always run variant 0, DefaultCfg); the
// default for 128 is variant 7 (K-major: a block per state by whole rows; V-major: 8 warps with
// register tiles). The list and what each one tries: the table above launch_variant
// in recurrent.cu.
int decode_variant_count();
const char* decode_variant_name(int v);  // e.g. "6w x 2 smem"
// Selects the decode variant of later launches; out of range (e.g. -1): the default.
void set_decode_variant(int v);

}  // namespace cuda
}  // namespace gdn
