// Ordering between kernels that run at the same time (programmatic dependent launch: griddepcontrol,
// sm_90), block barriers on mbarriers, and the thread block cluster's barrier.
#pragma once

#include <cstdint>

#include "cuda/ptx/copy.cuh"  // smem_u32

namespace gdn {
namespace cuda {

// Programmatic dependent launch: the kernel launched after this one (with the programmatic
// serialization attribute) may start once every block of this one has executed this.
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
// Waits until the kernels this one programmatically depends on have completed (memory flushed).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
// A block barrier on an mbarrier in shared memory, for warp-specialized blocks whose roles reach
// their barriers from different code: compute-sanitizer synccheck reports a bar.sync (also a named
// one) reached from two different instructions as divergent, even where PTX allows it; an mbarrier
// has no such rule. Every thread of the block arrives (release) and waits (acquire) for the phase
// `parity` (0, 1, 0, ...: the barrier's uses so far, mod 2) to complete: __syncthreads' ordering
// of shared and global memory. One thread initializes it with the block's thread count, and a
// __syncthreads orders that before the first use.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int threads) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(threads) : "memory");
}
// The two halves of a block barrier on an mbarrier, for a role that may arrive early (once what
// the others wait for is done) and wait later (when it needs what they did).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
}
// One arrival that also announces `bytes` of bulk copies to come (bulk_load's complete_tx): the
// phase completes once the arrivals are in and those bytes have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// An arrival that fires once every cp.async this thread issued before it has landed (.noinc: the
// barrier's count includes it): the phase then also covers those copies, whoever waits on it.
__device__ __forceinline__ void mbarrier_arrive_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t a = smem_u32(bar);
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(a), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void mbarrier_block_sync(uint64_t* bar, uint32_t parity) {
  mbarrier_arrive(bar);
  mbarrier_wait(bar, parity);
}

// A warpgroup's register budget from here on (every warp of the warpgroup executes it, converged):
// roles of one block that need different counts share the SM's registers (the kernel is compiled at
// its launch bounds' count; one role gives registers back, the others take them).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Thread block clusters (sm_90). The cluster barrier: every thread of every CTA of the cluster
// arrives (release: its shared-memory writes before it) and waits (acquire: they are visible to
// its reads after it, the peers' shared memory included: copy.cuh's ld_shared_cluster16). A CTA
// must not exit while a peer may still read its shared memory: end with one more barrier.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
}  // namespace cuda
}  // namespace gdn
