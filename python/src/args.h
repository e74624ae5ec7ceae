// Argument checking shared by the bindings of python/src/: DLPack arrays (nb::ndarray) turned into
// the C++ API's views after checking their dtype, device, shape and strides. Errors name the argument:
// wrong dtype or device -> TypeError; wrong shape, stride or value -> ValueError.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

#include "gdn/gdn.h"

namespace gdn_py {

namespace nb = nanobind;

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

const char* dl_dtype_name(nb::dlpack::dtype d);
// The library's dtype of a floating dlpack dtype; false for any other.
bool to_gdn_dtype(nb::dlpack::dtype d, gdn::DType* out);
bool is_f32(nb::dlpack::dtype d);
// The library's index type of an int32 / int64 dlpack dtype; false for any other.
bool to_index_type(nb::dlpack::dtype d, gdn::IndexType* out);
const char* device_name(int type);

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
std::string stride_str(const A& a) {
  std::string out = "(";
  for (size_t i = 0; i < a.ndim(); ++i) out += cat(i ? ", " : "", a.stride(i));
  return out + ")";
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

// Fills a StateRef from a pool/dense state array and optional (device, host) indices. The array's
// dtype (fp32, fp16 or bf16) goes to *state_dtype; when *state_dtype_set (an earlier state of the
// call), it must be the same.
template <typename S>
gdn::StateRef state_ref(const char* op, DeviceCtx& dev, const char* name, const S& s, const In& idx, const In& idx_host,
                        int64_t N, int64_t HV, int64_t K, int64_t V, bool v_major, const char* idx_name,
                        const char* idx_host_name, gdn::DType* state_dtype, bool* state_dtype_set) {
  gdn::StateRef r;
  if (!s.is_valid()) {
    if (idx.is_valid()) value_error(op, idx_name, " is given without ", name);
    return r;
  }
  dev.check(name, s);
  const int64_t d2 = v_major ? V : K, d3 = v_major ? K : V;
  const std::string expect = cat("[slots, HV, ", v_major ? "V, K" : "K, V", "] = [.., ", HV, ", ", d2, ", ", d3, "]",
                                 v_major ? " (state_v_first)" : "");
  gdn::DType sdt;
  if (!to_gdn_dtype(s.dtype(), &sdt))
    type_error(op, name, " has dtype ", dl_dtype_name(s.dtype()), "; expected float32, float16 or bfloat16 ", expect);
  if (*state_dtype_set && *state_dtype != sdt)
    type_error(op, name, " has dtype ", gdn::dtype_name(sdt), "; expected that of the other state (",
               gdn::dtype_name(*state_dtype), ")");
  *state_dtype = sdt;
  *state_dtype_set = true;
  if (s.ndim() != 4 || dim(s, 1) != HV || dim(s, 2) != d2 || dim(s, 3) != d3)
    value_error(op, name, " has shape ", shape_str(s), "; expected ", expect);
  // Each row [HV, d2, d3] contiguous; rows (slots) may be further apart (an engine's pool view
  // with a padded slot stride): the row stride goes to gdn, which checks it.
  const int64_t row_elems = HV * d2 * d3;
  const bool rows_contiguous =
      (d3 == 1 || s.stride(3) == 1) && (d2 == 1 || s.stride(2) == d3) && (HV == 1 || s.stride(1) == d2 * d3);
  if (!rows_contiguous)
    value_error(op, name, " is not contiguous within a row (strides ", stride_str(s), "); expected each row ", expect,
                " contiguous (a padded row stride is allowed)");
  if (dim(s, 0) < 1) value_error(op, name, " has ", dim(s, 0), " rows; expected at least 1");
  if (dim(s, 0) > 1 && s.stride(0) < row_elems)
    value_error(op, name, " has a row stride of ", s.stride(0), " elements; expected >= HV * ", d2, " * ", d3, " = ",
                row_elems, " (rows must not overlap)");
  r.data = const_cast<void*>(static_cast<const void*>(s.data()));
  r.num_slots = dim(s, 0);
  r.row_stride = dim(s, 0) > 1 ? s.stride(0) : row_elems;
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
// nbytes -> array on the arrays' device. Attaches `needed` bytes of it to eb.exec.
void attach_workspace(const char* op, DeviceCtx& dev, ExecBuilder& eb, nb::handle workspace, size_t needed);

// The sizes, scale and state layout of a Problem (the callers checked the ranges).
void set_shape(gdn::Problem& p, int64_t T, int64_t N, int64_t H, int64_t HV, int64_t K, int64_t V, double scale,
               bool state_v_first);

}  // namespace gdn_py
