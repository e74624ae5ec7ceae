// The chain's TMA tensor maps (row_maps.cuh), encoded on the host per call (a few microseconds;
// kernel arguments, so graph replays keep them).
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include "cuda/chunk/row_maps.cuh"

namespace gdn {
namespace cuda {
namespace {

// The driver's encoder through the runtime (no link against libcuda), looked up once.
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

bool encode_row_map(CUtensorMap* map, DType dtype, const void* base, int64_t T, int64_t heads, int64_t width,
                    int64_t st, int64_t sh) {
  constexpr int64_t kBytes = 2;
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
  if (encode == nullptr || T < 1 || heads < 1 || st < 0 || sh < 0 || (width != 64 && width != 128 && width != 256))
    return false;
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || (st * kBytes) % 16 != 0 || (sh * kBytes) % 16 != 0) return false;
  if (st * kBytes >= (int64_t(1) << 40) || sh * kBytes >= (int64_t(1) << 40)) return false;
  const cuuint64_t dims[3] = {cuuint64_t(width), cuuint64_t(heads), cuuint64_t(T)};
  // (A stride of 0 is legal for a tensor of one head; TMA wants strides of at least 16 bytes.)
  const cuuint64_t strides[2] = {cuuint64_t(heads > 1 ? sh * kBytes : width * kBytes), cuuint64_t(st * kBytes)};
  const cuuint32_t box[3] = {64, 1, 64}, unit[3] = {1, 1, 1};
  const CUtensorMapDataType dt =
      dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return encode(map, dt, 3, const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace cuda
}  // namespace gdn
