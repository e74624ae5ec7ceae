// Shared helpers of the CUDA backend: error checks, dtype conversions, device-side clamping of
// indices that the host could not validate, and the tiny tensor-core wrappers (mma.sync m16n8k16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// ---- dtype conversions ------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_f<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Element i of a buffer whose dtype is only known at run time (gates: fp32 or the input dtype).
__device__ __forceinline__ float load_dt(const void* p, DType dt, int64_t i) {
  if (dt == DType::kFloat32) return static_cast<const float*>(p)[i];
  if (dt == DType::kFloat16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void store_dt(void* p, DType dt, int64_t i, float x) {
  if (dt == DType::kFloat32)
    static_cast<float*>(p)[i] = x;
  else if (dt == DType::kFloat16)
    static_cast<__half*>(p)[i] = __float2half_rn(x);
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
}

__device__ __forceinline__ int64_t load_index(const void* p, IndexType t, int64_t i) {
  return t == IndexType::kInt64 ? static_cast<const int64_t*>(p)[i]
                                : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// State row of sequence n in a pool: indices may be unvalidated device data, so anything outside
// [0, num_slots) means "no state" (-1).
__device__ __forceinline__ int64_t state_row(const StateRef& s, int64_t n) {
  if (s.data == nullptr) return -1;
  const int64_t r = s.indices ? load_index(s.indices, s.index_type, n) : n;
  return (r >= 0 && r < s.num_slots) ? r : -1;
}

// Gates of token t, head hv: fp32 decay g (natural log) and beta, with optional model fusion.
struct GateArgs {
  const void* g;
  int64_t g_st, g_sh;
  const void* beta;
  int64_t b_st, b_sh;
  DType dt;
  bool fused;
  const float* A_log;
  const float* dt_bias;
};
__device__ __forceinline__ void load_gates(const GateArgs& ga, int64_t t, int hv, float& g, float& beta) {
  float a = load_dt(ga.g, ga.dt, t * ga.g_st + hv * ga.g_sh);
  float b = load_dt(ga.beta, ga.dt, t * ga.b_st + hv * ga.b_sh);
  if (ga.fused) {
    const float x = a + ga.dt_bias[hv];
    const float sp = x > 20.f ? x : log1pf(expf(x));
    g = -expf(ga.A_log[hv]) * sp;
    beta = 1.f / (1.f + expf(-b));
  } else {
    g = a;
    beta = b;
  }
}

// Gate arguments of a forward call (decode and prefill share them).
GateArgs make_gates(const ForwardArgs& f);

// ---- sequence plan (see plan.cu) ----------------------------------------------------------------
// Device-side view of the sequences and chunks of one call, built from (clamped) cu_seqlens.
struct Plan {
  const int64_t* bounds;     // [N + 1] token boundaries, clamped to [0, T] and monotone
  const int64_t* chunk_off;  // [N + 1] global chunk number of each sequence's first chunk
  const int32_t* chunk_seq;  // [max_chunks] sequence of each global chunk, -1 past the last
  int64_t num_seqs;
  int64_t max_chunks;
};

// Where chunk gc lives: sequence n, first token, number of valid rows (0 when gc is unused).
__device__ __forceinline__ bool chunk_info(const Plan& pl, int64_t gc, int64_t& n, int64_t& t0, int& len) {
  if (gc >= pl.max_chunks) return false;
  const int32_t s = pl.chunk_seq[gc];
  if (s < 0) return false;
  n = s;
  t0 = pl.bounds[n] + (gc - pl.chunk_off[n]) * kChunkSize;
  const int64_t rem = pl.bounds[n + 1] - t0;
  len = static_cast<int>(rem < kChunkSize ? rem : kChunkSize);
  return len > 0;
}

// Sequence n's chunks in the plan: global chunks [c0, c0 + count) (clipped to max_chunks), tokens
// [tb, te). The sequential kernels walk them in order.
struct SeqChunks {
  int64_t c0, count, tb, te;
};
__device__ __forceinline__ SeqChunks seq_chunks(const Plan& pl, int64_t n) {
  SeqChunks s;
  s.c0 = pl.chunk_off[n];
  s.count = pl.chunk_off[n + 1] - s.c0;
  if (s.c0 + s.count > pl.max_chunks) s.count = pl.max_chunks - s.c0;
  s.tb = pl.bounds[n];
  s.te = pl.bounds[n + 1];
  return s;
}

// max_num_chunks(T, N) of gdn.h, kept here so the backend links on its own.
inline int64_t chunk_bound(int64_t num_tokens, int64_t num_seqs) { return num_tokens / kChunkSize + num_seqs; }

size_t plan_bytes(int64_t num_tokens, int64_t num_seqs);
// Builds the plan into `ws` (plan_bytes long) on the stream; returns the device view.
Plan build_plan(const Problem& p, void* ws, cudaStream_t stream);

inline size_t align_up(size_t x) { return (x + 255) & ~size_t(255); }

// Carves consecutive 256-byte aligned pieces out of a workspace.
struct Carver {
  char* base;
  size_t used = 0;
  explicit Carver(void* b) : base(static_cast<char*>(b)) {}
  template <typename T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(base ? base + used : nullptr);
    used += align_up(count * sizeof(T));
    return p;
  }
};

// ---- tensor-core helpers (sm_80+ mma.sync; fine on sm_90a) ---------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// D = A(16x16 bf16, row) * B(16x8 bf16, col) + D (fp32).
__device__ __forceinline__ void mma_bf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// 16-byte async copy global -> shared; src_bytes = 0 fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace cuda
}  // namespace gdn

namespace gdn {
namespace cuda {

// ---- fragment loaders for m16n8k16 (lane-address patterns of ldmatrix.x4) ---------------------------
// A (16x16, row-major) from smem stored [m][k] (stride in elements).
__device__ __forceinline__ void frag_a(const __nv_bfloat16* base, int stride, int m0, int k0, uint32_t* a) {
  const int lane = threadIdx.x % 32;
  ldsm_x4(smem_u32(base + (m0 + lane % 16) * stride + k0 + (lane / 16) * 8), a[0], a[1], a[2], a[3]);
}
// A (16x16) from smem stored transposed, [k][m].
__device__ __forceinline__ void frag_a_t(const __nv_bfloat16* base, int stride, int m0, int k0, uint32_t* a) {
  const int lane = threadIdx.x % 32, q = lane / 8, r = lane % 8;
  ldsm_x4_t(smem_u32(base + (k0 + r + (q / 2) * 8) * stride + m0 + (q % 2) * 8), a[0], a[1], a[2], a[3]);
}
// B for two n-tiles (n0, n0 + 8), k 16, from smem stored [n][k]: b[0..1] tile n0, b[2..3] tile n0+8.
__device__ __forceinline__ void frag_b_nk(const __nv_bfloat16* base, int stride, int n0, int k0, uint32_t* b) {
  const int lane = threadIdx.x % 32;
  ldsm_x4(smem_u32(base + (n0 + lane % 8 + (lane / 16) * 8) * stride + k0 + ((lane / 8) % 2) * 8), b[0], b[1], b[2],
          b[3]);
}
// B for two n-tiles from smem stored [k][n].
__device__ __forceinline__ void frag_b_kn(const __nv_bfloat16* base, int stride, int n0, int k0, uint32_t* b) {
  const int lane = threadIdx.x % 32, q = lane / 8, r = lane % 8;
  ldsm_x4_t(smem_u32(base + (k0 + r + (q % 2) * 8) * stride + n0 + (q / 2) * 8), b[0], b[1], b[2], b[3]);
}
// stmatrix.x4: the inverse of ldmatrix.x4 (lane l gives the address of row l % 8 of matrix l / 8).
__device__ __forceinline__ void stsm_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2),
               "r"(r3)
               : "memory");
}
// Two floats as one 16-bit pair of T (bf16 or fp16), low half first.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, __half>::value) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    return pack_bf16(lo, hi);
  }
}
// A warp's m16n8 accumulators acc[0..NT) (rows r0..r0 + 15, columns c0 + 8 nt..) times `scale`,
// rounded to T and stored [row][col] into shared memory (stride in elements) by stmatrix, so that
// the rows can leave in 16-byte pieces (stage_rows_out) instead of 4-byte pairs 8 rows apart.
template <typename T, int NT>
__device__ __forceinline__ void stage_acc(T* base, int stride, int r0, int c0, const float (&acc)[NT][4], float scale) {
  static_assert(NT % 2 == 0, "pairs of n-tiles");
  const int lane = threadIdx.x % 32;
  T* row = base + (r0 + lane % 8 + ((lane / 8) % 2) * 8) * stride + c0 + (lane / 16) * 8;
#pragma unroll
  for (int nt = 0; nt < NT; nt += 2)
    stsm_x4(smem_u32(row + 8 * nt), pack2<T>(scale * acc[nt][0], scale * acc[nt][1]),
            pack2<T>(scale * acc[nt][2], scale * acc[nt][3]), pack2<T>(scale * acc[nt + 1][0], scale * acc[nt + 1][1]),
            pack2<T>(scale * acc[nt + 1][2], scale * acc[nt + 1][3]));
}
// The 16 x W tile staged by stage_acc (after __syncwarp), 16 bytes per lane: out(i, c, piece)
// gets row r0 + i (i < rows), columns c0 + c..c0 + c + 7.
template <typename T, int W, typename Out>
__device__ __forceinline__ void stage_rows_out(const T* base, int stride, int r0, int c0, int rows, Out out) {
  static_assert(W % 8 == 0 && 32 % (W / 8) == 0, "whole 16-byte pieces, whole rows per warp step");
  constexpr int PR = W / 8;  // pieces per row
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int e = lane; e < 16 * PR; e += 32) {
    const int i = e / PR, c = 8 * (e % PR);
    if (i < rows) out(i, c, *reinterpret_cast<const uint4*>(base + (r0 + i) * stride + c0 + c));
  }
}
// 4-byte async copy (one fp32 value); src_bytes = 0 fills zeros.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes));
}
// 8-byte async copy (one fp64 G value); src_bytes = 0 fills zeros.
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes));
}

// ---- hand-off between two kernels that run at the same time ------------------------------------
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

}  // namespace cuda
}  // namespace gdn
