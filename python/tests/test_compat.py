"""gdn.compat.vllm and gdn.compat.sglang against float64 models of the engines' kernels written
here (token by token, with each engine's index and padding rules: vLLM's NULL_BLOCK_ID = 0, 2-D
slots with num_accepted_tokens padded with 1, zero-length padding sequences; SGLang's negative
indices, intermediate-states buffer, disable_state_update, chunk states h). CPU tensors, ragged
cu_seqlens, V-major pools; pool rows the engine would not write stay bitwise unchanged. Also q / k
/ v as strided views of one packed projection (mixed_qkv) and o into a caller's strided buffer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import gdn  # noqa: E402
from gdn.compat import _common, sglang, vllm  # noqa: E402

F32_TOL = 1e-4
BF16_TOL = 5e-3
H, HV, K, V = 2, 4, 32, 16
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


def sglang_decode_model(q, k, v, g, beta, scale, pool, idx, cu, l2, disable, buf, buf_idx):
    """SGLang's fused sigmoid-gating recurrent kernel: o, the pool and the buffer after the call."""
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
# Helpers.

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


# ---------------------------------------------------------------------------------------------
# vLLM: fused_sigmoid_gating_delta_rule_update / fused_recurrent_gated_delta_rule.

def test_vllm_decode_null_block_padding(rng):
    """Non-spec decode: one token per sequence, 1-D slots; padding rows are zero-length with slot 0
    (NULL_BLOCK_ID), and the index array is longer than N (CUDA-graph padding)."""
    gen = _gen(rng)
    lens = [1, 1, 0, 1, 1, 0, 1]
    N, slots = len(lens), 12
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, a, b, _, _ = inputs(gen, (1, T))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, slots)
    before = pool.clone()
    idx = torch.tensor([3, 7, 0, 11, 5, 0, 1, 0, 0], dtype=torch.int32)  # 2 rows past N
    idx[1] = 0  # a real token whose slot is NULL_BLOCK_ID: skipped entirely, as vLLM does
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp = vllm_recurrent_model(q, k, v, g, beta, K ** -0.5, pool, True, cu, idx[:N], None, True)
    o, state = vllm.fused_sigmoid_gating_delta_rule_update(
        A_log=A_log, a=a[0], b=b[0], dt_bias=dt_bias, q=q, k=k, v=v, initial_state=pool, inplace_final_state=True,
        cu_seqlens=cu, ssm_state_indices=idx, use_qk_l2norm_in_kernel=True)
    assert state is pool and o.shape == v.shape and o.dtype == q.dtype
    live = torch.tensor([int(idx[n]) > 0 for n in range(N) for _ in range(lens[n])])
    assert rel(o[0, live], ro[0, live]) <= F32_TOL
    check_pool(pool, before, rp, [3, 11, 5, 1])


@pytest.mark.parametrize("varlen", [True, False])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_vllm_spec_verify(rng, varlen, index_dtype):
    """Speculative verify: 2-D slots [N, T_max], the state read from column num_accepted - 1 and
    the state after token t written to column t; padding rows all 0 with num_accepted 1 (and
    zero-length when varlen); a row whose read slot is 0 is skipped whole."""
    gen = _gen(rng)
    N, M = 6, 4
    padding = torch.tensor([False, False, True, False, False, True])
    if varlen:
        lens = [0 if padding[n] else int(torch.randint(1, M + 1, (1,), generator=gen)) for n in range(N)]
        cu = ragged(gen, lens)
        lead = (1, int(cu[-1]))
    else:
        lens, cu, lead = [M] * N, None, (N, M)
    q, k, v, a, b, _, _ = inputs(gen, lead)
    A_log, dt_bias = gate_params(gen)
    slots = 1 + N * M + 3
    pool = pool_of(gen, slots)
    before = pool.clone()
    idx = (1 + torch.randperm(slots - 1, generator=gen)[: N * M]).reshape(N, M).to(index_dtype)
    idx[padding] = 0
    nat = torch.randint(1, M + 1, (N,), generator=gen).to(index_dtype)
    nat[padding] = 1
    idx[4, int(nat[4]) - 1] = 0  # the read slot of a real row is NULL_BLOCK_ID: vLLM skips the row
    idx[0, M - 1] = 0            # one token's slot is 0: that token's state is not stored
    idx_padded = torch.cat([idx, torch.zeros(2, M, dtype=index_dtype)])  # rows past N
    nat_padded = torch.cat([nat, torch.ones(2, dtype=index_dtype)])
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp = vllm_recurrent_model(q, k, v, g, beta, K ** -0.5, pool, True, cu, idx, nat, True)
    o, state = vllm.fused_sigmoid_gating_delta_rule_update(
        A_log, a, b, dt_bias, q, k, v, initial_state=pool, inplace_final_state=True, cu_seqlens=cu,
        ssm_state_indices=idx_padded, num_accepted_tokens=nat_padded, use_qk_l2norm_in_kernel=True)
    assert state is pool
    live = torch.isfinite(ro)
    assert rel(o[live], ro[live]) <= F32_TOL
    written = sorted({int(idx[n, t]) for n in range(N) for t in range(lens[n])
                      if int(idx[n, t]) > 0 and int(idx[n, int(nat[n]) - 1]) > 0})
    assert written
    check_pool(pool, before, rp, written)


@pytest.mark.parametrize("indices", ["none", "1d", "2d"])
def test_vllm_not_inplace(rng, indices):
    """inplace_final_state=False: the state after every token in a new [T, HV, V, K] array (row
    bos + t); the pool read at the slots (or at row bos without indices) and left untouched."""
    gen = _gen(rng)
    lens = [2, 0, 3, 1]
    N, M = len(lens), 3
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, _, _, g, beta = inputs(gen, (1, T))
    pool = pool_of(gen, 16)
    before = pool.clone()
    idx = nat = None
    if indices == "1d":
        idx = torch.tensor([4, 0, 9, 2])
    elif indices == "2d":
        idx = torch.tensor([[3, 5, 6], [0, 0, 0], [7, 8, 10], [11, 12, 13]])
        nat = torch.tensor([2, 1, 1, 3])
    ro, rt = vllm_recurrent_model(q, k, v, g, beta, 0.3, pool, False, cu, idx, nat, False)
    o, final = vllm.fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=0.3, initial_state=pool,
                                                     inplace_final_state=False, cu_seqlens=cu,
                                                     ssm_state_indices=idx, num_accepted_tokens=nat)
    assert final.shape == (T, HV, V, K) and final.dtype == pool.dtype
    live = torch.isfinite(ro)
    assert rel(o[live], ro[live]) <= F32_TOL
    rows = torch.isfinite(rt.reshape(T, -1)).all(-1)
    assert rows.any() and rel(final[rows], rt[rows]) <= F32_TOL
    assert torch.equal(pool, before)


def test_vllm_fused_recurrent_plain_gates(rng):
    """fused_recurrent_gated_delta_rule: plain g / beta (beta None: ones), a fixed [B, T] batch of
    decode tokens, scale given, no l2norm."""
    gen = _gen(rng)
    N, M = 5, 2
    q, k, v, _, _, g, _ = inputs(gen, (N, M))
    pool = pool_of(gen, 8)
    before = pool.clone()
    idx = torch.tensor([[1, 2], [3, 4], [0, 0], [5, 6], [7, 0]], dtype=torch.int32)
    ro, rp = vllm_recurrent_model(q, k, v, g, torch.ones(N, M, HV), 0.2, pool, True, None, idx, None, False)
    o, _ = vllm.fused_recurrent_gated_delta_rule(q, k, v, g, None, 0.2, pool, True, None, idx)
    live = torch.isfinite(ro)
    assert rel(o[live], ro[live]) <= F32_TOL
    check_pool(pool, before, rp, [1, 2, 3, 4, 5, 6, 7])


def test_vllm_softplus_params_and_bf16(rng):
    """A softplus other than (1, 20) is computed by the adapter; bf16 q / k / v."""
    gen = _gen(rng)
    lens = [1, 3, 2]
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, a, b, _, _ = inputs(gen, (1, T), torch.bfloat16)
    a = a * 4
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 10)
    before = pool.clone()
    idx = torch.tensor([[2, 3, 4], [5, 6, 7], [8, 9, 1]])
    nat = torch.tensor([1, 2, 1])
    g, beta = _gate_model(a, b, A_log, dt_bias, 2.0, 1.5)
    ro, rp = vllm_recurrent_model(q, k, v, g, beta, K ** -0.5, pool, True, cu, idx, nat, True)
    o, _ = vllm.fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v, beta=2.0, threshold=1.5,
                                                       initial_state=pool, cu_seqlens=cu, ssm_state_indices=idx,
                                                       num_accepted_tokens=nat, use_qk_l2norm_in_kernel=True)
    assert o.dtype == torch.bfloat16
    assert rel(o, ro) <= BF16_TOL
    check_pool(pool, before, rp, [2, 5, 6, 7, 8, 9], BF16_TOL)


def test_vllm_chunk(rng):
    """chunk_gated_delta_rule: ragged batch with a zero-length sequence, a dense V-major initial
    state (bf16, read as fp32), fp32 final states, o into core_attn_out (a flat buffer)."""
    gen = _gen(rng)
    lens = [70, 0, 5, 130]
    cu = ragged(gen, lens)
    T, N = int(cu[-1]), len(lens)
    q, k, v, _, _, g, beta = inputs(gen, (1, T))
    h0 = torch.randn((N, HV, V, K), generator=gen).to(torch.bfloat16)
    ro, rf, _ = chunk_model(q, k, v, g, beta, K ** -0.5, h0, None, cu, True)
    buf = torch.full((v.numel() + 37,), NAN)
    o, ht = vllm.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                                        chunk_indices=torch.zeros(1), chunk_offsets=torch.zeros(1),
                                        use_qk_l2norm_in_kernel=True, core_attn_out=buf)
    assert o.data_ptr() == buf.data_ptr() and o.shape == v.shape
    assert torch.isnan(buf[v.numel():]).all()
    assert ht.dtype == torch.float32 and ht.shape == (N, HV, V, K)
    assert rel(o, ro) <= F32_TOL and rel(ht, rf) <= F32_TOL
    o2, none = vllm.chunk_gated_delta_rule(q, k, v, g, beta, 0.5, None, False, cu)
    ro2, _, _ = chunk_model(q, k, v, g, beta, 0.5, None, None, cu, False)
    assert none is None and rel(o2, ro2) <= F32_TOL
    with pytest.raises(DeprecationWarning, match="head_first is deprecated"):
        vllm.chunk_gated_delta_rule(q, k, v, g, beta, head_first=True)


def test_vllm_bad_arguments(rng):
    gen = _gen(rng)
    q, k, v, a, b, g, beta = inputs(gen, (2, 1))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 4)
    idx = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="initial_state .* is required"):
        vllm.fused_recurrent_gated_delta_rule(q, k, v, g, beta, ssm_state_indices=idx)
    with pytest.raises(ValueError, match="inplace_final_state=True needs ssm_state_indices"):
        vllm.fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=pool)
    with pytest.raises(ValueError, match="num_accepted_tokens needs 2-D ssm_state_indices"):
        vllm.fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=pool, ssm_state_indices=idx,
                                              num_accepted_tokens=torch.ones(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="scale must be positive"):
        vllm.fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=-1.0, initial_state=pool, ssm_state_indices=idx)
    with pytest.raises(ValueError, match="ssm_state_indices has 1 rows; expected at least N = 2"):
        vllm.fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=pool, ssm_state_indices=idx[:1])
    with pytest.raises(NotImplementedError, match="beta per value"):
        vllm.fused_recurrent_gated_delta_rule(q, k, v, g, torch.ones(v.shape), initial_state=pool,
                                              ssm_state_indices=idx)
    with pytest.raises(NotImplementedError, match="is_kda"):
        vllm.fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v, initial_state=pool,
                                                    ssm_state_indices=idx, is_kda=True)
    with pytest.raises(ValueError, match=r"num_accepted\[1\] is 3; expected in \[1, max_tokens = 1\]"):
        vllm.fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v, initial_state=pool,
                                                    ssm_state_indices=torch.tensor([[1], [2]]),
                                                    num_accepted_tokens=torch.tensor([1, 3]))


# ---------------------------------------------------------------------------------------------
# SGLang: chunk_gated_delta_rule (extend) / fused_sigmoid_gating_delta_rule_update (decode, verify).

@pytest.mark.parametrize("inplace_update", [True, False])
@pytest.mark.parametrize("output_h", [True, False])
def test_sglang_chunk(rng, inplace_update, output_h):
    """Extend on the pool in place: ragged lengths across chunk boundaries, a zero-length sequence,
    a negative (padding) index; o, the pool rows, and h (the state at each chunk's start)."""
    gen = _gen(rng)
    lens = [70, 0, 5, 130, 64]
    cu = ragged(gen, lens).long()
    T, N = int(cu[-1]), len(lens)
    q, k, v, _, _, g, beta = inputs(gen, (1, T), torch.bfloat16)
    pool = pool_of(gen, 9)
    before = pool.clone()
    idx = torch.tensor([6, 2, -1, 0, 4], dtype=torch.int32)
    ro, rf, rh = chunk_model(q, k, v, g, beta, K ** -0.5, pool, idx, cu, True)
    o, none, h = sglang.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, initial_state_indices=idx,
                                               cu_seqlens=cu, head_first=False, use_qk_l2norm_in_kernel=True,
                                               inplace_update=inplace_update, output_h=output_h)
    assert none is None and o.dtype == q.dtype and o.shape == v.shape
    assert rel(o, ro) <= BF16_TOL
    if output_h:
        NT = sum((n + 63) // 64 for n in lens)
        assert h.shape == (1, NT, HV, V, K) and h.dtype == k.dtype
        assert rel(h[0], rh) <= BF16_TOL
    else:
        assert h is None
    ref = before.double().clone()
    written = []
    if inplace_update:
        for n in range(N):
            if int(idx[n]) >= 0:
                ref[int(idx[n])] = rf[n]
                written.append(int(idx[n]))
    check_pool(pool, before, ref, written, BF16_TOL)


def test_sglang_chunk_fixed_batch(rng):
    """A fixed [B, T] batch (no cu_seqlens): h is [B, ceil(T / 64), ...]."""
    gen = _gen(rng)
    B, T = 2, 100
    q, k, v, _, _, g, beta = inputs(gen, (B, T))
    pool = pool_of(gen, 3)
    before = pool.clone()
    idx = torch.tensor([2, 0])
    ro, rf, rh = chunk_model(q, k, v, g, beta, 0.25, pool, idx, None, False)
    o, _, h = sglang.chunk_gated_delta_rule(q, k, v, g, beta, 0.25, pool, idx)
    assert h.shape == (B, 2, HV, V, K)
    assert rel(o, ro) <= F32_TOL and rel(h.reshape(-1, HV, V, K), rh) <= F32_TOL
    ref = before.double().clone()
    ref[2], ref[0] = rf[0], rf[1]
    check_pool(pool, before, ref, [0, 2])


def test_sglang_decode(rng):
    """Decode: one token per sequence, -1 padding (zero state in, nothing written, o computed);
    q / k / v strided views of the projection as SGLang passes them."""
    gen = _gen(rng)
    N, slots = 6, 10
    cu = torch.arange(N + 1, dtype=torch.int32)
    q, k, v, a, b, _, _ = inputs(gen, (1, N))
    mixed = torch.cat([q.reshape(N, -1), k.reshape(N, -1), v.reshape(N, -1)], -1)
    qv, kv, vv = (x.view(1, N, -1, d) for x, d in zip(torch.split(mixed, [H * K, H * K, HV * V], -1), (K, K, V)))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, slots)
    before = pool.clone()
    idx = torch.tensor([4, -1, 9, 0, -1, 2], dtype=torch.int64)
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp, _ = sglang_decode_model(q, k, v, g, beta, K ** -0.5, pool, idx, cu, True, False, None, None)
    o = sglang.fused_sigmoid_gating_delta_rule_update(A_log, a[0], dt_bias, 1.0, 20.0, qv, kv, vv, b[0], pool, idx,
                                                      use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
    assert o.shape == v.shape
    assert rel(o, ro) <= F32_TOL
    check_pool(pool, before, rp, [4, 9, 0, 2])


@pytest.mark.parametrize("disable_state_update", [True, False])
@pytest.mark.parametrize("buffer_indices", [True, False])
def test_sglang_target_verify(rng, disable_state_update, buffer_indices):
    """target_verify: ragged drafts (a zero-length padding sequence), the state after every token into
    the intermediate-states buffer [S, steps, HV, V, K] at the sequence's buffer row (-1: none), the
    pool left bitwise unchanged with disable_state_update; a softplus other than (1, 20)."""
    gen = _gen(rng)
    lens = [3, 1, 0, 4, 2]
    N, steps = len(lens), 4
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, a, b, _, _ = inputs(gen, (1, T))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 8)
    before = pool.clone()
    idx = torch.tensor([5, 1, -1, 7, 3], dtype=torch.int32)
    S = N + 2
    buf = torch.full((S, steps, HV, V, K), NAN)
    buf_before = buf.clone()
    bidx = torch.tensor([2, 6, -1, 0, -1], dtype=torch.int32) if buffer_indices else None
    g, beta = _gate_model(a, b, A_log, dt_bias, 1.5, 10.0)
    ro, rp, rb = sglang_decode_model(q, k, v, g, beta, 0.3, pool, idx, cu, False, disable_state_update, buf,
                                     bidx if buffer_indices else torch.arange(N))
    o = sglang.fused_sigmoid_gating_delta_rule_update(
        A_log, a, dt_bias, 1.5, 10.0, q, k, v, b, pool, idx, scale=0.3, cu_seqlens=cu,
        disable_state_update=disable_state_update, intermediate_states_buffer=buf, intermediate_state_indices=bidx,
        cache_steps=steps)
    assert rel(o, ro) <= F32_TOL
    stored = torch.isfinite(rb.reshape(S * steps, -1)).all(-1)
    assert stored.any() and rel(buf.reshape(S * steps, -1)[stored], rb.reshape(S * steps, -1)[stored]) <= F32_TOL
    assert torch.isnan(buf.reshape(S * steps, -1)[~stored]).all() and torch.isnan(buf_before).all()
    written = [] if disable_state_update else [5, 1, 7, 3]
    check_pool(pool, before, rp, written)


def test_sglang_bad_arguments(rng):
    gen = _gen(rng)
    q, k, v, a, b, g, beta = inputs(gen, (1, 3))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 4)
    idx = torch.tensor([1])
    with pytest.raises(NotImplementedError, match="retrieve_parent_token .* not a gdn feature"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, idx,
                                                      retrieve_parent_token=torch.zeros(1, 3, dtype=torch.int64))
    with pytest.raises(NotImplementedError, match="is_kda"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, idx, is_kda=True)
    with pytest.raises(ValueError, match="initial_state_indices .* is required"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, None)
    with pytest.raises(ValueError, match="number of initial states is expected to be equal"):
        sglang.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, initial_state_indices=torch.tensor([1, 2]),
                                      cu_seqlens=torch.tensor([0, 3]))
    with pytest.raises(DeprecationWarning, match="head_first is deprecated"):
        sglang.chunk_gated_delta_rule(q, k, v, g, beta, head_first=True)


# ---------------------------------------------------------------------------------------------
# 16-bit pools: updated in place where gdn has them; a clear NotImplementedError where it has not.

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_pools(rng, dtype):
    gen = _gen(rng)
    N = 3
    q, k, v, a, b, _, _ = inputs(gen, (1, N))
    A_log, dt_bias = gate_params(gen)
    cu = torch.arange(N + 1)
    pool = pool_of(gen, 5, dtype)
    before = pool.clone()
    idx = torch.tensor([3, 0, 1])
    if not _common._takes_pool_dtype(dtype):
        with pytest.raises(NotImplementedError, match="bf16 / fp16 state pools are a gdn feature not in this build"):
            vllm.fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v, initial_state=pool,
                                                        cu_seqlens=cu, ssm_state_indices=idx)
        with pytest.raises(NotImplementedError, match="state pools"):
            sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, idx,
                                                          cu_seqlens=cu)
        assert torch.equal(pool, before)
        return
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp = vllm_recurrent_model(q, k, v, g, beta, K ** -0.5, pool, True, cu, idx, None, False)
    o, _ = vllm.fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v, initial_state=pool,
                                                       cu_seqlens=cu, ssm_state_indices=idx)
    assert rel(o[0, [0, 2]], ro[0, [0, 2]]) <= F32_TOL
    check_pool(pool, before, rp, [3, 1], 5e-3)


# ---------------------------------------------------------------------------------------------
# Item 6 (Python side): q, k, v as views of one packed projection, o into a strided buffer.

def _packed(gen, T, dtype=torch.float32):
    mixed = torch.randn(T, 2 * H * K + HV * V, generator=gen).to(dtype)
    q, k, v = torch.split(mixed, [H * K, H * K, HV * V], dim=-1)
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


@pytest.mark.parametrize("op", ["prefill_", "decode_", "chunk_gated_delta_rule"])
def test_packed_projection_views(rng, op):
    gen = _gen(rng)
    lens = [3, 0, 70, 2]
    cu = ragged(gen, lens)
    T, N = int(cu[-1]), len(lens)
    mixed, q, k, v = _packed(gen, T)
    assert q.data_ptr() == mixed.data_ptr() and not q.is_contiguous() and not v.is_contiguous()
    kn = torch.nn.functional.normalize(k.float(), dim=-1)  # the model's keys: gdn l2-norms them in the kernel
    g = torch.nn.functional.logsigmoid(torch.randn(1, T, HV, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, HV, generator=gen))
    pool = pool_of(gen, 6)
    before = pool.clone()
    idx = torch.tensor([5, 1, 0, 3], dtype=torch.int32)
    obuf = torch.full((T, HV, V + 8), NAN)  # o lands in [..., :V]; the padding must stay NaN
    out = obuf[:, :, :V].unsqueeze(0)
    ro, rf, _ = chunk_model(q, kn, v, g, beta, K ** -0.5, pool, idx, cu, True)
    if op == "prefill_":
        o = _no_copies(lambda: gdn.prefill_(q, k, v, g, beta, pool, idx, use_qk_l2norm_in_kernel=True,
                                            state_v_first=True, cu_seqlens=cu, out=out))
    elif op == "decode_":
        o = _no_copies(lambda: gdn.decode_(q, k, v, g, beta, pool, idx, use_qk_l2norm_in_kernel=True,
                                           state_v_first=True, cu_seqlens=cu, out=out))
    else:
        o, _ = _no_copies(lambda: gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, state_indices=idx,
                                                             inplace_final_state=True, use_qk_l2norm_in_kernel=True,
                                                             state_v_first=True, cu_seqlens=cu, out=out))
    assert o is out and torch.isnan(obuf[:, :, V:]).all()
    assert rel(o, ro) <= F32_TOL
    ref = before.double().clone()
    for n in range(N):
        ref[int(idx[n])] = rf[n]
    check_pool(pool, before, ref, [5, 1, 0, 3])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_decode(rng, engine, dtype):
    """fused_recurrent_gated_delta_rule_packed_decode: q / k / v read from mixed_qkv (no copy),
    o into out, the pool in place; padding (vLLM: slot <= 0, SGLang: slot < 0) gets o = 0 and
    touches no state; beta = sigmoid(b) rounded to b's dtype."""
    gen = _gen(rng)
    B, slots = 6, 9
    mixed, q, k, v = _packed(gen, B, dtype)
    a = torch.randn(B, HV, generator=gen).to(dtype)
    b = torch.randn(B, HV, generator=gen).to(dtype)
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, slots)
    before = pool.clone()
    if engine == "vllm":
        mod, idx, live = vllm, torch.tensor([3, 0, 8, 1, 0, 6], dtype=torch.int32), [0, 2, 3, 5]
    else:
        mod, idx, live = sglang, torch.tensor([3, -1, 8, 0, -1, 6], dtype=torch.int32), [0, 2, 3, 5]
    g, beta = _gate_model(a, b, A_log, dt_bias)
    beta = beta.to(dtype).double()
    qb, kb, vb = (x.reshape(1, B, *x.shape[2:]) for x in (q, k, v))
    ro, rp = vllm_recurrent_model(qb, kb, vb, g.reshape(1, B, HV), beta.reshape(1, B, HV), 0.2, pool, True,
                                  torch.arange(B + 1), torch.where(idx < 0, 0, idx) if engine == "sglang" else idx,
                                  None, True)
    if engine == "sglang":  # slot 0 is a real slot in SGLang: the model above skips it, redo that one
        S, o3 = _step(before[0].double(), _flat(q)[3], _flat(k)[3], _flat(v)[3], g[3], beta[3], 0.2, True)
        ro[0, 3], rp[0] = o3, S
    out = torch.full((B, 1, HV, V), NAN, dtype=dtype)
    o, state = _no_copies(lambda: mod.fused_recurrent_gated_delta_rule_packed_decode(
        mixed, a, b, A_log, dt_bias, 0.2, pool, out, idx, use_qk_l2norm_in_kernel=True)) if dtype == torch.float32 \
        else mod.fused_recurrent_gated_delta_rule_packed_decode(mixed, a, b, A_log, dt_bias, 0.2, pool, out, idx,
                                                                use_qk_l2norm_in_kernel=True)
    assert o is out and state is pool
    tol = F32_TOL if dtype == torch.float32 else BF16_TOL
    assert rel(o[live, 0], ro[0, live]) <= tol
    pad = [n for n in range(B) if n not in live]
    assert torch.equal(o[pad], torch.zeros_like(o[pad]))
    check_pool(pool, before, rp, [int(idx[n]) for n in live], tol)
