"""gdn.compat.vllm against a float64 model of vLLM's kernels (compat_models.py): the decode step
and speculative verify (1-D / 2-D ssm_state_indices, num_accepted_tokens padded with 1,
NULL_BLOCK_ID = 0, zero-length padding sequences, index rows past N), the not-in-place per-token
states, plain gates, a non-default softplus, bf16 inputs, the chunked prefill with core_attn_out;
pool rows the engine would not write stay bitwise unchanged. Bad arguments raise clearly."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from compat_models import (  # noqa: E402
    BF16_TOL, CHUNK_F32_TOL, F32_TOL, HV, K, NAN, V, _gate_model, _gen, check_pool, chunk_model, gate_params, inputs,
    DEVICES, on, pool_of, ragged, rel, vllm_recurrent_model,
)
from gdn.compat import vllm  # noqa: E402


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_decode_null_block_padding(rng, device):
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
    idx = torch.tensor([3, 7, 0, 11, 5, 0, 1, 0, 0], dtype=torch.int32)  # 2 rows past N
    idx[1] = 0  # a real token whose slot is NULL_BLOCK_ID: skipped entirely, as vLLM does
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp = vllm_recurrent_model(q, k, v, g, beta, K ** -0.5, pool, True, cu, idx[:N], None, True)
    P = on(device, pool.clone())
    o, state = vllm.fused_sigmoid_gating_delta_rule_update(
        A_log=on(device, A_log), a=on(device, a[0]), b=on(device, b[0]), dt_bias=on(device, dt_bias),
        q=on(device, q), k=on(device, k), v=on(device, v), initial_state=P, inplace_final_state=True,
        cu_seqlens=on(device, cu), ssm_state_indices=on(device, idx), use_qk_l2norm_in_kernel=True)
    assert state is P and o.shape == v.shape and o.dtype == q.dtype and o.device.type == device
    live = torch.tensor([int(idx[n]) > 0 for n in range(N) for _ in range(lens[n])])
    assert rel(o.cpu()[0, live], ro[0, live]) <= F32_TOL
    check_pool(P.cpu(), pool, rp, [3, 11, 5, 1])


@pytest.mark.parametrize("varlen", [True, False])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("device", DEVICES)
def test_vllm_spec_verify(rng, device, varlen, index_dtype):
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
    P = on(device, pool.clone())
    o, state = vllm.fused_sigmoid_gating_delta_rule_update(
        *on(device, A_log, a, b, dt_bias, q, k, v), initial_state=P, inplace_final_state=True,
        cu_seqlens=on(device, cu), ssm_state_indices=on(device, idx_padded), num_accepted_tokens=on(device, nat_padded),
        use_qk_l2norm_in_kernel=True)
    assert state is P
    live = torch.isfinite(ro)
    assert rel(o.cpu()[live], ro[live]) <= F32_TOL
    written = sorted({int(idx[n, t]) for n in range(N) for t in range(lens[n])
                      if int(idx[n, t]) > 0 and int(idx[n, int(nat[n]) - 1]) > 0})
    assert written
    check_pool(P.cpu(), pool, rp, written)


@pytest.mark.parametrize("indices", ["none", "1d", "2d"])
@pytest.mark.parametrize("device", DEVICES)
def test_vllm_not_inplace(rng, device, indices):
    """inplace_final_state=False: the state after every token in a new [T, HV, V, K] array (row
    bos + t); the pool read at the slots (or at row bos without indices) and left untouched."""
    gen = _gen(rng)
    lens = [2, 0, 3, 1]
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, _, _, g, beta = inputs(gen, (1, T))
    pool = pool_of(gen, 16)
    idx = nat = None
    if indices == "1d":
        idx = torch.tensor([4, 0, 9, 2])
    elif indices == "2d":
        idx = torch.tensor([[3, 5, 6], [0, 0, 0], [7, 8, 10], [11, 12, 13]])
        nat = torch.tensor([2, 1, 1, 3])
    ro, rt = vllm_recurrent_model(q, k, v, g, beta, 0.3, pool, False, cu, idx, nat, False)
    P = on(device, pool.clone())
    o, final = vllm.fused_recurrent_gated_delta_rule(*on(device, q, k, v, g, beta), scale=0.3, initial_state=P,
                                                     inplace_final_state=False, cu_seqlens=on(device, cu),
                                                     ssm_state_indices=on(device, idx),
                                                     num_accepted_tokens=on(device, nat))
    assert final.shape == (T, HV, V, K) and final.dtype == pool.dtype
    live = torch.isfinite(ro)
    assert rel(o.cpu()[live], ro[live]) <= F32_TOL
    rows = torch.isfinite(rt.reshape(T, -1)).all(-1)
    assert rows.any() and rel(final.cpu()[rows], rt[rows]) <= F32_TOL
    assert torch.equal(P.cpu(), pool)


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_fused_recurrent_plain_gates(rng, device):
    """fused_recurrent_gated_delta_rule: plain g / beta (beta None: ones), a fixed [B, T] batch of
    decode tokens, scale given, no l2norm."""
    gen = _gen(rng)
    N, M = 5, 2
    q, k, v, _, _, g, _ = inputs(gen, (N, M))
    pool = pool_of(gen, 8)
    idx = torch.tensor([[1, 2], [3, 4], [0, 0], [5, 6], [7, 0]], dtype=torch.int32)
    ro, rp = vllm_recurrent_model(q, k, v, g, torch.ones(N, M, HV), 0.2, pool, True, None, idx, None, False)
    P = on(device, pool.clone())
    o, _ = vllm.fused_recurrent_gated_delta_rule(*on(device, q, k, v, g), None, 0.2, P, True, None, on(device, idx))
    live = torch.isfinite(ro)
    assert rel(o.cpu()[live], ro[live]) <= F32_TOL
    check_pool(P.cpu(), pool, rp, [1, 2, 3, 4, 5, 6, 7])


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_softplus_params_and_bf16(rng, device):
    """A softplus other than (1, 20) is computed by the adapter; bf16 q / k / v."""
    gen = _gen(rng)
    lens = [1, 3, 2]
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, a, b, _, _ = inputs(gen, (1, T), torch.bfloat16)
    a = a * 4
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 10)
    idx = torch.tensor([[2, 3, 4], [5, 6, 7], [8, 9, 1]])
    nat = torch.tensor([1, 2, 1])
    g, beta = _gate_model(a, b, A_log, dt_bias, 2.0, 1.5)
    ro, rp = vllm_recurrent_model(q, k, v, g, beta, K ** -0.5, pool, True, cu, idx, nat, True)
    P = on(device, pool.clone())
    o, _ = vllm.fused_sigmoid_gating_delta_rule_update(*on(device, A_log, a, b, dt_bias, q, k, v), beta=2.0,
                                                       threshold=1.5, initial_state=P, cu_seqlens=on(device, cu),
                                                       ssm_state_indices=on(device, idx),
                                                       num_accepted_tokens=on(device, nat),
                                                       use_qk_l2norm_in_kernel=True)
    assert o.dtype == torch.bfloat16
    assert rel(o.cpu(), ro) <= BF16_TOL
    check_pool(P.cpu(), pool, rp, [2, 5, 6, 7, 8, 9], BF16_TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_chunk(rng, device):
    """chunk_gated_delta_rule: ragged batch with a zero-length sequence, a dense V-major initial
    state (bf16, read as fp32), fp32 final states, o into core_attn_out (a flat buffer)."""
    gen = _gen(rng)
    lens = [70, 0, 5, 130]
    cu = ragged(gen, lens)
    T, N = int(cu[-1]), len(lens)
    q, k, v, _, _, g, beta = inputs(gen, (1, T))
    h0 = torch.randn((N, HV, V, K), generator=gen).to(torch.bfloat16)
    ro, rf, _ = chunk_model(q, k, v, g, beta, K ** -0.5, h0, None, cu, True)
    buf = on(device, torch.full((v.numel() + 37,), NAN))
    qd, kd, vd, gd, bd, cud = on(device, q, k, v, g, beta, cu)
    o, ht = vllm.chunk_gated_delta_rule(qd, kd, vd, gd, bd, initial_state=on(device, h0), output_final_state=True,
                                        cu_seqlens=cud, chunk_indices=torch.zeros(1), chunk_offsets=torch.zeros(1),
                                        use_qk_l2norm_in_kernel=True, core_attn_out=buf)
    assert o.data_ptr() == buf.data_ptr() and o.shape == v.shape
    assert torch.isnan(buf[v.numel():]).all()
    assert ht.dtype == torch.float32 and ht.shape == (N, HV, V, K)
    tol = CHUNK_F32_TOL[device]
    assert rel(o.cpu(), ro) <= tol and rel(ht.cpu(), rf) <= tol
    o2, none = vllm.chunk_gated_delta_rule(qd, kd, vd, gd, bd, 0.5, None, False, cud)
    ro2, _, _ = chunk_model(q, k, v, g, beta, 0.5, None, None, cu, False)
    assert none is None and rel(o2.cpu(), ro2) <= tol
    with pytest.raises(DeprecationWarning, match="head_first is deprecated"):
        vllm.chunk_gated_delta_rule(qd, kd, vd, gd, bd, head_first=True)


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
