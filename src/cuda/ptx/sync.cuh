// Ordering between kernels that run at the same time: the release/acquire hand-off of a counter in
// global memory, and programmatic dependent launch (griddepcontrol, sm_90).
#pragma once

namespace gdn {
namespace cuda {

// Producer: after a __syncthreads() that follows the block's global stores, one thread adds 1
// with release semantics at GPU scope (the stores of the whole block happen before it).
__device__ __forceinline__ void signal_release(int* flag) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(flag) : "memory");
}
// Consumer: one thread waits with acquire loads until *flag >= target, then the block
// synchronizes (__syncthreads) before reading what the producer stored.
__device__ __forceinline__ void wait_acquire(const int* flag, int target) {
  int x;
  while (true) {
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(x) : "l"(flag) : "memory");
    if (x >= target) break;
    __nanosleep(64);
  }
}
// Programmatic dependent launch: the kernel launched after this one (with the programmatic
// serialization attribute) may start once every block of this one has executed this.
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
// Waits until the kernels this one programmatically depends on have completed (memory flushed).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
// Named barrier `id` (1..15; 0 is __syncthreads') for `threads` threads (a multiple of 32): for
// warp-specialized blocks whose roles reach the barrier from different code (__syncthreads must be
// the same instruction for the whole block; compute-sanitizer synccheck reports it otherwise).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// The fused chain's block barrier (fwd_h_wgmma.cu with chain_o.cuh): both warpgroups, 256 threads.
constexpr int kChainBarrier = 1;

}  // namespace cuda
}  // namespace gdn
