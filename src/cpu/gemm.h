// Small fp32 matrix products for the CPU backend, sized for one chunk (64 rows) and one head
// (K, V <= 256): all operands sit in L1/L2, so a register-blocked micro-kernel without packing is
// what pays. Written with GCC/Clang vector extensions: 16-float vectors become single AVX-512
// registers when the target has them and pairs/quads of AVX/SSE registers when it does not.
#pragma once

#include <cstdint>
#include <cstring>

namespace gdn {
namespace cpu {

typedef float f32x16 __attribute__((vector_size(64)));

inline f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store16(float* p, f32x16 v) { std::memcpy(p, &v, sizeof(v)); }

// C[8, 16 * NV] (=|+=) A[8, depth] B[depth, 16 * NV]; 8 x NV accumulators stay in registers,
// each B row is loaded once and each A element is broadcast once.
template <int NV>
inline void gemm_tile(int depth, const float* __restrict A, int64_t lda, const float* __restrict B, int64_t ldb,
                      float* __restrict C, int64_t ldc, bool accumulate) {
  f32x16 acc[8][NV];
  for (int r = 0; r < 8; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load16(C + r * ldc + 16 * v) : f32x16{};
  for (int p = 0; p < depth; ++p) {
    f32x16 b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load16(B + p * ldb + 16 * v);
    for (int r = 0; r < 8; ++r) {
      const float a = A[r * lda + p];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < 8; ++r)
    for (int v = 0; v < NV; ++v) store16(C + r * ldc + 16 * v, acc[r][v]);
}

// Structure the caller knows about, so zero blocks are skipped:
//  kDense:       C = A B.
//  kLowerA:      A is [M, M] lower triangular (A_ip = 0 for p > i): the depth stops at the tile's
//                last row.
//  kLowerC:      only C_ij with j <= i is needed (the caller masks the rest): column tiles wholly
//                above the diagonal are skipped and left unwritten.
enum class Shape { kDense, kLowerA, kLowerC };

// C[M, N] (=|+=) A[M, depth] B[depth, N], row-major with leading dimensions in elements.
// M % 8 == 0 and N % 16 == 0 (head sizes are multiples of 16 and chunks are padded to 64 rows).
template <Shape shape = Shape::kDense>
inline void gemm(int M, int N, int depth, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                 int64_t ldc, bool accumulate) {
  for (int i = 0; i < M; i += 8) {
    const int d = shape == Shape::kLowerA ? (i + 8 < depth ? i + 8 : depth) : depth;
    const int n_end = shape == Shape::kLowerC ? (i + 8 + 15) / 16 * 16 < N ? (i + 8 + 15) / 16 * 16 : N : N;
    int j = 0;
    for (; j + 32 <= n_end; j += 32) gemm_tile<2>(d, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, accumulate);
    if (j < n_end) gemm_tile<1>(d, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, accumulate);
  }
}

// dst[cols, rows] = src[rows, cols]^T.
inline void transpose(int rows, int cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

}  // namespace cpu
}  // namespace gdn
