"""decode_ with per-token states (speculative decoding's verify) against the float64 recurrence:
vLLM's convention (2-D state_indices, num_accepted_tokens, the null slot 0 for padding) and
SGLang's (the pool row read, token_states buffer by group or densely, disable_state_update), on
ragged batches with zero-length padding, fixed [N, T] batches, both state layouts, NaN-filled
outputs; rows nothing writes stay bitwise unchanged. Bad arguments raise with clear messages."""

from __future__ import annotations

import numpy as np
import pytest

import gdn
from gdn_ref import make_inputs, nan_like, recurrence, rel_err

F32_TOL = 1e-4
H, HV, K, V = 2, 4, 32, 16


def _batch(rng, N, M, varlen):
    """Lengths (padding: every fourth sequence, zero-length when varlen), cu_seqlens and inputs."""
    padding = np.arange(N) % 4 == 3
    if varlen:
        lens = np.where(padding, 0, rng.integers(1, M + 1, size=N))
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        q, k, v, g, beta = make_inputs(rng, (1, int(cu[-1])), H, HV, K, V)
    else:
        lens = np.full(N, M)
        cu = None
        q, k, v, g, beta = make_inputs(rng, (N, M), H, HV, K, V)
    return padding, lens, cu, (q, k, v, g, beta)


def _starts(lens):
    return np.concatenate([[0], np.cumsum(lens)])[:-1]


@pytest.mark.parametrize("varlen", [True, False])
@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_vllm_spec_decode(rng, varlen, state_v_first, index_dtype):
    N, M = 6, 4
    padding, lens, cu, (q, k, v, g, beta) = _batch(rng, N, M, varlen)
    slots = 1 + N * M + 2
    shape = (slots, HV, V, K) if state_v_first else (slots, HV, K, V)
    pool = rng.standard_normal(shape).astype(np.float32)
    before = pool.copy()
    idx = (1 + rng.permutation(slots - 1)[: N * M]).reshape(N, M).astype(index_dtype)
    idx[padding] = 0  # NULL_BLOCK_ID
    idx[0, M - 1] = -1  # not stored (and read as zeros if sequence 0 starts there)
    acc = np.where(padding, 1, rng.integers(1, M + 1, size=N)).astype(index_dtype)
    read = np.array([-1 if padding[n] or idx[n, acc[n] - 1] <= 0 else idx[n, acc[n] - 1] for n in range(N)])
    ro, _, rt = recurrence(q, k, v, g, beta, initial_state=before, state_indices=read, cu_seqlens=cu,
                           state_v_first=state_v_first, token_states=True)
    out = nan_like(v.shape, np.float32)
    o = gdn.decode_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, state_v_first=state_v_first, null_slot=0,
                    num_accepted_tokens=acc, out=out)
    assert o is out and rel_err(o, ro) <= F32_TOL
    written = set()
    for n, s in enumerate(_starts(lens)):
        for t in range(lens[n]):
            if idx[n, t] > 0:
                written.add(int(idx[n, t]))
                assert rel_err(pool[idx[n, t]], rt[s + t]) <= F32_TOL, (n, t)
    untouched = sorted(set(range(slots)) - written)
    np.testing.assert_array_equal(pool[untouched], before[untouched])


@pytest.mark.parametrize("state_v_first", [False, True])
def test_vllm_spec_decode_fp16_pool(rng, state_v_first):
    """An fp16 pool with a padded slot stride: every stored token state rounded once (fp16 bound
    1e-3), o from the fp32 running state; padding bytes and rows nothing writes unchanged."""
    N, M, pad = 6, 4, 40
    padding, lens, cu, (q, k, v, g, beta) = _batch(rng, N, M, True)
    slots = 1 + N * M + 2
    row = HV * K * V
    base = rng.standard_normal((slots, row + pad)).astype(np.float16)
    pool = base[:, :row].reshape((slots, HV, V, K) if state_v_first else (slots, HV, K, V))
    before = base.copy()
    idx = (1 + rng.permutation(slots - 1)[: N * M]).reshape(N, M).astype(np.int32)
    idx[padding] = 0
    acc = np.where(padding, 1, rng.integers(1, M + 1, size=N)).astype(np.int32)
    read = np.array([-1 if padding[n] else idx[n, acc[n] - 1] for n in range(N)])
    ro, _, rt = recurrence(q, k, v, g, beta, initial_state=pool.astype(np.float32), state_indices=read,
                           cu_seqlens=cu, state_v_first=state_v_first, token_states=True)
    o = gdn.decode_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, state_v_first=state_v_first, null_slot=0,
                    num_accepted_tokens=acc)
    assert rel_err(o, ro) <= F32_TOL
    written = set()
    for n, s in enumerate(_starts(lens)):
        for t in range(lens[n]):
            if idx[n, t] > 0:
                written.add(int(idx[n, t]))
                assert rel_err(pool[idx[n, t]].astype(np.float32), rt[s + t]) <= 1e-3, (n, t)
    untouched = sorted(set(range(slots)) - written)
    np.testing.assert_array_equal(base[untouched].view(np.uint16), before[untouched].view(np.uint16))
    np.testing.assert_array_equal(base[:, row:].view(np.uint16), before[:, row:].view(np.uint16))


@pytest.mark.parametrize("groups", [True, False])
@pytest.mark.parametrize("disable_state_update", [True, False])
@pytest.mark.parametrize("state_v_first", [False, True])
def test_sglang_spec_decode(rng, groups, disable_state_update, state_v_first):
    N, M = 7, 3
    padding, lens, cu, (q, k, v, g, beta) = _batch(rng, N, M, True)
    slots = N + 2
    tail = (HV, V, K) if state_v_first else (HV, K, V)
    pool = rng.standard_normal((slots,) + tail).astype(np.float32)
    before = pool.copy()
    idx = rng.permutation(slots)[:N].astype(np.int32)
    idx[padding] = -1
    S = N + 1 if groups else N
    buf = np.full((S, M) + tail, np.nan, np.float32)
    tok = rng.permutation(S)[:N].astype(np.int64) if groups else None
    if groups:
        tok[padding] = -1
    ro, rh, rt = recurrence(q, k, v, g, beta, initial_state=before, state_indices=idx, cu_seqlens=cu,
                            state_v_first=state_v_first, token_states=True)
    o = gdn.decode_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, state_v_first=state_v_first, token_states=buf,
                    token_state_indices=tok, token_state_indices_cpu=None if tok is None else tok.copy(),
                    disable_state_update=disable_state_update)
    assert rel_err(o, ro) <= F32_TOL
    stored = np.zeros((S, M), bool)
    for n, s in enumerate(_starts(lens)):
        row = (tok[n] if groups else n)
        if row < 0:
            continue
        for t in range(lens[n]):
            stored[row, t] = True
            assert rel_err(buf[row, t], rt[s + t]) <= F32_TOL, (n, t)
    assert np.isnan(buf[~stored]).all(), "a buffer entry no token names was written"
    if disable_state_update:
        np.testing.assert_array_equal(pool, before)
    else:
        for n in range(N):
            if idx[n] >= 0:
                assert rel_err(pool[idx[n]], rh[n]) <= F32_TOL
        untouched = sorted(set(range(slots)) - {int(i) for i in idx if i >= 0})
        np.testing.assert_array_equal(pool[untouched], before[untouched])


def test_spec_decode_torch(rng):
    """The torch custom op carries token_states as a mutated argument (CPU; CUDA when present)."""
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and gdn.cuda_available() else [])
    N, M = 5, 3
    padding, lens, cu, arrays = _batch(rng, N, M, True)
    pool = rng.standard_normal((1 + N * M, HV, K, V)).astype(np.float32)
    idx = (1 + rng.permutation(N * M)).reshape(N, M).astype(np.int32)
    idx[padding] = 0
    acc = np.where(padding, 1, rng.integers(1, M + 1, size=N)).astype(np.int32)
    read = np.array([-1 if padding[n] else idx[n, acc[n] - 1] for n in range(N)])
    ro, _, rt = recurrence(*arrays, initial_state=pool, state_indices=read, cu_seqlens=cu, token_states=True)
    for dev in devices:
        q, k, v, g, beta = (torch.from_numpy(x).to(dev) for x in arrays)
        tpool = torch.from_numpy(pool.copy()).to(dev)
        o = gdn.decode_(q, k, v, g, beta, tpool, torch.from_numpy(idx).to(dev), null_slot=0,
                        cu_seqlens=torch.from_numpy(cu).to(dev), cu_seqlens_cpu=torch.from_numpy(cu),
                        num_accepted_tokens=torch.from_numpy(acc).to(dev),
                        num_accepted_tokens_cpu=torch.from_numpy(acc), state_indices_cpu=torch.from_numpy(idx))
        assert rel_err(o.cpu().numpy(), ro) <= F32_TOL
        got = tpool.cpu().numpy()
        for n, s in enumerate(_starts(lens)):
            for t in range(lens[n]):
                assert rel_err(got[idx[n, t]], rt[s + t]) <= F32_TOL, (dev, n, t)


def _vllm_args(rng):
    N, M = 3, 2
    q, k, v, g, beta = make_inputs(rng, (1, 5), H, HV, K, V)
    cu = np.array([0, 2, 3, 5], np.int32)
    pool = rng.standard_normal((1 + N * M, HV, K, V)).astype(np.float32)
    idx = np.arange(1, 1 + N * M, dtype=np.int32).reshape(N, M)
    return (q, k, v, g, beta, pool, idx), dict(cu_seqlens=cu, null_slot=0,
                                               num_accepted_tokens=np.ones(N, np.int32))


def test_spec_decode_bad_args(rng):
    args, kw = _vllm_args(rng)
    pool = args[5]
    before = pool.copy()
    with pytest.raises(ValueError, match=r"num_accepted\[1\] is 0; expected in \[1, max_tokens = 2\]"):
        gdn.decode_(*args, **dict(kw, num_accepted_tokens=np.array([1, 0, 1], np.int32)))
    with pytest.raises(ValueError, match=r"num_accepted\[2\] is 3"):
        gdn.decode_(*args, **dict(kw, num_accepted_tokens=np.array([1, 1, 3], np.int32)))
    bad = args[6].copy()
    bad[2, 1] = 99
    with pytest.raises(ValueError, match=r"token_states.pool.indices\[2\]\[1\] is 99; expected < num_slots = 7"):
        gdn.decode_(*args[:6], bad, **kw)
    bad = args[6].copy()
    bad[1, 0] = bad[0, 0]
    with pytest.raises(ValueError, match="is written twice"):
        gdn.decode_(*args[:6], bad, **kw)
    with pytest.raises(ValueError, match="need num_accepted_tokens"):
        gdn.decode_(*args, **dict(kw, num_accepted_tokens=None))
    with pytest.raises(ValueError, match="for decode_ only"):
        gdn.prefill_(*args, cu_seqlens=kw["cu_seqlens"])
    np.testing.assert_array_equal(pool, before)
    q, k, v, g, beta, pool, _ = args
    idx1 = np.array([1, 2, 3], np.int32)
    with pytest.raises(ValueError, match="token_state_indices has shape"):
        gdn.decode_(q, k, v, g, beta, pool, idx1, cu_seqlens=kw["cu_seqlens"], token_states=pool.copy(),
                    token_state_indices=idx1)
    with pytest.raises(ValueError, match="token_states has shape"):
        gdn.decode_(q, k, v, g, beta, pool, idx1, cu_seqlens=kw["cu_seqlens"],
                    token_states=np.zeros((3, 2, HV, K, V + 1), np.float32))
    with pytest.raises(ValueError, match="sequence 0 has 2 tokens; expected at most token_states.max_tokens = 1"):
        gdn.decode_(q, k, v, g, beta, pool, idx1, cu_seqlens=kw["cu_seqlens"],
                    token_states=np.zeros((3, 1, HV, K, V), np.float32))
    with pytest.raises(ValueError, match="num_accepted_tokens needs"):
        gdn.decode_(q, k, v, g, beta, pool, idx1, cu_seqlens=kw["cu_seqlens"], num_accepted_tokens=idx1)


@pytest.mark.parametrize("vllm", [True, False])
def test_eagle_tree(rng, vllm):
    """retrieve_parent_token: each token continues from its parent's state; the oracle runs the
    recurrence along each token's path from the sequence's first token."""
    N, M = 4, 5
    padding, lens, cu, (q, k, v, g, beta) = _batch(rng, N, M, True)
    parents = np.full((N, M), -1, np.int32)
    for n in range(N):
        for t in range(1, M):
            parents[n, t] = rng.integers(-1, t)  # -1: the previous token
    pool = rng.standard_normal((1 + N * M, HV, K, V)).astype(np.float32)
    before = pool.copy()
    if vllm:
        idx = (1 + rng.permutation(N * M)).reshape(N, M).astype(np.int32)
        idx[padding] = 0
        acc = np.where(padding, 1, rng.integers(1, M + 1, size=N)).astype(np.int32)
        read = [-1 if padding[n] else int(idx[n, acc[n] - 1]) for n in range(N)]
        o = gdn.decode_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, null_slot=0, num_accepted_tokens=acc,
                        retrieve_parent_token=parents)
    else:
        read = list(range(N))
        buf = np.full((N, M, HV, K, V), np.nan, np.float32)
        o = gdn.decode_(q, k, v, g, beta, pool, np.arange(N, dtype=np.int32), cu_seqlens=cu, token_states=buf,
                        disable_state_update=True, retrieve_parent_token=parents)
        np.testing.assert_array_equal(pool, before)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    qf, kf, vf, gf, bf, of = (flat(x) for x in (q, k, v, g, beta, o))
    for n, s in enumerate(_starts(lens)):
        h0 = before[read[n]:read[n] + 1] if read[n] >= 0 else None
        for t in range(lens[n]):
            path, u = [], t
            while u >= 0:
                path.insert(0, s + u)
                u = -1 if u == 0 else (u - 1 if parents[n, u] < 0 else int(parents[n, u]))
            ro, rh = recurrence(qf[path], kf[path], vf[path], gf[path], bf[path], initial_state=h0)
            assert rel_err(of[s + t], ro[-1]) <= F32_TOL, (n, t)
            got = pool[idx[n, t]] if vllm else buf[n, t]
            if not vllm or idx[n, t] > 0:
                assert rel_err(got, rh[0]) <= F32_TOL, (n, t)
    fixed = make_inputs(rng, (N, M), H, HV, K, V)  # M tokens each
    bad = parents.copy()
    bad[0, 2] = 2
    with pytest.raises(ValueError, match=r"parents\[0\]\[2\] is 2; expected a token before 2"):
        gdn.decode_(*fixed, pool, np.arange(N, dtype=np.int32), token_states=np.zeros((N, M, HV, K, V), np.float32),
                    retrieve_parent_token=bad)
