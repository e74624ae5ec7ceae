// Prefill checkpoints on the CUDA forward (Checkpoints in gdn.h; the slot map is
// common/checkpoint_slots.h, shared with validation and the CPU backend). Every chain kernel
// (stages.cu's fwd_h, fwd_h_wgmma.cuh) carries a sequence's fp32 state on chip across its chunks;
// after the update of a chunk that ends on a stored boundary it writes the state it holds to the
// boundary's pool row the way it writes the final state: the same fp32 values, rounded once into
// the pool's dtype (store_chain_state_as below; the exact path's store_dt). So a row is bitwise the
// final state of a call on the prefix that runs the same chain.
#pragma once

#include "common/checkpoint_slots.h"
#include "cuda/core/common.cuh"

namespace gdn {
namespace cuda {

// What the tensor-core chain kernels need to store checkpoints: the caller's Checkpoints and the
// pools' element type, which their initial and final states share (Problem::state_dtype: every
// pool of a call): the chain reads its initial row and writes its final row and checkpoints in it
// directly, converted on read and rounded once on write, with neither workspace nor a copy.
struct CheckpointOut {
  Checkpoints ck;                 // ck.pool.data null: none
  DType dtype = DType::kFloat32;  // the pools' element type (Problem::state_dtype)
};

// A forward call's checkpoints. Its problem's state_dtype is the caller's pool type (the initial
// and final rows' too: the chain reads and writes them in place).
inline CheckpointOut checkpoint_out(const ForwardArgs& f) {
  return CheckpointOut{f.checkpoints, f.problem.state_dtype};
}

// The pool row that takes sequence n's state after its chunk c (0-based, from the sequence's
// start; the sequence has `len` tokens), or -1: the chunk ends boundary j = (c + 1) / every - 1,
// which the sequence stores (checkpoint_count: the boundary lies inside it and j <
// max_checkpoints), at a row the slot map names.
__device__ __forceinline__ int64_t checkpoint_row_after(const Checkpoints& ck, int64_t n, int64_t c, int64_t len) {
  if (ck.pool.data == nullptr || ck.every_chunks < 1 || (c + 1) % ck.every_chunks != 0) return -1;
  const int64_t j = (c + 1) / ck.every_chunks - 1;
  return j < slots::checkpoint_count(ck, len) ? slots::checkpoint_row(ck, ck.pool.indices, n, j) : -1;
}

// Offset (elements) of state element S[kk][vv] of head hv in row r of a K x V pool, K- or V-major.
__device__ __forceinline__ int64_t state_elem(const StateRef& s, int64_t r, int hv, int HV, int K, int V, bool kmajor,
                                              int kk, int vv) {
  return state_offset(s, r, hv, HV, int64_t(K) * V) + (kmajor ? int64_t(kk) * V + vv : int64_t(vv) * K + kk);
}

// The wgmma chain's state registers (fwd_h_wgmma.cuh: the S^T accumulator of a 64-wide V slice,
// st[4 j + 2 hh + e] = S[kk = 8 j + 2 t + e][vv = v0 + 16 warp + g + 8 hh]) into a [D][D] state, K- or
// V-major, rounded once to TS; p: this thread's element (2 t, v0 + 16 warp + g). Every store at a
// constant offset from p: no address registers in a chain loop that runs at 255. D = 64: the
// m64n64 state's 32 floats (j < 8). kRows: the rows kk the registers hold (D = 256: each chain
// warpgroup's 128-row half, p at its first row). kVPairs: V-major rows by element pairs where
// aligned (one 2-element store a pair); only for the final state, stored after the chain loop:
// inside it (the checkpoints) the pairs' path made ptxas reschedule the loop (+184 instructions;
// H200, session 47: 1x32k/bf16vstate 0.734 -> 0.698 ms with the pairs at the final store alone).
template <int D, int kRows = D, bool kVPairs = false, typename TS>
__device__ __forceinline__ void store_chain_state(TS* p, bool kmajor, const float (&st)[kRows / 2]) {
  if (kmajor) {
#pragma unroll
    for (int j = 0; j < kRows / 8; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int e = 0; e < 2; ++e) p[(8 * j + e) * D + 8 * hh] = from_f<TS>(st[4 * j + 2 * hh + e]);
  } else if (kVPairs && reinterpret_cast<uintptr_t>(p) % (2 * sizeof(TS)) == 0) {
    // V-major: this thread's pairs (kk, kk + 1) side by side, one store a pair where aligned.
    struct alignas(2 * sizeof(TS)) Pair {
      TS lo, hi;
    };
#pragma unroll
    for (int j = 0; j < kRows / 8; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
        *reinterpret_cast<Pair*>(p + 8 * hh * D + 8 * j) =
            Pair{from_f<TS>(st[4 * j + 2 * hh]), from_f<TS>(st[4 * j + 2 * hh + 1])};
  } else {
#pragma unroll
    for (int j = 0; j < kRows / 8; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int e = 0; e < 2; ++e) p[8 * hh * D + 8 * j + e] = from_f<TS>(st[4 * j + 2 * hh + e]);
  }
}

// The same into a pool `data` of element type dt (fp32, fp16 or bf16); e0: the offset of this
// thread's element.
template <int D, int kRows = D, bool kVPairs = false>
__device__ __forceinline__ void store_chain_state_as(DType dt, void* data, int64_t e0, bool kmajor,
                                                     const float (&st)[kRows / 2]) {
  if (dt == DType::kFloat32)
    store_chain_state<D, kRows, kVPairs>(static_cast<float*>(data) + e0, kmajor, st);
  else if (dt == DType::kFloat16)
    store_chain_state<D, kRows, kVPairs>(static_cast<__half*>(data) + e0, kmajor, st);
  else
    store_chain_state<D, kRows, kVPairs>(static_cast<__nv_bfloat16*>(data) + e0, kmajor, st);
}

// The same into the checkpoint pool.
template <int D, int kRows = D>
__device__ __forceinline__ void store_chain_checkpoint(const CheckpointOut& out, int64_t e0, bool kmajor,
                                                       const float (&st)[kRows / 2]) {
  store_chain_state_as<D, kRows>(out.dtype, out.ck.pool.data, e0, kmajor, st);
}

}  // namespace cuda
}  // namespace gdn
