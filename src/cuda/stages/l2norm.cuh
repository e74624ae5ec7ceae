// Row conversion shared by the l2norm op and the forward's input packing.
#pragma once
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

// y[t, h, :] = x[t, h, :] (optionally l2-normalized in fp32), converted from `in` to `out` dtype.
// x and y are [T, heads, dim] with element strides (token, head); dim <= 256.
void convert_rows(DType in, DType out, const void* x, int64_t x_st, int64_t x_sh, void* y, int64_t y_st, int64_t y_sh,
                  int64_t T, int heads, int dim, bool normalize, cudaStream_t s);

}  // namespace cuda
}  // namespace gdn
