// The capability table: which head sizes, dtypes, state layouts and operations each backend
// runs. The one place these facts live; validation (validate.cpp), the public query
// (gdn::capabilities, gdn::supports) and the tests read it. Each entry states what the backend's
// kernels are built for today:
//   CPU:  K and V any multiple of 16 in [16, 256] (the kernels work on 16-float vectors and keep
//         rows of at most 256 floats on the stack: kMaxDim in src/cpu/recurrent.cpp, the l2norm
//         row buffer in src/cpu/stages.cpp).
//   CUDA: K and V each 64, 128 or 256 (the kernels are instantiated for those sizes only:
//         src/cuda/decode/recurrent.cu, src/cuda/stages/stages.cu, src/cuda/backend.cu).
// Both: every dtype for q/k/v/o, gates in float32 or the input dtype, both state layouts, state
// pools in float32, float16 and bfloat16 (fp32 arithmetic, one rounding on write: src/cpu/common.h;
// CUDA: the decode kernels natively, the tensor-core forward through an fp32 copy of the rows in
// its workspace, src/cuda/chunk/state_copy.cu), every operation.
#pragma once

#include "gdn/gdn.h"

namespace gdn {
namespace detail {

inline Capabilities cpu_capabilities() {
  Capabilities c;
  c.backend = Backend::kCPU;
  c.built = true;
  for (int d = 16; d <= 256; d += 16) c.head_sizes[c.num_head_sizes++] = d;
  c.dtypes[static_cast<int>(DType::kFloat32)] = true;
  c.dtypes[static_cast<int>(DType::kFloat16)] = true;
  c.dtypes[static_cast<int>(DType::kBFloat16)] = true;
  c.gates_in_dtype = true;
  c.state_layouts[static_cast<int>(StateLayout::kKMajor)] = true;
  c.state_layouts[static_cast<int>(StateLayout::kVMajor)] = true;
  for (bool& d : c.state_dtypes) d = true;
  for (bool& op : c.operations) op = true;
  return c;
}

inline Capabilities cuda_capabilities() {
  Capabilities c;
  c.backend = Backend::kCUDA;
#ifdef GDN_WITH_CUDA
  c.built = true;
#endif
  for (int d : {64, 128, 256}) c.head_sizes[c.num_head_sizes++] = d;
  c.dtypes[static_cast<int>(DType::kFloat32)] = true;
  c.dtypes[static_cast<int>(DType::kFloat16)] = true;
  c.dtypes[static_cast<int>(DType::kBFloat16)] = true;
  c.gates_in_dtype = true;
  c.state_layouts[static_cast<int>(StateLayout::kKMajor)] = true;
  c.state_layouts[static_cast<int>(StateLayout::kVMajor)] = true;
  for (bool& d : c.state_dtypes) d = true;
  for (bool& op : c.operations) op = true;
  return c;
}

}  // namespace detail
}  // namespace gdn
