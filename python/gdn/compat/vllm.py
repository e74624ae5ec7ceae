"""vLLM's GDN kernel calls on gdn: the names, signatures and return values of
``vllm/third_party/flash_linear_attention/ops`` (formerly ``vllm/model_executor/layers/fla/ops``):
``chunk_gated_delta_rule``, ``fused_recurrent_gated_delta_rule`` and
``fused_sigmoid_gating_delta_rule_update``.

vLLM's conventions, kept here: states are V-major, ``[.., HV, V, K]``; the pool is updated in place
through ``ssm_state_indices`` (1-D ``[N]``: a slot per sequence; 2-D ``[N, T_max]`` with
``num_accepted_tokens``: a slot per token, speculative decoding's verify); a slot ``<= 0`` is
padding (``NULL_BLOCK_ID = 0``): a sequence whose read slot is ``<= 0`` reads and writes no state,
and a token whose slot is ``<= 0`` stores none. ``num_accepted_tokens`` pads with 1 and
``cu_seqlens`` repeats its last value for padding rows (zero-length sequences). Index arrays may
be longer than N (CUDA-graph padding): rows past N are not read. o of a padding sequence is
unspecified in vLLM (its kernel leaves it unwritten); gdn writes it from a zero state.

Differences, all on calls vLLM does not make:
- fp32 q / k / v are accepted (vLLM's chunk asserts bf16 / fp16).
- 1-D ``ssm_state_indices`` with more than one token per sequence: gdn writes the sequence's final
  state to its slot (vLLM's kernel would store token t's state in the slot of sequence n + t).
- ``initial_state`` is required by the recurrent functions (vLLM's kernels dereference it)."""

from __future__ import annotations

import torch

from .. import _api
from ._common import check_scale, first_rows, gate_as_v, gates, num_seqs, packed_decode

__all__ = ["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "fused_sigmoid_gating_delta_rule_update",
           "fused_recurrent_gated_delta_rule_packed_decode"]

NULL_BLOCK_ID = 0


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float = None,
    initial_state: torch.Tensor = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    chunk_indices: torch.Tensor | None = None,
    chunk_offsets: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    core_attn_out: torch.Tensor | None = None,
    *,
    head_first: bool = False,
):
    r"""vLLM's chunked prefill: q, k ``[B, T, H, K]``, v ``[B, T, HV, V]``, g (log decay) and beta
    ``[B, T, HV]``; ``initial_state`` dense ``[N, HV, V, K]`` (any float dtype; read as fp32);
    ``cu_seqlens`` ``[N + 1]`` with ``B = 1``. ``chunk_indices`` / ``chunk_offsets`` (vLLM's
    host-built chunk metadata) are accepted and not needed. ``core_attn_out``: a buffer of at least
    ``v.numel()`` elements whose first ones, viewed as v's shape, receive o (as vLLM's
    ``core_attn_out[: v.numel()].view(*v.shape)``). ``head_first=True`` (older vLLM) is rejected.

    Returns ``(o, final_state)``: o like v in q's dtype (the view of ``core_attn_out`` when given);
    final_state fp32 ``[N, HV, V, K]`` when ``output_final_state``, else None."""
    if head_first:
        raise DeprecationWarning("head_first is deprecated and will be removed in a future version. "
                                 "Please use head_first=False for now instead.")
    del chunk_indices, chunk_offsets
    out = None
    if core_attn_out is not None:
        if core_attn_out.numel() < v.numel():
            raise ValueError(f"gdn.compat.vllm.chunk_gated_delta_rule: core_attn_out too small: "
                             f"{core_attn_out.numel()} < {v.numel()}")
        out = core_attn_out[: v.numel()].view(*v.shape)
    return _api.chunk_gated_delta_rule(
        q, k, v, g, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, state_v_first=True, cu_seqlens=cu_seqlens, out=out)


def fused_recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor = None,
    scale: float = None,
    initial_state: torch.Tensor = None,
    inplace_final_state: bool = True,
    cu_seqlens: torch.Tensor | None = None,
    ssm_state_indices: torch.Tensor | None = None,
    num_accepted_tokens: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""vLLM's recurrent decode / verify with plain gates: g (log decay) ``[B, T, HV]``, beta
    ``[B, T, HV]`` (None: ones; per-value beta ``[B, T, HV, V]`` is not supported by gdn).
    State pool, indices and return value as in :func:`fused_sigmoid_gating_delta_rule_update`."""
    op = "vllm.fused_recurrent_gated_delta_rule"
    if beta is not None and beta.ndim == v.ndim:
        raise NotImplementedError(f"gdn.compat.{op}: beta has shape {tuple(beta.shape)} (a beta per value "
                                  "element); gdn takes one beta per token and head, [B, T, HV]")
    if beta is None:
        beta = torch.ones(v.shape[:-1], dtype=torch.float32, device=v.device)
    return _recurrent(op, q, k, v, gate_as_v(op, "g", g, v), gate_as_v(op, "beta", beta, v), None, None, scale,
                      initial_state, inplace_final_state, cu_seqlens, ssm_state_indices, num_accepted_tokens,
                      use_qk_l2norm_in_kernel)


def fused_sigmoid_gating_delta_rule_update(
    A_log: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    dt_bias: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: float = 1.0,
    threshold: float = 20.0,
    scale: float = None,
    initial_state: torch.Tensor = None,
    inplace_final_state: bool = True,
    cu_seqlens: torch.Tensor | None = None,
    ssm_state_indices: torch.Tensor | None = None,
    num_accepted_tokens: torch.Tensor | None = None,
    use_qk_l2norm_in_kernel: bool = False,
    is_kda: bool = False,
):
    r"""vLLM's decode step and speculative verify with the gate fused:
    ``g = -exp(A_log) * softplus(a + dt_bias)`` (softplus with ``beta`` and ``threshold``) and
    ``beta_t = sigmoid(b)``; a, b ``[T, HV]`` or ``[B, T, HV]``; q, k ``[B, T, H, K]``, v
    ``[B, T, HV, V]`` (``B = 1`` with ``cu_seqlens``).

    ``initial_state``: the pool ``[slots, HV, V, K]`` (fp32, bf16 or fp16).
    With ``inplace_final_state`` (vLLM's only use) it is updated in place through
    ``ssm_state_indices``: 1-D ``[N]`` (read and write slot per sequence) or 2-D ``[N, T_max]``
    (the state is read from column ``num_accepted_tokens[n] - 1``, None meaning column 0, and the
    state after token t is written to column t); slots ``<= 0`` are padding (see the module).
    Without ``inplace_final_state`` the states after every token are returned in a new
    ``[B * T, HV, V, K]`` array (row ``bos + t``), read from the indexed pool rows or, without
    indices, from row ``bos`` (the first token of the sequence) of ``initial_state``.

    Returns ``(o, final_state)``: o ``[B, T, HV, V]`` in q's dtype; final_state is ``initial_state``
    (in place) or the per-token array."""
    op = "vllm.fused_sigmoid_gating_delta_rule_update"
    if is_kda:
        raise NotImplementedError(f"gdn.compat.{op}: is_kda=True (KDA's per-key gates) is not the gated delta rule; "
                                  "gdn does not implement it")
    g, b_, A_log, dt_bias = gates(gate_as_v(op, "a", a, v), gate_as_v(op, "b", b, v), A_log, dt_bias, beta, threshold)
    return _recurrent(op, q, k, v, g, b_, A_log, dt_bias, scale, initial_state, inplace_final_state, cu_seqlens,
                      ssm_state_indices, num_accepted_tokens, use_qk_l2norm_in_kernel)


def _recurrent(op, q, k, v, g, beta, A_log, dt_bias, scale, initial_state, inplace_final_state, cu_seqlens,
               ssm_state_indices, num_accepted_tokens, use_qk_l2norm_in_kernel):
    scale = check_scale(op, scale, int(k.shape[-1]))
    if initial_state is None:
        raise ValueError(f"gdn.compat.{op}: initial_state (the state pool [slots, HV, V, K]) is required")
    if cu_seqlens is not None and q.shape[0] != 1:
        raise ValueError(f"gdn.compat.{op}: the batch size is expected to be 1 rather than {int(q.shape[0])} when "
                         "using `cu_seqlens`. Please flatten variable-length inputs before processing.")
    N = num_seqs(q, cu_seqlens)
    kw = dict(scale=scale, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, state_v_first=True, A_log=A_log,
              dt_bias=dt_bias, cu_seqlens=cu_seqlens)

    idx = nat = None
    if ssm_state_indices is not None:
        idx = first_rows(op, "ssm_state_indices", ssm_state_indices, N)
        if idx.ndim == 2:
            T_max = int(idx.shape[1])
            nat = (torch.ones(N, dtype=torch.int32, device=idx.device) if num_accepted_tokens is None
                   else first_rows(op, "num_accepted_tokens", num_accepted_tokens, N))
            # vLLM skips a sequence whose read slot is <= 0 altogether (no token state stored):
            # make its whole row padding. Clamped only to form the gather; gdn checks nat itself.
            col = (nat.long() - 1).clamp(0, T_max - 1)
            read = idx.gather(1, col[:, None])
            idx = torch.where(read > 0, idx, torch.zeros_like(idx))
        elif idx.ndim != 1:
            raise ValueError(f"gdn.compat.{op}: ssm_state_indices has shape {tuple(ssm_state_indices.shape)}; "
                             "expected [N] or [N, T_max]")
        elif num_accepted_tokens is not None:
            raise ValueError(f"gdn.compat.{op}: num_accepted_tokens needs 2-D ssm_state_indices [N, T_max] "
                             "(a slot per token)")
    elif num_accepted_tokens is not None:
        raise ValueError(f"gdn.compat.{op}: num_accepted_tokens needs 2-D ssm_state_indices [N, T_max]")

    if inplace_final_state:
        if idx is None:
            raise ValueError(f"gdn.compat.{op}: inplace_final_state=True needs ssm_state_indices (the pool slots)")
        o = _api.decode_(q, k, v, g, beta, initial_state, idx, null_slot=NULL_BLOCK_ID,
                         num_accepted_tokens=nat if idx.ndim == 2 else None, **kw)
        return o, initial_state

    # Not in place: the state after token t of sequence n goes to row bos_n + t of a new array.
    B, T = int(q.shape[0]), int(q.shape[1])
    final_state = torch.empty((B * T,) + tuple(initial_state.shape[1:]), dtype=initial_state.dtype,
                              device=initial_state.device)
    dev = q.device
    if cu_seqlens is not None:
        bos = cu_seqlens[:-1].long()
        lens = cu_seqlens[1:].long() - bos
        T_max = T if cu_seqlens.device.type != "cpu" else max(int(lens.max()), 1)
    else:
        bos = torch.arange(N, device=dev, dtype=torch.long) * T
        lens = torch.full((N,), T, device=dev, dtype=torch.long)
        T_max = max(T, 1)
    t = torch.arange(T_max, device=dev, dtype=torch.long)
    rows = torch.where(t[None, :] < lens[:, None], bos[:, None] + t[None, :], torch.full_like(t[None, :], -1))
    if idx is None:
        read = torch.where(lens > 0, bos, torch.full_like(bos, -1))  # h0 row bos (vLLM's kernel)
    else:
        read = idx.gather(1, (nat.long() - 1).clamp(0, idx.shape[1] - 1)[:, None])[:, 0] if idx.ndim == 2 else idx
        read = torch.where(read > 0, read.long(), torch.full_like(read, -1, dtype=torch.long))
        # A skipped sequence (read slot <= 0) stores no token state either.
        rows = torch.where((read >= 0)[:, None], rows, torch.full_like(rows, -1))
    o = _api.decode_(q, k, v, g, beta, initial_state, read, token_states=final_state, token_state_indices=rows,
                     disable_state_update=True, **kw)
    return o, final_state


def fused_recurrent_gated_delta_rule_packed_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""vLLM's packed decode step: one token per sequence, q / k / v read as views of
    ``mixed_qkv [B, 2 H K + HV V]`` (no copy), the gate fused (softplus threshold 20), o written
    into ``out [B, 1, HV, V]``, the pool ``initial_state [slots, HV, V, K]`` updated in place at
    ``ssm_state_indices [B]``; a slot <= 0 (NULL_BLOCK_ID) is padding: no state read or written, o = 0.
    Returns ``(out, initial_state)``."""
    return packed_decode("vllm.fused_recurrent_gated_delta_rule_packed_decode", NULL_BLOCK_ID, mixed_qkv, a, b, A_log,
                         dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel)
