// Asynchronous global -> shared copies (cp.async, sm_80+) and shared-memory addresses. Every
// wrapper carries a "memory" clobber: the compiler keeps ordinary shared-memory reads and writes on
// their side of each copy, commit and wait (a read of a stage must not move past the wait for it,
// nor past the copy that refills it).
#pragma once

#include <cstdint>

namespace gdn {
namespace cuda {

// The 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global -> shared (L2 only); src_bytes = 0 fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// 16 bytes to global memory as one st.global.v4 (STG.E.128). A uint4 handed through a lambda whose
// other branch reads it element by element otherwise leaves as four 4-byte stores (ptxas, CUDA 13).
__device__ __forceinline__ void st_global16(void* gmem, const uint4& x) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w)
               : "memory");
}
// 16 bytes of shared memory by their 32-bit shared-window address (a generic pointer costs two
// registers: the norm warpgroup converts at 40).
__device__ __forceinline__ uint4 ld_shared16(uint32_t addr) {
  uint4 x;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w)
               : "r"(addr)
               : "memory");
  return x;
}
// Distributed shared memory (thread block clusters, sm_90): the address in CTA `rank` of the
// cluster of this CTA's shared address `addr` (mapa), and 16 bytes read from such an address.
__device__ __forceinline__ uint32_t map_shared_rank(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ uint4 ld_shared_cluster16(uint32_t addr) {
  uint4 x;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w)
               : "r"(addr)
               : "memory");
  return x;
}
__device__ __forceinline__ void st_shared16(uint32_t addr, const uint4& x) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w)
               : "memory");
}
// 16 bytes, always all of them (no zero fill).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem)), "l"(gmem) : "memory");
}
// The same to a shared-state-space address (the wgmma fwd_h computes its swizzled addresses).
__device__ __forceinline__ void cp_async16(uint32_t smem_addr, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// 8-byte async copy (one fp64 G value); src_bytes = 0 fills zeros.
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// 4-byte async copy (one fp32 value); src_bytes = 0 fills zeros.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Bulk copy shared -> global by the TMA engine (sm_90): `bytes` (a multiple of 16) from a 16-byte
// aligned shared address to a 16-byte aligned global one, in this thread's bulk group. The shared
// source must have been written before a fence.proxy.async (it is read by the async proxy).
__device__ __forceinline__ void bulk_store(void* gmem, uint32_t smem_addr, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem), "r"(smem_addr), "r"(bytes)
               : "memory");
}
// Bulk copy global -> shared by the TMA engine (sm_90): `bytes` (a multiple of 16) from a 16-byte
// aligned global address to a 16-byte aligned shared one, its completion counted on the mbarrier
// `bar` (complete_tx: the issuing thread announces the bytes first, mbarrier_arrive_expect_tx).
// The copy writes through the async proxy: wgmma may read what it wrote once the barrier's phase
// completes, without a proxy fence.
__device__ __forceinline__ void bulk_load(uint32_t smem_addr, const void* gmem, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_addr),
      "l"(gmem), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
// A box of a 3-d tensor map (row_maps.cuh) global -> shared by the TMA engine, at element
// coordinates (x, y, z) of the map's dimensions, completion counted on the mbarrier `bar` as
// bulk_load's. `map`: the generic address of a __grid_constant__ kernel parameter (or of global
// memory). Elements outside the tensor read as zeros.
__device__ __forceinline__ void tma_load_3d(uint32_t smem_addr, const void* map, int x, int y, int z, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_addr),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(smem_u32(bar))
      : "memory");
}
// Closes this thread's bulk group.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's bulk groups still read their shared source (the source
// may then be overwritten).
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until at most N of this thread's bulk groups are incomplete (their writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace cuda
}  // namespace gdn
