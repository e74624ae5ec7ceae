"""The public functions: flash-linear-attention 0.6 compatible chunk_gated_delta_rule and
fused_recurrent_gated_delta_rule, and the in-place engine variants prefill_ / decode_."""

from __future__ import annotations

from ._forward import pop_fla_kwargs, run_forward


def chunk_gated_delta_rule(
    q,
    k,
    v,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens=None,
    cu_seqlens_cpu=None,
    chunk_indices=None,
    cp_context=None,
    **kwargs,
):
    r"""The chunked gated delta rule (prefill), a drop-in for
    ``fla.ops.gated_delta_rule.chunk_gated_delta_rule`` (fla 0.6): same signature, shapes and results.

    Args:
        q, k: ``[B, T, H, K]`` (or packed ``[T, H, K]``), bf16 / fp16 / fp32, one dtype. Any K in
            [1, 256] (fast kernels for some sizes, the others at the same accuracy).
        v: ``[B, T, HV, V]``, bf16 / fp16 / fp32, any V in [1, 256]; its dtype may differ from q's
            (fla's tests pass fp32 q/k with fp16 v): each is read in its own dtype and the work is
            fp32. On CUDA with K = V in {64, 128}, fp32 inputs (and fp32 q/k beside fp16 v) run the
            tensor cores on fp16 copies (tf32-class error, ~5e-4; fp16's range: docs/api.md), a
            mix with bf16 on bf16 copies. bf16 inputs at K = V = 64 run the tensor cores with
            fp16 operands (~1.7e-3; fp16's range for v and the state: docs/api.md).
            GVA when ``HV > H`` (``HV % H == 0``).
        g: ``[B, T, HV]`` log decay (``<= 0``), fp32 or the dtype of v; with ``use_gate_in_kernel=True``
            the raw gate input ``a``: ``g = -exp(A_log) * softplus(a + dt_bias)``.
        beta: ``[B, T, HV]``; with ``use_beta_sigmoid_in_kernel=True`` the logits ``b``:
            ``beta = sigmoid(b)`` (``2 * sigmoid(b)`` with ``allow_neg_eigval``).
        scale: defaults to ``K ** -0.5``.
        initial_state: ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``); fp32 (others are
            converted). With ``state_indices``: a state pool ``[slots, HV, ...]`` in fp32, bf16 or fp16
            (rows may be further apart than ``HV*K*V``: a padded slot stride), read in place.
        output_final_state: return the final states ``[N, HV, K, V]`` (fp32; a bf16 / fp16 pool's dtype
            when read through ``state_indices``).
        use_qk_l2norm_in_kernel: l2-normalize q and k per head inside the kernel.
        state_v_first: states in the V-major ``[.., V, K]`` layout (vLLM's cache).
        cu_seqlens: ``[N + 1]`` int32/int64 boundaries on q's device (varlen; then ``B == 1``).
        cu_seqlens_cpu: optional host copy of cu_seqlens: validated on the host (and read by the
            CUDA forward's kernel choices: one long sequence among many short ones; equal lengths,
            which need no longest-first order of the sequences). Without it,
            malformed boundaries on the CUDA backend are clamped on the device (never read out of
            bounds); no host synchronization happens either way, so calls can be captured in CUDA
            graphs.
        chunk_indices, cp_context: fla's; chunk_indices is ignored (gdn computes its own), context
            parallelism is not supported.

    Keyword-only extras (fla's and gdn's engine variants):
        use_gate_in_kernel, A_log, dt_bias: the fused gate (fla's names). The fastest path is
            ``use_gate_in_kernel=True`` together with ``use_beta_sigmoid_in_kernel=True``.
        chunk_size: accepted for fla compatibility (16, 32, 64); gdn always uses 64.
        state_indices (aliases ``ssm_state_indices``, ``initial_state_indices``): ``[N]`` int32/int64 on
            q's device; sequence n uses pool row ``state_indices[n]`` of ``initial_state``; a negative
            index means no state (start from zeros, write nothing back).
        state_indices_cpu: optional host copy of state_indices (validated on the host).
        inplace_final_state: write the final states back into ``initial_state`` (pool rows, or the
            dense array) in place, rounded once to its dtype; the returned final state is then
            ``initial_state`` itself.
        out: preallocated ``o`` (the shape of v; any float dtype, q's by default); written and returned.
        checkpoints, checkpoint_indices, checkpoint_indices_cpu, checkpoint_every_chunks: prefix
            caching, the states at chunk boundaries (as in :func:`prefill_`; CPU and CUDA).

    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in q's dtype (as fla's); final_state or None.

    Raises ValueError / TypeError naming the argument for inconsistent inputs. Backward is not
    implemented (inference only).
    """
    if cp_context is not None:
        raise ValueError("gdn.chunk_gated_delta_rule: cp_context (context parallelism) is not supported")
    del chunk_indices
    state_v_first, extra = pop_fla_kwargs("chunk_gated_delta_rule", kwargs, state_v_first)
    return run_forward(
        "chunk_gated_delta_rule", q, k, v, g, beta, scale=scale, initial_state=initial_state,
        output_final_state=output_final_state, use_qk_l2norm=use_qk_l2norm_in_kernel,
        use_beta_sigmoid=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
        state_v_first=state_v_first, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu, recurrent=False,
        **extra)


def fused_recurrent_gated_delta_rule(
    q,
    k,
    v,
    g=None,
    gk=None,
    gv=None,
    beta=None,
    scale=None,
    initial_state=None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    A_log=None,
    dt_bias=None,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens=None,
    **kwargs,
):
    r"""The token-by-token recurrence (decode), a drop-in for
    ``fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule`` (fla 0.6). Arguments as in
    :func:`chunk_gated_delta_rule`; ``g`` defaults to 0 (no decay) and ``beta`` to 1. Per-key and
    per-value gates (``gk``, ``gv``) are not supported. Also takes ``cu_seqlens_cpu``,
    ``state_indices``, ``state_indices_cpu``, ``inplace_final_state`` and ``out`` (keywords).
    As fla 0.6's, o comes back in v's dtype (which differs from q's when q/k are, e.g., fp32 and v fp16)."""
    if gk is not None or gv is not None:
        raise ValueError("gdn.fused_recurrent_gated_delta_rule: gk / gv (per-key or per-value gates) are not "
                         "supported; expected g [B, T, HV]")
    cu_seqlens_cpu = kwargs.pop("cu_seqlens_cpu", None)
    kwargs["use_gate_in_kernel"] = use_gate_in_kernel
    kwargs["A_log"] = A_log
    kwargs["dt_bias"] = dt_bias
    state_v_first, extra = pop_fla_kwargs("fused_recurrent_gated_delta_rule", kwargs, state_v_first)
    return run_forward(
        "fused_recurrent_gated_delta_rule", q, k, v, g, beta, scale=scale, initial_state=initial_state,
        output_final_state=output_final_state, use_qk_l2norm=use_qk_l2norm_in_kernel,
        use_beta_sigmoid=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
        state_v_first=state_v_first, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu, recurrent=True,
        o_like_v=True, **extra)


def _engine(op, recurrent, q, k, v, g, beta, state, state_indices, scale, use_qk_l2norm_in_kernel, state_v_first,
            A_log, dt_bias, cu_seqlens, cu_seqlens_cpu, state_indices_cpu, out, has_initial_state, null_slot,
            final_state_indices, final_state_indices_cpu, **decode_only):
    fused = A_log is not None
    o, _ = run_forward(
        op, q, k, v, g, beta, scale=scale, initial_state=state, output_final_state=False,
        use_qk_l2norm=use_qk_l2norm_in_kernel, use_gate_in_kernel=fused, A_log=A_log, dt_bias=dt_bias,
        use_beta_sigmoid=fused, allow_neg_eigval=False, state_v_first=state_v_first, cu_seqlens=cu_seqlens,
        cu_seqlens_cpu=cu_seqlens_cpu, state_indices=state_indices, state_indices_cpu=state_indices_cpu,
        inplace_final_state=True, out=out, recurrent=recurrent, has_initial_state=has_initial_state,
        null_slot=null_slot, final_state_indices=final_state_indices, final_state_indices_cpu=final_state_indices_cpu,
        **decode_only)
    return o


def prefill_(q, k, v, g, beta, state, state_indices=None, *, scale=None, use_qk_l2norm_in_kernel=False,
             state_v_first=False, A_log=None, dt_bias=None, cu_seqlens=None, cu_seqlens_cpu=None,
             state_indices_cpu=None, out=None, has_initial_state=None, null_slot=-1, final_state_indices=None,
             final_state_indices_cpu=None, checkpoints=None, checkpoint_indices=None, checkpoint_indices_cpu=None,
             checkpoint_every_chunks=1):
    r"""Serving-engine prefill: the chunked forward with states in a pool, updated in place.

    ``state`` is a pool ``[slots, HV, K, V]`` (``[slots, HV, V, K]`` with ``state_v_first``) in fp32, bf16
    or fp16, each row contiguous and rows possibly further apart (a padded slot stride: a view into an
    engine's cache); the arithmetic is fp32 and a written state is rounded once to the pool's dtype;
    sequence n starts from row ``state_indices[n]`` and its final state is written back to that row
    (a negative index: start from zeros, write nothing). Without ``state_indices``, ``state`` is a
    dense ``[N, ...]`` array updated in place. With ``A_log`` (and optional ``dt_bias``), ``g`` and
    ``beta`` are the raw ``a`` and ``b``: ``g = -exp(A_log) * softplus(a + dt_bias)``,
    ``beta = sigmoid(b)``, fused in the kernel. Returns o (``out`` when given).

    Serving engines' pools: ``null_slot`` names a row that means "no state" like a negative index
    (vLLM pads its batches with slot 0): such sequences read and write nothing; several may name
    it. ``has_initial_state`` ([N] bool): False starts that sequence from zeros, and its final state
    is still written. ``final_state_indices`` ([N]): write the final states to these rows instead of
    the rows read (a row written by one sequence must not be read by another).

    Prefix caching: ``checkpoints`` (a pool ``[slots, HV, K, V]`` with ``checkpoint_indices``
    ``[N, M]``, or a buffer ``[N, M, HV, K, V]`` without; the dtype of ``state``) takes the state at
    token ``(j + 1) * 64 * checkpoint_every_chunks`` of sequence n (when the sequence reaches it) in
    row ``checkpoint_indices[n, j]`` (negative or ``null_slot``: not stored), bitwise the final state
    of a separate call on that prefix (on CUDA: unless either call splits a long sequence across
    SMs; then within the forward's tolerance)."""
    return _engine("prefill_", False, q, k, v, g, beta, state, state_indices, scale, use_qk_l2norm_in_kernel,
                   state_v_first, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu, state_indices_cpu, out,
                   has_initial_state, null_slot, final_state_indices, final_state_indices_cpu,
                   checkpoints=checkpoints, checkpoint_indices=checkpoint_indices,
                   checkpoint_indices_cpu=checkpoint_indices_cpu, checkpoint_every_chunks=checkpoint_every_chunks)


def decode_(q, k, v, g, beta, state, state_indices=None, *, scale=None, use_qk_l2norm_in_kernel=False,
            state_v_first=False, A_log=None, dt_bias=None, cu_seqlens=None, cu_seqlens_cpu=None,
            state_indices_cpu=None, out=None, has_initial_state=None, null_slot=-1, final_state_indices=None,
            final_state_indices_cpu=None, num_accepted_tokens=None, num_accepted_tokens_cpu=None,
            token_states=None, token_state_indices=None, token_state_indices_cpu=None, disable_state_update=False,
            retrieve_parent_token=None, retrieve_parent_token_cpu=None):
    r"""Serving-engine decode step: the recurrence (one or a few tokens per sequence) with states in a
    pool, updated in place. Arguments as in :func:`prefill_`; typical shapes are q ``[N, 1, H, K]``
    (one token per sequence), ``[N, T, H, K]`` (T tokens each) or ``[1, total, H, K]`` with
    ``cu_seqlens``; ``null_slot``, ``has_initial_state`` and ``final_state_indices`` as in
    :func:`prefill_`. Returns o.

    Speculative decoding's verify (several tokens per sequence, the state after every token kept):

    - vLLM: ``state_indices`` 2-D ``[N, T_max]`` (a pool row per token) with
      ``num_accepted_tokens`` ``[N]``: sequence n starts from row ``state_indices[n, a - 1]``
      (``a = num_accepted_tokens[n]``, in ``[1, T_max]``) and the state after its token t is written
      to row ``state_indices[n, t]``; rows equal to ``null_slot`` (vLLM pads with 0) or negative
      are neither read nor written.
    - SGLang: ``state_indices`` ``[N]`` as usual and ``token_states`` an fp32 buffer
      ``[S, T_max, HV, K, V]`` that takes the state after token t of sequence n at
      ``[token_state_indices[n], t]`` (``[n, t]`` without indices, S = N; a negative index stores
      nothing); ``disable_state_update=True`` leaves the pool rows untouched.
      ``token_states`` may also be a pool ``[slots, HV, K, V]`` with 2-D ``token_state_indices``.
    - EAGLE trees (either convention): ``retrieve_parent_token`` ``[N, T_max]``: token t >= 1
      continues from the state after token ``retrieve_parent_token[n, t]`` (an earlier token whose
      state is stored) instead of token t - 1; a negative entry keeps the chain.

    ``null_slot`` applies to the token states' indices too. ``*_cpu`` arguments are host copies of
    device indices for validation (no device sync)."""
    return _engine("decode_", True, q, k, v, g, beta, state, state_indices, scale, use_qk_l2norm_in_kernel,
                   state_v_first, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu, state_indices_cpu, out,
                   has_initial_state, null_slot, final_state_indices, final_state_indices_cpu,
                   num_accepted_tokens=num_accepted_tokens, num_accepted_tokens_cpu=num_accepted_tokens_cpu,
                   token_states=token_states, token_state_indices=token_state_indices,
                   token_state_indices_cpu=token_state_indices_cpu, disable_state_update=disable_state_update,
                   retrieve_parent_token=retrieve_parent_token, retrieve_parent_token_cpu=retrieve_parent_token_cpu)


chunk_gdn = chunk_gated_delta_rule
fused_recurrent_gdn = fused_recurrent_gated_delta_rule
