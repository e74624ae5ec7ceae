// The stages of the chunked forward, each on its own (gdn.stages), and the l2norm of stage 0.
#include <nanobind/stl/string.h>

#include "ops.h"

namespace gdn_py {

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
    gdn::DType sdt = gdn::DType::kFloat32;  // the state pools' dtype: that of the state arrays
    bool sdt_set = false;
    b.final_state = state_ref(op, dev, "final_state", final_state, final_indices, final_indices_host, N, HV, K, V,
                              state_v_first, "final_state_indices", "final_state_indices_cpu", &sdt, &sdt_set);
    if (final_is_initial) {
      if (!final_state.is_valid()) value_error(op, "the in-place state update needs a state (pool)");
      b.initial_state = b.final_state;
    } else {
      b.initial_state =
          state_ref(op, dev, "initial_state", initial_state, initial_indices, initial_indices_host, N, HV, K, V,
                    state_v_first, "initial_state_indices", "initial_state_indices_cpu", &sdt, &sdt_set);
    }
    p.state_dtype = sdt;
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

}  // namespace gdn_py
