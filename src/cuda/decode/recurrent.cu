// The decode step: the token-by-token recurrence, memory-bound on the state (read once and
// written once: 64 KiB per (sequence, value head) at K = V = 128 in fp32, 32 KiB in bf16 / fp16).
// Three kernels, chosen by decode_heuristics (recurrent.cuh) from the head sizes and the pools'
// alignment:
//   K = V = 128, both state layouts: decode_rows_kernel<4, K-major or not, ...> (rows_kernel.cuh),
//     a block of 4 warps per (sequence, value head) with the whole state in registers, 2 blocks per
//     SM for fp32 pools; bf16 / fp16 pools keep the state packed and make it fp32 part by part,
//     with more blocks per SM (the shape: kRows16Shapes, recurrent.cuh);
//   every other K, V in {64, 128, 256}: decode_tiles_kernel<K, V, K-major or not>
//     (tiles_kernel.cuh), persistent warps over 32-value state tiles in cp.async rings, one block
//     per SM;
//   every other K, V in [1, 256] (fla's 32, 60, 100, ...): decode_general_kernel<KT>
//     (general_kernel.cuh), a block per 32 columns of a (sequence, value head) with the rows past
//     K and the columns past V masked; KT is the next of 64, 128, 256 at or above K. It also takes
//     the tuned sizes when a state pool's rows do not start on 4-element pieces (an odd
//     row_stride): its element accesses need no alignment, the tuned kernels' float4 / uint2 do.
// The configurations that lost against these (other warp counts and ring depths, register tiles,
// flash-linear-attention's direct loads, whole rows with 8 warps) are gone from the library; their
// numbers are in docs/perf.md ("Decode versions", v3 to v5) and in
// bench/results/h200_decode_variants.log.
#include <algorithm>
#include <stdexcept>

#include "backend.h"
#include "cuda/core/common.cuh"
#include "cuda/decode/decode_args.cuh"
#include "cuda/decode/launch.cuh"
#include "cuda/decode/recurrent.cuh"

namespace gdn {
namespace cuda {
namespace decode {
namespace {

// The sizes that the rows and tiles kernels are instantiated for; the general kernel takes the rest.
bool tuned_head(int d) { return d == 64 || d == 128 || d == 256; }
bool uses_general_kernel(const Problem& p) { return !tuned_head(p.head_k) || !tuned_head(p.head_v); }

// The API layer validates head sizes first; this guards direct calls of the backend.
void check_head_sizes(const Problem& p) {
  auto ok = [](int d) { return d >= 1 && d <= 256; };
  if (!ok(p.head_k) || !ok(p.head_v))
    throw Error("recurrent_gated_delta_rule: head_k and head_v must be in [1, 256] on the CUDA backend");
}

bool uses_rows_kernel(const Problem& p) { return p.head_k == kRowsHead && p.head_v == kRowsHead; }

// The rows kernel's shape for the pool's element type (decode_heuristics), and whether a config
// names a compiled one (check_config).
RowsShape rows_shape(const Problem& p) {
  return p.state_dtype == DType::kFloat32 ? kRowsShapeF32 : kRows16Shapes[kRows16Choice];
}
bool rows_shape_compiled(const Problem& p, const DecodeConfig& c) {
  auto is = [&](const RowsShape& s) {
    return c.parts == s.parts && c.blocks_per_sm == s.blocks_per_sm && c.staged == s.staged;
  };
  if (p.state_dtype == DType::kFloat32) return is(kRowsShapeF32);
  for (const RowsShape& s : kRows16Shapes)
    if (is(s)) return true;
  return false;
}

int64_t general_grid(const Problem& p) {
  return p.num_seqs * p.num_v_heads * ((p.head_v + kGeneralSlice - 1) / kGeneralSlice);
}

// The general kernel's configuration (any head sizes, any pool alignment).
DecodeConfig general_config(const Problem& p) {
  DecodeConfig c;
  c.kernel = DecodeKernel::kGeneral;
  c.warps = kGeneralWarps;
  c.ring_stages = 0;
  c.blocks_per_sm = 0;
  c.grid = general_grid(p);
  return c;
}

// A pool whose rows split into 4-element pieces (decode_pools_in_pieces); a null pool passes.
bool pool_in_pieces(const StateRef& s, const Problem& p) {
  if (s.data == nullptr) return true;
  const int64_t head = int64_t(p.head_k) * p.head_v;
  const int64_t stride = s.row_stride != 0 ? s.row_stride : p.num_v_heads * head;
  // Bytes of 4 elements (not gdn::dtype_size of api.cpp: the backend links on its own).
  const uintptr_t piece = p.state_dtype == DType::kFloat32 ? 16 : 8;
  return reinterpret_cast<uintptr_t>(s.data) % piece == 0 && stride % 4 == 0 && head % 4 == 0;
}

// A configuration names a compiled kernel: decode_rows_kernel<kRowsWarps, ...> of a compiled shape
// (rows_shape_compiled) for K = V = 128,
// decode_tiles_kernel with tiles_warps(K) x tiles_stages(K) for the other tuned sizes (both for
// pools in 4-element pieces only), decode_general_kernel for any call.
void check_config(const ForwardArgs& f, const DecodeConfig& c) {
  const Problem& p = f.problem;
  bool ok = false;
  if (c.kernel == DecodeKernel::kRows)
    ok = uses_rows_kernel(p) && c.warps == kRowsWarps && c.ring_stages == 0 && rows_shape_compiled(p, c) &&
         c.grid == p.num_seqs * p.num_v_heads;
  else if (c.kernel == DecodeKernel::kTiles)
    ok = !uses_rows_kernel(p) && !uses_general_kernel(p) && c.warps == tiles_warps(p.head_k) &&
         c.ring_stages == tiles_stages(p.head_k) && c.blocks_per_sm == 1 && c.parts == 0 && !c.staged && c.grid >= 1;
  else if (c.kernel == DecodeKernel::kGeneral)
    ok = c.warps == kGeneralWarps && c.ring_stages == 0 && c.blocks_per_sm == 0 && c.parts == 0 && !c.staged &&
         c.grid == general_grid(p);
  if (!ok)
    throw Error(
        "recurrent_gated_delta_rule: no decode kernel of the CUDA backend matches this DecodeConfig (decode_heuristics "
        "gives the one for the problem)");
  if (c.kernel != DecodeKernel::kGeneral && !decode_pools_in_pieces(f))
    throw Error(
        "recurrent_gated_delta_rule: decode_rows_kernel and decode_tiles_kernel move state rows in 4-element pieces, "
        "and a state pool of this call has rows that do not start on one (data or row_stride not a multiple of 4 "
        "elements); expected DecodeKernel::kGeneral (decode_heuristics(args, device) gives it)");
}

DecodeArgs make_decode_args(const ForwardArgs& f) {
  const Problem& p = f.problem;
  DecodeArgs a;
  a.q = f.q.data;
  a.q_st = f.q.stride_token;
  a.q_sh = f.q.stride_head;
  a.k = f.k.data;
  a.k_st = f.k.stride_token;
  a.k_sh = f.k.stride_head;
  a.v = f.v.data;
  a.v_st = f.v.stride_token;
  a.v_sh = f.v.stride_head;
  a.o = f.o.data;
  a.o_st = f.o.stride_token;
  a.o_sh = f.o.stride_head;
  a.dt = p.dtype;
  a.qk_dt = qk_dtype_of(p);
  a.o_dt = o_dtype_of(p);
  a.K = p.head_k;
  a.V = p.head_v;
  a.gates = make_gates(f);
  a.cu = p.cu_seqlens;
  a.cu_type = p.cu_seqlens_type;
  a.T = p.num_tokens;
  a.N = p.num_seqs;
  a.len = p.num_seqs > 0 ? p.num_tokens / p.num_seqs : 0;
  a.H = p.num_qk_heads;
  a.HV = p.num_v_heads;
  a.group = p.num_v_heads / p.num_qk_heads;
  a.scale = p.scale;
  a.l2norm = p.use_qk_l2norm;
  a.init = f.initial_state;
  a.fin = f.final_state;
  a.ts = f.token_states;
  return a;
}

// The one place the pool's element type becomes a template argument (launch.cuh; each type's
// kernels are instantiated in a file of their own, decode/instantiate_*.cu).
void launch(const DecodeArgs& a, const Problem& p, const DecodeConfig& c, cudaStream_t st) {
  switch (p.state_dtype) {
    case DType::kBFloat16:
      launch_typed<__nv_bfloat16>(a, p, c, st);
      break;
    case DType::kFloat16:
      launch_typed<__half>(a, p, c, st);
      break;
    default:
      launch_typed<float>(a, p, c, st);
      break;
  }
}

}  // namespace
}  // namespace decode

// device_props() is read once per process, for the device that is current at the first call
// (common.cuh). That is safe on a second, different GPU: the grid only sizes the persistent
// kernel's parallelism (its warps stride over all the items whatever the grid), so it could only
// be less well sized there, never wrong.
DecodeConfig decode_heuristics(const Problem& p, const DeviceProps& dev) {
  using namespace decode;
  check_head_sizes(p);
  if (uses_general_kernel(p)) return general_config(p);  // a block per 32 columns of each (sequence, value head)
  DecodeConfig c;
  if (uses_rows_kernel(p)) {
    c.kernel = DecodeKernel::kRows;
    c.warps = kRowsWarps;
    c.ring_stages = 0;
    c.blocks_per_sm = rows_shape(p).blocks_per_sm;
    c.parts = rows_shape(p).parts;
    c.staged = rows_shape(p).staged;
    c.grid = p.num_seqs * p.num_v_heads;
    return c;
  }
  // Persistent grid: as many blocks as fit on the device at once (shared memory bounds them), fewer
  // for few items.
  c.kernel = DecodeKernel::kTiles;
  c.warps = tiles_warps(p.head_k);
  c.ring_stages = tiles_stages(p.head_k);
  c.blocks_per_sm = 1;
  const size_t smem = tiles_smem_bytes(p.head_k);
  const int64_t per_sm = std::max<int64_t>(1, int64_t(dev.smem_per_sm) / int64_t(smem + dev.smem_reserved_per_block));
  const int64_t items = p.num_seqs * p.num_v_heads * (p.head_v / kSlice);
  c.grid = std::max<int64_t>(1, std::min<int64_t>((items + c.warps - 1) / c.warps, int64_t(dev.sms) * per_sm));
  return c;
}

bool decode_pools_in_pieces(const ForwardArgs& f) {
  using decode::pool_in_pieces;
  return pool_in_pieces(f.initial_state, f.problem) && pool_in_pieces(f.final_state, f.problem) &&
         pool_in_pieces(f.token_states.pool, f.problem);
}

// Pools whose rows start off a 4-element piece (small heads with HV K V not a multiple of 4 run the
// general kernel anyway; at the tuned sizes only an odd row_stride or a view starting mid-row does
// this) take the general kernel: correct at any alignment, slower than the tuned kernels.
DecodeConfig decode_heuristics(const ForwardArgs& f, const DeviceProps& dev) {
  decode::check_head_sizes(f.problem);
  return decode_pools_in_pieces(f) ? decode_heuristics(f.problem, dev) : decode::general_config(f.problem);
}

size_t recurrent_gated_delta_rule_workspace_size(const Problem&, int) { return 0; }

void recurrent_gated_delta_rule(const ForwardArgs& f, const Exec& exec, const DecodeConfig& cfg) {
  decode::check_head_sizes(f.problem);
  decode::check_config(f, cfg);
  decode::launch(decode::make_decode_args(f), f.problem, cfg, stream_of(exec));
}

void recurrent_gated_delta_rule(const ForwardArgs& f, const Exec& exec) {
  decode::check_head_sizes(f.problem);  // before device_props(): bad sizes are an Error on any machine
  recurrent_gated_delta_rule(f, exec, decode_heuristics(f, device_props()));
}

}  // namespace cuda
}  // namespace gdn
