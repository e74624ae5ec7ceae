"""gdn.compat.sglang against a float64 model of SGLang's kernels (compat_models.py): the extend
(pool rows in place or not, h at chunk starts, negative indices, fixed and ragged batches), the
decode step with -1 padding on strided q / k / v, target_verify into the intermediate-states
buffer with disable_state_update, no pool; pool rows the engine would not write stay bitwise
unchanged. Bad arguments raise clearly."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from compat_models import (  # noqa: E402
    BF16_TOL, CHUNK_F32_TOL, DEVICES, F32_TOL, H, HV, K, NAN, V, _gate_model, _gen, check_pool, chunk_model,
    gate_params, inputs, on, pool_of, ragged, rel, sglang_decode_model,
)
from gdn.compat import sglang  # noqa: E402


@pytest.mark.parametrize("inplace_update", [True, False])
@pytest.mark.parametrize("output_h", [True, False])
@pytest.mark.parametrize("device", DEVICES)
def test_sglang_chunk(rng, device, inplace_update, output_h):
    """Extend on the pool in place: ragged lengths across chunk boundaries, a zero-length sequence,
    a negative (padding) index; o, the pool rows, and h (the state at each chunk's start)."""
    gen = _gen(rng)
    lens = [70, 0, 5, 130, 64]
    cu = ragged(gen, lens).long()
    T, N = int(cu[-1]), len(lens)
    q, k, v, _, _, g, beta = inputs(gen, (1, T), torch.bfloat16)
    pool = pool_of(gen, 9)
    idx = torch.tensor([6, 2, -1, 0, 4], dtype=torch.int32)
    ro, rf, rh = chunk_model(q, k, v, g, beta, K ** -0.5, pool, idx, cu, True)
    P = on(device, pool.clone())
    o, none, h = sglang.chunk_gated_delta_rule(*on(device, q, k, v, g, beta), initial_state=P,
                                               initial_state_indices=on(device, idx), cu_seqlens=on(device, cu),
                                               head_first=False, use_qk_l2norm_in_kernel=True,
                                               inplace_update=inplace_update, output_h=output_h)
    assert none is None and o.dtype == q.dtype and o.shape == v.shape
    assert rel(o.cpu(), ro) <= BF16_TOL
    if output_h:
        NT = sum((n + 63) // 64 for n in lens)
        assert h.shape == (1, NT, HV, V, K) and h.dtype == k.dtype
        assert rel(h.cpu()[0], rh) <= BF16_TOL
    else:
        assert h is None
    ref = pool.double().clone()
    written = []
    if inplace_update:
        for n in range(N):
            if int(idx[n]) >= 0:
                ref[int(idx[n])] = rf[n]
                written.append(int(idx[n]))
    check_pool(P.cpu(), pool, ref, written, BF16_TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_sglang_chunk_fixed_batch(rng, device):
    """A fixed [B, T] batch (no cu_seqlens): h is [B, ceil(T / 64), ...]."""
    gen = _gen(rng)
    B, T = 2, 100
    q, k, v, _, _, g, beta = inputs(gen, (B, T))
    pool = pool_of(gen, 3)
    idx = torch.tensor([2, 0])
    ro, rf, rh = chunk_model(q, k, v, g, beta, 0.25, pool, idx, None, False)
    P = on(device, pool.clone())
    o, _, h = sglang.chunk_gated_delta_rule(*on(device, q, k, v, g, beta), 0.25, P, on(device, idx))
    assert h.shape == (B, 2, HV, V, K)
    tol = CHUNK_F32_TOL[device]
    assert rel(o.cpu(), ro) <= tol and rel(h.cpu().reshape(-1, HV, V, K), rh) <= tol
    ref = pool.double().clone()
    ref[2], ref[0] = rf[0], rf[1]
    check_pool(P.cpu(), pool, ref, [0, 2], tol)


@pytest.mark.parametrize("device", DEVICES)
def test_sglang_decode(rng, device):
    """Decode: one token per sequence, -1 padding (zero state in, nothing written, o computed);
    q / k / v strided views of the projection as SGLang passes them."""
    gen = _gen(rng)
    N, slots = 6, 10
    cu = torch.arange(N + 1, dtype=torch.int32)
    q, k, v, a, b, _, _ = inputs(gen, (1, N))
    mixed = on(device, torch.cat([q.reshape(N, -1), k.reshape(N, -1), v.reshape(N, -1)], -1))
    qv, kv, vv = (x.view(1, N, -1, d) for x, d in zip(torch.split(mixed, [H * K, H * K, HV * V], -1), (K, K, V)))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, slots)
    idx = torch.tensor([4, -1, 9, 0, -1, 2], dtype=torch.int64)
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp, _ = sglang_decode_model(q, k, v, g, beta, K ** -0.5, pool, idx, cu, True, False, None, None)
    P = on(device, pool.clone())
    o = sglang.fused_sigmoid_gating_delta_rule_update(*on(device, A_log, a[0], dt_bias), 1.0, 20.0, qv, kv, vv,
                                                      on(device, b[0]), P, on(device, idx),
                                                      use_qk_l2norm_in_kernel=True, cu_seqlens=on(device, cu))
    assert o.shape == v.shape
    assert rel(o.cpu(), ro) <= F32_TOL
    check_pool(P.cpu(), pool, rp, [4, 9, 0, 2])


@pytest.mark.parametrize("disable_state_update", [True, False])
@pytest.mark.parametrize("buffer_indices", [True, False])
@pytest.mark.parametrize("device", DEVICES)
def test_sglang_target_verify(rng, device, disable_state_update, buffer_indices):
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
    idx = torch.tensor([5, 1, -1, 7, 3], dtype=torch.int32)
    S = N + 2
    buf = torch.full((S, steps, HV, V, K), NAN)
    bidx = torch.tensor([2, 6, -1, 0, -1], dtype=torch.int32) if buffer_indices else None
    g, beta = _gate_model(a, b, A_log, dt_bias, 1.5, 10.0)
    ro, rp, rb = sglang_decode_model(q, k, v, g, beta, 0.3, pool, idx, cu, False, disable_state_update, buf,
                                     bidx if buffer_indices else torch.arange(N))
    P, Bf = on(device, pool.clone(), buf)
    o = sglang.fused_sigmoid_gating_delta_rule_update(
        *on(device, A_log, a, dt_bias), 1.5, 10.0, *on(device, q, k, v, b), P, on(device, idx), scale=0.3,
        cu_seqlens=on(device, cu), disable_state_update=disable_state_update, intermediate_states_buffer=Bf,
        intermediate_state_indices=on(device, bidx), cache_steps=steps)
    assert rel(o.cpu(), ro) <= F32_TOL
    got = Bf.cpu().reshape(S * steps, -1)
    stored = torch.isfinite(rb.reshape(S * steps, -1)).all(-1)
    assert stored.any() and rel(got[stored], rb.reshape(S * steps, -1)[stored]) <= F32_TOL
    assert torch.isnan(got[~stored]).all()
    written = [] if disable_state_update else [5, 1, 7, 3]
    check_pool(P.cpu(), pool, rp, written)


@pytest.mark.parametrize("device", DEVICES)
def test_sglang_tree_verify(rng, device):
    """EAGLE tree verify: each draft token continues from its parent's buffered state; a sequence
    without a buffer row (-1) ignores its parents (the chain); ragged drafts and -1 pool padding;
    parents given for more columns than the buffer has steps (the extra ones are not read)."""
    gen = _gen(rng)
    lens = [4, 3, 0, 4, 2]
    N, steps = len(lens), 4
    cu = ragged(gen, lens)
    T = int(cu[-1])
    q, k, v, a, b, _, _ = inputs(gen, (1, T))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 8)
    idx = torch.tensor([5, 1, -1, 7, -1], dtype=torch.int32)
    buf = torch.full((N + 1, steps, HV, V, K), NAN)
    bidx = torch.tensor([2, 0, -1, -1, 4], dtype=torch.int32)
    parents = torch.tensor([[-1, 0, 0, 1, 0], [-1, 0, 0, 0, 0], [-1, 0, 0, 0, 0], [-1, 0, 1, 1, 0],
                            [-1, 0, 0, 0, 0]], dtype=torch.int64)
    g, beta = _gate_model(a, b, A_log, dt_bias)
    ro, rp, rb = sglang_decode_model(q, k, v, g, beta, K ** -0.5, pool, idx, cu, True, True, buf, bidx, parents)
    P, Bf = on(device, pool.clone(), buf)
    o = sglang.fused_sigmoid_gating_delta_rule_update(
        *on(device, A_log, a, dt_bias), 1.0, 20.0, *on(device, q, k, v, b), P, on(device, idx),
        use_qk_l2norm_in_kernel=True, cu_seqlens=on(device, cu), disable_state_update=True,
        intermediate_states_buffer=Bf, intermediate_state_indices=on(device, bidx), cache_steps=steps,
        retrieve_parent_token=on(device, parents))
    assert rel(o.cpu(), ro) <= F32_TOL
    got, ref = Bf.cpu().reshape((N + 1) * steps, -1), rb.reshape((N + 1) * steps, -1)
    stored = torch.isfinite(ref).all(-1)
    assert stored.any() and rel(got[stored], ref[stored]) <= F32_TOL and torch.isnan(got[~stored]).all()
    check_pool(P.cpu(), pool, rp, [])
    # The chain and the tree differ (the test can tell them apart).
    chain, _, _ = sglang_decode_model(q, k, v, g, beta, K ** -0.5, pool, idx, cu, True, True, buf, bidx)
    assert rel(chain, ro) > 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_sglang_no_pool(rng, device):
    """initial_state_source=None: every sequence starts from zeros and no state is written; the
    intermediate states still go to the buffer (row n without indices)."""
    gen = _gen(rng)
    B, M = 3, 2
    q, k, v, a, b, _, _ = inputs(gen, (B, M))
    A_log, dt_bias = gate_params(gen)
    buf = torch.full((B + 1, M, HV, V, K), NAN)
    g, beta = _gate_model(a, b, A_log, dt_bias)
    none = torch.full((B,), -1)
    ro, _, rb = sglang_decode_model(q, k, v, g, beta, K ** -0.5, pool_of(gen, 1), none, None, True, True, buf,
                                    torch.arange(B))
    Bf = on(device, buf)
    o = sglang.fused_sigmoid_gating_delta_rule_update(*on(device, A_log, a, dt_bias), 1.0, 20.0,
                                                      *on(device, q, k, v, b), None, None,
                                                      use_qk_l2norm_in_kernel=True, intermediate_states_buffer=Bf)
    got = Bf.cpu()
    assert rel(o.cpu(), ro) <= F32_TOL and rel(got[:B], rb[:B]) <= F32_TOL and torch.isnan(got[B]).all()


def test_sglang_bad_arguments(rng):
    gen = _gen(rng)
    q, k, v, a, b, g, beta = inputs(gen, (1, 3))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 4)
    idx = torch.tensor([1])
    with pytest.raises(ValueError, match="retrieve_parent_token has shape"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, idx,
                                                      intermediate_states_buffer=torch.zeros(1, 3, HV, V, K),
                                                      retrieve_parent_token=torch.zeros(3, dtype=torch.int64))
    with pytest.raises(NotImplementedError, match="is_kda"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, idx, is_kda=True)
    with pytest.raises(ValueError, match="initial_state_indices .* is required"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, 1.0, 20.0, q, k, v, b, pool, None)
    with pytest.raises(ValueError, match="number of initial states is expected to be equal"):
        sglang.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, initial_state_indices=torch.tensor([1, 2]),
                                      cu_seqlens=torch.tensor([0, 3]))
    with pytest.raises(DeprecationWarning, match="head_first is deprecated"):
        sglang.chunk_gated_delta_rule(q, k, v, g, beta, head_first=True)
