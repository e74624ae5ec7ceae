"""SGLang's GDN kernel calls on gdn: the names, signatures and return values of
``sglang/kernels/ops/attention/fla`` (formerly ``sglang/srt/layers/attention/fla``):
``chunk_gated_delta_rule`` (``chunk.py``) and ``fused_sigmoid_gating_delta_rule_update``
(``fused_sigmoid_gating_recurrent.py``), as its Triton GDN kernel backend calls them.

SGLang's conventions, kept here: the pool ``[slots, HV, V, K]`` (V-major) is read and updated in
place through per-sequence ``initial_state_indices``; a negative index is padding (CUDA graphs pad
with -1): that sequence starts from a zero state and no state is written for it, and its o is
computed from that zero state (as SGLang's decode kernel). The intermediate-states buffer of
speculative verify is ``[S, steps, HV, V, K]``; the state after token t of sequence n goes to
``buffer[intermediate_state_indices[n], t]`` (a negative index stores nothing).

Differences, all on calls SGLang does not make:
- fp32 q / k / v are accepted (SGLang's chunk asserts bf16 / fp16).
- chunk: a negative index reads zeros and writes nothing (SGLang's Triton kernel does not guard it);
  ``initial_state`` without ``initial_state_indices`` is a dense ``[N, HV, V, K]`` array.
- decode: without ``intermediate_state_indices`` sequence n uses buffer row n.

EAGLE tree verify (``retrieve_parent_token`` ``[N, T]``): token t >= 1 of a sequence with a
buffer row continues from the state after token ``retrieve_parent_token[n, t]`` (read back from
the buffer), not from token t - 1; without a buffer row the parents are not read (the chain).

Not supported (NotImplementedError): ``is_kda`` (KDA's per-key gates)."""

from __future__ import annotations

from typing import Optional

import torch

from .. import _api, stages
from ._common import check_scale, first_rows, gate_as_v, gates, num_seqs, packed_decode

__all__ = ["chunk_gated_delta_rule", "fused_sigmoid_gating_delta_rule_update",
           "fused_recurrent_gated_delta_rule_packed_decode"]

CHUNK_SIZE = 64


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float = None,
    initial_state: torch.Tensor = None,
    initial_state_indices: torch.Tensor = None,
    cu_seqlens: Optional[torch.LongTensor] = None,
    head_first: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    inplace_update: bool = True,
    *,
    output_h: bool = True,
):
    r"""SGLang's chunked prefill (extend): q, k ``[B, T, H, K]``, v ``[B, T, HV, V]`` (strided views
    of the projection are fine), g (log decay) and beta ``[B, T, HV]``; ``initial_state`` the pool
    ``[slots, HV, V, K]`` read at ``initial_state_indices`` ``[N]`` and, with ``inplace_update``,
    overwritten there with the final states.

    Returns ``(o, None, h)``: o like v in q's dtype; h the state at the start of every chunk of 64
    tokens, ``[B, NT, HV, V, K]`` in k's dtype, chunks numbered over the batch (sequence n's chunk c
    is ``sum_{m<n} ceil(len_m / 64) + c``), as SGLang's ``_track_mamba_state_extend`` reads it.
    Finding NT reads cu_seqlens on the host (SGLang's ``prepare_chunk_indices`` does too).

    h comes from gdn's stages (``gdn.stages``), which run the chunked forward step by step (exact
    fp32 stages); ``output_h=False`` (keyword, gdn's) returns ``(o, None, None)`` from gdn's fused
    prefill instead, the faster path when the caller does not track chunk states."""
    if head_first:
        raise DeprecationWarning("head_first is deprecated and will be removed in a future version. "
                                 "Please use head_first=False for now instead.")
    if cu_seqlens is not None and q.shape[0] != 1:
        raise ValueError(f"The batch size is expected to be 1 rather than {int(q.shape[0])} when using `cu_seqlens`."
                         f"Please flatten variable-length inputs before processing.")
    N = num_seqs(q, cu_seqlens)
    if initial_state_indices is not None and int(initial_state_indices.shape[0]) != N:
        raise ValueError(f"The number of initial states is expected to be equal to the number of input sequences, "
                         f"i.e., {N} rather than {int(initial_state_indices.shape[0])}.")
    scale = float(k.shape[-1]) ** -0.5 if scale is None else float(scale)  # SGLang's chunk does not check it
    idx = None if initial_state_indices is None else initial_state_indices.contiguous()
    if initial_state is None and idx is not None:
        idx = None  # SGLang reads no state without a pool
    in_place = bool(inplace_update) and initial_state is not None

    if not output_h:
        if in_place:
            o = _api.prefill_(q, k, v, g, beta, initial_state, idx, scale=scale, state_v_first=True,
                              use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens)
        else:
            o, _ = _api.chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                                               state_indices=idx, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                               state_v_first=True, cu_seqlens=cu_seqlens)
        return o, None, None

    if use_qk_l2norm_in_kernel:
        q, k = stages.l2norm(q), stages.l2norm(k)
    G = stages.chunk_local_cumsum(g, cu_seqlens=cu_seqlens, num_seqs=N)
    L = stages.chunk_scaled_dot_kkt(k, beta, G, cu_seqlens=cu_seqlens, num_seqs=N)
    A = stages.solve_tril(L, cu_seqlens=cu_seqlens, num_seqs=N)
    w, u = stages.recompute_w_u(k, v, beta, A, G, cu_seqlens=cu_seqlens, num_seqs=N)
    h, v_new, _ = stages.chunk_fwd_h(k, w, u, G, initial_state=initial_state, state_v_first=True, cu_seqlens=cu_seqlens,
                                     num_seqs=N, state_indices=idx, inplace_final_state=in_place)
    o = stages.chunk_fwd_o(q, k, v_new, h, G, scale=scale, cu_seqlens=cu_seqlens, num_seqs=N)
    # h: [chunks, HV, K, V] fp32 (K-major, an upper bound of rows) -> SGLang's [B, NT, HV, V, K].
    B, T = int(q.shape[0]), int(q.shape[1])
    if cu_seqlens is not None:
        lens = cu_seqlens.detach().to("cpu").long().diff()
        NT = int(((lens + CHUNK_SIZE - 1) // CHUNK_SIZE).sum())
    else:
        NT = B * ((T + CHUNK_SIZE - 1) // CHUNK_SIZE)
    h = h[:NT].transpose(-1, -2).to(dtype=k.dtype, memory_format=torch.contiguous_format)
    return o, None, h.view(B, NT // B, *h.shape[1:])


def fused_sigmoid_gating_delta_rule_update(
    A_log: torch.Tensor,
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    softplus_beta: float,
    softplus_threshold: float,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    b: torch.Tensor,
    initial_state_source: torch.Tensor,
    initial_state_indices: torch.Tensor,
    scale: Optional[float] = None,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: Optional[torch.Tensor] = None,
    is_kda: bool = False,
    disable_state_update: bool = False,
    intermediate_states_buffer: Optional[torch.Tensor] = None,
    intermediate_state_indices: Optional[torch.Tensor] = None,
    cache_steps: Optional[int] = None,
    retrieve_parent_token: Optional[torch.Tensor] = None,
):
    r"""SGLang's decode step and target_verify with the gate fused:
    ``g = -exp(A_log) * softplus(a + dt_bias)`` (softplus with ``softplus_beta`` /
    ``softplus_threshold``) and ``beta = sigmoid(b)``; a, b ``[T, HV]`` or ``[B, T, HV]``; q, k
    ``[B, T, H, K]``, v ``[B, T, HV, V]`` (strided views of the projection are fine; ``B = 1`` with
    ``cu_seqlens``).

    ``initial_state_source``: the pool ``[slots, HV, V, K]``; sequence n reads row
    ``initial_state_indices[n]`` (negative: zeros) and, unless ``disable_state_update``, writes its
    final state there. ``intermediate_states_buffer`` ``[S, steps, HV, V, K]`` (pool dtype) takes
    the state after each token at ``[intermediate_state_indices[n], t]``; ``cache_steps`` is
    accepted and, as in SGLang, the step stride is ``buffer.shape[1]``. ``retrieve_parent_token``
    ``[N, T]`` (EAGLE trees): see the module.

    Returns o ``[B, T, HV, V]`` in q's dtype."""
    op = "sglang.fused_sigmoid_gating_delta_rule_update"
    del cache_steps
    if is_kda:
        raise NotImplementedError(f"gdn.compat.{op}: is_kda=True (KDA's per-key gates) is not the gated delta rule; "
                                  "gdn does not implement it")
    scale = check_scale(op, scale, int(k.shape[-1]))
    N = num_seqs(q, cu_seqlens)
    g, beta, A_log, dt_bias = gates(gate_as_v(op, "a", a, v), gate_as_v(op, "b", b, v), A_log, dt_bias,
                                    softplus_beta, softplus_threshold)
    pool, idx = initial_state_source, initial_state_indices
    if pool is None:
        # No state: zeros in, nothing out (a one-row dummy pool that no sequence names).
        like = intermediate_states_buffer
        pool = torch.zeros((1, int(v.shape[-2]), int(v.shape[-1]), int(k.shape[-1])),
                           dtype=torch.float32 if like is None else like.dtype, device=q.device)
        idx = torch.full((N,), -1, dtype=torch.int32, device=q.device)
    else:
        if idx is None:
            raise ValueError(f"gdn.compat.{op}: initial_state_indices ([N] pool rows) is required with "
                             "initial_state_source")
        idx = first_rows(op, "initial_state_indices", idx, N)
    buf, buf_idx, parents = intermediate_states_buffer, None, None
    if buf is not None and intermediate_state_indices is not None:
        buf_idx = first_rows(op, "intermediate_state_indices", intermediate_state_indices, N)
    elif buf is not None:
        buf = buf[:N]  # row n for sequence n (a view; gdn checks that there are N rows)
    if buf is not None and retrieve_parent_token is not None:
        parents = _parents(op, retrieve_parent_token, N, int(buf.shape[1]), buf_idx)
    return _api.decode_(q, k, v, g, beta, pool, idx, scale=scale, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                        state_v_first=True, A_log=A_log, dt_bias=dt_bias, cu_seqlens=cu_seqlens,
                        token_states=buf, token_state_indices=buf_idx, retrieve_parent_token=parents,
                        disable_state_update=bool(disable_state_update) or initial_state_source is None)


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
    r"""SGLang's packed decode step: one token per sequence, q / k / v read as views of
    ``mixed_qkv [B, 2 H K + HV V]`` (no copy), the gate fused (softplus threshold 20), o written
    into ``out [B, 1, HV, V]``, the pool ``initial_state [slots, HV, V, K]`` updated in place at
    ``ssm_state_indices [B]``; a negative index is padding: no state read or written, o = 0.
    Returns ``(out, initial_state)``."""
    return packed_decode("sglang.fused_recurrent_gated_delta_rule_packed_decode", -1, mixed_qkv, a, b, A_log,
                         dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel)


def _parents(op, retrieve_parent_token, N, steps, buf_idx):
    """SGLang's tree parents as gdn takes them, ``[N, steps]``: SGLang reads a parent only for steps
    >= 1 of a sequence whose states are cached (buffer index >= 0) and otherwise continues the
    chain, which is gdn's -1."""
    if retrieve_parent_token.ndim != 2:
        raise ValueError(f"gdn.compat.{op}: retrieve_parent_token has shape {tuple(retrieve_parent_token.shape)}; "
                         "expected [N, T]")
    par = first_rows(op, "retrieve_parent_token", retrieve_parent_token, N)
    if par.shape[1] >= steps:
        par = par[:, :steps]
    else:  # columns past the given ones: tokens past the buffer's steps, stored nowhere
        par = torch.cat([par, par.new_full((N, steps - par.shape[1]), -1)], 1)
    if buf_idx is not None:
        par = torch.where((buf_idx >= 0)[:, None], par, par.new_full((), -1))
    return par.contiguous()
