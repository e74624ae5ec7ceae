// The decode kernels' launchers for one pool element type TS (float, __nv_bfloat16, __half):
// launch_typed picks the kernel of the configuration and the layout. Defined here and
// instantiated once per TS in decode/instantiate_*.cu (the kernels of each type compile apart);
// recurrent.cu turns the run-time state dtype into TS.
#pragma once

#include <stdexcept>
#include <type_traits>

#include "cuda/core/common.cuh"
#include "cuda/decode/decode_args.cuh"
#include "cuda/decode/general_kernel.cuh"
#include "cuda/decode/recurrent.cuh"
#include "cuda/decode/rows_kernel.cuh"
#include "cuda/decode/tiles_kernel.cuh"

namespace gdn {
namespace cuda {
namespace decode {

constexpr int kRowsHead = 128;  // decode_rows_kernel's K = V

template <typename TS>
void launch_typed(const DecodeArgs& a, const Problem& p, const DecodeConfig& c, cudaStream_t st);

#ifdef GDN_DECODE_INSTANTIATE
template <bool KMAJ, typename TS, int NP, int BPS, bool STAGED>
void launch_rows(const DecodeArgs& a, int64_t grid, cudaStream_t st) {
  auto kern = decode_rows_kernel<kRowsWarps, KMAJ, TS, NP, BPS, STAGED>;
  if constexpr (STAGED)  // blocks_per_sm x 37 KB of static shared memory per SM
    check(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
          "cudaFuncSetAttribute");
  kern<<<grid_1d(grid, 1), kRowsWarps * 32, 0, st>>>(a);
  GDN_CUDA_LAUNCH_CHECK("decode_rows_kernel");
}

// The rows kernel of the config's shape: kRowsShapeF32 for fp32 pools, one of kRows16Shapes
// (entry I onwards) for bf16 / fp16 pools (check_config has checked that it is one).
template <bool KMAJ, typename TS, int I = 0>
void launch_rows_shape(const DecodeArgs& a, const DecodeConfig& c, cudaStream_t st) {
  if constexpr (std::is_same_v<TS, float>) {
    launch_rows<KMAJ, TS, kRowsShapeF32.parts, kRowsShapeF32.blocks_per_sm, kRowsShapeF32.staged>(a, c.grid, st);
  } else {
    constexpr RowsShape s = kRows16Shapes[I];
    if (c.parts == s.parts && c.blocks_per_sm == s.blocks_per_sm && c.staged == s.staged)
      launch_rows<KMAJ, TS, s.parts, s.blocks_per_sm, s.staged>(a, c.grid, st);
    else if constexpr (I + 1 < int(sizeof(kRows16Shapes) / sizeof(RowsShape)))
      launch_rows_shape<KMAJ, TS, I + 1>(a, c, st);
    else
      throw std::logic_error("decode: no decode_rows_kernel of this shape (check_config)");
  }
}

template <int K, int V, bool KMAJ, typename TS>
void launch_tiles(const DecodeArgs& a, int64_t grid, cudaStream_t st) {
  constexpr size_t smem = tiles_smem_bytes(K);
  auto kern = decode_tiles_kernel<K, V, KMAJ, TS>;
  allow_smem(kern, smem);
  kern<<<grid_1d(grid, 1), tiles_warps(K) * 32, smem, st>>>(a);
  GDN_CUDA_LAUNCH_CHECK("decode_tiles_kernel");
}

template <int K, int V, typename TS>
void launch_tiles_layout(const DecodeArgs& a, bool kmaj, int64_t grid, cudaStream_t st) {
  if (kmaj)
    launch_tiles<K, V, true, TS>(a, grid, st);
  else
    launch_tiles<K, V, false, TS>(a, grid, st);
}

// V = 128 with K = 128 runs decode_rows_kernel: its tiles kernel is not compiled.
template <int K, typename TS>
void launch_tiles_k(const DecodeArgs& a, int V, bool kmaj, int64_t grid, cudaStream_t st) {
  if (V == 64) {
    launch_tiles_layout<K, 64, TS>(a, kmaj, grid, st);
  } else if (V == 256) {
    launch_tiles_layout<K, 256, TS>(a, kmaj, grid, st);
  } else {
    if constexpr (K != kRowsHead)
      launch_tiles_layout<K, 128, TS>(a, kmaj, grid, st);
    else
      throw std::logic_error("decode: K = V = 128 runs decode_rows_kernel (check_config)");
  }
}

template <int KT, typename TS>
void launch_general(const DecodeArgs& a, bool kmaj, int64_t grid, cudaStream_t st) {
  decode_general_kernel<KT, TS><<<grid_1d(grid, 1), kGeneralWarps * 32, 0, st>>>(a, kmaj);
  GDN_CUDA_LAUNCH_CHECK("decode_general_kernel");
}

template <typename TS>
void launch_typed(const DecodeArgs& a, const Problem& p, const DecodeConfig& c, cudaStream_t st) {
  const bool kmaj = p.state_layout == StateLayout::kKMajor;
  if (c.kernel == DecodeKernel::kGeneral) {  // the next instantiated row count at or above K
    if (p.head_k <= 64)
      launch_general<64, TS>(a, kmaj, c.grid, st);
    else if (p.head_k <= 128)
      launch_general<128, TS>(a, kmaj, c.grid, st);
    else
      launch_general<256, TS>(a, kmaj, c.grid, st);
  } else if (c.kernel == DecodeKernel::kRows) {
    if (kmaj)
      launch_rows_shape<true, TS>(a, c, st);
    else
      launch_rows_shape<false, TS>(a, c, st);
  } else if (p.head_k == 64) {
    launch_tiles_k<64, TS>(a, p.head_v, kmaj, c.grid, st);
  } else if (p.head_k == 128) {
    launch_tiles_k<128, TS>(a, p.head_v, kmaj, c.grid, st);
  } else {
    launch_tiles_k<256, TS>(a, p.head_v, kmaj, c.grid, st);
  }
}

#endif  // GDN_DECODE_INSTANTIATE

extern template void launch_typed<float>(const DecodeArgs&, const Problem&, const DecodeConfig&, cudaStream_t);
extern template void launch_typed<__nv_bfloat16>(const DecodeArgs&, const Problem&, const DecodeConfig&, cudaStream_t);
extern template void launch_typed<__half>(const DecodeArgs&, const Problem&, const DecodeConfig&, cudaStream_t);

}  // namespace decode
}  // namespace cuda
}  // namespace gdn
