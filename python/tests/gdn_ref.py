"""The definition (SPEC.md section 1) in float64 numpy, token by token, and the input generators
the tests share. Framework-free: torch tensors are converted by the callers."""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np

# bench/cases.txt: the one benchmark case list (the CLI, the CUDA device check, the Python benchmark
# and the tests read it), found relative to the repository root.
CASES_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench",
                          "cases.txt")


class BenchCase(NamedTuple):
    name: str
    set: str  # "spec" (SPEC section 6's table), "tp" (tensor-parallel slices), "exact", "model"
    H: int  # q/k heads
    HV: int  # value heads
    gates: str  # "normal": logsigmoid(randn); "zero": g = 0 exactly; "model": model_gate_params
    lengths: list  # sequence lengths


def parse_lengths(text: str) -> list:
    """'4x8192' -> [8192] * 4; '256,4096,512' -> [256, 4096, 512] (items may mix both forms)."""
    out = []
    try:
        for item in text.split(","):
            count, sep, length = item.partition("x")
            out += [int(length)] * int(count) if sep else [int(item)]
    except ValueError:
        out = []
    if not out or any(n < 0 for n in out):
        raise ValueError(f"lengths {text!r}: expected comma-separated lengths >= 0 or AxB")
    return out


def load_cases(path: str = CASES_FILE) -> dict:
    """name -> BenchCase, in the file's order. A malformed line is an error naming the file and line."""
    cases = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            try:
                if len(fields) != 6:
                    raise ValueError(f"{len(fields)} fields; expected name set H HV gates lengths")
                name, set_, h, hv, gates, lengths = fields
                if gates not in ("normal", "zero", "model"):
                    raise ValueError(f"gates {gates!r}; expected normal, zero or model")
                if name in cases:
                    raise ValueError(f"case {name!r} appears twice")
                case = BenchCase(name, set_, int(h), int(hv), gates, parse_lengths(lengths))
                if case.H < 1 or case.HV % case.H != 0:
                    raise ValueError(f"H = {case.H}, HV = {case.HV}; expected HV a multiple of H >= 1")
            except ValueError as e:
                raise ValueError(f"{path}:{lineno}: {e}") from None
            cases[name] = case
    return cases


BENCH_CASES = load_cases()


def model_gate_params(hv: int):
    """The "model" gates' per-head (A, dt_bias), hv value heads: g = -A softplus(x + dt_bias) for a
    token's random draw x. Qwen3-Next's gate with its initialization's ranges (A ~ U(0, 16), dt ~
    logU(1e-3, 0.1), dt_bias = softplus^-1(dt)), spread deterministically over the heads: the same
    formula as tools/model_gate.h's model_gate (the CLI, the CUDA check, the C++ tests' GateKind::kModel)."""
    A, bias = [], []
    for h in range(hv):
        hx = h + 0.5
        dt = 1e-3 * 100.0 ** math.fmod(hx * 0.6180339887498949, 1.0)
        A.append(16.0 * hx / hv)
        bias.append(dt + math.log(-math.expm1(-dt)))
    return A, bias


def torch_case_gates(gates: str, x):
    """A case's gates g [..., HV] from the draws x [..., HV] (a torch tensor): "normal" logsigmoid(x),
    "zero" 0, "model" -A softplus(x + dt_bias) per head (model_gate_params)."""
    import torch
    import torch.nn.functional as F

    if gates == "zero":
        return torch.zeros_like(x)
    if gates == "model":
        A, bias = (torch.tensor(p, device=x.device, dtype=x.dtype) for p in model_gate_params(x.shape[-1]))
        return -A * F.softplus(x + bias)
    return F.logsigmoid(x)

# SPEC section 6 prefill cases: name -> sequence lengths (the benchmark and the fla tests).
SPEC_PREFILL_CASES = {c.name: c.lengths for c in BENCH_CASES.values() if c.set == "spec"}


def spec_mixed_lengths():
    """SPEC section 6 "mixed": 15 lengths from 256 to 4096 plus a remainder, 32768 tokens in all."""
    return list(BENCH_CASES["mixed"].lengths)


def l2norm(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + 1e-6)


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def fused_gates(a, b, A_log, dt_bias):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    g = -np.exp(np.asarray(A_log, np.float64)) * softplus(a + np.asarray(dt_bias, np.float64))
    return g, sigmoid(b)


def recurrence(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None, use_qk_l2norm=False,
               state_v_first=False, state_indices=None, token_states=False):
    """q, k: [T, H, K] (packed) or [B, T, H, K]; v: [.., HV, V]; g, beta: [.., HV].
    initial_state: [N, HV, K, V] (or [.., V, K] with state_v_first), or a pool with state_indices
    (negative: zeros). Returns (o [like v], final [N, HV, K, V] in the same layout) in float64;
    final rows of sequences with a negative index are zeros (not written). token_states=True: also
    the state after every token, [T_total, HV, K, V] in the same layout (a third value)."""
    q = np.asarray(q, np.float64)
    shape_o = np.shape(v)
    if q.ndim == 4:
        B, Tb = q.shape[:2]
        flat = lambda x: np.asarray(x, np.float64).reshape((B * Tb,) + np.shape(x)[2:])  # noqa: E731
        q, k, v, g, beta = (flat(x) for x in (q, k, v, g, beta))
        if cu_seqlens is None:
            cu_seqlens = np.arange(B + 1) * Tb
    else:
        k, v, g, beta = (np.asarray(x, np.float64) for x in (k, v, g, beta))
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    if cu_seqlens is None:
        cu_seqlens = np.array([0, T])
    cu = np.asarray(cu_seqlens, np.int64)
    N = len(cu) - 1
    if scale is None:
        scale = K ** -0.5
    if use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    rep = HV // H
    qh = np.repeat(q, rep, axis=1)  # [T, HV, K]
    kh = np.repeat(k, rep, axis=1)
    o = np.zeros((T, HV, V))
    final = np.zeros((N, HV, K, V))
    per_token = np.zeros((T, HV, K, V)) if token_states else None  # (T x 128 KiB per head: only when asked)
    for n in range(N):
        S = np.zeros((HV, K, V))
        if initial_state is not None:
            row = n if state_indices is None else int(state_indices[n])
            if row >= 0:
                S = np.asarray(initial_state[row], np.float64)
                if state_v_first:
                    S = S.transpose(0, 2, 1)
                S = S.copy()
        for t in range(cu[n], cu[n + 1]):
            S *= np.exp(g[t])[:, None, None]
            kv = np.einsum("hkv,hk->hv", S, kh[t])
            vn = beta[t][:, None] * (v[t] - kv)
            S += kh[t][:, :, None] * vn[:, None, :]
            o[t] = scale * np.einsum("hkv,hk->hv", S, qh[t])
            if token_states:
                per_token[t] = S
        final[n] = S
    if state_v_first:
        final = final.transpose(0, 1, 3, 2)
        if token_states:
            per_token = per_token.transpose(0, 1, 3, 2)
    if token_states:
        return o.reshape(shape_o), final, per_token
    return o.reshape(shape_o), final


def rel_err(out, ref):
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    assert np.isfinite(out).all(), "output holds NaN or Inf"
    den = np.linalg.norm(ref.ravel())
    return float(np.linalg.norm((out - ref).ravel()) / (den if den > 0 else 1.0))


def make_inputs(rng, lead, H, HV, K, V, dtype=np.float32, gate_dtype=np.float32, gate_scale=1.0, g_mode="normal",
                beta_mode="normal"):
    """Fresh random inputs (SPEC section 4): l2-normed keys, g = gate_scale * logsigmoid(randn),
    beta = sigmoid(randn). lead: the leading shape, e.g. (B, T) or (T,)."""
    lead = tuple(lead)
    q = rng.standard_normal(lead + (H, K))
    k = l2norm(rng.standard_normal(lead + (H, K)))
    v = rng.standard_normal(lead + (HV, V))
    g = gate_scale * -np.logaddexp(0.0, -rng.standard_normal(lead + (HV,)))
    if g_mode == "zero":
        g = np.zeros_like(g)
    elif g_mode == "very_negative":
        g = np.full_like(g, -1e4)
    elif g_mode == "mixed_very_negative":  # -1e4 at random positions among ordinary gates
        g = np.where(rng.random(g.shape) < 0.3, -1e4, g)
    beta = sigmoid(rng.standard_normal(lead + (HV,)))
    if beta_mode == "extremes":
        beta = np.where(rng.random(beta.shape) < 0.5, 0.0, 2.0)
    return (q.astype(dtype), k.astype(dtype), v.astype(dtype), g.astype(gate_dtype), beta.astype(gate_dtype))


def ragged_cu_seqlens(rng, num_seqs, max_len, with_empty=True):
    lens = rng.integers(1, max_len + 1, size=num_seqs)
    if with_empty and num_seqs > 2:
        lens[rng.integers(0, num_seqs)] = 0
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def _boundaries(B, Tb, cu_seqlens_cpu):
    """The sequences' token boundaries: cu_seqlens_cpu, or B sequences of Tb tokens each."""
    return [i * Tb for i in range(B + 1)] if cu_seqlens_cpu is None else [int(x) for x in cu_seqlens_cpu]


def _torch_packed_inputs(q, k, v, g, beta, scale, cu_seqlens_cpu, use_qk_l2norm):
    """What both torch references start from: the boundaries, the inputs flattened to packed
    tokens in float64 (q, k normalized when asked) and the scale."""
    import torch

    B, Tb, _, K = q.shape
    cu = _boundaries(B, Tb, cu_seqlens_cpu)
    flat = lambda x: x.reshape((B * Tb,) + tuple(x.shape[2:])).double()  # noqa: E731
    qf, kf, vf, gf, bf = (flat(x) for x in (q, k, v, g, beta))
    if use_qk_l2norm:
        qf = qf / torch.sqrt((qf * qf).sum(-1, keepdim=True) + 1e-6)
        kf = kf / torch.sqrt((kf * kf).sum(-1, keepdim=True) + 1e-6)
    return cu, qf, kf, vf, gf, bf, (K ** -0.5 if scale is None else scale)


def torch_recurrence(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens_cpu=None, use_qk_l2norm=False,
                     state_v_first=False, state_indices=None):
    """The same definition in float64 with torch, on the inputs' device (fast on a GPU): all
    sequences step together, padded with g = 0 and beta = 0 (which leave a state unchanged).
    q, k: [B, T, H, K]; cu_seqlens_cpu: host boundaries (then B == 1). Returns (o like v, final
    [N, HV, K, V] or [N, HV, V, K]) in float64; negative state_indices start from zeros."""
    import torch

    B, Tb, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    dev = q.device
    cu, qf, kf, vf, gf, bf, scale = _torch_packed_inputs(q, k, v, g, beta, scale, cu_seqlens_cpu, use_qk_l2norm)
    N = len(cu) - 1
    lens = [cu[n + 1] - cu[n] for n in range(N)]
    L = max(max(lens), 1)
    starts = torch.tensor(cu[:-1], device=dev)
    ar = torch.arange(L, device=dev)
    valid = ar[None, :] < torch.tensor(lens, device=dev)[:, None]  # [N, L]
    pos = (starts[:, None] + ar[None, :]).clamp(max=max(B * Tb - 1, 0))
    rep = HV // H
    Q = qf[pos].repeat_interleave(rep, dim=2)  # [N, L, HV, K]
    Kk = kf[pos].repeat_interleave(rep, dim=2)
    Vv = vf[pos]
    G = torch.where(valid[..., None], gf[pos], torch.zeros((), dtype=torch.float64, device=dev))
    Bt = torch.where(valid[..., None], bf[pos], torch.zeros((), dtype=torch.float64, device=dev))
    S = torch.zeros((N, HV, K, V), dtype=torch.float64, device=dev)
    if initial_state is not None:
        if state_indices is None:
            h0 = initial_state[:N].double()
        else:  # gather the rows first (a pool can be large), then widen
            idx = state_indices.to(dev).long()
            h0 = initial_state[idx.clamp(min=0)].double()
            h0[idx < 0] = 0.0
        S = (h0.transpose(-1, -2) if state_v_first else h0).contiguous()
    O = torch.empty((N, L, HV, V), dtype=torch.float64, device=dev)
    dg = G.exp()
    for t in range(L):
        S = S * dg[:, t, :, None, None]
        kt = Kk[:, t]
        kv = torch.einsum("nhkv,nhk->nhv", S, kt)
        vn = Bt[:, t, :, None] * (Vv[:, t] - kv)
        S = S + kt[..., :, None] * vn[..., None, :]
        O[:, t] = scale * torch.einsum("nhkv,nhk->nhv", S, Q[:, t])
    o = torch.zeros((B * Tb, HV, V), dtype=torch.float64, device=dev)
    o[pos[valid]] = O[valid]
    final = S.transpose(-1, -2) if state_v_first else S
    return o.reshape(v.shape), final


def torch_rel_err(out, ref):
    import torch

    out = out.double()
    ref = ref.double()
    assert torch.isfinite(out).all(), "output holds NaN or Inf"
    den = torch.linalg.vector_norm(ref)
    return float(torch.linalg.vector_norm(out - ref) / (den if den > 0 else 1.0))


def torch_chunked_reference(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens_cpu=None,
                            use_qk_l2norm=False, chunk=64, max_bytes=8 << 30):
    """The chunked form of the same function (SPEC section 3) in float64 with torch: the same
    result as torch_recurrence up to float64 rounding (tests check that), some 50x fewer kernel
    launches, so that the benchmark can check long sequences quickly. Gates must be moderate
    (exp(G) of a chunk within float64 range: no -1e4 gates). K-major states only.
    All sequences step together, padded to the longest: where that would take more than about
    max_bytes (one long prompt among many short ones: the bench's tail-16k asked for 128 GiB), the
    sequences go in groups of similar lengths, longest first."""
    import torch

    B, Tb, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    cu = _boundaries(B, Tb, cu_seqlens_cpu)
    N = len(cu) - 1
    lens = [cu[n + 1] - cu[n] for n in range(N)]
    per_token = 8 * HV * (2 * K + 2 * V) * 3  # float64 rows of q, k, v, o padded, with temporaries
    padded = lambda ns: len(ns) * max(-(-max(lens[n] for n in ns) // chunk) * chunk, chunk)  # noqa: E731
    if N <= 1 or padded(range(N)) * per_token <= max_bytes:
        return _torch_chunked_reference(q, k, v, g, beta, scale, initial_state, cu_seqlens_cpu, use_qk_l2norm, chunk)
    groups, group = [], []
    for n in sorted(range(N), key=lambda n: -lens[n]):
        if group and padded(group + [n]) * per_token > max_bytes:
            groups.append(group)
            group = []
        group.append(n)
    groups.append(group)
    flat = lambda x: x.reshape((B * Tb,) + tuple(x.shape[2:]))  # noqa: E731
    o = torch.zeros((B * Tb, HV, V), dtype=torch.float64, device=q.device)
    S = torch.empty((N, HV, K, V), dtype=torch.float64, device=q.device)
    for group in groups:
        sel = torch.tensor(group, device=q.device)
        if sum(lens[n] for n in group) == 0:  # (empty sequences only: their states pass through)
            S[sel] = 0.0 if initial_state is None else initial_state[sel].double()
            continue
        rows = torch.cat([torch.arange(cu[n], cu[n + 1], device=q.device) for n in group])
        sub_cu = [0]
        for n in group:
            sub_cu.append(sub_cu[-1] + lens[n])
        og, sg = _torch_chunked_reference(*(flat(x)[rows][None] for x in (q, k, v, g, beta)), scale,
                                          None if initial_state is None else initial_state[sel], sub_cu,
                                          use_qk_l2norm, chunk)
        o[rows] = og.reshape(-1, HV, V)
        S[sel] = sg
    return o.reshape(v.shape), S


def _torch_chunked_reference(q, k, v, g, beta, scale, initial_state, cu_seqlens_cpu, use_qk_l2norm, chunk):
    import torch

    B, Tb, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    dev = q.device
    cu, qf, kf, vf, gf, bf, scale = _torch_packed_inputs(q, k, v, g, beta, scale, cu_seqlens_cpu, use_qk_l2norm)
    N = len(cu) - 1
    lens = [cu[n + 1] - cu[n] for n in range(N)]
    C = chunk
    L = max(-(-max(lens) // C) * C, C)
    ar = torch.arange(L, device=dev)
    valid = ar[None, :] < torch.tensor(lens, device=dev)[:, None]
    pos = (torch.tensor(cu[:-1], device=dev)[:, None] + ar[None, :]).clamp(max=max(B * Tb - 1, 0))
    rep = HV // H
    zero = torch.zeros((), dtype=torch.float64, device=dev)
    # [N, HV, L, D] head-major for batched matrix products; padding: k = q = v = 0, g = 0, beta = 0
    Q = torch.where(valid[..., None, None], qf[pos], zero).repeat_interleave(rep, dim=2).transpose(1, 2)
    Kk = torch.where(valid[..., None, None], kf[pos], zero).repeat_interleave(rep, dim=2).transpose(1, 2)
    Vv = torch.where(valid[..., None, None], vf[pos], zero).transpose(1, 2)
    G_all = torch.where(valid[..., None], gf[pos], zero).transpose(1, 2)  # [N, HV, L]
    Bt = torch.where(valid[..., None], bf[pos], zero).transpose(1, 2)
    S = torch.zeros((N, HV, K, V), dtype=torch.float64, device=dev)
    if initial_state is not None:
        S = initial_state[:N].double().clone()
    O = torch.empty((N, HV, L, V), dtype=torch.float64, device=dev)
    strict = torch.ones(C, C, dtype=torch.bool, device=dev).tril(-1)
    causal = torch.ones(C, C, dtype=torch.bool, device=dev).tril(0)
    eye = torch.eye(C, dtype=torch.float64, device=dev)
    ninf = torch.tensor(float("-inf"), dtype=torch.float64, device=dev)
    for c0 in range(0, L, C):
        sl = slice(c0, c0 + C)
        qc, kc, vc, bc = Q[:, :, sl], Kk[:, :, sl], Vv[:, :, sl], Bt[:, :, sl]
        G = G_all[:, :, sl].cumsum(-1)
        diff = G[..., :, None] - G[..., None, :]
        Lm = bc[..., None] * (kc @ kc.transpose(-1, -2)) * torch.exp(torch.where(strict, diff, ninf))
        A = torch.linalg.solve_triangular(eye + Lm, eye.expand_as(Lm), upper=False, unitriangular=True)
        w = A @ ((bc * G.exp())[..., None] * kc)
        u = A @ (bc[..., None] * vc)
        v_new = u - w @ S
        att = (qc @ kc.transpose(-1, -2)) * torch.exp(torch.where(causal, diff, ninf))
        O[:, :, sl] = scale * (G.exp()[..., None] * (qc @ S) + att @ v_new)
        G_last = G[..., -1:]
        S = G_last.exp()[..., None] * S + (kc * torch.exp(G_last - G)[..., None]).transpose(-1, -2) @ v_new
    o = torch.zeros((B * Tb, HV, V), dtype=torch.float64, device=dev)
    o[pos[valid]] = O.transpose(1, 2)[valid]
    return o.reshape(v.shape), S


def nan_like(shape, dtype):
    """An output buffer filled with NaN: every element the call must write stays visible."""
    return np.full(shape, np.nan, dtype=dtype)
