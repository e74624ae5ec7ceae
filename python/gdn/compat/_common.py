"""What the engine adapters share: argument translation only (gates with a non-default softplus,
index slicing, the packed decode's views). Torch tensors only: the engines call these functions
with torch tensors."""

from __future__ import annotations

import torch

from .._api import decode_

# The softplus of gdn's fused gate: softplus(x) = x above 20 (SPEC section 1). The engines pass
# beta = 1 and threshold = 20; any other pair is computed here, in fp32, and gdn gets plain g / beta.
FUSED_SOFTPLUS = (1.0, 20.0)


def check_scale(op, scale, K):
    """The engines' scale rule: None is K ** -0.5; a given scale must be positive."""
    if scale is None:
        return K ** -0.5
    if not scale > 0:
        raise ValueError(f"gdn.compat.{op}: scale is {scale}; scale must be positive")
    return float(scale)


def gate_as_v(op, name, x, v):
    """a / b / g / beta as gdn wants them, v's shape without V ([B, T, HV]); the engines pass them
    as [T, HV] or [B, T, HV] and index them by token (a view, no copy)."""
    want = tuple(v.shape[:-1])
    if x.numel() != v.numel() // v.shape[-1]:
        raise ValueError(f"gdn.compat.{op}: {name} has shape {tuple(x.shape)}; expected {want} "
                         f"(or [T, HV] = {want[-2:]} with B = 1)")
    return x.reshape(want)


def softplus_gate(a, A_log, dt_bias, softplus_beta, threshold):
    """g = -exp(A_log) * softplus_beta,threshold(a + dt_bias) in fp32, the engines' formula:
    (1 / beta) log(1 + exp(beta x)) where beta x <= threshold, else x."""
    x = a.float() + (0.0 if dt_bias is None else dt_bias.float())
    bx = softplus_beta * x
    sp = torch.where(bx <= threshold, torch.log1p(torch.exp(bx)) / softplus_beta, x)
    return -torch.exp(A_log.float()) * sp


def gates(a, b, A_log, dt_bias, softplus_beta, threshold):
    """(g, beta, A_log, dt_bias) for gdn: the fused gate when the softplus is gdn's, else plain
    fp32 g and beta = sigmoid(b)."""
    if (float(softplus_beta), float(threshold)) == FUSED_SOFTPLUS:
        return a, b, A_log, dt_bias
    g = softplus_gate(a, A_log, dt_bias, float(softplus_beta), float(threshold))
    return g, torch.sigmoid(b.float()), None, None


def num_seqs(q, cu_seqlens):
    return int(q.shape[0]) if cu_seqlens is None else int(cu_seqlens.shape[0]) - 1


def first_rows(op, name, idx, N):
    """The engines read row n < N of an index array that may be longer (CUDA-graph padding): the
    first N rows, contiguous (a few ints)."""
    if idx.shape[0] < N:
        raise ValueError(f"gdn.compat.{op}: {name} has {int(idx.shape[0])} rows; expected at least N = {N}")
    return idx[:N].contiguous()


def packed_decode(op, padding_le, mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
                  use_qk_l2norm_in_kernel):
    """``fused_recurrent_gated_delta_rule_packed_decode`` (vLLM's and SGLang's, one token per
    sequence): q, k, v are views of ``mixed_qkv [B, 2 H K + HV V]`` (no copy), o goes to ``out
    [B, 1, HV, V]``, the pool ``[slots, HV, V, K]`` is updated in place at ``ssm_state_indices
    [B]``. A sequence whose index is ``<= padding_le`` (vLLM: 0, NULL_BLOCK_ID; SGLang: -1) reads
    and writes no state and gets o = 0. beta = sigmoid(b) rounded to b's dtype, as both kernels do."""
    if mixed_qkv.ndim != 2 or a.ndim != 2 or b.ndim != 2 or ssm_state_indices.ndim != 1 \
            or initial_state.ndim != 4:
        raise ValueError(f"gdn.compat.{op}: expected mixed_qkv [B, qkv_dim], a / b [B, HV], ssm_state_indices [B] and "
                         f"initial_state [slots, HV, V, K]; got {tuple(mixed_qkv.shape)}, {tuple(a.shape)}, "
                         f"{tuple(b.shape)}, {tuple(ssm_state_indices.shape)}, {tuple(initial_state.shape)}")
    B = int(mixed_qkv.shape[0])
    HV, V, K = (int(s) for s in initial_state.shape[1:])
    qk = int(mixed_qkv.shape[1]) - HV * V
    if qk <= 0 or qk % (2 * K) != 0:
        raise ValueError(f"gdn.compat.{op}: invalid packed mixed_qkv last dim = {int(mixed_qkv.shape[1])} for "
                         f"HV = {HV}, V = {V}, K = {K}")
    H = qk // (2 * K)
    if tuple(out.shape) != (B, 1, HV, V):
        raise ValueError(f"gdn.compat.{op}: out has shape {tuple(out.shape)}; expected {(B, 1, HV, V)}")
    if int(ssm_state_indices.shape[0]) != B or int(a.shape[0]) != B or int(b.shape[0]) != B:
        raise ValueError(f"gdn.compat.{op}: a, b and ssm_state_indices must have B = {B} rows")
    q = mixed_qkv[:, : H * K].view(B, 1, H, K)
    k = mixed_qkv[:, H * K: 2 * H * K].view(B, 1, H, K)
    v = mixed_qkv[:, 2 * H * K:].view(B, 1, HV, V)
    g, beta = a.view(B, 1, HV), b.view(B, 1, HV)
    if b.dtype != torch.float32:  # the kernels round sigmoid(b) to b's dtype: plain gates, fp32 g
        g, beta = softplus_gate(g, A_log, dt_bias, 1.0, 20.0), torch.sigmoid(beta.float()).to(b.dtype)
        A_log = dt_bias = None
    idx = ssm_state_indices.contiguous()
    decode_(q, k, v, g, beta, initial_state, idx, scale=scale, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            state_v_first=True, A_log=A_log, dt_bias=dt_bias, out=out, null_slot=padding_le if padding_le >= 0 else -1)
    out.masked_fill_((idx <= padding_le).view(B, 1, 1, 1), 0)
    return out, initial_state
