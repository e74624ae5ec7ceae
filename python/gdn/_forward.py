"""The composed forward (chunked prefill and the recurrent decode step): argument handling shared
by the fla-compatible functions and the engine variants, dispatch to the torch custom op (torch
tensors) or straight to the binding (numpy / cupy arrays)."""

from __future__ import annotations

from . import _C
from . import _signature as sig
from ._env import Env, _torch, same_framework

sig.check_binding(_C.forward_args)  # the binding and the table agree (one argument list)

if _torch is not None and hasattr(_torch.library, "custom_op"):
    from ._torch_ops import forward_op
else:  # numpy / cupy only
    forward_op = None

_FLA_CHUNK_SIZES = (16, 32, 64)


def _shape(x):
    return tuple(int(s) for s in x.shape)


def _check_shapes(op, q, k, v, g, beta, cu_seqlens):
    qs, vs = tuple(q.shape), tuple(v.shape)  # (each shape read once: this runs on every call)
    if len(qs) not in (3, 4):
        raise ValueError(f"gdn.{op}: q has shape {_shape(q)}; expected [B, T, H, K] (or packed [T, H, K])")
    ks = tuple(k.shape)
    if len(ks) != len(qs) or ks[-2] != qs[-2]:
        raise ValueError(f"gdn.{op}: k has shape {_shape(k)}; q and k must have the same number of heads "
                         f"and dimensions, like q {_shape(q)}")
    if ks != qs:
        raise ValueError(f"gdn.{op}: k has shape {_shape(k)}; expected q's shape {_shape(q)}")
    if len(vs) != len(qs) or vs[:-2] != qs[:-2]:
        raise ValueError(f"gdn.{op}: v has shape {_shape(v)}; expected {_shape(q)[:-2] + ('HV', 'V')}")
    H, HV = int(qs[-2]), int(vs[-2])
    if H < 1 or HV % H != 0:
        raise ValueError(f"gdn.{op}: v has HV = {HV} heads and q has H = {H}; for GVA, num_v_heads (HV) "
                         f"must be evenly divisible by num_heads (H)")
    gshape = vs[:-1]
    if g is not None and tuple(g.shape) != gshape:
        raise ValueError(f"gdn.{op}: g has shape {_shape(g)}; expected {_shape(v)[:-1]} (v's shape without V)")
    if beta is not None and tuple(beta.shape) != gshape:
        raise ValueError(f"gdn.{op}: beta has shape {_shape(beta)}; expected {_shape(v)[:-1]} (v's shape without V)")
    if cu_seqlens is not None:
        if len(qs) == 4 and qs[0] != 1:
            raise ValueError(f"gdn.{op}: q has batch size {int(qs[0])}; the batch size is expected to be 1 "
                             "when using cu_seqlens (flatten variable-length inputs)")
        if cu_seqlens.ndim != 1 or cu_seqlens.shape[0] < 2:
            raise ValueError(f"gdn.{op}: cu_seqlens has shape {_shape(cu_seqlens)}; expected [N + 1], N >= 1")
        return int(cu_seqlens.shape[0]) - 1
    return int(qs[0]) if len(qs) == 4 else 1


def run_forward(op, q, k, v, g, beta, *, scale, initial_state, output_final_state, use_qk_l2norm,
                use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid, allow_neg_eigval, state_v_first,
                cu_seqlens, cu_seqlens_cpu, state_indices, state_indices_cpu, inplace_final_state, out,
                recurrent, o_like_v=False, has_initial_state=None, null_slot=-1, final_state_indices=None,
                final_state_indices_cpu=None, token_states=None, token_state_indices=None,
                token_state_indices_cpu=None, num_accepted_tokens=None, num_accepted_tokens_cpu=None,
                disable_state_update=False, retrieve_parent_token=None, retrieve_parent_token_cpu=None,
                checkpoints=None, checkpoint_indices=None, checkpoint_indices_cpu=None, checkpoint_every_chunks=1):
    env = Env(q, "q")
    kind = env.kind
    q_type = type(q)
    for name, x in (("k", k), ("v", v), ("g", g), ("beta", beta), ("initial_state", initial_state),
                    ("cu_seqlens", cu_seqlens), ("state_indices", state_indices), ("A_log", A_log),
                    ("dt_bias", dt_bias), ("out", out), ("token_states", token_states),
                    ("token_state_indices", token_state_indices), ("num_accepted_tokens", num_accepted_tokens),
                    ("retrieve_parent_token", retrieve_parent_token), ("checkpoints", checkpoints),
                    ("checkpoint_indices", checkpoint_indices)):
        if x is not None and type(x) is not q_type:  # (q's own type is q's framework)
            same_framework(kind, name, x)
    N = _check_shapes(op, q, k, v, g, beta, cu_seqlens)
    HV, K, V = int(v.shape[-2]), int(q.shape[-1]), int(v.shape[-1])

    # Gates. The core fuses the gate and the beta sigmoid together (fused_gate); other combinations
    # are computed here, in fp32, with the framework's own operations.
    if allow_neg_eigval and not use_beta_sigmoid:
        raise ValueError(f"gdn.{op}: allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True")
    if use_gate_in_kernel:
        if A_log is None:
            raise ValueError(f"gdn.{op}: A_log is None; it must be provided ([HV] = [{HV}]) when "
                             "use_gate_in_kernel=True")
        if g is None:
            raise ValueError(f"gdn.{op}: g (the raw pre-activation gate) must be provided when use_gate_in_kernel=True")
        if _shape(A_log) != (HV,):
            raise ValueError(f"gdn.{op}: A_log has shape {_shape(A_log)}; expected [HV] = [{HV}]")
        if dt_bias is not None and _shape(dt_bias) != (HV,):
            raise ValueError(f"gdn.{op}: dt_bias has shape {_shape(dt_bias)}; expected [HV] = [{HV}]")
    else:
        A_log = dt_bias = None
    if g is None:
        g = env.zeros(_shape(v)[:-1])
    if beta is None:
        beta = env.ones(_shape(v)[:-1])
    for name, x in (("g", g), ("beta", beta)):
        if not env.is_float_dtype(x):
            raise TypeError(f"gdn.{op}: {name} has dtype {env.dtype_name(x)}; expected a floating dtype")
    fused_gate = bool(use_gate_in_kernel and use_beta_sigmoid and not allow_neg_eigval)
    if fused_gate:
        A_log = env.contiguous(env.to_f32(A_log))
        dt_bias = env.zeros((HV,)) if dt_bias is None else env.contiguous(env.to_f32(dt_bias))
    else:
        if use_gate_in_kernel:
            g = env.gate(g, A_log, dt_bias)
            A_log = dt_bias = None
        if use_beta_sigmoid:
            beta = env.sigmoid(beta, 2.0 if allow_neg_eigval else 1.0)
    # g and beta share one dtype: fp32, or the input dtype (v's: q/k may come in another one).
    if g.dtype != beta.dtype or (g.dtype != v.dtype and not env.is_f32(g)):
        g, beta = env.to_f32(g), env.to_f32(beta)

    if scale is None:
        scale = K ** -0.5
    scale = float(scale)

    # Per-token states (speculative decoding's verify, the decode step only). vLLM's convention: 2-D
    # state_indices [N, T_max] name a pool row per token; the state after token t goes to column t
    # and the initial state comes from column num_accepted_tokens - 1, so the pool is the token
    # states and there is no other initial or final state.
    if state_indices is not None and state_indices.ndim == 2:
        if not recurrent or not inplace_final_state:
            raise ValueError(f"gdn.{op}: 2-D state_indices [N, T_max] (a pool row per token) are for decode_ only")
        if token_states is not None or token_state_indices is not None:
            raise ValueError(f"gdn.{op}: pass either 2-D state_indices (the pool takes every token's state) or "
                             "token_states, not both")
        if num_accepted_tokens is None:
            raise ValueError(f"gdn.{op}: 2-D state_indices need num_accepted_tokens ([N]; ones when every sequence "
                             "starts from its first column)")
        if final_state_indices is not None or has_initial_state is not None or disable_state_update:
            raise ValueError(f"gdn.{op}: final_state_indices, has_initial_state and disable_state_update do not apply "
                             "to 2-D state_indices")
        if state_indices_cpu is not None:
            state_indices_cpu = env.to_index_dtype_of(state_indices_cpu, state_indices)
        token_states, token_state_indices, token_state_indices_cpu = initial_state, state_indices, state_indices_cpu
        initial_state = state_indices = state_indices_cpu = None
        inplace_final_state = False
        output_final_state = False
    elif num_accepted_tokens is not None and token_states is None:
        raise ValueError(f"gdn.{op}: num_accepted_tokens needs 2-D state_indices or token_states")
    if (token_states is not None or disable_state_update) and not recurrent:
        raise ValueError(f"gdn.{op}: token_states and disable_state_update are for the decode step (decode_) only")
    if checkpoints is not None and recurrent:
        raise ValueError(f"gdn.{op}: checkpoints are for the chunked forward (prefill_, chunk_gated_delta_rule) only")
    if checkpoint_indices_cpu is not None and checkpoint_indices is not None:
        checkpoint_indices_cpu = env.to_index_dtype_of(checkpoint_indices_cpu, checkpoint_indices)
    if token_state_indices_cpu is not None and token_state_indices is not None:
        token_state_indices_cpu = env.to_index_dtype_of(token_state_indices_cpu, token_state_indices)
    if num_accepted_tokens_cpu is not None and num_accepted_tokens is not None:
        num_accepted_tokens_cpu = env.to_index_dtype_of(num_accepted_tokens_cpu, num_accepted_tokens)
    if retrieve_parent_token_cpu is not None and retrieve_parent_token is not None:
        retrieve_parent_token_cpu = env.to_index_dtype_of(retrieve_parent_token_cpu, retrieve_parent_token)

    # States.
    initial_indices = final_indices = initial_indices_cpu = final_indices_cpu = None
    final_state = None
    final_is_initial = False
    if cu_seqlens is not None and cu_seqlens_cpu is not None:
        cu_seqlens_cpu = env.to_index_dtype_of(cu_seqlens_cpu, cu_seqlens)
    if state_indices is not None:
        if initial_state is None:
            raise ValueError(f"gdn.{op}: state_indices is given without initial_state (the state pool)")
        if state_indices.ndim != 1 or int(state_indices.shape[0]) != N:
            raise ValueError(f"gdn.{op}: state_indices has shape {_shape(state_indices)}; expected [N] = [{N}] "
                             "(one pool row per sequence)")
        if state_indices_cpu is not None:
            state_indices_cpu = env.to_index_dtype_of(state_indices_cpu, state_indices)
    elif state_indices_cpu is not None:
        raise ValueError(f"gdn.{op}: state_indices_cpu is given without state_indices")
    if initial_state is not None and state_indices is None and initial_state.ndim >= 1 \
            and int(initial_state.shape[0]) != N:
        raise ValueError(f"gdn.{op}: initial_state has {int(initial_state.shape[0])} rows; the number of initial "
                         f"states is expected to be equal to the number of input sequences, i.e. {N}")
    if final_state_indices is not None and (not inplace_final_state or state_indices is None):
        raise ValueError(f"gdn.{op}: final_state_indices (the write slots) needs the in-place pool update "
                         "(inplace_final_state=True, or prefill_ / decode_) with state_indices (the read slots)")
    if final_state_indices_cpu is not None and final_state_indices is None:
        raise ValueError(f"gdn.{op}: final_state_indices_cpu is given without final_state_indices")
    if inplace_final_state and disable_state_update:
        # SGLang's verify: the pool rows are read and left as they are (the token states hold the rest).
        if final_state_indices is not None:
            raise ValueError(f"gdn.{op}: final_state_indices is given with disable_state_update=True (nothing is "
                             "written to the pool)")
        if initial_state is None:
            raise ValueError(f"gdn.{op}: disable_state_update=True needs the state pool")
        initial_indices, initial_indices_cpu = state_indices, state_indices_cpu
    elif inplace_final_state:
        # The final states overwrite the initial ones (pool rows, or a dense [N, ...] fp32 array),
        # or go to other rows of the same pool (final_state_indices: read one slot, write another).
        if initial_state is None:
            raise ValueError(f"gdn.{op}: inplace_final_state=True needs initial_state (the state pool)")
        final_state = initial_state
        final_indices, final_indices_cpu = state_indices, state_indices_cpu
        final_is_initial = True
        initial_state = None
        if final_state_indices is not None:
            if final_state_indices.ndim != 1 or int(final_state_indices.shape[0]) != N:
                raise ValueError(f"gdn.{op}: final_state_indices has shape {_shape(final_state_indices)}; expected "
                                 f"[N] = [{N}]")
            if final_state_indices_cpu is not None:
                final_state_indices_cpu = env.to_index_dtype_of(final_state_indices_cpu, final_state_indices)
            # Read rows state_indices, write rows final_state_indices: two views of one pool.
            initial_state, initial_indices, initial_indices_cpu = final_state, state_indices, state_indices_cpu
            final_indices, final_indices_cpu = final_state_indices, final_state_indices_cpu
            final_is_initial = False
    else:
        if initial_state is not None:
            if state_indices is None and not env.is_f32(initial_state):
                initial_state = env.to_f32(initial_state)  # fla accepts low-precision h0; states are fp32
            if state_indices is None:
                initial_state = env.contiguous(initial_state)
            initial_indices, initial_indices_cpu = state_indices, state_indices_cpu
        if output_final_state:
            # fp32, or the dtype of a bf16 / fp16 pool read through state_indices (one state
            # dtype per call: the kernels convert to fp32 on read and round once on write).
            like = initial_state if initial_state is not None and state_indices is not None else None
            final_state = env.empty((N, HV, V, K) if state_v_first else (N, HV, K, V),
                                    None if like is not None else "float32", like=like)

    # o's dtype (it matters when q/k come in another dtype than v): q's, as fla's chunked forward
    # and the engines' kernels; v's where the caller asks (fla 0.6's fused_recurrent).
    o = out if out is not None else env.empty(_shape(v), like=v if o_like_v else q)

    args = sig.pack_op_args(
        q=q, k=k, v=v, g=g, beta=beta, o=o, A_log=A_log, dt_bias=dt_bias, initial_state=initial_state,
        initial_state_indices=initial_indices, initial_state_indices_cpu=initial_indices_cpu,
        final_state=final_state, final_state_indices=final_indices, final_state_indices_cpu=final_indices_cpu,
        final_is_initial=final_is_initial, initial_state_present=has_initial_state, null_slot=int(null_slot),
        token_states=token_states, token_state_indices=token_state_indices,
        token_state_indices_cpu=token_state_indices_cpu, num_accepted_tokens=num_accepted_tokens,
        num_accepted_tokens_cpu=num_accepted_tokens_cpu, retrieve_parent_token=retrieve_parent_token,
        retrieve_parent_token_cpu=retrieve_parent_token_cpu, checkpoints=checkpoints,
        checkpoint_indices=checkpoint_indices, checkpoint_indices_cpu=checkpoint_indices_cpu,
        checkpoint_every_chunks=int(checkpoint_every_chunks),
        cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu, scale=scale,
        use_qk_l2norm=bool(use_qk_l2norm), state_v_first=bool(state_v_first), fused_gate=fused_gate,
        recurrent=bool(recurrent))
    if kind == "torch" and forward_op is not None:
        forward_op(*args)
    else:
        call_binding(env, args)
    if final_is_initial:
        return o, final_state
    return o, (final_state if output_final_state else None)


def call_binding(env, args):
    """The binding straight (numpy, cupy; torch without custom ops), `args` in the op's order."""
    with env.scope():
        sig.binding_call(_C.forward, args, env.array_map(), workspace=env.workspace(), stream=env.stream(),
                         num_threads=env.num_threads())


def pop_fla_kwargs(op, kwargs, state_v_first):
    """fla's extra keyword arguments plus gdn's engine ones; unknown names are an error."""
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError(f"gdn.{op}: cannot pass both state_v_first and the deprecated transpose_state_layout")
        import warnings

        warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.",
                      DeprecationWarning, stacklevel=3)
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    if "head_first" in kwargs:
        raise ValueError(f"gdn.{op}: head_first has been removed; inputs must be in [B, T, H, ...] format")
    chunk_size = kwargs.pop("chunk_size", 64)
    if chunk_size not in _FLA_CHUNK_SIZES:
        raise ValueError(f"gdn.{op}: chunk_size must be 16, 32 or 64, got {chunk_size} (gdn always uses 64; "
                         "the result is the same function)")
    indices = None
    for name in ("state_indices", "ssm_state_indices", "initial_state_indices"):
        if name in kwargs:
            if indices is not None:
                raise ValueError(f"gdn.{op}: pass the pool row indices once (state_indices)")
            indices = kwargs.pop(name)
    extra = dict(
        use_gate_in_kernel=bool(kwargs.pop("use_gate_in_kernel", False)),
        A_log=kwargs.pop("A_log", None),
        dt_bias=kwargs.pop("dt_bias", None),
        state_indices=indices,
        state_indices_cpu=kwargs.pop("state_indices_cpu", None),
        inplace_final_state=bool(kwargs.pop("inplace_final_state", False)),
        out=kwargs.pop("out", None),
        has_initial_state=kwargs.pop("has_initial_state", None),
        null_slot=kwargs.pop("null_slot", -1),
        final_state_indices=kwargs.pop("final_state_indices", None),
        final_state_indices_cpu=kwargs.pop("final_state_indices_cpu", None),
    )
    # Prefix caching (the chunked forward only; run_forward rejects them for the recurrence).
    for name in ("checkpoints", "checkpoint_indices", "checkpoint_indices_cpu", "checkpoint_every_chunks"):
        if name in kwargs:
            extra[name] = kwargs.pop(name)
    if kwargs:
        raise TypeError(f"gdn.{op}: unexpected keyword argument(s) {sorted(kwargs)}")
    return state_v_first, extra
