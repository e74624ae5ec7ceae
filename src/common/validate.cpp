#include "common/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

#include "common/capabilities.h"
#include "common/validate_detail.h"

namespace gdn {
namespace {

using detail::fail;
using detail::host_view;
using detail::named_row;
using detail::read_index;

bool valid_dtype(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

// How a backend's entry reads in a message: "CPU", "CUDA".
const char* backend_label(Backend backend) { return backend == Backend::kCUDA ? "CUDA" : "CPU"; }

// The table's head sizes in words: "an integer in [1, 256] on the CPU backend".
std::string head_sizes_expected(const Capabilities& caps) {
  std::ostringstream os;
  os << "an integer in [" << caps.min_head_size << ", " << caps.max_head_size << "] on the "
     << backend_label(caps.backend) << " backend";
  return os.str();
}

std::string dtypes_expected(const Capabilities& caps) {
  std::ostringstream os;
  int listed = 0;
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    if (caps.has_dtype(d)) os << (listed++ ? ", " : "") << dtype_name(d);
  os << " on the " << backend_label(caps.backend) << " backend";
  return os.str();
}

template <typename... Parts>
bool reject(std::string* why, const Parts&... parts) {
  if (why != nullptr) {
    std::ostringstream os;
    (os << ... << parts);
    *why = os.str();
  }
  return false;
}

// The dtype of a dim-sized row operation (l2norm) against the table.
bool dtype_supported(const Capabilities& caps, DType dtype, std::string* why) {
  if (!caps.has_dtype(dtype))
    return reject(why, "dtype is ", valid_dtype(dtype) ? dtype_name(dtype) : "invalid", "; expected one of ",
                  dtypes_expected(caps));
  return true;
}

bool backend_supported(const Capabilities& caps, Backend backend, Operation op, std::string* why) {
  if (backend != Backend::kCPU && backend != Backend::kCUDA) return reject(why, "exec.backend is invalid");
  if (!caps.built)
    return reject(why, "exec.backend is k", backend_label(backend), ", but gdn was built without ",
                  backend_label(backend));
  if (!caps.has_operation(op))
    return reject(why, operation_name(op), " is not supported on the ", backend_label(backend), " backend");
  return true;
}

void fill_strides(ConstTensor& t, int heads, int dim) {
  if (t.stride_head == 0) t.stride_head = dim;
  if (t.stride_token == 0) t.stride_token = static_cast<int64_t>(heads) * t.stride_head;
}
void fill_strides(MutTensor& t, int heads, int dim) {
  if (t.stride_head == 0) t.stride_head = dim;
  if (t.stride_token == 0) t.stride_token = static_cast<int64_t>(heads) * t.stride_head;
}

// Packed strides for the token-major tensors that ForwardArgs and StageBuffers share.
template <typename Args>
void fill_io_strides(Args& a, const Problem& p) {
  fill_strides(a.q, p.num_qk_heads, p.head_k);
  fill_strides(a.k, p.num_qk_heads, p.head_k);
  fill_strides(a.v, p.num_v_heads, p.head_v);
  fill_strides(a.g, p.num_v_heads, 1);
  fill_strides(a.beta, p.num_v_heads, 1);
  fill_strides(a.o, p.num_v_heads, p.head_v);
}

template <typename TensorT>
void check_tensor(const char* op, const char* name, const TensorT& t, int heads, int dim) {
  if (t.data == nullptr) fail(op, name, " is null; expected a pointer to [T, ", heads, ", ", dim, "]");
  if (t.stride_token < 0 || t.stride_head < 0)
    fail(op, name, " has a negative stride (token ", t.stride_token, ", head ", t.stride_head,
         "); expected non-negative element strides");
  if (heads > 1 && t.stride_head < dim)
    fail(op, name, ".stride_head (", t.stride_head, ") overlaps rows; expected 0 or >= ", dim);
  if (t.stride_token != 0 && t.stride_token < static_cast<int64_t>(heads - 1) * t.stride_head + dim)
    fail(op, name, ".stride_token (", t.stride_token,
         ") overlaps tokens; expected 0 or >= ", static_cast<int64_t>(heads - 1) * t.stride_head + dim);
}

// The first n whose row in [0, num_slots) repeats the row of an earlier sequence, or -1.
// Without allocating: a bitmap of 64 Ki slots on the stack, one pass over the indices per 64 Ki
// slots of the pool (one pass for any pool of up to 65536 rows).
int64_t first_repeated_index(const StateRef& s, const void* indices, const uint8_t* present, int64_t num_seqs) {
  const int64_t num_slots = s.num_slots;
  constexpr int64_t kWindow = int64_t{1} << 16;
  uint64_t seen[kWindow / 64];
  int64_t first = -1;
  for (int64_t lo = 0; lo < num_slots; lo += kWindow) {
    std::fill(seen, seen + (std::min(kWindow, num_slots - lo) + 63) / 64, uint64_t{0});
    const int64_t end = first >= 0 ? first : num_seqs;  // a later repeat cannot be the first
    for (int64_t n = 0; n < end; ++n) {
      const int64_t row = named_row(s, indices, present, n);
      if (row < lo || row >= lo + kWindow || row >= num_slots) continue;
      const int64_t bit = row - lo;
      if ((seen[bit / 64] >> (bit % 64)) & 1u) {
        first = n;
        break;
      }
      seen[bit / 64] |= uint64_t{1} << (bit % 64);
    }
  }
  return first;
}

// Checks a state pool and fills in its packed row stride (row_stride 0 -> HV * K * V).
// `indexed_per_sequence` false: only the pool itself is checked (TokenStates' indices are not [N]).
void check_state(const char* op, const char* name, StateRef& s, const Problem& p, Backend backend, bool written,
                 bool indexed_per_sequence = true) {
  if (s.data == nullptr) return;
  // Rows start at any element (a pool of small heads, HV * K * V * the element size not a multiple
  // of 16 bytes, or an odd row_stride): the kernels choose their access width from the pool's
  // alignment (the CUDA decode step: cuda/decode/recurrent.cu). Only the element itself must be
  // aligned, as any array of the dtype is.
  const size_t elem = dtype_size(p.state_dtype);
  if (reinterpret_cast<uintptr_t>(s.data) % elem != 0)
    fail(op, name, ".data is not aligned to its element size (", elem, " bytes for ", dtype_name(p.state_dtype),
         "); expected an array of state_dtype");
  const int64_t packed = int64_t{p.num_v_heads} * p.head_k * p.head_v;
  if (s.row_stride != 0 && s.row_stride < packed)
    fail(op, name, ".row_stride is ", s.row_stride, "; expected 0 (packed) or >= HV * K * V = ", packed,
         " (rows must not overlap)");
  if (s.row_stride == 0) s.row_stride = packed;
  if (s.num_slots <= 0) fail(op, name, ".num_slots is ", s.num_slots, "; expected > 0");
  if (s.index_type != IndexType::kInt32 && s.index_type != IndexType::kInt64)
    fail(op, name, ".index_type is invalid; expected kInt32 or kInt64");
  if (s.null_slot < -1 || s.null_slot >= s.num_slots)
    fail(op, name, ".null_slot is ", s.null_slot, "; expected -1 (none) or a row in [0, num_slots = ", s.num_slots,
         ")");
  if (!indexed_per_sequence) return;
  if (s.indices == nullptr) {
    if (s.num_slots < p.num_seqs)
      fail(op, name, ".num_slots is ", s.num_slots, "; expected at least N = ", p.num_seqs,
           " when indices is null (row n per sequence)");
    return;
  }
  const void* idx = host_view(s.indices, s.indices_host, backend);
  if (idx == nullptr) return;  // CUDA without a host copy: clamped on the device
  // A mask that only the device holds cannot be read here: then every named row counts.
  const uint8_t* present = static_cast<const uint8_t*>(host_view(s.present, s.present_host, backend));
  const int64_t repeat = first_repeated_index(s, idx, present, p.num_seqs);
  for (int64_t n = 0; n < p.num_seqs; ++n) {
    const int64_t row = named_row(s, idx, present, n);
    if (row >= s.num_slots)
      fail(op, name, ".indices[", n, "] is ", row, "; expected < num_slots = ", s.num_slots, " (or negative for none)");
    if (n == repeat)
      fail(op, name, ".indices[", n, "] repeats row ", row, "; expected distinct rows",
           written ? " (two sequences would write one row)" : "");
  }
}

}  // namespace

int64_t max_num_chunks(int64_t num_tokens, int64_t num_seqs) {
  // sum ceil(len_n / C) <= sum (len_n / C + 1) = T / C + N
  return num_tokens / kChunkSize + num_seqs;
}

Problem normalize_problem(const Problem& p) {
  Problem out = p;
  if (out.scale == 0.0f) out.scale = 1.0f / std::sqrt(static_cast<float>(p.head_k));
  if (!out.qk_dtype) out.qk_dtype = p.dtype;
  if (!out.o_dtype) out.o_dtype = p.dtype;
  return out;
}

const char* operation_name(Operation op) {
  switch (op) {
    case Operation::kForward:
      return "chunk_gated_delta_rule";
    case Operation::kDecode:
      return "recurrent_gated_delta_rule";
    case Operation::kStages:
      return "the stage operations";
    case Operation::kL2Norm:
      return "l2norm";
  }
  return "invalid";
}

const Capabilities& capabilities(Backend backend) {
  static const Capabilities cpu = detail::cpu_capabilities();
  static const Capabilities cuda = detail::cuda_capabilities();
  static const Capabilities none;
  return backend == Backend::kCPU ? cpu : backend == Backend::kCUDA ? cuda : none;
}

bool supports(const Problem& p, Backend backend, Operation op, std::string* why) {
  const Capabilities& caps = capabilities(backend);
  if (!backend_supported(caps, backend, op, why)) return false;
  if (!caps.has_head_size(p.head_k))
    return reject(why, "head_k (K = ", p.head_k, ") is unsupported; expected ", head_sizes_expected(caps));
  if (!caps.has_head_size(p.head_v))
    return reject(why, "head_v (V = ", p.head_v, ") is unsupported; expected ", head_sizes_expected(caps));
  if (!dtype_supported(caps, p.dtype, why)) return false;
  // q/k and o in dtypes of their own (fla passes fp32 q/k with fp16 v; its chunked forward
  // returns o in q's dtype).
  for (const auto& [name, d] :
       {std::pair<const char*, std::optional<DType>>{"qk_dtype", p.qk_dtype}, {"o_dtype", p.o_dtype}}) {
    if (!d || *d == p.dtype) continue;
    if (!valid_dtype(*d) || !caps.has_dtype(*d))
      return reject(why, name, " is ", valid_dtype(*d) ? dtype_name(*d) : "invalid", "; expected one of ",
                    dtypes_expected(caps));
    if (!caps.mixed_dtypes)
      return reject(why, name, " (", dtype_name(*d), ") differs from dtype (", dtype_name(p.dtype),
                    "); expected the same dtype on the ", backend_label(backend), " backend");
    // The stages pass q, k and o in the input dtype (chunk_fwd_o reads q, k and writes o in it).
    if (op == Operation::kStages)
      return reject(why, name, " (", dtype_name(*d), ") differs from dtype (", dtype_name(p.dtype),
                    "); expected the same dtype for a stage");
  }
  const bool gate_ok = p.gate_dtype == DType::kFloat32 || (caps.gates_in_dtype && p.gate_dtype == p.dtype);
  if (!gate_ok)
    return reject(why, "gate_dtype is ", valid_dtype(p.gate_dtype) ? dtype_name(p.gate_dtype) : "invalid",
                  caps.gates_in_dtype ? "; expected float32 or the input dtype (" : "; expected float32 (",
                  dtype_name(p.dtype), ")");
  if (!caps.has_state_dtype(p.state_dtype)) {
    std::ostringstream expected;
    int listed = 0;
    for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      if (caps.has_state_dtype(d)) expected << (listed++ ? ", " : "") << dtype_name(d);
    return reject(why, "state_dtype is ", valid_dtype(p.state_dtype) ? dtype_name(p.state_dtype) : "invalid",
                  "; expected one of ", expected.str(), " on the ", backend_label(backend), " backend");
  }
  if (p.state_layout != StateLayout::kKMajor && p.state_layout != StateLayout::kVMajor)
    return reject(why, "state_layout is invalid; expected kKMajor or kVMajor");
  if (!caps.has_state_layout(p.state_layout))
    return reject(why, "state_layout is ", p.state_layout == StateLayout::kKMajor ? "kKMajor" : "kVMajor",
                  "; unsupported on the ", backend_label(backend), " backend");
  // The stages take q/k as given and plain gates (SPEC section 3).
  if (op == Operation::kStages && p.use_qk_l2norm)
    return reject(why, "problem.use_qk_l2norm is set; expected false for a stage (run gdn::l2norm on q and k first)");
  if (op == Operation::kStages && p.fused_gate)
    return reject(why, "problem.fused_gate is set; expected false for a stage (stages take plain g and beta)");
  return true;
}

void validate_problem(const char* op, const Problem& p, Backend backend, Operation operation) {
  if (backend != Backend::kCPU && backend != Backend::kCUDA) fail(op, "exec.backend is invalid");
  if (p.num_tokens < 0) fail(op, "num_tokens (T) is ", p.num_tokens, "; expected >= 0");
  if (p.num_seqs < 1) fail(op, "num_seqs (N) is ", p.num_seqs, "; expected >= 1");
  if (p.num_qk_heads < 1) fail(op, "num_qk_heads (H) is ", p.num_qk_heads, "; expected >= 1");
  if (p.num_v_heads < 1) fail(op, "num_v_heads (HV) is ", p.num_v_heads, "; expected >= 1");
  if (p.num_v_heads % p.num_qk_heads != 0)
    fail(op, "num_v_heads (HV = ", p.num_v_heads, ") must be a multiple of num_qk_heads (H = ", p.num_qk_heads, ")");
  std::string why;
  if (!supports(p, backend, operation, &why)) fail(op, why);
  if (!std::isfinite(p.scale)) fail(op, "scale is not finite; expected a finite number (0 for K^-0.5)");
  if (p.cu_seqlens == nullptr) {
    if (p.num_tokens % p.num_seqs != 0)
      fail(op, "num_tokens (T = ", p.num_tokens, ") is not a multiple of num_seqs (N = ", p.num_seqs,
           "); expected cu_seqlens for sequences of different lengths");
    return;
  }
  if (p.cu_seqlens_type != IndexType::kInt32 && p.cu_seqlens_type != IndexType::kInt64)
    fail(op, "cu_seqlens_type is invalid; expected kInt32 or kInt64");
  const void* cu = host_view(p.cu_seqlens, p.cu_seqlens_host, backend);
  if (cu == nullptr) return;  // CUDA without a host copy: clamped on the device
  const int64_t first = read_index(cu, 0, p.cu_seqlens_type);
  if (first != 0) fail(op, "cu_seqlens[0] is ", first, "; expected 0");
  int64_t prev = 0;
  for (int64_t n = 1; n <= p.num_seqs; ++n) {
    const int64_t b = read_index(cu, n, p.cu_seqlens_type);
    if (b < prev)
      fail(op, "cu_seqlens[", n, "] is ", b, ", less than cu_seqlens[", n - 1, "] = ", prev,
           "; expected non-decreasing boundaries");
    prev = b;
  }
  if (prev != p.num_tokens)
    fail(op, "cu_seqlens[N = ", p.num_seqs, "] is ", prev, "; expected num_tokens (T = ", p.num_tokens, ")");
}

void validate_exec(const char* op, const Exec& exec, size_t workspace_needed) {
  if (exec.num_threads < 0) fail(op, "exec.num_threads is ", exec.num_threads, "; expected >= 0");
  if (workspace_needed > 0 && (exec.workspace == nullptr || exec.workspace_bytes < workspace_needed))
    fail(op, "exec.workspace holds ", exec.workspace == nullptr ? 0 : exec.workspace_bytes,
         " bytes; expected at least ", workspace_needed, " (see the *_workspace_size query)");
  if (exec.backend != Backend::kCPU && exec.backend != Backend::kCUDA) fail(op, "exec.backend is invalid");
  const Capabilities& caps = capabilities(exec.backend);
  if (!caps.built)
    fail(op, "exec.backend is k", backend_label(exec.backend), ", but gdn was built without ",
         backend_label(exec.backend));
}

ForwardArgs validate_forward(const char* op, Operation operation, const ForwardArgs& args, const Exec& exec) {
  const Problem& p = args.problem;
  validate_problem(op, p, exec.backend, operation);
  ForwardArgs a = args;
  a.problem = normalize_problem(p);
  const int H = p.num_qk_heads, HV = p.num_v_heads;
  fill_io_strides(a, p);
  check_tensor(op, "q", a.q, H, p.head_k);
  check_tensor(op, "k", a.k, H, p.head_k);
  check_tensor(op, "v", a.v, HV, p.head_v);
  check_tensor(op, p.fused_gate ? "g (a, fused gate)" : "g", a.g, HV, 1);
  check_tensor(op, p.fused_gate ? "beta (b, fused gate)" : "beta", a.beta, HV, 1);
  check_tensor(op, "o", a.o, HV, p.head_v);
  if (p.fused_gate) {
    if (args.A_log == nullptr) fail(op, "A_log is null; expected [HV = ", HV, "] fp32 with fused_gate");
    if (args.dt_bias == nullptr) fail(op, "dt_bias is null; expected [HV = ", HV, "] fp32 with fused_gate");
  }
  check_state(op, "initial_state", a.initial_state, p, exec.backend, false);
  check_state(op, "final_state", a.final_state, p, exec.backend, true);
  check_state(op, "token_states.pool", a.token_states.pool, p, exec.backend, false, false);
  detail::check_token_states(op, operation, a, exec.backend);
  detail::check_checkpoints_allowed(op, operation, a, exec.backend);
  check_state(op, "checkpoints.pool", a.checkpoints.pool, p, exec.backend, true, false);
  detail::check_checkpoints(op, a, exec.backend);
  return a;
}

StageBuffers validate_stage(const char* op, const Problem& p, const StageBuffers& b, unsigned needs, const Exec& exec) {
  validate_problem(op, p, exec.backend, Operation::kStages);
  StageBuffers s = b;
  const int H = p.num_qk_heads, HV = p.num_v_heads;
  fill_io_strides(s, p);
  if (needs & kNeedQ) check_tensor(op, "q", s.q, H, p.head_k);
  if (needs & kNeedK) check_tensor(op, "k", s.k, H, p.head_k);
  if (needs & kNeedV) check_tensor(op, "v", s.v, HV, p.head_v);
  if (needs & kNeedG) check_tensor(op, "g", s.g, HV, 1);
  if (needs & kNeedBeta) check_tensor(op, "beta", s.beta, HV, 1);
  if (needs & kNeedO) check_tensor(op, "o", s.o, HV, p.head_v);
  struct Named {
    unsigned bit;
    const float* ptr;
    const char* what;
  };
  const Named buffers[] = {
      {kNeedGcum, s.G, "G; expected fp32 [T, HV]"},
      {kNeedL, s.L, "L; expected fp32 [T, HV, 64]"},
      {kNeedA, s.A, "A; expected fp32 [T, HV, 64]"},
      {kNeedW, s.w, "w; expected fp32 [T, HV, K]"},
      {kNeedU, s.u, "u; expected fp32 [T, HV, V]"},
      {kNeedH, s.h, "h; expected fp32 [max_num_chunks(T, N), HV, K, V]"},
      {kNeedVNew, s.v_new, "v_new; expected fp32 [T, HV, V]"},
  };
  for (const Named& n : buffers)
    if ((needs & n.bit) && n.ptr == nullptr) fail(op, "buffer ", n.what, " (it is null)");
  if (needs & kNeedStates) {
    check_state(op, "initial_state", s.initial_state, p, exec.backend, false);
    check_state(op, "final_state", s.final_state, p, exec.backend, true);
  }
  return s;
}

L2NormArgs validate_l2norm(const L2NormArgs& args, const Exec& exec) {
  const char* op = "l2norm";
  if (args.num_tokens < 0) fail(op, "num_tokens is ", args.num_tokens, "; expected >= 0");
  if (args.num_heads < 1) fail(op, "num_heads is ", args.num_heads, "; expected >= 1");
  const Capabilities& caps = capabilities(exec.backend);
  std::string why;
  if (!backend_supported(caps, exec.backend, Operation::kL2Norm, &why)) fail(op, why);
  if (!caps.has_head_size(args.dim))
    fail(op, "dim (", args.dim, ") is unsupported; expected ", head_sizes_expected(caps));
  if (!dtype_supported(caps, args.dtype, &why)) fail(op, why);
  L2NormArgs a = args;
  fill_strides(a.x, a.num_heads, a.dim);
  fill_strides(a.y, a.num_heads, a.dim);
  check_tensor(op, "x", a.x, a.num_heads, a.dim);
  check_tensor(op, "y", a.y, a.num_heads, a.dim);
  return a;
}

}  // namespace gdn
