// The test harness's memory and dtypes: buffers on a backend's device (host memory for the CPU)
// and storage-dtype conversions (common/host_dtype.h, the library's own).
#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#ifdef GDN_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/host_dtype.h"
#include "harness.h"

namespace gdn {
namespace test {

// ------------------------------------------------------------------------------------------
// Buffers

#ifdef GDN_HAS_CUDA
static void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

Buffer::Buffer(Backend backend, size_t bytes) : backend_(backend), bytes_(bytes) {
  const size_t n = std::max<size_t>(bytes, 1);
  if (backend == Backend::kCPU) {
    ptr_ = std::aligned_alloc(64, (n + 63) / 64 * 64);
  } else {
#ifdef GDN_HAS_CUDA
    cuda_check(cudaMalloc(&ptr_, n), "cudaMalloc");
#else
    throw std::runtime_error("CUDA buffer requested without CUDA");
#endif
  }
}

Buffer::~Buffer() {
  if (ptr_ == nullptr) return;
  if (backend_ == Backend::kCPU) {
    std::free(ptr_);
  } else {
#ifdef GDN_HAS_CUDA
    cudaFree(ptr_);
#endif
  }
}

Buffer::Buffer(Buffer&& o) noexcept : backend_(o.backend_), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(backend_, o.backend_);
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

void Buffer::upload(const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (backend_ == Backend::kCPU) {
    std::memcpy(ptr_, src, bytes);
  } else {
#ifdef GDN_HAS_CUDA
    cuda_check(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#endif
  }
}

void Buffer::download(void* dst, size_t bytes) const {
  if (bytes == 0) return;
  if (backend_ == Backend::kCPU) {
    std::memcpy(dst, ptr_, bytes);
  } else {
#ifdef GDN_HAS_CUDA
    cuda_check(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#endif
  }
}

std::vector<uint8_t> Buffer::to_host() const {
  std::vector<uint8_t> out(bytes_);
  download(out.data(), bytes_);
  return out;
}

Buffer upload(Backend backend, const std::vector<uint8_t>& host) {
  Buffer b(backend, host.size());
  b.upload(host.data(), host.size());
  return b;
}

void synchronize(Backend backend) {
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cuda_check(cudaGetLastError(), "kernel");
  }
#else
  (void)backend;
#endif
}

// ------------------------------------------------------------------------------------------
// Dtypes

std::vector<uint8_t> encode(const std::vector<double>& x, DType dtype) {
  std::vector<uint8_t> out(x.size() * dtype_size(dtype));
  for (size_t i = 0; i < x.size(); ++i) store_from_float(out.data(), static_cast<int64_t>(i), dtype, float(x[i]));
  return out;
}

std::vector<double> decode(const uint8_t* bytes, size_t count, DType dtype) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = load_as_float(bytes, static_cast<int64_t>(i), dtype);
  return out;
}

std::vector<double> round_to(const std::vector<double>& x, DType dtype) {
  const std::vector<uint8_t> bytes = encode(x, dtype);
  return decode(bytes.data(), x.size(), dtype);
}

}  // namespace test
}  // namespace gdn
