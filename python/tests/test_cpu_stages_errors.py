"""The Python package on the CPU backend through numpy arrays: the stage functions against the
float64 definitions of gdn_ref.py, and bad input (every rejected call names the argument). No GPU,
no torch needed. Every test draws fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import gdn
import gdn.stages as st
from gdn_ref import nan_like, make_inputs, ragged_cu_seqlens, recurrence, rel_err

F32_TOL = 1e-4


# ------------------------------------------------------------------------------------------------
# Stages


@pytest.mark.parametrize("varlen", [False, True])
def test_stages_compose(rng, varlen):
    H, HV, K, V = 2, 4, 32, 32
    if varlen:
        cu = ragged_cu_seqlens(rng, 4, 150)
        T, N = int(cu[-1]), 4
        lead = (1, T)
    else:
        cu, N, T = None, 2, 2 * 100
        lead = (2, 100)
    q, k, v, g, beta = make_inputs(rng, lead, H, HV, K, V)
    h0 = rng.standard_normal((N, HV, K, V)).astype(np.float32)
    qn, kn = st.l2norm(q), st.l2norm(k)
    from gdn_ref import l2norm as ref_l2norm
    assert rel_err(qn, ref_l2norm(q)) <= 1e-6
    G = st.chunk_local_cumsum(g, cu_seqlens=cu)
    assert G.shape == (T, HV)
    # G is the chunk-local cumulative sum
    gf = g.reshape(T, HV).astype(np.float64)
    bounds = cu if cu is not None else np.arange(N + 1) * (T // N)
    ref_G = np.zeros_like(gf)
    for n in range(N):
        for s in range(bounds[n], bounds[n + 1], 64):
            e = min(s + 64, bounds[n + 1])
            ref_G[s:e] = np.cumsum(gf[s:e], axis=0)
    assert rel_err(G, ref_G) <= 1e-5
    L = st.chunk_scaled_dot_kkt(kn, beta, G, cu_seqlens=cu)
    A = st.solve_tril(L, cu_seqlens=cu, num_seqs=N)
    w, u = st.recompute_w_u(kn, v, beta, A, G, cu_seqlens=cu)
    h, v_new, ht = st.chunk_fwd_h(kn, w, u, G, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    o = st.chunk_fwd_o(qn, kn, v_new, h, G, cu_seqlens=cu)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, use_qk_l2norm=True)
    assert o.shape == v.shape
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL


def test_stage_bad_buffers(rng):
    q, k, v, g, beta = make_inputs(rng, (1, 64), 1, 2, 32, 32)
    G = st.chunk_local_cumsum(g)
    with pytest.raises(ValueError, match="L has shape"):
        st.chunk_scaled_dot_kkt(k, beta, G, out=np.zeros((64, 2, 32), np.float32))
    with pytest.raises(TypeError, match="G has dtype"):
        st.chunk_scaled_dot_kkt(k, beta, G.astype(np.float16))
    with pytest.raises(ValueError, match="G has shape"):
        st.chunk_scaled_dot_kkt(k, beta, G[:10])


# ------------------------------------------------------------------------------------------------
# Bad input: ValueError / TypeError naming the argument, nothing written


def _base(rng, T=64):
    return make_inputs(rng, (1, T), 2, 4, 32, 32)


def test_bad_heads(rng):
    q, k, v, g, beta = _base(rng)
    v3 = np.zeros((1, 64, 3, 32), np.float32)
    with pytest.raises(ValueError, match="HV"):
        gdn.chunk_gated_delta_rule(q, k, v3, g[..., :3], beta[..., :3])
    with pytest.raises(ValueError, match="k has shape"):
        gdn.chunk_gated_delta_rule(q, k[:, :, :1], v, g, beta)
    with pytest.raises(ValueError, match="g has shape"):
        gdn.chunk_gated_delta_rule(q, k, v, g[..., :2], beta)
    with pytest.raises(ValueError, match="beta has shape"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta[:, :10])
    with pytest.raises(ValueError, match="v has shape"):
        gdn.chunk_gated_delta_rule(q, k, v[:, :10], g, beta)


def test_bad_head_dim(rng):
    # Any K, V in [1, 256] runs (test_head_sizes.py); past 256 the table's range is named.
    q, k, v, g, beta = make_inputs(rng, (1, 16), 1, 1, 264, 16)
    with pytest.raises(ValueError, match=r"head_k \(K = 264\) is unsupported; expected an integer in \[1, 256\]"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta)
    q, k, v, g, beta = make_inputs(rng, (1, 16), 1, 1, 16, 300)
    with pytest.raises(ValueError, match=r"head_v \(V = 300\) is unsupported"):
        gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta)


def test_bad_dtypes(rng):
    q, k, v, g, beta = _base(rng)
    with pytest.raises(TypeError, match=r"k has dtype float16; expected float32 \(that of q\)"):
        gdn.chunk_gated_delta_rule(q, k.astype(np.float16), v, g, beta)
    with pytest.raises(TypeError, match="v has dtype"):
        gdn.chunk_gated_delta_rule(q, k, v.astype(np.float64), g, beta)
    with pytest.raises(TypeError, match="q has dtype"):
        gdn.chunk_gated_delta_rule(q.astype(np.float64), k, v, g, beta)
    with pytest.raises(TypeError, match="g has dtype"):
        gdn.chunk_gated_delta_rule(q, k, v, g.astype(np.int32), beta)
    with pytest.raises(TypeError, match=r"o has dtype float64; expected float32, float16 or bfloat16"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, out=np.zeros(v.shape, np.float64))
    with pytest.raises(TypeError, match="cu_seqlens has dtype"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=np.array([0, 64], np.float32))
    with pytest.raises(TypeError, match="state .* has dtype float64; expected float32, float16 or bfloat16"):
        gdn.prefill_(q, k, v, g, beta, np.zeros((2, 4, 32, 32), np.float64), np.array([0], np.int32))
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        gdn.chunk_gated_delta_rule(q.tolist(), k, v, g, beta)


@pytest.mark.parametrize("cu,what", [([1, 30, 64], r"cu_seqlens\[0\]"), ([0, 40, 30, 64], "cu_seqlens"),
                                     ([0, 30, 60], "cu_seqlens"), ([0, 30, 70], "cu_seqlens")])
def test_bad_cu_seqlens(rng, cu, what):
    q, k, v, g, beta = _base(rng)
    out = nan_like(v.shape, np.float32)
    with pytest.raises(ValueError, match=what):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=np.array(cu, np.int64), out=out)
    assert np.isnan(out).all()  # nothing written
    with pytest.raises(ValueError, match=what):
        gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, cu_seqlens=np.array(cu, np.int32), out=out)
    assert np.isnan(out).all()


def test_bad_batch_with_cu_seqlens(rng):
    q, k, v, g, beta = make_inputs(rng, (2, 32), 1, 1, 16, 16)
    with pytest.raises(ValueError, match="batch size"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=np.array([0, 32, 64]))


def test_bad_initial_state(rng):
    q, k, v, g, beta = _base(rng)
    with pytest.raises(ValueError, match="initial_state"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=np.zeros((2, 4, 32, 32), np.float32))
    with pytest.raises(ValueError, match="initial_state has shape"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=np.zeros((1, 4, 16, 32), np.float32))
    with pytest.raises(ValueError, match="state .* is not contiguous"):
        pool = np.zeros((3, 4, 32, 64), np.float32)[..., ::2]
        gdn.prefill_(q, k, v, g, beta, pool, np.array([0], np.int32))


def test_bad_pool_indices(rng):
    q, k, v, g, beta = _base(rng)
    pool = rng.standard_normal((3, 4, 32, 32)).astype(np.float32)
    before = pool.copy()
    out = nan_like(v.shape, np.float32)
    with pytest.raises(ValueError, match=r"indices\[0\] is 3; expected < num_slots = 3"):
        gdn.prefill_(q, k, v, g, beta, pool, np.array([3], np.int32), out=out)
    cu = np.array([0, 30, 64])
    with pytest.raises(ValueError, match="repeats row"):
        gdn.prefill_(q, k, v, g, beta, pool, np.array([1, 1], np.int32), cu_seqlens=cu, out=out)
    with pytest.raises(ValueError, match="state_indices has shape"):
        gdn.prefill_(q, k, v, g, beta, pool, np.array([0, 1, 2], np.int32), cu_seqlens=cu, out=out)
    with pytest.raises(TypeError, match="indices has dtype"):
        gdn.decode_(q, k, v, g, beta, pool, np.array([0.0], np.float32), out=out)
    assert np.isnan(out).all()
    np.testing.assert_array_equal(pool, before)


def test_bad_strides(rng):
    q, k, v, g, beta = _base(rng)
    qt = np.ascontiguousarray(np.swapaxes(q, -1, -2)).swapaxes(-1, -2)  # innermost stride != 1
    with pytest.raises(ValueError, match="q has stride"):
        gdn.chunk_gated_delta_rule(qt, k, v, g, beta)
    vb = np.broadcast_to(v[:, :1], v.shape)  # stride 0 (broadcast)
    with pytest.raises(ValueError, match="v has stride 0"):
        gdn.chunk_gated_delta_rule(q, k, vb, g, beta)
    gb = np.broadcast_to(g[..., :1], g.shape)
    with pytest.raises(ValueError, match="g has stride 0"):
        gdn.chunk_gated_delta_rule(q, k, v, gb, beta)


def test_bad_gate_args(rng):
    q, k, v, g, beta = _base(rng)
    with pytest.raises(ValueError, match="A_log"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, use_gate_in_kernel=True)
    with pytest.raises(ValueError, match="A_log has shape"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, use_gate_in_kernel=True, A_log=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="dt_bias has shape"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, use_gate_in_kernel=True, A_log=np.zeros(4, np.float32),
                                   dt_bias=np.zeros(5, np.float32), use_beta_sigmoid_in_kernel=True)
    with pytest.raises(ValueError, match="allow_neg_eigval"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, allow_neg_eigval=True)


def test_cu_seqlens_cpu_checks(rng):
    q, k, v, g, beta = _base(rng)
    cu = np.array([0, 20, 64], np.int64)
    # the host copy is validated too (on the CPU backend the array itself is host-readable)
    o, _ = gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu, cu_seqlens_cpu=cu.astype(np.int32))
    ro, _ = recurrence(q, k, v, g, beta, cu_seqlens=cu)
    assert rel_err(o, ro) <= F32_TOL
    with pytest.raises(ValueError, match="cu_seqlens_cpu"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu, cu_seqlens_cpu=np.array([0, 64]))


def test_empty_input(rng):
    q, k, v, g, beta = make_inputs(rng, (1, 0), 1, 2, 16, 16)
    h0 = rng.standard_normal((1, 2, 16, 16)).astype(np.float32)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert o.shape == v.shape
    np.testing.assert_array_equal(ht, h0)


def test_threads(rng):
    q, k, v, g, beta = make_inputs(rng, (2, 100), 2, 2, 32, 32)
    ref, _ = gdn.chunk_gated_delta_rule(q, k, v, g, beta)
    gdn.set_num_threads(1)
    try:
        o, _ = gdn.chunk_gated_delta_rule(q, k, v, g, beta)
    finally:
        gdn.set_num_threads(0)
    assert rel_err(o, ref) <= 1e-6
    with pytest.raises(ValueError):
        gdn.set_num_threads(-1)
