// The capability table: which head sizes, dtypes, state layouts and operations each backend
// runs. The one place these facts live; validation (validate.cpp), the public query
// (gdn::capabilities, gdn::supports) and the tests read it. Each entry states what the backend's
// kernels are built for today.
//
// Head sizes, both backends: K and V each any integer in [1, 256], independently (fla's tests
// use 32, 60, 100). 256 bounds the rows that the kernels keep on the stack, in registers and in
// shared memory. Within that range some sizes have fast kernels and the others take a general
// path at the same accuracy (SPEC section 4):
//   CPU:  multiples of 16 run whole 16-float vectors; other sizes run the same code on rows
//         zero-padded to the next multiple of 16 (src/cpu/chunk.h, padded()), with masked tails
//         in the decode step (src/cpu/recurrent.cpp).
//   CUDA: the tensor-core forward takes bf16/fp16 with K = V in {64, 128}; the decode step has
//         kernels for K, V in {64, 128, 256}. Every other size runs the exact CUDA-core stages
//         (src/cuda/stages/, which mask the columns past V) and the general decode kernel
//         (src/cuda/decode/general_kernel.cuh). The choice is made in src/cuda/backend.cu and
//         decode_heuristics.
// Both: every dtype for q/k/v/o, q/k and o in other dtypes than v (Problem::qk_dtype, o_dtype; not
// for the stage operations), gates in float32 or the input dtype, both state layouts, state
// pools in float32, float16 and bfloat16 (Problem::state_dtype; fp32 arithmetic, one rounding on
// write: src/cpu/common.h; CUDA: the decode kernels, the exact stages and the tensor-core forward
// natively), every operation.
#pragma once

#include "gdn/gdn.h"

namespace gdn {
namespace detail {

// What both backends run today (the entries below say only how they differ: built).
inline Capabilities shared_capabilities(Backend backend) {
  Capabilities c;
  c.backend = backend;
  c.min_head_size = 1;
  c.max_head_size = 256;
  c.mixed_dtypes = true;
  c.dtypes[static_cast<int>(DType::kFloat32)] = true;
  c.dtypes[static_cast<int>(DType::kFloat16)] = true;
  c.dtypes[static_cast<int>(DType::kBFloat16)] = true;
  c.gates_in_dtype = true;
  c.state_layouts[static_cast<int>(StateLayout::kKMajor)] = true;
  c.state_layouts[static_cast<int>(StateLayout::kVMajor)] = true;
  for (bool& d : c.state_dtypes) d = true;
  for (bool& op : c.operations) op = true;
  c.checkpoints = true;  // prefill checkpoints (ForwardArgs::checkpoints), on every forward path
  return c;
}

inline Capabilities cpu_capabilities() {
  Capabilities c = shared_capabilities(Backend::kCPU);
  c.built = true;
  return c;
}

inline Capabilities cuda_capabilities() {
  Capabilities c = shared_capabilities(Backend::kCUDA);
#ifdef GDN_WITH_CUDA
  c.built = true;
#endif
  return c;
}

}  // namespace detail
}  // namespace gdn
