"""The float64 models of the engines' GDN kernels and the helpers of test_compat*.py (token by
token, V-major states, each engine's index and padding rules as its Triton kernel has them)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

F32_TOL = 1e-4
BF16_TOL = 5e-3
CHUNK_F32_TOL = {"cpu": F32_TOL, "cuda": 2e-3}  # SPEC section 4: tf32 where tensor cores run
H, HV, K, V = 2, 4, 64, 128  # K != V (a transposed layout shows); sizes the CUDA backend takes
NAN = float("nan")

# ---------------------------------------------------------------------------------------------
# The float64 models.

def _step(S, q, k, v, g, beta, scale, l2):
    """One token on a V-major state S [HV, V, K] (float64); q, k [H, K], v [HV, V], g, beta [HV]."""
    rep = S.shape[0] // q.shape[0]
    q, k = q.repeat_interleave(rep, 0), k.repeat_interleave(rep, 0)
    if l2:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    S = S * torch.exp(g)[:, None, None]
    u = (v - torch.einsum("hvk,hk->hv", S, k)) * beta[:, None]
    S = S + u[:, :, None] * k[:, None, :]
    return S, torch.einsum("hvk,hk->hv", S, q * scale)


def _gate_model(a, b, A_log, dt_bias, sp_beta=1.0, threshold=20.0):
    x = a.double() + dt_bias.double()
    sp = torch.where(sp_beta * x <= threshold, torch.log1p(torch.exp(sp_beta * x)) / sp_beta, x)
    return -torch.exp(A_log.double()) * sp, torch.sigmoid(b.double())


def _bounds(n, cu, T):
    return (int(cu[n]), int(cu[n + 1])) if cu is not None else (n * T, n * T + T)


def _flat(x):
    return x.double().reshape(-1, *x.shape[-2:]) if x.ndim >= 3 else x.double().reshape(-1, x.shape[-1])


def vllm_recurrent_model(q, k, v, g, beta, scale, state, inplace, cu, idx, nat, l2):
    """vLLM's fused recurrent / sigmoid-gating kernel: o (NaN where unwritten) and the state array
    after the call (the pool in place, or the per-token [B*T, ...] array, NaN where unwritten)."""
    B, T = q.shape[:2]
    N = B if cu is None else len(cu) - 1
    qf, kf, vf, gf, bf = _flat(q), _flat(k), _flat(v), g.double().reshape(-1, v.shape[-2]), \
        beta.double().reshape(-1, v.shape[-2])
    o = torch.full(vf.shape, NAN, dtype=torch.float64)
    ht = state.double().clone() if inplace else torch.full((B * T,) + tuple(state.shape[1:]), NAN, dtype=torch.float64)
    flat_idx = None if idx is None else idx.reshape(-1)
    stride_seq = None if idx is None else (1 if idx.ndim == 1 else idx.shape[1])
    for n in range(N):
        bos, eos = _bounds(n, cu, T)
        if eos == bos:
            continue
        if idx is not None:
            i_t = int(nat[n]) - 1 if nat is not None else 0
            s = int(flat_idx[n * stride_seq + i_t])
            if s <= 0:
                continue
            S = state[s].double()
        else:
            S = state[bos].double()
        for t in range(eos - bos):
            S, o[bos + t] = _step(S, qf[bos + t], kf[bos + t], vf[bos + t], gf[bos + t], bf[bos + t], scale, l2)
            if inplace:
                w = int(flat_idx[n * stride_seq + t])
                if w > 0:
                    ht[w] = S
            else:
                ht[bos + t] = S
    return o.reshape(v.shape), ht


def sglang_decode_model(q, k, v, g, beta, scale, pool, idx, cu, l2, disable, buf, buf_idx, parents=None):
    """SGLang's fused sigmoid-gating recurrent kernel: o, the pool and the buffer after the call.
    With parents (EAGLE trees) and a buffer row, token t >= 1 starts from the buffered state of
    token parents[n, t]."""
    B, T = q.shape[:2]
    N = B if cu is None else len(cu) - 1
    qf, kf, vf = _flat(q), _flat(k), _flat(v)
    gf, bf = g.double().reshape(-1, v.shape[-2]), beta.double().reshape(-1, v.shape[-2])
    o = torch.full(vf.shape, NAN, dtype=torch.float64)
    pool_after = pool.double().clone()
    buf_after = None if buf is None else buf.double().clone()
    for n in range(N):
        bos, eos = _bounds(n, cu, T)
        i = int(idx[n])
        S = pool[i].double() if i >= 0 else torch.zeros(pool.shape[1:], dtype=torch.float64)
        c = int(buf_idx[n]) if buf is not None else -1
        for t in range(eos - bos):
            if parents is not None and t > 0 and c >= 0:
                S = buf_after[c, int(parents[n, t])]
            S, o[bos + t] = _step(S, qf[bos + t], kf[bos + t], vf[bos + t], gf[bos + t], bf[bos + t], scale, l2)
            if c >= 0:
                buf_after[c, t] = S
        if not disable and i >= 0:
            pool_after[i] = S
    return o.reshape(v.shape), pool_after, buf_after


def chunk_model(q, k, v, g, beta, scale, state, idx, cu, l2):
    """The chunked prefill, token by token: o, the final states [N, ...] and the state at the start
    of every chunk of 64 (chunks numbered over the batch). idx: pool rows (negative: zeros), or None
    for a dense [N, ...] state, or state None."""
    B, T = q.shape[:2]
    N = B if cu is None else len(cu) - 1
    qf, kf, vf = _flat(q), _flat(k), _flat(v)
    gf, bf = g.double().reshape(-1, v.shape[-2]), beta.double().reshape(-1, v.shape[-2])
    o = torch.full(vf.shape, NAN, dtype=torch.float64)
    shape = (HV, V, K)
    finals, hs = [], []
    for n in range(N):
        bos, eos = _bounds(n, cu, T)
        if state is None or (idx is not None and int(idx[n]) < 0):
            S = torch.zeros(shape, dtype=torch.float64)
        else:
            S = state[int(idx[n]) if idx is not None else n].double()
        for t in range(eos - bos):
            if t % 64 == 0:
                hs.append(S)
            S, o[bos + t] = _step(S, qf[bos + t], kf[bos + t], vf[bos + t], gf[bos + t], bf[bos + t], scale, l2)
        finals.append(S)
    h = torch.stack(hs) if hs else torch.zeros((0,) + shape, dtype=torch.float64)
    return o.reshape(v.shape), torch.stack(finals), h


# ---------------------------------------------------------------------------------------------
# Helpers. Tests build their inputs on the CPU, call the adapters on `device` (copies, for CUDA) and
# compare on the CPU.

def _cuda() -> bool:
    import gdn

    return gdn.cuda_available()


# The devices the adapters run on (the models run on the CPU in float64): parametrize("device", DEVICES).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not _cuda(), reason="no CUDA device "
                                                                "(gdn.cuda_available() is False)"))]


def on(device, *xs):
    """The tensors on `device` (the same objects on the CPU; None stays None)."""
    ys = tuple(None if x is None else x.to(device) for x in xs)
    return ys[0] if len(ys) == 1 else ys


def rel(out, ref):
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all(), "output holds NaN or Inf"
    den = torch.linalg.norm(ref)
    return float(torch.linalg.norm(out - ref) / (den if den > 0 else 1.0))


def _gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2 ** 31)))


def inputs(gen, lead, dtype=torch.float32):
    """Fresh inputs (SPEC section 4): l2-normed keys, raw gate inputs a, b and the plain g, beta."""
    q = torch.randn(lead + (H, K), generator=gen)
    k = torch.nn.functional.normalize(torch.randn(lead + (H, K), generator=gen), dim=-1)
    v = torch.randn(lead + (HV, V), generator=gen)
    a = torch.randn(lead + (HV,), generator=gen)
    b = torch.randn(lead + (HV,), generator=gen)
    g = torch.nn.functional.logsigmoid(torch.randn(lead + (HV,), generator=gen))
    beta = torch.sigmoid(torch.randn(lead + (HV,), generator=gen))
    return q.to(dtype), k.to(dtype), v.to(dtype), a, b, g, beta


def gate_params(gen):
    return torch.randn(HV, generator=gen) * 0.5, torch.randn(HV, generator=gen)  # A_log, dt_bias


def ragged(gen, lens):
    """cu_seqlens (int32) for the lengths (0 = a zero-length padding sequence)."""
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)


def pool_of(gen, slots, dtype=torch.float32):
    return torch.randn((slots, HV, V, K), generator=gen).to(dtype)


def check_pool(after, before, ref, written, tol=F32_TOL):
    """Rows in `written` match the model; every other row is bitwise what it was."""
    for s in written:
        assert rel(after[s], ref[s]) <= tol, s
    rest = sorted(set(range(after.shape[0])) - set(written))
    assert torch.equal(after[rest], before[rest])



def _packed(gen, T, dtype=torch.float32):
    """A packed projection mixed_qkv [T, 2 H K + HV V] and q, k, v as views of it."""
    return _packed_views(torch.randn(T, 2 * H * K + HV * V, generator=gen).to(dtype), T)


def _packed_views(mixed, T):
    q, k, v = torch.split(mixed, [H * K, H * K, HV * V], dim=-1)
    assert q.data_ptr() == mixed.data_ptr()
    return mixed, q.view(1, T, H, K), k.view(1, T, H, K), v.view(1, T, HV, V)


def _no_copies(fn):
    """Runs fn under the profiler; fails if an aten copy / contiguous / clone of a tensor of 64 or
    more elements ran (q, k, v and o must go to gdn as the views they are; scalars and index
    arrays may be converted)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        out = fn()
    copies = [(e.name, e.input_shapes) for e in prof.events()
              if e.name in ("aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy")
              and any(isinstance(s, list) and s and torch.Size(s).numel() >= 64 for s in e.input_shapes)]
    assert not copies, copies
    return out
