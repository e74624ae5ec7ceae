// Host <-> device arrays of the device check, through the library's host conversions.
#include <algorithm>

#include "check.h"
#include "common/host_dtype.h"

namespace gdn {
namespace check {

float round_to(DType dtype, float x) {
  if (dtype == DType::kBFloat16) return bf16_to_float(float_to_bf16(x));
  if (dtype == DType::kFloat16) return fp16_to_float(float_to_fp16(x));
  return x;
}

void* upload(const std::vector<float>& x, DType dtype, int64_t rows, int64_t row_len, int64_t stride) {
  std::vector<char> buf(static_cast<size_t>(std::max<int64_t>(rows * stride, 1)) * dtype_bytes(dtype), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < row_len; ++i) store_from_float(buf.data(), r * stride + i, dtype, x[r * row_len + i]);
  void* d;
  CK(cudaMalloc(&d, buf.size()));
  CK(cudaMemcpy(d, buf.data(), buf.size(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<float> download(const void* device, DType dtype, int64_t rows, int64_t row_len, int64_t stride) {
  std::vector<char> buf(static_cast<size_t>(std::max<int64_t>(rows * stride, 1)) * dtype_bytes(dtype));
  CK(cudaMemcpy(buf.data(), device, buf.size(), cudaMemcpyDeviceToHost));
  std::vector<float> x(rows * row_len);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < row_len; ++i) x[r * row_len + i] = load_as_float(buf.data(), r * stride + i, dtype);
  return x;
}

void* upload_indices(const std::vector<int64_t>& x, IndexType type) {
  const bool i32 = type == IndexType::kInt32;
  std::vector<char> buf(std::max<size_t>(x.size(), 1) * (i32 ? 4 : 8));
  for (size_t i = 0; i < x.size(); ++i) {
    if (i32)
      reinterpret_cast<int32_t*>(buf.data())[i] = static_cast<int32_t>(x[i]);
    else
      reinterpret_cast<int64_t*>(buf.data())[i] = x[i];
  }
  void* d;
  CK(cudaMalloc(&d, buf.size()));
  CK(cudaMemcpy(d, buf.data(), buf.size(), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace check
}  // namespace gdn
