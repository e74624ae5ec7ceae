// Small fp32 matrix products for the CPU backend, sized for one chunk (64 rows) and one head
// (K, V <= 256): all operands sit in L1/L2, so a register-blocked micro-kernel without packing is
// what pays. Written with GCC/Clang vector extensions in the target's own vector (f32xN: one
// register), whose width sets the micro-kernel's tile, so that its accumulators never leave the
// registers:
//   AVX-512 (32 x 16 floats):  8 rows x 2 vectors of 16: 16 accumulators;
//   AVX / AVX2 (16 x 8):       6 rows x 2 vectors of 8:  12 accumulators (M % 6 left in 4 or 2
//                              rows: M is a multiple of 8);
//   others (SSE, NEON: 4):     4 rows x 4 vectors of 4:  16 accumulators (NEON's 32 registers; SSE's
//                              16 spill a little).
// (16-float vectors everywhere, the AVX-512 tile on AVX2 held 32 register halves in 16 registers:
// 2.0 GFLOP/s against ~48 for the AVX2 tile on the same core, an AVX2 EPYC, session 30; the other
// loops in 16-float vectors ran 2-3x slower there too.)
#pragma once

#include <cstdint>
#include <cstring>

namespace gdn {
namespace cpu {

// The target's own vector: kLanes floats, one register (the micro-kernel, the inverse's rows, the
// V-major decode step).
#if defined(__AVX512F__)
constexpr int kLanes = 16, kGemmRows = 8, kGemmVecs = 2;
#elif defined(__AVX__)
constexpr int kLanes = 8, kGemmRows = 6, kGemmVecs = 2;
#else
constexpr int kLanes = 4, kGemmRows = 4, kGemmVecs = 4;
#endif
constexpr int kGemmCols = kLanes * kGemmVecs;  // the micro-kernel's columns: 32, 16 or 16
typedef float f32xN __attribute__((vector_size(4 * kLanes)));
static_assert(kGemmCols % 16 == 0 || 16 % kGemmCols == 0, "whole tiles over N % 16 == 0");

inline f32xN loadN(const float* p) {
  f32xN v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void storeN(float* p, f32xN v) { std::memcpy(p, &v, sizeof(v)); }
inline float hsumN(f32xN v) {  // the lanes' sum, in lane order
  float t[kLanes];
  std::memcpy(t, &v, sizeof(t));
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += t[l];
  return s;
}

// C[R, kLanes * NV] (=|+=) A[R, depth] B[depth, kLanes * NV]; the R x NV accumulators stay in
// registers, each B row is loaded once and each A element is broadcast once.
template <int R, int NV>
inline void gemm_tile(int depth, const float* __restrict A, int64_t lda, const float* __restrict B, int64_t ldb,
                      float* __restrict C, int64_t ldc, bool accumulate) {
  f32xN acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? loadN(C + r * ldc + kLanes * v) : f32xN{};
  for (int p = 0; p < depth; ++p) {
    f32xN b[NV];
    for (int v = 0; v < NV; ++v) {
      b[v] = loadN(B + p * ldb + kLanes * v);
#if defined(__AVX__) && !defined(__AVX512F__)
      // In a register: GCC otherwise folds the load into every row's FMA (at 4 rows, 8 loads of
      // B and 4 broadcasts a step: load-bound, 35 GFLOP/s; held: ~48, session 30).
      asm("" : "+x"(b[v]));
#endif
    }
    for (int r = 0; r < R; ++r) {
      const float a = A[r * lda + p];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) storeN(C + r * ldc + kLanes * v, acc[r][v]);
}

// Structure the caller knows about, so zero blocks are skipped:
//  kDense:       C = A B.
//  kLowerA:      A is [M, M] lower triangular (A_ip = 0 for p > i): the depth stops at the tile's
//                last row.
//  kLowerC:      only C_ij with j <= i is needed (the caller masks the rest): column tiles wholly
//                above the diagonal are skipped and left unwritten.
enum class Shape { kDense, kLowerA, kLowerC };

// The row tiles [i, i + R) of C (=|+=) A B from row i on, R rows each while they fit.
template <int R, Shape shape>
inline int gemm_rows(int i, int M, int N, int depth, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                     int64_t ldc, bool accumulate) {
  constexpr int kHalf = 16 / kLanes;  // vectors of a 16-column tile (N % 16 == 0)
  for (; i + R <= M; i += R) {
    const int last = i + R;  // one past the tile's last row
    const int d = shape == Shape::kLowerA ? (last < depth ? last : depth) : depth;
    const int n_end = shape == Shape::kLowerC ? (last + 15) / 16 * 16 < N ? (last + 15) / 16 * 16 : N : N;
    int j = 0;
    for (; j + kGemmCols <= n_end; j += kGemmCols)
      gemm_tile<R, kGemmVecs>(d, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, accumulate);
    for (; j < n_end; j += 16) gemm_tile<R, kHalf>(d, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, accumulate);
  }
  return i;
}

// C[M, N] (=|+=) A[M, depth] B[depth, N], row-major with leading dimensions in elements.
// M % 8 == 0 and N % 16 == 0 (head sizes are multiples of 16 and chunks are padded to 64 rows).
// Each element's products accumulate over the depth in order, whatever the tile.
template <Shape shape = Shape::kDense>
inline void gemm(int M, int N, int depth, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                 int64_t ldc, bool accumulate) {
  int i = gemm_rows<kGemmRows, shape>(0, M, N, depth, A, lda, B, ldb, C, ldc, accumulate);
  if constexpr (8 % kGemmRows != 0) {  // (6 rows: M % 6 is 0, 2 or 4 when M % 8 == 0)
    i = gemm_rows<4, shape>(i, M, N, depth, A, lda, B, ldb, C, ldc, accumulate);
    gemm_rows<2, shape>(i, M, N, depth, A, lda, B, ldb, C, ldc, accumulate);
  }
}

// dst[cols, rows] = src[rows, cols]^T.
inline void transpose(int rows, int cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

}  // namespace cpu
}  // namespace gdn
