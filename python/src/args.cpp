// The non-template helpers of args.h: dtype and device names, the workspace and the Problem's shape.
#include "args.h"

namespace gdn_py {

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

}  // namespace gdn_py
