// gdn._C: the Python binding of the C++ API (include/gdn/gdn.h).
//
// It only checks arguments and dispatches: every array comes in zero-copy through DLPack
// (nb::ndarray), so numpy, torch and cupy arrays all work and no framework is linked at build time.
// Allocation is the caller's (the Python package): outputs are passed in, and scratch memory comes
// from `workspace`, an array or a callable that allocates `nbytes` bytes on the arrays' device.
//
// Errors: wrong dtype or device -> TypeError; wrong shape, stride or value -> ValueError; every
// message names the argument. gdn::Error (the library's own validation) -> ValueError.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <sstream>
#include <string>

#include "gdn/gdn.h"

namespace nb = nanobind;

namespace {

using In = nb::ndarray<nb::ro>;  // read-only view (accepts read-only numpy arrays too)
using Out = nb::ndarray<>;       // written

constexpr int kDevCPU = nb::device::cpu::value;
constexpr int kDevCUDA = nb::device::cuda::value;
constexpr int kDevCUDAHost = nb::device::cuda_host::value;
constexpr int kDevCUDAManaged = nb::device::cuda_managed::value;

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
template <typename... Parts>
[[noreturn]] void value_error(const char* op, const Parts&... parts) {
  throw nb::value_error(cat("gdn.", op, ": ", parts...).c_str());
}
template <typename... Parts>
[[noreturn]] void type_error(const char* op, const Parts&... parts) {
  throw nb::type_error(cat("gdn.", op, ": ", parts...).c_str());
}

const char* dl_dtype_name(nb::dlpack::dtype d) {
  using C = nb::dlpack::dtype_code;
  if (d.lanes != 1) return "a vector dtype";
  if (d.code == (uint8_t)C::Float)
    return d.bits == 32 ? "float32" : d.bits == 16 ? "float16" : d.bits == 64 ? "float64" : "float";
  if (d.code == (uint8_t)C::Bfloat) return d.bits == 16 ? "bfloat16" : "bfloat";
  if (d.code == (uint8_t)C::Int)
    return d.bits == 32 ? "int32" : d.bits == 64 ? "int64" : d.bits == 16 ? "int16" : "int8";
  if (d.code == (uint8_t)C::UInt) return d.bits == 8 ? "uint8" : "uint";
  if (d.code == (uint8_t)C::Bool) return "bool";
  return "an unsupported dtype";
}

bool to_gdn_dtype(nb::dlpack::dtype d, gdn::DType* out) {
  using C = nb::dlpack::dtype_code;
  if (d.lanes != 1) return false;
  if (d.code == (uint8_t)C::Float && d.bits == 32) {
    *out = gdn::DType::kFloat32;
    return true;
  }
  if (d.code == (uint8_t)C::Float && d.bits == 16) {
    *out = gdn::DType::kFloat16;
    return true;
  }
  if (d.code == (uint8_t)C::Bfloat && d.bits == 16) {
    *out = gdn::DType::kBFloat16;
    return true;
  }
  return false;
}
bool is_f32(nb::dlpack::dtype d) {
  return d.lanes == 1 && d.code == (uint8_t)nb::dlpack::dtype_code::Float && d.bits == 32;
}
bool to_index_type(nb::dlpack::dtype d, gdn::IndexType* out) {
  if (d.lanes != 1 || d.code != (uint8_t)nb::dlpack::dtype_code::Int) return false;
  if (d.bits == 32) {
    *out = gdn::IndexType::kInt32;
    return true;
  }
  if (d.bits == 64) {
    *out = gdn::IndexType::kInt64;
    return true;
  }
  return false;
}

const char* device_name(int type) {
  switch (type) {
    case kDevCPU:
      return "cpu";
    case kDevCUDA:
      return "cuda";
    case kDevCUDAHost:
      return "cuda_host (pinned host)";
    case kDevCUDAManaged:
      return "cuda_managed";
    default:
      return "an unsupported device";
  }
}

// The device every array of one call must live on (that of the first array seen, q usually).
struct DeviceCtx {
  const char* op;
  bool set = false;
  int type = 0, id = 0;
  const char* first = "";

  template <typename A>
  void check(const char* name, const A& a) {
    if (!set) {
      if (a.device_type() != kDevCPU && a.device_type() != kDevCUDA)
        type_error(op, name, " is on ", device_name(a.device_type()), "; expected a cpu or cuda array");
      set = true;
      type = a.device_type();
      id = a.device_id();
      first = name;
      return;
    }
    if (a.device_type() != type || (type == kDevCUDA && a.device_id() != id))
      type_error(op, name, " is on ", device_name(a.device_type()), ":", a.device_id(), "; expected ", first,
                 "'s device (", device_name(type), ":", id, ")");
  }
  gdn::Backend backend() const { return type == kDevCUDA ? gdn::Backend::kCUDA : gdn::Backend::kCPU; }
};

// A host-readable array (for the host copies of device index arrays).
template <typename A>
void check_host(const char* op, const char* name, const A& a) {
  if (a.device_type() != kDevCPU && a.device_type() != kDevCUDAHost)
    type_error(op, name, " is on ", device_name(a.device_type()), "; expected a cpu (host) array");
}

template <typename A>
int64_t dim(const A& a, size_t i) {
  return static_cast<int64_t>(a.shape(i));
}

template <typename A>
std::string shape_str(const A& a) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < a.ndim(); ++i) os << (i ? ", " : "") << a.shape(i);
  os << "]";
  return os.str();
}

// A token-major tensor: [T, heads, dim] / [B, Tb, heads, dim], or for dim == 0 (per-head scalars
// such as g and beta) [T, heads] / [B, Tb, heads]. Returns element strides (token, head), checking
// that the innermost dimension is contiguous and that a batch dimension folds into the token one.
struct TokView {
  const void* data = nullptr;
  int64_t stride_token = 0, stride_head = 0;
};

template <typename A>
TokView token_view(const char* op, const char* name, const A& a, int64_t T, int64_t heads, int64_t d,
                   const char* heads_name, const char* dim_name) {
  const bool scalar = d == 0;  // per-head scalar
  const size_t base = scalar ? 1 : 2;
  const std::string expect = scalar ? cat("[T, ", heads_name, "] or [B, T, ", heads_name, "] with ", heads_name, " = ",
                                          heads, " and B*T = ", T)
                                    : cat("[T, ", heads_name, ", ", dim_name, "] or [B, T, ", heads_name, ", ",
                                          dim_name, "] = [.., ", heads, ", ", d, "] with B*T = ", T);
  if (a.ndim() != base + 1 && a.ndim() != base + 2)
    value_error(op, name, " has shape ", shape_str(a), "; expected ", expect);
  const size_t nd = a.ndim();
  const size_t h_ax = scalar ? nd - 1 : nd - 2;
  int64_t tokens = 1;
  for (size_t i = 0; i < h_ax; ++i) tokens *= dim(a, i);
  if (dim(a, h_ax) != heads || (!scalar && dim(a, nd - 1) != d) || tokens != T)
    value_error(op, name, " has shape ", shape_str(a), "; expected ", expect);
  const int64_t dd = scalar ? 1 : d;
  TokView v;
  v.data = a.data();
  if (T == 0) {  // nothing is read or written: any strides (and a dummy pointer) do
    static const float dummy[1] = {0.0f};
    if (v.data == nullptr) v.data = dummy;
    v.stride_head = dd;
    v.stride_token = heads * dd;
    return v;
  }
  for (size_t i = 0; i < nd; ++i)
    if (a.stride(i) < 0 || (a.stride(i) == 0 && a.shape(i) > 1))
      value_error(op, name, " has stride ", a.stride(i), " in dimension ", i,
                  "; expected positive strides (no broadcast or flipped views; make it contiguous)");
  if (!scalar && d > 1 && a.stride(nd - 1) != 1)
    value_error(op, name, " has stride ", a.stride(nd - 1), " in its last dimension; expected 1 (contiguous)");
  v.stride_head = heads > 1 ? a.stride(h_ax) : dd;
  const int64_t packed_token = (heads - 1) * v.stride_head + dd;
  if (h_ax == 1) {
    v.stride_token = dim(a, 0) > 1 ? a.stride(0) : packed_token;
  } else {  // [B, Tb, ...]
    const int64_t B = dim(a, 0), Tb = dim(a, 1);
    if (B <= 1 && Tb <= 1)
      v.stride_token = packed_token;
    else if (B <= 1)
      v.stride_token = a.stride(1);
    else if (Tb <= 1)
      v.stride_token = a.stride(0);
    else if (a.stride(0) == Tb * a.stride(1))
      v.stride_token = a.stride(1);
    else
      value_error(op, name, " has strides (", a.stride(0), ", ", a.stride(1),
                  ") in its batch and time dimensions that do not fold into one token dimension; expected "
                  "stride[0] = T * stride[1] (make it contiguous)");
  }
  if (T <= 1 && v.stride_token < packed_token) v.stride_token = packed_token;
  return v;
}

template <typename A>
gdn::DType data_dtype(const char* op, const char* name, const A& a) {
  gdn::DType d;
  if (!to_gdn_dtype(a.dtype(), &d))
    type_error(op, name, " has dtype ", dl_dtype_name(a.dtype()), "; expected float32, float16 or bfloat16");
  return d;
}
template <typename A>
void expect_dtype(const char* op, const char* name, const A& a, gdn::DType want, const char* why) {
  gdn::DType d;
  if (!to_gdn_dtype(a.dtype(), &d) || d != want)
    type_error(op, name, " has dtype ", dl_dtype_name(a.dtype()), "; expected ", gdn::dtype_name(want), why);
}

template <typename A>
bool c_contiguous(const A& a) {
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= dim(a, i);
  }
  return true;
}

// A fp32, C-contiguous buffer whose trailing dimensions are `tail` and whose leading dimensions
// multiply to `rows` (exactly, or at least when at_least).
template <typename A>
void check_buffer(const char* op, const char* name, const A& a, int64_t rows, std::initializer_list<int64_t> tail,
                  const char* expect, bool at_least = false) {
  if (!is_f32(a.dtype())) type_error(op, name, " has dtype ", dl_dtype_name(a.dtype()), "; expected float32 ", expect);
  const size_t nt = tail.size();
  bool ok = a.ndim() >= nt + 1;
  int64_t lead = 1;
  if (ok) {
    size_t i = a.ndim() - nt;
    for (int64_t t : tail) ok = ok && dim(a, i++) == t;
    for (size_t j = 0; j < a.ndim() - nt; ++j) lead *= dim(a, j);
    ok = ok && (at_least ? lead >= rows : lead == rows);
  }
  if (!ok) value_error(op, name, " has shape ", shape_str(a), "; expected ", expect);
  if (!c_contiguous(a)) value_error(op, name, " is not contiguous; expected a C-contiguous ", expect);
}

// 1-D index arrays: cu_seqlens and state indices (and their host copies).
template <typename A>
gdn::IndexType index_array(const char* op, const char* name, const A& a, int64_t len, const char* expect) {
  gdn::IndexType t;
  if (!to_index_type(a.dtype(), &t))
    type_error(op, name, " has dtype ", dl_dtype_name(a.dtype()), "; expected int32 or int64");
  if (a.ndim() != 1 || dim(a, 0) != len)
    value_error(op, name, " has shape ", shape_str(a), "; expected [", len, "] (", expect, ")");
  if (len > 1 && a.stride(0) != 1) value_error(op, name, " has stride ", a.stride(0), "; expected 1 (contiguous)");
  return t;
}

struct StateIn {
  In data, indices, indices_host;
};

// Fills a StateRef from a pool/dense state array and optional (device, host) indices.
template <typename S>
gdn::StateRef state_ref(const char* op, DeviceCtx& dev, const char* name, const S& s, const In& idx, const In& idx_host,
                        int64_t N, int64_t HV, int64_t K, int64_t V, bool v_major, const char* idx_name,
                        const char* idx_host_name) {
  gdn::StateRef r;
  if (!s.is_valid()) {
    if (idx.is_valid()) value_error(op, idx_name, " is given without ", name);
    return r;
  }
  dev.check(name, s);
  const int64_t d2 = v_major ? V : K, d3 = v_major ? K : V;
  const std::string expect = cat("[slots, HV, ", v_major ? "V, K" : "K, V", "] = [.., ", HV, ", ", d2, ", ", d3, "]",
                                 v_major ? " (state_v_first)" : "");
  if (!is_f32(s.dtype())) type_error(op, name, " has dtype ", dl_dtype_name(s.dtype()), "; expected float32 ", expect);
  if (s.ndim() != 4 || dim(s, 1) != HV || dim(s, 2) != d2 || dim(s, 3) != d3)
    value_error(op, name, " has shape ", shape_str(s), "; expected ", expect);
  if (!c_contiguous(s)) value_error(op, name, " is not contiguous; expected a C-contiguous ", expect);
  if (dim(s, 0) < 1) value_error(op, name, " has ", dim(s, 0), " rows; expected at least 1");
  r.data = static_cast<float*>(const_cast<void*>(static_cast<const void*>(s.data())));
  r.num_slots = dim(s, 0);
  if (idx.is_valid()) {
    dev.check(idx_name, idx);
    r.index_type = index_array(op, idx_name, idx, N, "one row index per sequence");
    r.indices = idx.data();
    if (idx_host.is_valid()) {
      check_host(op, idx_host_name, idx_host);
      gdn::IndexType ht = index_array(op, idx_host_name, idx_host, N, "a host copy of the indices");
      if (ht != r.index_type)
        type_error(op, idx_host_name, " has dtype ", dl_dtype_name(idx_host.dtype()), "; expected ",
                   r.index_type == gdn::IndexType::kInt32 ? "int32" : "int64", " (that of ", idx_name, ")");
      r.indices_host = idx_host.data();
    } else if (dev.type == kDevCPU) {
      r.indices_host = idx.data();
    }
  } else {
    if (idx_host.is_valid()) value_error(op, idx_host_name, " is given without ", idx_name);
    if (dim(s, 0) != N)
      value_error(op, name, " has ", dim(s, 0), " rows; expected N = ", N,
                  " (one state per sequence), or pass state indices to use it as a pool");
  }
  return r;
}

struct ExecBuilder {
  gdn::Exec exec;
  nb::object keep;  // keeps an allocated workspace alive for the call
};

// Workspace: None (none needed), an array (uint8 or any dtype; its bytes are used), or a callable
// nbytes -> array on the arrays' device.
void attach_workspace(const char* op, DeviceCtx& dev, ExecBuilder& eb, nb::handle workspace, size_t needed) {
  if (needed == 0) return;
  nb::object ws;
  if (workspace.is_none())
    value_error(op, "workspace is None; expected ", needed, " bytes of scratch (an array or an allocator)");
  if (PyCallable_Check(workspace.ptr()))
    ws = workspace(needed);
  else
    ws = nb::borrow(workspace);
  Out arr;
  if (!nb::try_cast<Out>(ws, arr)) type_error(op, "workspace is not a writable array (nor an allocator returning one)");
  dev.check("workspace", arr);
  if (!c_contiguous(arr)) value_error(op, "workspace is not contiguous");
  if (arr.nbytes() < needed) value_error(op, "workspace holds ", arr.nbytes(), " bytes; expected at least ", needed);
  eb.exec.workspace = arr.data();
  eb.exec.workspace_bytes = arr.nbytes();
  eb.keep = ws;
}

// The sizes, scale and state layout of a Problem (the callers checked the ranges).
void set_shape(gdn::Problem& p, int64_t T, int64_t N, int64_t H, int64_t HV, int64_t K, int64_t V, double scale,
               bool state_v_first) {
  p.num_tokens = T;
  p.num_seqs = N;
  p.num_qk_heads = static_cast<int>(H);
  p.num_v_heads = static_cast<int>(HV);
  p.head_k = static_cast<int>(K);
  p.head_v = static_cast<int>(V);
  p.scale = static_cast<float>(scale);
  p.state_layout = state_v_first ? gdn::StateLayout::kVMajor : gdn::StateLayout::kKMajor;
}

// ------------------------------------------------------------------------------------------------
// The composed forward (chunked or recurrent).

void forward(In q, In k, In v, In g, In beta, Out o, In A_log, In dt_bias, In initial_state, In initial_indices,
             In initial_indices_host, Out final_state, In final_indices, In final_indices_host, bool final_is_initial,
             In cu_seqlens, In cu_seqlens_host, double scale, bool use_qk_l2norm, bool state_v_first, bool fused_gate,
             bool recurrent, nb::handle workspace, uintptr_t stream, int num_threads) {
  const char* op = recurrent ? "fused_recurrent_gated_delta_rule" : "chunk_gated_delta_rule";
  DeviceCtx dev{op};
  dev.check("q", q);
  dev.check("k", k);
  dev.check("v", v);
  dev.check("g", g);
  dev.check("beta", beta);
  dev.check("o", o);

  if (q.ndim() != 3 && q.ndim() != 4)
    value_error(op, "q has shape ", shape_str(q), "; expected [B, T, H, K] or [T, H, K]");
  const size_t nd = q.ndim();
  const int64_t T = nd == 4 ? dim(q, 0) * dim(q, 1) : dim(q, 0);
  const int64_t H = dim(q, nd - 2), K = dim(q, nd - 1);
  if (v.ndim() != nd)
    value_error(op, "v has shape ", shape_str(v), "; expected ", nd, " dimensions like q ", shape_str(q));
  const int64_t HV = dim(v, nd - 2), V = dim(v, nd - 1);
  if (H < 1 || HV % H != 0)
    value_error(op, "v has ", HV, " heads (HV), q and k have ", H, " (H); expected HV a multiple of H");
  if (HV > INT32_MAX || K > INT32_MAX || V > INT32_MAX) value_error(op, "head counts or sizes are too large");

  int64_t N;
  gdn::Problem p;
  if (cu_seqlens.is_valid()) {
    dev.check("cu_seqlens", cu_seqlens);
    if (cu_seqlens.ndim() != 1 || dim(cu_seqlens, 0) < 2)
      value_error(op, "cu_seqlens has shape ", shape_str(cu_seqlens), "; expected [N + 1] with N >= 1");
    N = dim(cu_seqlens, 0) - 1;
    p.cu_seqlens_type = index_array(op, "cu_seqlens", cu_seqlens, N + 1, "sequence boundaries");
    p.cu_seqlens = cu_seqlens.data();
    if (cu_seqlens_host.is_valid()) {
      check_host(op, "cu_seqlens_cpu", cu_seqlens_host);
      if (index_array(op, "cu_seqlens_cpu", cu_seqlens_host, N + 1, "a host copy of cu_seqlens") != p.cu_seqlens_type)
        type_error(op, "cu_seqlens_cpu has dtype ", dl_dtype_name(cu_seqlens_host.dtype()),
                   "; expected that of cu_seqlens (", dl_dtype_name(cu_seqlens.dtype()), ")");
      p.cu_seqlens_host = cu_seqlens_host.data();
    } else if (dev.type == kDevCPU) {
      p.cu_seqlens_host = cu_seqlens.data();
    }
  } else {
    if (cu_seqlens_host.is_valid()) value_error(op, "cu_seqlens_cpu is given without cu_seqlens");
    N = nd == 4 ? dim(q, 0) : 1;
    if (N < 1) N = 1;
  }

  const gdn::DType dt = data_dtype(op, "q", q);
  expect_dtype(op, "k", k, dt, " (that of q)");
  expect_dtype(op, "v", v, dt, " (that of q)");
  expect_dtype(op, "o", o, dt, " (that of q)");
  const gdn::DType gdt = data_dtype(op, "g", g);
  if (gdt != gdn::DType::kFloat32 && gdt != dt)
    type_error(op, "g has dtype ", gdn::dtype_name(gdt), "; expected float32 or q's dtype (", gdn::dtype_name(dt), ")");
  expect_dtype(op, "beta", beta, gdt, " (that of g)");

  const TokView tq = token_view(op, "q", q, T, H, K, "H", "K");
  const TokView tk = token_view(op, "k", k, T, H, K, "H", "K");
  const TokView tv = token_view(op, "v", v, T, HV, V, "HV", "V");
  const TokView tg = token_view(op, "g", g, T, HV, 0, "HV", "");
  const TokView tb = token_view(op, "beta", beta, T, HV, 0, "HV", "");
  const TokView to = token_view(op, "o", o, T, HV, V, "HV", "V");

  set_shape(p, T, N, H, HV, K, V, scale, state_v_first);
  p.dtype = dt;
  p.gate_dtype = gdt;
  p.use_qk_l2norm = use_qk_l2norm;
  p.fused_gate = fused_gate;

  gdn::ForwardArgs a;
  a.problem = p;
  a.q = {tq.data, tq.stride_token, tq.stride_head};
  a.k = {tk.data, tk.stride_token, tk.stride_head};
  a.v = {tv.data, tv.stride_token, tv.stride_head};
  a.g = {tg.data, tg.stride_token, tg.stride_head};
  a.beta = {tb.data, tb.stride_token, tb.stride_head};
  a.o = {const_cast<void*>(to.data), to.stride_token, to.stride_head};

  if (fused_gate) {
    for (auto [name, arr] : {std::pair<const char*, const In*>{"A_log", &A_log}, {"dt_bias", &dt_bias}}) {
      if (!arr->is_valid()) value_error(op, name, " is None; expected [HV = ", HV, "] float32 with the fused gate");
      dev.check(name, *arr);
      if (!is_f32(arr->dtype())) type_error(op, name, " has dtype ", dl_dtype_name(arr->dtype()), "; expected float32");
      if (arr->ndim() != 1 || dim(*arr, 0) != HV)
        value_error(op, name, " has shape ", shape_str(*arr), "; expected [HV = ", HV, "]");
      if (HV > 1 && arr->stride(0) != 1) value_error(op, name, " is not contiguous");
    }
    a.A_log = static_cast<const float*>(A_log.data());
    a.dt_bias = static_cast<const float*>(dt_bias.data());
  } else if (A_log.is_valid() || dt_bias.is_valid()) {
    value_error(op, "A_log / dt_bias are given but the fused gate is off (use_gate_in_kernel=False)");
  }

  if (final_is_initial)
    a.final_state = state_ref(op, dev, "state (initial_state, updated in place)", final_state, final_indices,
                              final_indices_host, N, HV, K, V, state_v_first, "state_indices", "state_indices_cpu");
  else
    a.final_state = state_ref(op, dev, "final_state", final_state, final_indices, final_indices_host, N, HV, K, V,
                              state_v_first, "final_state_indices", "final_state_indices_cpu");
  if (final_is_initial) {
    if (!final_state.is_valid()) value_error(op, "the in-place state update needs a state (pool)");
    if (initial_state.is_valid()) value_error(op, "initial_state must be None for the in-place state update");
    a.initial_state = a.final_state;
  } else {
    a.initial_state = state_ref(op, dev, "initial_state", initial_state, initial_indices, initial_indices_host, N, HV,
                                K, V, state_v_first, "state_indices", "state_indices_cpu");
  }

  ExecBuilder eb;
  eb.exec.backend = dev.backend();
  eb.exec.stream = reinterpret_cast<void*>(stream);
  eb.exec.num_threads = num_threads;
  attach_workspace(op, dev, eb, workspace,
                   recurrent ? gdn::recurrent_gated_delta_rule_workspace_size(p, eb.exec)
                             : gdn::chunk_gated_delta_rule_workspace_size(p, eb.exec));

  nb::gil_scoped_release release;
  if (recurrent)
    gdn::recurrent_gated_delta_rule(a, eb.exec);
  else
    gdn::chunk_gated_delta_rule(a, eb.exec);
}

// ------------------------------------------------------------------------------------------------
// The stages. `which` names the stage; T, N, H, HV, K, V describe the problem; the buffers that the
// stage uses must be given (the others are ignored). Intermediates are fp32, packed:
// G [T, HV], L and A [T, HV, 64], w [T, HV, K], u and v_new [T, HV, V], h [>= max_num_chunks, HV, K, V].

void stage(const std::string& which, int64_t T, int64_t N, int64_t H, int64_t HV, int64_t K, int64_t V, double scale,
           bool state_v_first, In cu_seqlens, In cu_seqlens_host, In q, In k, In v, In g, In beta, Out G, Out L, Out A,
           Out w, Out u, Out h, Out v_new, Out o, In initial_state, In initial_indices, In initial_indices_host,
           Out final_state, In final_indices, In final_indices_host, bool final_is_initial, nb::handle workspace,
           uintptr_t stream, int num_threads) {
  const char* op = which.c_str();
  enum {
    kQ = 1,
    kK = 2,
    kV = 4,
    kG = 8,
    kBeta = 16,
    kGc = 32,
    kL = 64,
    kA = 128,
    kW = 256,
    kU = 512,
    kH = 1024,
    kVn = 2048,
    kO = 4096,
    kS = 8192
  };
  unsigned need;
  if (which == "chunk_local_cumsum")
    need = kG | kGc;
  else if (which == "chunk_scaled_dot_kkt")
    need = kK | kBeta | kGc | kL;
  else if (which == "solve_tril")
    need = kL | kA;
  else if (which == "recompute_w_u")
    need = kK | kV | kBeta | kGc | kA | kW | kU;
  else if (which == "chunk_fwd_h")
    need = kK | kW | kU | kGc | kH | kVn | kS;
  else if (which == "chunk_fwd_o")
    need = kQ | kK | kVn | kH | kGc | kO;
  else
    value_error("stage", "unknown stage '", which, "'");
  if (T < 0 || N < 1 || H < 1 || HV < 1 || K < 1 || V < 1 || HV > INT32_MAX || K > INT32_MAX || V > INT32_MAX)
    value_error(op, "invalid sizes T=", T, " N=", N, " H=", H, " HV=", HV, " K=", K, " V=", V);

  DeviceCtx dev{op};
  gdn::Problem p;
  set_shape(p, T, N, H, HV, K, V, scale, state_v_first);
  p.dtype = gdn::DType::kFloat32;
  p.gate_dtype = gdn::DType::kFloat32;

  gdn::StageBuffers b;
  // Data tensors: one dtype among those given (q, k, v, o).
  bool have_dtype = false;
  auto data_tensor = [&](const char* name, const auto& arr, int64_t heads, int64_t d, const char* hn,
                         const char* dn) -> TokView {
    if (!arr.is_valid()) value_error(op, name, " is None; this stage needs it");
    dev.check(name, arr);
    if (!have_dtype) {
      p.dtype = data_dtype(op, name, arr);
      have_dtype = true;
    } else {
      expect_dtype(op, name, arr, p.dtype, " (that of the other data tensors)");
    }
    return token_view(op, name, arr, T, heads, d, hn, dn);
  };
  if (need & kQ) {
    TokView t = data_tensor("q", q, H, K, "H", "K");
    b.q = {t.data, t.stride_token, t.stride_head};
  }
  if (need & kK) {
    TokView t = data_tensor("k", k, H, K, "H", "K");
    b.k = {t.data, t.stride_token, t.stride_head};
  }
  if (need & kV) {
    TokView t = data_tensor("v", v, HV, V, "HV", "V");
    b.v = {t.data, t.stride_token, t.stride_head};
  }
  if (need & kO) {
    TokView t = data_tensor("o", o, HV, V, "HV", "V");
    b.o = {const_cast<void*>(t.data), t.stride_token, t.stride_head};
  }
  bool have_gate = false;
  auto gate_tensor = [&](const char* name, const In& arr) -> TokView {
    if (!arr.is_valid()) value_error(op, name, " is None; this stage needs it");
    dev.check(name, arr);
    const gdn::DType d = data_dtype(op, name, arr);
    if (!have_gate) {
      p.gate_dtype = d;
      have_gate = true;
    } else if (d != p.gate_dtype) {
      type_error(op, name, " has dtype ", gdn::dtype_name(d), "; expected ", gdn::dtype_name(p.gate_dtype));
    }
    return token_view(op, name, arr, T, HV, 0, "HV", "");
  };
  if (need & kG) {
    TokView t = gate_tensor("g", g);
    b.g = {t.data, t.stride_token, t.stride_head};
  }
  if (need & kBeta) {
    TokView t = gate_tensor("beta", beta);
    b.beta = {t.data, t.stride_token, t.stride_head};
  }
  if (have_gate && have_dtype && p.gate_dtype != gdn::DType::kFloat32 && p.gate_dtype != p.dtype)
    type_error(op, "g/beta have dtype ", gdn::dtype_name(p.gate_dtype), "; expected float32 or the data dtype (",
               gdn::dtype_name(p.dtype), ")");
  if (have_gate && !have_dtype) p.dtype = p.gate_dtype;

  auto buffer = [&](const char* name, const Out& arr, int64_t rows, std::initializer_list<int64_t> tail,
                    const std::string& expect, bool at_least = false) -> float* {
    if (!arr.is_valid()) value_error(op, name, " is None; expected ", expect);
    dev.check(name, arr);
    check_buffer(op, name, arr, rows, tail, expect.c_str(), at_least);
    return static_cast<float*>(arr.data());
  };
  if (need & kGc) b.G = buffer("G", G, T, {HV}, cat("[T, HV] = [", T, ", ", HV, "]"));
  if (need & kL) b.L = buffer("L", L, T, {HV, gdn::kChunkSize}, cat("[T, HV, 64] = [", T, ", ", HV, ", 64]"));
  if (need & kA) b.A = buffer("A", A, T, {HV, gdn::kChunkSize}, cat("[T, HV, 64] = [", T, ", ", HV, ", 64]"));
  if (need & kW) b.w = buffer("w", w, T, {HV, K}, cat("[T, HV, K] = [", T, ", ", HV, ", ", K, "]"));
  if (need & kU) b.u = buffer("u", u, T, {HV, V}, cat("[T, HV, V] = [", T, ", ", HV, ", ", V, "]"));
  if (need & kVn) b.v_new = buffer("v_new", v_new, T, {HV, V}, cat("[T, HV, V] = [", T, ", ", HV, ", ", V, "]"));
  if (need & kH) {
    const int64_t nc = gdn::max_num_chunks(T, N);
    b.h = buffer(
        "h", h, nc, {HV, K, V},
        cat("[max_num_chunks(T, N) = ", nc, ", HV, K, V] = [", nc, ", ", HV, ", ", K, ", ", V, "] (or more rows)"),
        true);
  }

  if (cu_seqlens.is_valid()) {
    dev.check("cu_seqlens", cu_seqlens);
    p.cu_seqlens_type = index_array(op, "cu_seqlens", cu_seqlens, N + 1, "sequence boundaries");
    p.cu_seqlens = cu_seqlens.data();
    if (cu_seqlens_host.is_valid()) {
      check_host(op, "cu_seqlens_cpu", cu_seqlens_host);
      if (index_array(op, "cu_seqlens_cpu", cu_seqlens_host, N + 1, "a host copy of cu_seqlens") != p.cu_seqlens_type)
        type_error(op, "cu_seqlens_cpu has dtype ", dl_dtype_name(cu_seqlens_host.dtype()),
                   "; expected that of cu_seqlens");
      p.cu_seqlens_host = cu_seqlens_host.data();
    } else if (dev.type == kDevCPU) {
      p.cu_seqlens_host = cu_seqlens.data();
    }
  } else if (cu_seqlens_host.is_valid()) {
    value_error(op, "cu_seqlens_cpu is given without cu_seqlens");
  }

  if (need & kS) {
    b.final_state = state_ref(op, dev, "final_state", final_state, final_indices, final_indices_host, N, HV, K, V,
                              state_v_first, "final_state_indices", "final_state_indices_cpu");
    if (final_is_initial) {
      if (!final_state.is_valid()) value_error(op, "the in-place state update needs a state (pool)");
      b.initial_state = b.final_state;
    } else {
      b.initial_state = state_ref(op, dev, "initial_state", initial_state, initial_indices, initial_indices_host, N, HV,
                                  K, V, state_v_first, "initial_state_indices", "initial_state_indices_cpu");
    }
  }

  if (!dev.set) value_error(op, "no arrays were given");
  ExecBuilder eb;
  eb.exec.backend = dev.backend();
  eb.exec.stream = reinterpret_cast<void*>(stream);
  eb.exec.num_threads = num_threads;
  attach_workspace(op, dev, eb, workspace, gdn::stage_workspace_size(p, eb.exec));

  nb::gil_scoped_release release;
  if (which == "chunk_local_cumsum")
    gdn::chunk_local_cumsum(p, b, eb.exec);
  else if (which == "chunk_scaled_dot_kkt")
    gdn::chunk_scaled_dot_kkt(p, b, eb.exec);
  else if (which == "solve_tril")
    gdn::solve_tril(p, b, eb.exec);
  else if (which == "recompute_w_u")
    gdn::recompute_w_u(p, b, eb.exec);
  else if (which == "chunk_fwd_h")
    gdn::chunk_fwd_h(p, b, eb.exec);
  else
    gdn::chunk_fwd_o(p, b, eb.exec);
}

void l2norm(In x, Out y, uintptr_t stream, int num_threads) {
  const char* op = "l2norm";
  DeviceCtx dev{op};
  dev.check("x", x);
  dev.check("y", y);
  if (x.ndim() != 3 && x.ndim() != 4)
    value_error(op, "x has shape ", shape_str(x), "; expected [T, H, D] or [B, T, H, D]");
  const size_t nd = x.ndim();
  const int64_t T = nd == 4 ? dim(x, 0) * dim(x, 1) : dim(x, 0);
  const int64_t Hh = dim(x, nd - 2), D = dim(x, nd - 1);
  if (Hh > INT32_MAX || D > INT32_MAX) value_error(op, "x is too large");
  gdn::L2NormArgs a;
  a.num_tokens = T;
  a.num_heads = static_cast<int>(Hh);
  a.dim = static_cast<int>(D);
  a.dtype = data_dtype(op, "x", x);
  expect_dtype(op, "y", y, a.dtype, " (that of x)");
  TokView tx = token_view(op, "x", x, T, Hh, D, "H", "D");
  TokView ty = token_view(op, "y", y, T, Hh, D, "H", "D");
  a.x = {tx.data, tx.stride_token, tx.stride_head};
  a.y = {const_cast<void*>(ty.data), ty.stride_token, ty.stride_head};
  gdn::Exec exec;
  exec.backend = dev.backend();
  exec.stream = reinterpret_cast<void*>(stream);
  exec.num_threads = num_threads;
  nb::gil_scoped_release release;
  gdn::l2norm(a, exec);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "gdn: Gated DeltaNet kernels (the chunked gated delta rule); low-level binding of the C++ API";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const gdn::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.attr("chunk_size") = gdn::kChunkSize;
#ifdef GDN_HAS_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("cuda_available", &gdn::cuda_available,
        "True when gdn was built with the CUDA backend and a CUDA device is visible.");
  m.def("max_num_chunks", &gdn::max_num_chunks, nb::arg("num_tokens"), nb::arg("num_seqs"));

  m.def("forward", &forward, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g"), nb::arg("beta"), nb::arg("o"),
        nb::arg("A_log").none(), nb::arg("dt_bias").none(), nb::arg("initial_state").none(),
        nb::arg("initial_state_indices").none(), nb::arg("initial_state_indices_cpu").none(),
        nb::arg("final_state").none(), nb::arg("final_state_indices").none(), nb::arg("final_state_indices_cpu").none(),
        nb::arg("final_is_initial"), nb::arg("cu_seqlens").none(), nb::arg("cu_seqlens_cpu").none(), nb::arg("scale"),
        nb::arg("use_qk_l2norm"), nb::arg("state_v_first"), nb::arg("fused_gate"), nb::arg("recurrent"),
        nb::arg("workspace").none(), nb::arg("stream"), nb::arg("num_threads"),
        "The composed forward (chunked, or the recurrence when recurrent=True) over preallocated outputs.");

  m.def("stage", &stage, nb::arg("which"), nb::arg("T"), nb::arg("N"), nb::arg("H"), nb::arg("HV"), nb::arg("K"),
        nb::arg("V"), nb::arg("scale"), nb::arg("state_v_first"), nb::arg("cu_seqlens").none(),
        nb::arg("cu_seqlens_cpu").none(), nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(),
        nb::arg("g").none(), nb::arg("beta").none(), nb::arg("G").none(), nb::arg("L").none(), nb::arg("A").none(),
        nb::arg("w").none(), nb::arg("u").none(), nb::arg("h").none(), nb::arg("v_new").none(), nb::arg("o").none(),
        nb::arg("initial_state").none(), nb::arg("initial_state_indices").none(),
        nb::arg("initial_state_indices_cpu").none(), nb::arg("final_state").none(),
        nb::arg("final_state_indices").none(), nb::arg("final_state_indices_cpu").none(), nb::arg("final_is_initial"),
        nb::arg("workspace").none(), nb::arg("stream"), nb::arg("num_threads"),
        "One stage of the chunked forward (SPEC.md section 3).");

  m.def("l2norm", &l2norm, nb::arg("x"), nb::arg("y"), nb::arg("stream"), nb::arg("num_threads"),
        "y = x / sqrt(sum(x^2) + 1e-6) per token and head, in fp32.");
}
