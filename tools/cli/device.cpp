#include "cli/device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#ifdef GDN_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef GDN_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

#include "cli/host.h"

namespace gdn {
namespace cli {

Mem::Mem(Backend b, size_t bytes) : backend(b) {
  bytes = std::max<size_t>(bytes, 64);
#ifdef GDN_HAS_CUDA
  if (b == Backend::kCUDA) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    return;
  }
#endif
  p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::runtime_error("out of host memory");
}

Mem::~Mem() {
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    cudaFree(p);
    return;
  }
#endif
  std::free(p);
}

void Mem::put(const void* src, size_t bytes, size_t offset) {
  char* dst = static_cast<char*>(p) + offset;
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void Mem::get(void* dst, size_t bytes, size_t offset) const {
  const char* src = static_cast<const char*>(p) + offset;
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void synchronize(Backend backend) {
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) cudaDeviceSynchronize();
#else
  (void)backend;
#endif
}

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

double time_ms(Backend backend, const std::function<void(void*)>& fn) {
  std::vector<double> ms;
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    fn(stream);  // warm-up
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    fn(stream);
    cudaStreamEndCapture(stream, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; ++i) cudaGraphLaunch(exec, stream);
    for (int i = 0; i < 30; ++i) {
      cudaEventRecord(a, stream);
      cudaGraphLaunch(exec, stream);
      cudaEventRecord(b, stream);
      cudaEventSynchronize(b);
      float t = 0;
      cudaEventElapsedTime(&t, a, b);
      ms.push_back(t);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(stream);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
#endif
  (void)backend;
  fn(nullptr);  // warm-up
  const double start = now_s();
  while (ms.size() < 3 || (now_s() - start < 1.0 && ms.size() < 50)) {
    const double t0 = now_s();
    fn(nullptr);
    ms.push_back((now_s() - t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double blas_gemm_gflops(int threads) {
#ifdef GDN_HAVE_CBLAS
  openblas_set_num_threads(threads);
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  Rng rng(7);
  for (float& x : a) x = float(rng.symmetric());
  for (float& x : b) x = float(rng.symmetric());
  const double ms = time_ms(Backend::kCPU, [&](void*) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  return 2.0 * n * n * double(n) / (ms * 1e-3) / 1e9;
#else
  (void)threads;
  return 0.0;
#endif
}

double copy_bandwidth_GBps(Backend backend) {
#ifdef GDN_HAS_CUDA
  if (backend == Backend::kCUDA) {
    const size_t bytes = size_t(1) << 30;
    Mem a(backend, bytes), b(backend, bytes);
    cudaMemset(a.p, 1, bytes);
    const double ms = time_ms(backend, [&](void* s) {
      cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s));
    });
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
  }
#endif
  (void)backend;
  return 0.0;
}

}  // namespace cli
}  // namespace gdn
