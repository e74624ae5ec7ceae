// The fp32 copy of bf16 / fp16 state rows around the tensor-core forward (state_copy.cuh).
// Memory-bound element copies: one thread per element, consecutive threads on consecutive
// elements of a row (coalesced on both sides); the pool row is looked up (and clamped on the
// device like every state index: state_row) per element, which the cache absorbs.
#include "cuda/chunk/state_copy.cuh"

namespace gdn {
namespace cuda {
namespace {

constexpr int kThreads = 256;

template <typename TS>
__global__ void gather_states_kernel(StateRef pool, int HV, int64_t KV, int64_t total, float* __restrict__ dense) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t head = i / KV, n = head / HV;
    const int hv = static_cast<int>(head % HV);
    const int64_t r = state_row(pool, n);
    dense[i] = r >= 0 ? to_f(static_cast<const TS*>(pool.data)[state_offset(pool, r, hv, HV, KV) + i % KV]) : 0.f;
  }
}

template <typename TS>
__global__ void scatter_states_kernel(const float* __restrict__ dense, int HV, int64_t KV, int64_t total,
                                      StateRef pool) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t head = i / KV, n = head / HV;
    const int hv = static_cast<int>(head % HV);
    const int64_t r = state_row(pool, n);
    if (r >= 0) static_cast<TS*>(pool.data)[state_offset(pool, r, hv, HV, KV) + i % KV] = from_f<TS>(dense[i]);
  }
}

int64_t dense_elems(const Problem& p) { return p.num_seqs * p.num_v_heads * int64_t(p.head_k) * p.head_v; }

// Enough blocks to fill the device many times over; the loops stride over the rest.
unsigned copy_grid(int64_t total) { return grid_1d(total < (int64_t(1) << 24) ? total : (int64_t(1) << 24), kThreads); }

template <typename Fn>
void by_state_type(DType dt, Fn&& fn) {
  if (dt == DType::kBFloat16)
    fn(__nv_bfloat16{});
  else
    fn(__half{});
}

}  // namespace

bool needs_state_copy(const Problem& p) { return p.state_dtype != DType::kFloat32; }

size_t state_copy_bytes(const Problem& p) {
  return needs_state_copy(p) ? align_up(size_t(dense_elems(p)) * sizeof(float)) : 0;
}

void gather_states(const Problem& p, const StateRef& pool, float* dense, cudaStream_t s) {
  const int64_t total = dense_elems(p), KV = int64_t(p.head_k) * p.head_v;
  if (total == 0) return;
  by_state_type(p.state_dtype, [&](auto tag) {
    using TS = decltype(tag);
    gather_states_kernel<TS><<<copy_grid(total), kThreads, 0, s>>>(pool, p.num_v_heads, KV, total, dense);
    GDN_CUDA_LAUNCH_CHECK("gather_states_kernel");
  });
}

void scatter_states(const Problem& p, const float* dense, const StateRef& pool, cudaStream_t s) {
  const int64_t total = dense_elems(p), KV = int64_t(p.head_k) * p.head_v;
  if (total == 0) return;
  by_state_type(p.state_dtype, [&](auto tag) {
    using TS = decltype(tag);
    scatter_states_kernel<TS><<<copy_grid(total), kThreads, 0, s>>>(dense, p.num_v_heads, KV, total, pool);
    GDN_CUDA_LAUNCH_CHECK("scatter_states_kernel");
  });
}

}  // namespace cuda
}  // namespace gdn
