"""The Python package on the CPU backend through numpy arrays, against the float64 recurrence of
gdn_ref.py (no GPU, no torch needed). Every test draws fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import gdn
from gdn_ref import nan_like, fused_gates, make_inputs, ragged_cu_seqlens, recurrence, rel_err

F32_TOL = 1e-4
F16_TOL = 1e-3  # SPEC section 4: fp16 inputs keep fp16 precision (the CPU backend computes in fp32)


# ------------------------------------------------------------------------------------------------
# chunk_gated_delta_rule / fused_recurrent_gated_delta_rule, fla semantics


@pytest.mark.parametrize("fn", ["chunk", "recurrent"])
@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("H,HV,K,V", [(2, 2, 32, 32), (2, 4, 64, 32), (1, 3, 16, 48)])
def test_fixed_batch_fp32(rng, fn, state_v_first, H, HV, K, V):
    B, T = 2, 150
    q, k, v, g, beta = make_inputs(rng, (B, T), H, HV, K, V)
    shape = (B, HV, V, K) if state_v_first else (B, HV, K, V)
    h0 = rng.standard_normal(shape).astype(np.float32)
    f = gdn.chunk_gated_delta_rule if fn == "chunk" else gdn.fused_recurrent_gated_delta_rule
    o, ht = f(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True, state_v_first=state_v_first)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0, state_v_first=state_v_first)
    assert o.shape == v.shape and o.dtype == np.float32
    assert ht.shape == shape and ht.dtype == np.float32
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht, rh) <= F32_TOL


@pytest.mark.parametrize("fn", ["chunk", "recurrent"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_varlen_ragged_gva(rng, fn, index_dtype):
    H, HV, K, V = 2, 6, 32, 64
    cu = ragged_cu_seqlens(rng, 7, 200).astype(index_dtype)  # includes a zero-length sequence
    T, N = int(cu[-1]), len(cu) - 1
    q, k, v, g, beta = make_inputs(rng, (1, T), H, HV, K, V, gate_scale=rng.choice([0.01, 1.0, 10.0]))
    h0 = rng.standard_normal((N, HV, K, V)).astype(np.float32)
    f = gdn.chunk_gated_delta_rule if fn == "chunk" else gdn.fused_recurrent_gated_delta_rule
    o, ht = f(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
              use_qk_l2norm_in_kernel=True)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, use_qk_l2norm=True)
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht, rh) <= F32_TOL
    empty = [n for n in range(N) if cu[n] == cu[n + 1]]
    for n in empty:  # a zero-length sequence's final state is its initial state
        np.testing.assert_array_equal(ht[n], h0[n])


def test_packed_3d_inputs(rng):
    H, HV, K, V = 2, 4, 32, 32
    cu = ragged_cu_seqlens(rng, 4, 100, with_empty=False)
    T = int(cu[-1])
    q, k, v, g, beta = make_inputs(rng, (T,), H, HV, K, V)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True, cu_seqlens=cu)
    assert o.shape == (T, HV, V)
    ro, rh = recurrence(q, k, v, g, beta, cu_seqlens=cu)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL


def test_mixed_dtypes_o_dtype_as_fla(rng):
    """fp32 q/k with fp16 v (fla's tests): o in q's dtype for the chunked form and the engine ops
    (fla 0.6's chunk_gated_delta_rule, vLLM's and SGLang's kernels), in v's for fla 0.6's
    fused_recurrent_gated_delta_rule; each held to the fp16 bound of the fp64 recurrence."""
    H, HV, K, V = 2, 4, 32, 48
    q, k, v, g, beta = make_inputs(rng, (1, 70), H, HV, K, V)
    v = v.astype(np.float16)
    h0 = rng.standard_normal((1, HV, K, V)).astype(np.float32)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0)
    for f, dt in ((gdn.chunk_gated_delta_rule, np.float32), (gdn.fused_recurrent_gated_delta_rule, np.float16)):
        o, ht = f(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True)
        assert o.dtype == dt and ht.dtype == np.float32, f.__name__
        assert rel_err(o, ro) <= F16_TOL and rel_err(ht, rh) <= F16_TOL, f.__name__
    for op in (gdn.prefill_, gdn.decode_):
        pool = h0.copy()
        o = op(q, k, v, g, beta, pool, np.array([0], np.int32))
        assert o.dtype == np.float32, op.__name__
        assert rel_err(o, ro) <= F16_TOL and rel_err(pool[0], rh[0]) <= F16_TOL, op.__name__


@pytest.mark.parametrize("gate_dtype", ["same", "fp32"])
def test_fp16_inputs(rng, gate_dtype):
    H, HV, K, V = 2, 4, 64, 64
    B, T = 2, 130
    gd = np.float16 if gate_dtype == "same" else np.float32
    q, k, v, g, beta = make_inputs(rng, (B, T), H, HV, K, V, dtype=np.float16, gate_dtype=gd)
    h0 = rng.standard_normal((B, HV, K, V)).astype(np.float32)
    for f in (gdn.chunk_gated_delta_rule, gdn.fused_recurrent_gated_delta_rule):
        o, ht = f(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True)
        assert o.dtype == np.float16
        ro, rh = recurrence(q, k, v, g, beta, initial_state=h0)  # on the rounded inputs
        assert rel_err(o, ro) <= F16_TOL
        assert rel_err(ht, rh) <= F16_TOL


def test_mixed_gate_dtypes_are_promoted(rng):
    # fp16 g with fp32 beta (models compute them in different precisions): both go in as fp32
    q, k, v, g, beta = make_inputs(rng, (1, 70), 1, 2, 32, 32, dtype=np.float16, gate_dtype=np.float32)
    o, _ = gdn.chunk_gated_delta_rule(q, k, v, g.astype(np.float16), beta)
    ro, _ = recurrence(q, k, v, g.astype(np.float16), beta)
    assert rel_err(o, ro) <= F16_TOL


def test_nan_stays_in_its_sequence(rng):
    """A batch's requests are independent: NaN in one sequence's inputs (q, k, v, g, beta and its
    initial state) leaves every other sequence's o and final state bit for bit as without it. The
    NaN sequence sits between partial chunks (70 = 64 + 6 tokens before it, 130 = 2 x 64 + 2 its own),
    whose rows past their end are the next sequence's tokens."""
    H, HV, D = 2, 4, 128
    cu = np.array([0, 70, 200, 400, 445], dtype=np.int32)
    T, bad = int(cu[-1]), slice(70, 200)
    q, k, v, g, beta = make_inputs(rng, (1, T), H, HV, D, D)
    h0 = (0.1 * rng.standard_normal((4, HV, D, D))).astype(np.float32)
    kw = dict(output_final_state=True, cu_seqlens=cu, use_qk_l2norm_in_kernel=True)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta=beta, initial_state=h0, **kw)
    for x in (q, k, v, g, beta):
        x[:, bad] = np.nan
    h0[1] = np.nan
    o2, ht2 = gdn.chunk_gated_delta_rule(q, k, v, g, beta=beta, initial_state=h0, **kw)
    keep = np.r_[0:70, 200:T]
    assert np.isfinite(o2[:, keep]).all() and np.isfinite(ht2[[0, 2, 3]]).all()
    assert np.array_equal(o2[:, keep], o[:, keep]) and np.array_equal(ht2[[0, 2, 3]], ht[[0, 2, 3]])


@pytest.mark.parametrize("g_mode,beta_mode", [("zero", "normal"), ("very_negative", "normal"),
                                              ("normal", "extremes"), ("very_negative", "extremes"),
                                              ("mixed_very_negative", "normal")])
@pytest.mark.parametrize("fn", ["chunk", "recurrent"])
def test_edge_gates(rng, fn, g_mode, beta_mode):
    H, HV, K, V = 2, 2, 32, 32
    q, k, v, g, beta = make_inputs(rng, (2, 140), H, HV, K, V, g_mode=g_mode, beta_mode=beta_mode)
    h0 = rng.standard_normal((2, HV, K, V)).astype(np.float32)
    f = gdn.chunk_gated_delta_rule if fn == "chunk" else gdn.fused_recurrent_gated_delta_rule
    o, ht = f(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht, rh) <= F32_TOL


def test_gate_scales(rng):
    for scale in (0.01, 0.1, 1.0, 3.0, 10.0):
        q, k, v, g, beta = make_inputs(rng, (1, 200), 2, 4, 32, 32, gate_scale=scale)
        o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True, scale=0.3)
        ro, rh = recurrence(q, k, v, g, beta, scale=0.3)
        assert rel_err(o, ro) <= F32_TOL, scale
        assert rel_err(ht, rh) <= F32_TOL, scale


def test_every_output_written_and_out_buffer(rng):
    q, k, v, g, beta = make_inputs(rng, (3, 65), 2, 2, 32, 32)
    out = nan_like(v.shape, np.float32)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, out=out, output_final_state=True)
    assert o is out
    assert np.isfinite(out).all() and np.isfinite(ht).all()


def test_strided_inputs(rng):
    # q, k, v as views of one fused projection [B, T, 2*H*K + HV*V] (strided, innermost contiguous)
    B, T, H, HV, K, V = 2, 90, 2, 4, 32, 32
    width = 2 * H * K + HV * V + 8
    x = rng.standard_normal((B, T, width)).astype(np.float32)
    q = x[..., :H * K].reshape(B, T, H, K)
    k = x[..., H * K:2 * H * K].reshape(B, T, H, K)
    v = x[..., 2 * H * K:2 * H * K + HV * V].reshape(B, T, HV, V)
    assert not q.flags.c_contiguous
    gb = np.empty((B, T, 2 * HV), np.float32)  # g and beta interleaved: head stride 2
    gb[..., ::2] = -np.logaddexp(0, -rng.standard_normal((B, T, HV)))
    gb[..., 1::2] = 1 / (1 + np.exp(-rng.standard_normal((B, T, HV))))
    g, beta = gb[..., ::2], gb[..., 1::2]
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True, use_qk_l2norm_in_kernel=True)
    ro, rh = recurrence(q, k, v, g, beta, use_qk_l2norm=True)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL
    # the same through the recurrence, and into a strided out
    big = nan_like((B, T, HV, V + 16), np.float32)
    o2, _ = gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, use_qk_l2norm_in_kernel=True,
                                                 out=big[..., :V])
    assert rel_err(o2, ro) <= F32_TOL
    assert np.isnan(big[..., V:]).all()  # nothing outside the view was written


def test_read_only_inputs(rng):
    q, k, v, g, beta = make_inputs(rng, (1, 64), 1, 1, 16, 16)
    for x in (q, k, v, g, beta):
        x.setflags(write=False)
    o, _ = gdn.chunk_gated_delta_rule(q, k, v, g, beta)
    assert rel_err(o, recurrence(q, k, v, g, beta)[0]) <= F32_TOL


def test_low_precision_initial_state_is_converted(rng):
    q, k, v, g, beta = make_inputs(rng, (1, 80), 1, 2, 32, 32)
    h0 = rng.standard_normal((1, 2, 32, 32)).astype(np.float16)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL


def test_fla_kwargs(rng):
    q, k, v, g, beta = make_inputs(rng, (1, 70), 1, 2, 32, 32)
    h0 = rng.standard_normal((1, 2, 32, 32)).astype(np.float32)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0, state_v_first=True)
    with pytest.warns(DeprecationWarning, match="transpose_state_layout"):
        o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                           transpose_state_layout=True, chunk_size=32, chunk_indices=None)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL
    o, ht = gdn.chunk_gdn(q, k, v, g, beta)
    assert ht is None
    with pytest.raises(TypeError, match="use_qk_l2norm"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm=True)
    with pytest.raises(ValueError, match="cp_context"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, cp_context=object())
    with pytest.raises(ValueError, match="chunk_size"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=128)
    with pytest.raises(ValueError, match="gk"):
        gdn.fused_recurrent_gated_delta_rule(q, k, v, g, gk=g, beta=beta)


def test_recurrent_defaults(rng):
    # fla: g defaults to no decay and beta to 1
    q, k, v, g, beta = make_inputs(rng, (1, 20), 1, 1, 16, 16)
    o, _ = gdn.fused_recurrent_gated_delta_rule(q, k, v)
    ro, _ = recurrence(q, k, v, np.zeros(g.shape), np.ones(beta.shape))
    assert rel_err(o, ro) <= F32_TOL


# ------------------------------------------------------------------------------------------------
# Gates computed in the kernel


@pytest.mark.parametrize("fn", ["chunk", "recurrent"])
@pytest.mark.parametrize("mode", ["fused", "gate_only", "beta_only", "neg_eigval", "no_dt_bias"])
def test_gates_in_kernel(rng, fn, mode):
    H, HV, K, V = 2, 4, 32, 32
    cu = ragged_cu_seqlens(rng, 3, 150)
    T = int(cu[-1])
    q, k, v, _, _ = make_inputs(rng, (1, T), H, HV, K, V)
    a = (rng.standard_normal((1, T, HV)) * 3).astype(np.float32)
    a[0, :5] = 25.0  # softplus(x) = x past 20
    b = rng.standard_normal((1, T, HV)).astype(np.float32)
    A_log = rng.uniform(-2, 1, HV).astype(np.float32)
    dt_bias = rng.standard_normal(HV).astype(np.float32)
    g_ref, beta_ref = fused_gates(a, b, A_log, dt_bias if mode != "no_dt_bias" else np.zeros(HV))
    kw = dict(cu_seqlens=cu, output_final_state=True)
    if mode in ("fused", "no_dt_bias"):
        kw.update(use_gate_in_kernel=True, A_log=A_log, dt_bias=None if mode == "no_dt_bias" else dt_bias,
                  use_beta_sigmoid_in_kernel=True)
        g_in, b_in = a, b
    elif mode == "gate_only":
        kw.update(use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
        g_in, b_in = a, beta_ref.astype(np.float32)
        beta_ref = b_in
    elif mode == "beta_only":
        kw.update(use_beta_sigmoid_in_kernel=True)
        g_in, b_in = g_ref.astype(np.float32), b
        g_ref = g_in
    else:  # allow_neg_eigval: beta = 2 sigmoid(b)
        kw.update(use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True,
                  allow_neg_eigval=True)
        g_in, b_in = a, b
        beta_ref = 2 * beta_ref
    if fn == "chunk":
        o, ht = gdn.chunk_gated_delta_rule(q, k, v, g_in, b_in, **kw)
    else:
        o, ht = gdn.fused_recurrent_gated_delta_rule(q, k, v, g_in, beta=b_in, **kw)
    ro, rh = recurrence(q, k, v, g_ref, beta_ref, cu_seqlens=cu)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL


# ------------------------------------------------------------------------------------------------
# State pools (engine variants)


@pytest.mark.parametrize("fn", ["prefill_", "decode_", "chunk_kwargs", "recurrent_kwargs"])
@pytest.mark.parametrize("state_v_first", [False, True])
def test_pool_in_place(rng, fn, state_v_first):
    H, HV, K, V = 2, 4, 32, 16
    N, slots = 5, 9
    if fn in ("decode_", "recurrent_kwargs"):
        cu = np.arange(N + 1, dtype=np.int32) * rng.integers(1, 3)  # one or two tokens each
    else:
        cu = ragged_cu_seqlens(rng, N, 100)
    T = int(cu[-1])
    q, k, v, g, beta = make_inputs(rng, (1, T), H, HV, K, V)
    shape = (slots, HV, V, K) if state_v_first else (slots, HV, K, V)
    pool = rng.standard_normal(shape).astype(np.float32)
    before = pool.copy()
    idx = rng.permutation(slots)[:N].astype(np.int32)
    idx[1] = -1  # no state: starts from zero, writes nothing
    ro, rh = recurrence(q, k, v, g, beta, initial_state=before, state_indices=idx, cu_seqlens=cu,
                        state_v_first=state_v_first)
    common = dict(cu_seqlens=cu, state_v_first=state_v_first)
    if fn == "prefill_":
        o = gdn.prefill_(q, k, v, g, beta, pool, idx, **common)
    elif fn == "decode_":
        o = gdn.decode_(q, k, v, g, beta, pool, idx, state_indices_cpu=idx.astype(np.int64), **common)
    elif fn == "chunk_kwargs":
        o, ret = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, state_indices=idx,
                                            inplace_final_state=True, **common)
        assert ret is pool
    else:
        o, ret = gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=pool,
                                                      ssm_state_indices=idx, inplace_final_state=True, **common)
        assert ret is pool
    assert rel_err(o, ro) <= F32_TOL
    for n in range(N):
        if idx[n] >= 0:
            assert rel_err(pool[idx[n]], rh[n]) <= F32_TOL
    untouched = sorted(set(range(slots)) - {int(i) for i in idx if i >= 0})
    np.testing.assert_array_equal(pool[untouched], before[untouched])


@pytest.mark.parametrize("fn", ["prefill_", "decode_"])
@pytest.mark.parametrize("state_v_first", [False, True])
def test_serving_pool(rng, fn, state_v_first):
    """vLLM-style padding on the null slot 0, has_initial_state, and separate read / write slots."""
    H, HV, K, V = 2, 4, 32, 16
    N = 7
    slots = 2 * N + 1
    if fn == "decode_":
        cu = np.arange(N + 1, dtype=np.int32) * 2
    else:
        cu = ragged_cu_seqlens(rng, N, 100)
    T = int(cu[-1])
    q, k, v, g, beta = make_inputs(rng, (1, T), H, HV, K, V)
    shape = (slots, HV, V, K) if state_v_first else (slots, HV, K, V)
    pool = rng.standard_normal(shape).astype(np.float32)
    before = pool.copy()
    reads = (1 + rng.permutation(N)).astype(np.int32)
    writes = (1 + N + rng.permutation(N)).astype(np.int32)
    padding = np.array([0, 1, 0, 0, 1, 0, 0], bool)  # two padded entries, both on slot 0
    reads[padding] = 0
    writes[padding] = 0
    has_initial = np.array([1, 1, 0, 1, 1, 1, 0], bool)
    # The oracle: padding and absent sequences start from zeros (negative index there).
    ref_idx = np.where(padding | ~has_initial, -1, reads).astype(np.int32)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=before, state_indices=ref_idx, cu_seqlens=cu,
                        state_v_first=state_v_first)
    f = gdn.prefill_ if fn == "prefill_" else gdn.decode_
    o = f(q, k, v, g, beta, pool, reads, cu_seqlens=cu, state_v_first=state_v_first, null_slot=0,
          has_initial_state=has_initial, final_state_indices=writes)
    assert rel_err(o, ro) <= F32_TOL
    for n in range(N):
        if not padding[n]:
            assert rel_err(pool[writes[n]], rh[n]) <= F32_TOL
    untouched = sorted(set(range(slots)) - {int(writes[n]) for n in range(N) if not padding[n]})
    np.testing.assert_array_equal(pool[untouched], before[untouched])  # slot 0 and every read row


@pytest.mark.parametrize("fn", ["prefill_", "decode_"])
@pytest.mark.parametrize("state_v_first", [False, True])
def test_fp16_pool_with_padded_rows(rng, fn, state_v_first):
    """An fp16 pool viewed out of a wider buffer (slot stride > HV*K*V): fp32 arithmetic, the final
    state rounded once (fp16 bound 1e-3; o at the fp32 bound, from the same rounded states); the
    padding and the rows nobody writes come back bitwise unchanged."""
    H, HV, K, V = 2, 4, 32, 16
    N, slots, pad = 5, 9, 24
    cu = np.arange(N + 1, dtype=np.int32) * 2 if fn == "decode_" else ragged_cu_seqlens(rng, N, 100)
    T = int(cu[-1])
    q, k, v, g, beta = make_inputs(rng, (1, T), H, HV, K, V)
    row = HV * K * V
    base = rng.standard_normal((slots, row + pad)).astype(np.float16)
    shape = (slots, HV, V, K) if state_v_first else (slots, HV, K, V)
    pool = base[:, :row].reshape(shape)
    assert np.shares_memory(pool, base) and pool.strides[0] == (row + pad) * 2
    before = base.copy()
    idx = rng.permutation(slots)[:N].astype(np.int32)
    idx[3] = -1
    ro, rh = recurrence(q, k, v, g, beta, initial_state=pool.astype(np.float32), state_indices=idx, cu_seqlens=cu,
                        state_v_first=state_v_first)
    f = gdn.prefill_ if fn == "prefill_" else gdn.decode_
    o = f(q, k, v, g, beta, pool, idx, cu_seqlens=cu, state_v_first=state_v_first)
    assert rel_err(o, ro) <= F32_TOL
    for n in range(N):
        if idx[n] >= 0:
            assert rel_err(pool[idx[n]].astype(np.float32), rh[n]) <= F16_TOL
    np.testing.assert_array_equal(base[:, row:].view(np.uint16), before[:, row:].view(np.uint16))
    untouched = sorted(set(range(slots)) - {int(i) for i in idx if i >= 0})
    np.testing.assert_array_equal(base[untouched].view(np.uint16), before[untouched].view(np.uint16))


def test_low_precision_pool_read_only_gives_final_in_its_dtype(rng):
    """chunk_gated_delta_rule reading an fp16 pool (state_indices, not in place) returns the final
    states in the pool's dtype: one state dtype per call."""
    H, HV, K, V = 2, 2, 16, 16
    cu = np.array([0, 5, 70], np.int32)
    q, k, v, g, beta = make_inputs(rng, (1, 70), H, HV, K, V)
    pool = rng.standard_normal((4, HV, K, V)).astype(np.float16)
    idx = np.array([2, 0], np.int32)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, state_indices=idx, cu_seqlens=cu,
                                       output_final_state=True)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=pool.astype(np.float32), state_indices=idx, cu_seqlens=cu)
    assert ht.dtype == np.float16
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht.astype(np.float32), rh) <= F16_TOL


def test_pool_bad_row_strides(rng):
    H, HV, K, V = 2, 2, 16, 16
    cu = np.array([0, 3, 5], np.int32)
    q, k, v, g, beta = make_inputs(rng, (1, 5), H, HV, K, V)
    idx = np.array([1, 0], np.int32)
    row = HV * K * V
    flat = np.zeros(4 * row, np.float32)
    overlapping = np.lib.stride_tricks.as_strided(flat, (3, HV, K, V), ((row - 16) * 4, K * V * 4, V * 4, 4))
    with pytest.raises(ValueError, match=r"row stride of 496 elements; expected >= HV \* 16 \* 16 = 512"):
        gdn.prefill_(q, k, v, g, beta, overlapping, idx, cu_seqlens=cu)
    transposed = np.zeros((3, HV, V, K), np.float32).transpose(0, 1, 3, 2)
    with pytest.raises(ValueError, match="expected each row .* contiguous"):
        gdn.prefill_(q, k, v, g, beta, transposed, idx, cu_seqlens=cu)
    with pytest.raises(TypeError, match="has dtype int32; expected float32, float16 or bfloat16"):
        gdn.decode_(q, k, v, g, beta, np.zeros((3, HV, K, V), np.int32), idx, cu_seqlens=cu)


def test_serving_pool_bad_args(rng):
    q, k, v, g, beta = make_inputs(rng, (1, 20), 2, 4, 32, 16)
    cu = np.array([0, 12, 20], np.int32)
    pool = rng.standard_normal((5, 4, 32, 16)).astype(np.float32)
    idx = np.array([1, 2], np.int32)
    with pytest.raises(ValueError, match="null_slot is 9"):
        gdn.prefill_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, null_slot=9)
    with pytest.raises(TypeError, match="initial_state_present has dtype"):
        gdn.prefill_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, has_initial_state=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="initial_state_present has shape"):
        gdn.prefill_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, has_initial_state=np.ones(3, bool))
    with pytest.raises(ValueError, match="repeats row 3"):
        gdn.prefill_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, final_state_indices=np.array([3, 3], np.int32))


def test_pool_read_only_with_dense_final(rng):
    H, HV, K, V = 1, 2, 16, 16
    N, slots = 3, 6
    cu = ragged_cu_seqlens(rng, N, 80, with_empty=False)
    q, k, v, g, beta = make_inputs(rng, (1, int(cu[-1])), H, HV, K, V)
    pool = rng.standard_normal((slots, HV, K, V)).astype(np.float32)
    before = pool.copy()
    idx = np.array([4, -1, 0], np.int64)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=pool, state_indices=idx, cu_seqlens=cu,
                                       output_final_state=True)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=before, state_indices=idx, cu_seqlens=cu)
    np.testing.assert_array_equal(pool, before)
    assert ht.shape == (N, HV, K, V)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rh) <= F32_TOL


def test_decode_fused_gate_dense_state(rng):
    N, H, HV, K, V = 4, 2, 4, 32, 32
    q, k, v, _, _ = make_inputs(rng, (N, 1), H, HV, K, V)
    a = rng.standard_normal((N, 1, HV)).astype(np.float32)
    b = rng.standard_normal((N, 1, HV)).astype(np.float32)
    A_log = rng.uniform(-1, 1, HV).astype(np.float32)
    dt_bias = rng.standard_normal(HV).astype(np.float32)
    state = rng.standard_normal((N, HV, K, V)).astype(np.float32)
    before = state.copy()
    o = gdn.decode_(q, k, v, a, b, state, A_log=A_log, dt_bias=dt_bias, use_qk_l2norm_in_kernel=True)
    g, beta = fused_gates(a, b, A_log, dt_bias)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=before, use_qk_l2norm=True)
    assert rel_err(o, ro) <= F32_TOL and rel_err(state, rh) <= F32_TOL


@pytest.mark.parametrize("mode", ["pool_negative_index", "no_final_state", "no_state_at_all"])
def test_decode_without_final_state_row(rng, mode):
    """The CPU recurrence keeps a sequence's state in workspace scratch when no final-state row
    receives it (a negative pool index, or no final state): the Python path must pass a workspace."""
    N, H, HV, K, V = 4, 2, 4, 32, 16
    q, k, v, g, beta = make_inputs(rng, (N, 1), H, HV, K, V)
    if mode == "pool_negative_index":
        pool = rng.standard_normal((7, HV, K, V)).astype(np.float32)
        before = pool.copy()
        idx = np.array([3, -1, 0, -1], np.int32)
        o = gdn.decode_(q, k, v, g, beta, pool, idx)
        ro, rh = recurrence(q, k, v, g, beta, initial_state=before, state_indices=idx)
        for n in (0, 2):
            assert rel_err(pool[idx[n]], rh[n]) <= F32_TOL
        untouched = [1, 2, 4, 5, 6]
        np.testing.assert_array_equal(pool[untouched], before[untouched])
    else:
        h0 = rng.standard_normal((N, HV, K, V)).astype(np.float32) if mode == "no_final_state" else None
        o, ht = gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=h0,
                                                     output_final_state=False)
        assert ht is None
        ro, _ = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(o, ro) <= F32_TOL


def test_cpu_decode_asks_for_its_workspace(rng):
    """The binding sizes the recurrent call's workspace from recurrent_gated_delta_rule_workspace_size:
    without one the CPU decode refuses to run (so the test above exercises the workspace)."""
    from gdn import _C
    from gdn import _signature as sig

    N, H, HV, K, V = 2, 1, 2, 16, 16
    q, k, v, g, beta = make_inputs(rng, (N, 1), H, HV, K, V)
    o = nan_like(v.shape, np.float32)
    values = {n: None for n in sig.OP_ARG_NAMES}
    values.update(q=q, k=k, v=v, g=g, beta=beta, o=o, final_is_initial=False, null_slot=-1, checkpoint_every_chunks=1,
                  scale=K ** -0.5,
                  use_qk_l2norm=False,
                  state_v_first=False, fused_gate=False, recurrent=True)
    args = sig.pack_op_args(**values)
    with pytest.raises(ValueError, match="workspace is None"):
        sig.binding_call(_C.forward, args, lambda x: x, workspace=None, stream=0, num_threads=1)
    sizes = []

    def alloc(n):
        sizes.append(n)
        return np.empty((n,), np.uint8)

    sig.binding_call(_C.forward, args, lambda x: x, workspace=alloc, stream=0, num_threads=1)
    assert sizes and sizes[0] >= K * V * 4
    assert rel_err(o, recurrence(q, k, v, g, beta)[0]) <= F32_TOL
