// The composed forward (chunked or recurrent): checks every array, fills gdn::ForwardArgs and
// dispatches to gdn::chunk_gated_delta_rule or gdn::recurrent_gated_delta_rule with a workspace of
// the size that the chosen one asks for.
#include "ops.h"

namespace gdn_py {
namespace {

// The per-token states of the decode step (gdn::TokenStates): a pool [slots, HV, K, V] whose rows
// the 2-D indices [N, T_max] name per token (vLLM), or a buffer [S, T_max, HV, K, V] with one group
// index per sequence [N] or none (S = N; SGLang's intermediate states). T_max comes from the shapes.
// Its dtype is the call's state dtype: that of the other states when there are any (*state_dtype_set).
gdn::TokenStates token_state_ref(const char* op, DeviceCtx& dev, const Out& s, const In& idx, const In& idx_host,
                                 int64_t N, int64_t HV, int64_t K, int64_t V, bool v_major, gdn::DType* state_dtype,
                                 bool* state_dtype_set) {
  dev.check("token_states", s);
  const int64_t d2 = v_major ? V : K, d3 = v_major ? K : V;
  const std::string expect =
      cat("[slots, HV, ", v_major ? "V, K" : "K, V", "] with [N, T_max] token_state_indices, or [S, ", "T_max, HV, ",
          v_major ? "V, K" : "K, V", "] with [N] or no indices; HV = ", HV, ", ", v_major ? "V, K" : "K, V", " = ", d2,
          ", ", d3);
  gdn::DType sdt;
  if (!to_gdn_dtype(s.dtype(), &sdt))
    type_error(op, "token_states has dtype ", dl_dtype_name(s.dtype()), "; expected float32, float16 or bfloat16");
  if (*state_dtype_set && sdt != *state_dtype)
    type_error(op, "token_states has dtype ", gdn::dtype_name(sdt), "; expected that of the state pool (",
               gdn::dtype_name(*state_dtype), ")");
  *state_dtype = sdt;
  *state_dtype_set = true;
  const size_t nd = s.ndim();
  if ((nd != 4 && nd != 5) || dim(s, nd - 3) != HV || dim(s, nd - 2) != d2 || dim(s, nd - 1) != d3)
    value_error(op, "token_states has shape ", shape_str(s), "; expected ", expect);
  // Each row [HV, d2, d3] contiguous, rows evenly apart (a padded slot stride is allowed; in a
  // buffer [S, T_max, ...] the (s, t) rows too).
  const int64_t row_elems = HV * d2 * d3, rs = nd == 5 && dim(s, 1) == 1 ? s.stride(0) : s.stride(nd - 4);
  const bool rows_contiguous = (d3 == 1 || s.stride(nd - 1) == 1) && (d2 == 1 || s.stride(nd - 2) == d3) &&
                               (HV == 1 || s.stride(nd - 3) == d2 * d3) &&
                               (nd == 4 || dim(s, 0) == 1 || dim(s, 1) == 1 || s.stride(0) == dim(s, 1) * rs);
  if (!rows_contiguous)
    value_error(op, "token_states is not contiguous within its rows (strides ", stride_str(s), "); expected rows [HV, ",
                d2, ", ", d3, "] contiguous and evenly apart");
  const int64_t num_rows = nd == 4 ? dim(s, 0) : dim(s, 0) * dim(s, 1);
  if (num_rows > 1 && rs < row_elems)
    value_error(op, "token_states has a row stride of ", rs, " elements; expected >= HV * ", d2, " * ", d3, " = ",
                row_elems, " (rows must not overlap)");
  gdn::TokenStates ts;
  ts.pool.data = s.data();
  ts.pool.num_slots = num_rows;
  ts.pool.row_stride = num_rows > 1 ? rs : row_elems;
  if (!idx.is_valid()) {
    if (idx_host.is_valid()) value_error(op, "token_state_indices_cpu is given without token_state_indices");
    if (nd != 5 || dim(s, 0) != N)
      value_error(op, "token_states has shape ", shape_str(s), "; expected [N = ", N,
                  ", T_max, HV, ..] without token_state_indices");
    ts.max_tokens = dim(s, 1);
    return ts;
  }
  dev.check("token_state_indices", idx);
  if (!to_index_type(idx.dtype(), &ts.pool.index_type))
    type_error(op, "token_state_indices has dtype ", dl_dtype_name(idx.dtype()), "; expected int32 or int64");
  ts.per_token = idx.ndim() == 2;
  if (ts.per_token ? (nd != 4 || dim(idx, 0) != N) : (idx.ndim() != 1 || nd != 5 || dim(idx, 0) != N))
    value_error(op, "token_state_indices has shape ", shape_str(idx), " with token_states ", shape_str(s),
                "; expected [N = ", N, ", T_max] with [slots, HV, ..], or [N = ", N, "] with [S, T_max, HV, ..]");
  if (!c_contiguous(idx)) value_error(op, "token_state_indices is not contiguous");
  ts.max_tokens = ts.per_token ? dim(idx, 1) : dim(s, 1);
  ts.pool.indices = idx.data();
  if (idx_host.is_valid()) {
    check_host(op, "token_state_indices_cpu", idx_host);
    gdn::IndexType ht;
    if (!to_index_type(idx_host.dtype(), &ht) || ht != ts.pool.index_type || shape_str(idx_host) != shape_str(idx) ||
        !c_contiguous(idx_host))
      value_error(op, "token_state_indices_cpu has shape ", shape_str(idx_host), " and dtype ",
                  dl_dtype_name(idx_host.dtype()), "; expected a contiguous copy of token_state_indices (",
                  shape_str(idx), ", ", dl_dtype_name(idx.dtype()), ")");
    ts.pool.indices_host = idx_host.data();
  } else if (dev.type == kDevCPU) {
    ts.pool.indices_host = idx.data();
  }
  return ts;
}

// Prefill checkpoints (gdn::Checkpoints): a pool [slots, HV, K, V] whose rows the indices
// [N, max_checkpoints] name, or a buffer [N, max_checkpoints, HV, K, V] without indices; the call's
// state dtype like the other state arrays.
gdn::Checkpoints checkpoint_ref(const char* op, DeviceCtx& dev, const Out& s, const In& idx, const In& idx_host,
                                int64_t every, int64_t N, int64_t HV, int64_t K, int64_t V, bool v_major,
                                gdn::DType* state_dtype, bool* state_dtype_set) {
  dev.check("checkpoints", s);
  const int64_t d2 = v_major ? V : K, d3 = v_major ? K : V;
  gdn::DType sdt;
  if (!to_gdn_dtype(s.dtype(), &sdt))
    type_error(op, "checkpoints has dtype ", dl_dtype_name(s.dtype()), "; expected float32, float16 or bfloat16");
  if (*state_dtype_set && sdt != *state_dtype)
    type_error(op, "checkpoints has dtype ", gdn::dtype_name(sdt), "; expected that of the state pool (",
               gdn::dtype_name(*state_dtype), ")");
  *state_dtype = sdt;
  *state_dtype_set = true;
  const size_t nd = s.ndim();
  const bool indexed = idx.is_valid();
  if (nd != (indexed ? 4u : 5u) || dim(s, nd - 3) != HV || dim(s, nd - 2) != d2 || dim(s, nd - 1) != d3 ||
      (!indexed && dim(s, 0) != N))
    value_error(op, "checkpoints has shape ", shape_str(s), "; expected [slots, HV, ", v_major ? "V, K" : "K, V",
                "] with checkpoint_indices [N, max_checkpoints], or [N = ", N, ", max_checkpoints, HV, ",
                v_major ? "V, K" : "K, V", "] without; HV = ", HV, ", ", d2, ", ", d3);
  // Each row [HV, d2, d3] contiguous, rows evenly apart (a padded slot stride is allowed).
  const int64_t row_elems = HV * d2 * d3, rs = s.stride(nd - 4);
  const bool contiguous = (d3 == 1 || s.stride(nd - 1) == 1) && (d2 == 1 || s.stride(nd - 2) == d3) &&
                          (HV == 1 || s.stride(nd - 3) == d2 * d3) &&
                          (nd == 4 || dim(s, 0) == 1 || s.stride(0) == dim(s, 1) * rs);
  if (!contiguous)
    value_error(op, "checkpoints is not contiguous within its rows (strides ", stride_str(s), "); expected rows [HV, ",
                d2, ", ", d3, "] contiguous and evenly apart");
  gdn::Checkpoints ck;
  ck.every_chunks = every;
  ck.pool.data = s.data();
  ck.pool.num_slots = nd == 4 ? dim(s, 0) : dim(s, 0) * dim(s, 1);
  ck.pool.row_stride = ck.pool.num_slots > 1 ? rs : row_elems;
  if (ck.pool.num_slots > 1 && rs < row_elems)
    value_error(op, "checkpoints has a row stride of ", rs, " elements; expected >= ", row_elems, " (no overlap)");
  if (!indexed) {
    if (idx_host.is_valid()) value_error(op, "checkpoint_indices_cpu is given without checkpoint_indices");
    ck.max_checkpoints = dim(s, 1);
    return ck;
  }
  dev.check("checkpoint_indices", idx);
  if (!to_index_type(idx.dtype(), &ck.pool.index_type))
    type_error(op, "checkpoint_indices has dtype ", dl_dtype_name(idx.dtype()), "; expected int32 or int64");
  if (idx.ndim() != 2 || dim(idx, 0) != N || !c_contiguous(idx))
    value_error(op, "checkpoint_indices has shape ", shape_str(idx), "; expected contiguous [N = ", N,
                ", max_checkpoints]");
  ck.max_checkpoints = dim(idx, 1);
  ck.pool.indices = idx.data();
  if (idx_host.is_valid()) {
    check_host(op, "checkpoint_indices_cpu", idx_host);
    gdn::IndexType ht;
    if (!to_index_type(idx_host.dtype(), &ht) || ht != ck.pool.index_type || shape_str(idx_host) != shape_str(idx) ||
        !c_contiguous(idx_host))
      value_error(op, "checkpoint_indices_cpu is not a contiguous copy of checkpoint_indices (", shape_str(idx), ", ",
                  dl_dtype_name(idx.dtype()), ")");
    ck.pool.indices_host = idx_host.data();
  } else if (dev.type == kDevCPU) {
    ck.pool.indices_host = idx.data();
  }
  return ck;
}

}  // namespace

void forward(In q, In k, In v, In g, In beta, Out o, In A_log, In dt_bias, In initial_state, In initial_indices,
             In initial_indices_host, Out final_state, In final_indices, In final_indices_host, bool final_is_initial,
             In initial_present, int64_t null_slot, Out token_states, In token_indices, In token_indices_host,
             In num_accepted, In num_accepted_host, In parents, In parents_host, Out checkpoints, In checkpoint_indices,
             In checkpoint_indices_host, int64_t checkpoint_every_chunks, In cu_seqlens, In cu_seqlens_host,
             double scale, bool use_qk_l2norm, bool state_v_first, bool fused_gate, bool recurrent,
             nb::handle workspace, uintptr_t stream, int num_threads) {
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

  // q and k share one dtype; v and o each have theirs (fla passes fp32 q/k with fp16 v, and its
  // chunked forward returns o in q's dtype).
  const gdn::DType qk_dt = data_dtype(op, "q", q);
  expect_dtype(op, "k", k, qk_dt, " (that of q)");
  const gdn::DType dt = data_dtype(op, "v", v);
  const gdn::DType o_dt = data_dtype(op, "o", o);
  const gdn::DType gdt = data_dtype(op, "g", g);
  if (gdt != gdn::DType::kFloat32 && gdt != dt)
    type_error(op, "g has dtype ", gdn::dtype_name(gdt), "; expected float32 or v's dtype (", gdn::dtype_name(dt), ")");
  expect_dtype(op, "beta", beta, gdt, " (that of g)");

  const TokView tq = token_view(op, "q", q, T, H, K, "H", "K");
  const TokView tk = token_view(op, "k", k, T, H, K, "H", "K");
  const TokView tv = token_view(op, "v", v, T, HV, V, "HV", "V");
  const TokView tg = token_view(op, "g", g, T, HV, 0, "HV", "");
  const TokView tb = token_view(op, "beta", beta, T, HV, 0, "HV", "");
  const TokView to = token_view(op, "o", o, T, HV, V, "HV", "V");

  set_shape(p, T, N, H, HV, K, V, scale, state_v_first);
  p.dtype = dt;
  if (qk_dt != dt) p.qk_dtype = qk_dt;
  if (o_dt != dt) p.o_dtype = o_dt;
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

  gdn::DType sdt = gdn::DType::kFloat32;  // the state pools' dtype: that of the state arrays
  bool sdt_set = false;
  if (final_is_initial)
    a.final_state =
        state_ref(op, dev, "state (initial_state, updated in place)", final_state, final_indices, final_indices_host, N,
                  HV, K, V, state_v_first, "state_indices", "state_indices_cpu", &sdt, &sdt_set);
  else
    a.final_state = state_ref(op, dev, "final_state", final_state, final_indices, final_indices_host, N, HV, K, V,
                              state_v_first, "final_state_indices", "final_state_indices_cpu", &sdt, &sdt_set);
  if (final_is_initial) {
    if (!final_state.is_valid()) value_error(op, "the in-place state update needs a state (pool)");
    if (initial_state.is_valid()) value_error(op, "initial_state must be None for the in-place state update");
    a.initial_state = a.final_state;
  } else {
    a.initial_state = state_ref(op, dev, "initial_state", initial_state, initial_indices, initial_indices_host, N, HV,
                                K, V, state_v_first, "state_indices", "state_indices_cpu", &sdt, &sdt_set);
  }

  // Serving pools: the null slot (padding) on both, the present mask (has_initial_state) on the
  // initial state only: a sequence without one starts from zeros and still writes its final state.
  a.initial_state.null_slot = a.initial_state.data ? null_slot : -1;
  a.final_state.null_slot = a.final_state.data ? null_slot : -1;
  if (initial_present.is_valid()) {
    if (!a.initial_state.data) value_error(op, "initial_state_present is given without an initial state");
    dev.check("initial_state_present", initial_present);
    const auto pd = initial_present.dtype();
    const bool bytes = pd.bits == 8 && pd.lanes == 1 &&
                       (pd.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bool) ||
                        pd.code == static_cast<uint8_t>(nb::dlpack::dtype_code::UInt));
    if (!bytes) type_error(op, "initial_state_present has dtype ", dl_dtype_name(pd), "; expected bool or uint8");
    if (initial_present.ndim() != 1 || dim(initial_present, 0) != N || (N > 1 && initial_present.stride(0) != 1))
      value_error(op, "initial_state_present has shape ", shape_str(initial_present), "; expected [N = ", N,
                  "] contiguous");
    a.initial_state.present = static_cast<const uint8_t*>(initial_present.data());
    if (dev.type == kDevCPU) a.initial_state.present_host = a.initial_state.present;
  }

  if (token_states.is_valid()) {
    a.token_states = token_state_ref(op, dev, token_states, token_indices, token_indices_host, N, HV, K, V,
                                     state_v_first, &sdt, &sdt_set);
    a.token_states.pool.null_slot = null_slot;
  } else if (token_indices.is_valid() || token_indices_host.is_valid()) {
    value_error(op, "token_state_indices is given without token_states");
  }
  if (checkpoints.is_valid()) {
    a.checkpoints = checkpoint_ref(op, dev, checkpoints, checkpoint_indices, checkpoint_indices_host,
                                   checkpoint_every_chunks, N, HV, K, V, state_v_first, &sdt, &sdt_set);
    a.checkpoints.pool.null_slot = null_slot;
  } else if (checkpoint_indices.is_valid() || checkpoint_indices_host.is_valid()) {
    value_error(op, "checkpoint_indices is given without checkpoints");
  }
  p.state_dtype = a.problem.state_dtype = sdt;
  if (num_accepted.is_valid()) {
    if (!token_states.is_valid()) value_error(op, "num_accepted_tokens is given without token_states");
    dev.check("num_accepted_tokens", num_accepted);
    gdn::TokenStates& ts = a.token_states;
    ts.num_accepted_type = index_array(op, "num_accepted_tokens", num_accepted, N, "one count per sequence");
    ts.num_accepted = num_accepted.data();
    if (num_accepted_host.is_valid()) {
      check_host(op, "num_accepted_tokens_cpu", num_accepted_host);
      if (index_array(op, "num_accepted_tokens_cpu", num_accepted_host, N, "a host copy of num_accepted_tokens") !=
          ts.num_accepted_type)
        type_error(op, "num_accepted_tokens_cpu has dtype ", dl_dtype_name(num_accepted_host.dtype()),
                   "; expected that of num_accepted_tokens (", dl_dtype_name(num_accepted.dtype()), ")");
      ts.num_accepted_host = num_accepted_host.data();
    } else if (dev.type == kDevCPU) {
      ts.num_accepted_host = ts.num_accepted;
    }
  } else if (num_accepted_host.is_valid()) {
    value_error(op, "num_accepted_tokens_cpu is given without num_accepted_tokens");
  }
  if (parents.is_valid()) {  // EAGLE trees: [N, T_max], T_max that of the token states
    if (!token_states.is_valid()) value_error(op, "retrieve_parent_token is given without token_states");
    gdn::TokenStates& ts = a.token_states;
    dev.check("retrieve_parent_token", parents);
    if (!to_index_type(parents.dtype(), &ts.parents_type))
      type_error(op, "retrieve_parent_token has dtype ", dl_dtype_name(parents.dtype()), "; expected int32 or int64");
    if (parents.ndim() != 2 || dim(parents, 0) != N || dim(parents, 1) != ts.max_tokens || !c_contiguous(parents))
      value_error(op, "retrieve_parent_token has shape ", shape_str(parents), "; expected contiguous [N = ", N,
                  ", T_max = ", ts.max_tokens, "]");
    ts.parents = parents.data();
    if (parents_host.is_valid()) {
      check_host(op, "retrieve_parent_token_cpu", parents_host);
      gdn::IndexType ht;
      if (!to_index_type(parents_host.dtype(), &ht) || ht != ts.parents_type ||
          shape_str(parents_host) != shape_str(parents) || !c_contiguous(parents_host))
        value_error(op, "retrieve_parent_token_cpu is not a contiguous copy of retrieve_parent_token (",
                    shape_str(parents), ", ", dl_dtype_name(parents.dtype()), ")");
      ts.parents_host = parents_host.data();
    } else if (dev.type == kDevCPU) {
      ts.parents_host = ts.parents;
    }
  } else if (parents_host.is_valid()) {
    value_error(op, "retrieve_parent_token_cpu is given without retrieve_parent_token");
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

}  // namespace gdn_py
