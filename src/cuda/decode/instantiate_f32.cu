// The decode kernels for float state pools (launch.cuh).
#define GDN_DECODE_INSTANTIATE
#include "cuda/decode/launch.cuh"

namespace gdn {
namespace cuda {
namespace decode {
template void launch_typed<float>(const DecodeArgs&, const Problem&, const DecodeConfig&, cudaStream_t);
}  // namespace decode
}  // namespace cuda
}  // namespace gdn
