// The CLI's device side: memory on the backend's device (host memory for the CPU), timing, and
// the reference rates the table is read against (OpenBLAS GEMM, device copy bandwidth).
#pragma once

#include <cstddef>
#include <functional>

#include "gdn/gdn.h"

namespace gdn {
namespace cli {

// A buffer on the backend's device, freed with it.
struct Mem {
  Backend backend;
  void* p = nullptr;
  Mem(Backend b, size_t bytes);
  ~Mem();
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
  void put(const void* src, size_t bytes, size_t offset = 0);
  void get(void* dst, size_t bytes, size_t offset = 0) const;
};

// Waits for the device (CUDA) after a call; nothing on the CPU.
void synchronize(Backend backend);

// Median milliseconds of `fn(stream)`. CPU: wall clock, at least 3 runs and about a second.
// CUDA: the call captured once in a CUDA graph, 30 replays timed with events.
double time_ms(Backend backend, const std::function<void(void*)>& fn);

// fp32 GEMM rate of the BLAS this tool was linked with (OpenBLAS) on `threads` threads; 0 without.
double blas_gemm_gflops(int threads);

// Device-to-device copy bandwidth (CUDA); 0 on the CPU.
double copy_bandwidth_GBps(Backend backend);

}  // namespace cli
}  // namespace gdn
