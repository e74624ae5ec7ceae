"""Drop-in adapters for serving engines: functions with the names, signatures and return values of
the engine-side GDN kernels they replace, running on gdn (CPU or CUDA, torch tensors). They only
translate arguments and call gdn's own ops (``gdn.prefill_``, ``gdn.decode_``,
``gdn.chunk_gated_delta_rule``, ``gdn.stages``); import the engine's module and call it where the
engine calls its own kernel:

    from gdn.compat import vllm as gdn_vllm        # vllm/third_party/flash_linear_attention/ops
    o, ssm_state = gdn_vllm.fused_sigmoid_gating_delta_rule_update(
        A_log=A_log, a=a, b=b, dt_bias=dt_bias, q=q, k=k, v=v, initial_state=ssm_state,
        inplace_final_state=True, cu_seqlens=spec_query_start_loc, ssm_state_indices=spec_state_indices,
        num_accepted_tokens=num_accepted_tokens, use_qk_l2norm_in_kernel=True)

    from gdn.compat import sglang as gdn_sglang    # sglang/kernels/ops/attention/fla
    o = gdn_sglang.fused_sigmoid_gating_delta_rule_update(
        A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, ssm_states, cache_indices, cu_seqlens=query_start_loc,
        use_qk_l2norm_in_kernel=True, disable_state_update=True,
        intermediate_states_buffer=buf, intermediate_state_indices=buf_idx)

``gdn.compat.vllm``:
    ``chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
    chunk_indices, chunk_offsets, use_qk_l2norm_in_kernel, core_attn_out) -> (o, final_state)``;
    ``fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale, initial_state, inplace_final_state,
    cu_seqlens, ssm_state_indices, num_accepted_tokens, use_qk_l2norm_in_kernel) -> (o, state)``;
    ``fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v, beta, threshold, scale,
    initial_state, inplace_final_state, cu_seqlens, ssm_state_indices, num_accepted_tokens,
    use_qk_l2norm_in_kernel, is_kda) -> (o, state)``. States V-major ``[.., HV, V, K]``; pool slot
    ``<= 0`` is padding (``NULL_BLOCK_ID = 0``); 2-D ``ssm_state_indices`` ``[N, T_max]`` with
    ``num_accepted_tokens`` (padded with 1) read column ``num_accepted - 1`` and write column t;
    ``fused_recurrent_gated_delta_rule_packed_decode(mixed_qkv, a, b, A_log, dt_bias, scale,
    initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel) -> (out, state)`` (q / k / v
    read as views of ``mixed_qkv``; padding gets o = 0).

``gdn.compat.sglang``:
    ``chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, initial_state_indices,
    cu_seqlens, head_first, use_qk_l2norm_in_kernel, inplace_update) -> (o, None, h)`` (h: the
    state at each chunk's start, ``[B, NT, HV, V, K]``; keyword ``output_h=False`` skips it);
    ``fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, softplus_beta, softplus_threshold,
    q, k, v, b, initial_state_source, initial_state_indices, scale, use_qk_l2norm_in_kernel,
    cu_seqlens, is_kda, disable_state_update, intermediate_states_buffer,
    intermediate_state_indices, cache_steps, retrieve_parent_token) -> o``;
    ``fused_recurrent_gated_delta_rule_packed_decode`` as vLLM's. Pool ``[slots, HV, V, K]``; a
    negative index is padding.

Each module's docstring lists its conventions and the (few) differences from the engine, all on
calls the engine does not make. SGLang's ``retrieve_parent_token`` (EAGLE tree verify) maps to
gdn's token parents; fp32, bf16 and fp16 pools are updated in place (fp32 arithmetic, one rounding
on write). Not supported, with NotImplementedError naming what gdn lacks: KDA (``is_kda``) and
vLLM's per-value beta."""

__all__ = ["vllm", "sglang"]
