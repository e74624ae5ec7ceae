// Host-side helpers of the CUDA backend: runtime error checks, the device's properties, grid
// sizes and the dynamic shared-memory limit. Host code only (the heuristics include it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "gdn/gdn.h"

namespace gdn {
namespace cuda {

// A CUDA runtime failure is not bad input: report it as a runtime error naming the call.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("gdn cuda: ") + what + ": " + cudaGetErrorString(e));
}
// After each launch: a launch failure (bad configuration) surfaces here, never later.
#define GDN_CUDA_LAUNCH_CHECK(name) ::gdn::cuda::check(cudaGetLastError(), name)

inline cudaStream_t stream_of(const Exec& exec) { return static_cast<cudaStream_t>(exec.stream); }

// The current device's multiprocessors and shared memory, read once per process (launchers size
// their grids from them on every call; the backend's GPUs are all the same Hopper part).
struct DeviceProps {
  int sms = 0, smem_per_sm = 0, smem_reserved_per_block = 0;
};
inline const DeviceProps& device_props() {
  static const DeviceProps props = [] {
    DeviceProps d;
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev),
          "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&d.smem_reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock, dev),
          "cudaDeviceGetAttribute");
    return d;
  }();
  return props;
}

inline unsigned grid_1d(int64_t items, int per_block) {
  int64_t b = (items + per_block - 1) / per_block;
  if (b < 1) b = 1;
  if (b > 0x7fffffff) throw std::runtime_error("gdn cuda: grid too large");
  return static_cast<unsigned>(b);
}

// Raises a kernel's dynamic shared-memory limit (needed past 48 KB). Called before every launch:
// the limit belongs to the current device, so a once-per-process flag would miss a second GPU.
// (Set from 32 KB up: static shared memory counts towards the same 48 KB default.)
template <typename Kernel>
inline void allow_smem(Kernel k, size_t bytes) {
  if (bytes > 32 * 1024)
    check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
          "cudaFuncSetAttribute");
}

// The configuration of a cudaLaunchKernelEx call; `programmatic`: the kernel is a programmatic
// dependent of the one before it in the stream (it may start once every block of that one has
// executed griddepcontrol.launch_dependents or exited). Build it in place: cfg points at attr.
struct LaunchConfig {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1] = {};
  LaunchConfig(dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool programmatic) {
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = programmatic ? 1 : 0;
  }
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
};

}  // namespace cuda
}  // namespace gdn
