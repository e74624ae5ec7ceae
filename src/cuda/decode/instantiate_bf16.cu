// The decode kernels for __nv_bfloat16 state pools (launch.cuh).
#define GDN_DECODE_INSTANTIATE
#include "cuda/decode/launch.cuh"

namespace gdn {
namespace cuda {
namespace decode {
template void launch_typed<__nv_bfloat16>(const DecodeArgs&, const Problem&, const DecodeConfig&, cudaStream_t);
}  // namespace decode
}  // namespace cuda
}  // namespace gdn
