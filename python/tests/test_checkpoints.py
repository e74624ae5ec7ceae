"""prefill_ with prefix-caching checkpoints (the state every 64 * n tokens into named pool rows):
each stored row is bitwise the final state of a separate prefill_ on that prefix, close to the
float64 recurrence, and rows nothing names stay bitwise unchanged; ragged lengths with zero-length
padding, both state layouts, a slot map or a dense buffer, torch on the CPU and on CUDA (every CUDA
forward path: the exact stages, the tensor-core chain at D = 64 and D = 128, 16-bit pools). Bad
arguments raise with clear messages."""

from __future__ import annotations

import numpy as np
import pytest

import gdn
from gdn_ref import make_inputs, nan_like, recurrence, rel_err

F32_TOL = 1e-4
H, HV, K, V = 2, 4, 32, 16


def _inputs(rng, lens):
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return cu, make_inputs(rng, (1, int(cu[-1])), H, HV, K, V)


def _prefix_state(q, k, v, g, beta, start, b, state0, state_v_first):
    """The final state of a separate prefill_ on tokens [start, start + b) from state0."""
    sl = lambda x: np.ascontiguousarray(x[:, start:start + b])  # noqa: E731
    st = state0[None].copy()
    gdn.prefill_(sl(q), sl(k), sl(v), sl(g), sl(beta), st, state_v_first=state_v_first,
                 cu_seqlens=np.array([0, b], np.int32))
    return st[0]


@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("indexed", [True, False])
@pytest.mark.parametrize("every", [1, 2])
def test_prefill_checkpoints(rng, state_v_first, indexed, every):
    lens = np.array([200, 0, 128, 330, 64])
    N, M = len(lens), 3
    cu, (q, k, v, g, beta) = _inputs(rng, lens)
    row = (HV, V, K) if state_v_first else (HV, K, V)
    pool = rng.standard_normal((N,) + row).astype(np.float32)
    state0 = pool.copy()
    if indexed:
        slots = N * M + 3
        ck = rng.standard_normal((slots,) + row).astype(np.float32)
        idx = rng.permutation(slots)[: N * M].reshape(N, M).astype(np.int64)
        idx[0, 1] = -1  # not stored
        rows = idx
    else:
        ck = rng.standard_normal((N, M) + row).astype(np.float32)
        idx = None
        rows = np.arange(N * M).reshape(N, M)
    before = ck.copy()
    out = nan_like(v.shape, np.float32)
    gdn.prefill_(q, k, v, g, beta, pool, np.arange(N, dtype=np.int32), cu_seqlens=cu, state_v_first=state_v_first,
                 out=out, checkpoints=ck, checkpoint_indices=idx, checkpoint_every_chunks=every)
    ro, rf, rt = recurrence(q, k, v, g, beta, initial_state=state0, cu_seqlens=cu, state_v_first=state_v_first,
                            token_states=True)
    assert rel_err(out, ro) <= F32_TOL and rel_err(pool, rf) <= F32_TOL
    flat = ck.reshape((-1,) + row)
    flat_before = before.reshape((-1,) + row)
    written = set()
    for n in range(N):
        for j in range(M):
            b = (j + 1) * every * 64
            r = int(rows[n, j])
            if b > lens[n] or r < 0:
                continue
            written.add(r)
            np.testing.assert_array_equal(flat[r], _prefix_state(q, k, v, g, beta, cu[n], b, state0[n], state_v_first))
            assert rel_err(flat[r], rt[cu[n] + b - 1]) <= F32_TOL, (n, j)
    assert written
    untouched = sorted(set(range(flat.shape[0])) - written)
    np.testing.assert_array_equal(flat[untouched], flat_before[untouched])


def test_prefill_checkpoints_torch():
    """The torch custom op carries checkpoints as a mutated argument."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    lens = np.array([130, 64])
    cu, (q, k, v, g, beta) = _inputs(rng, lens)
    t = lambda x: torch.from_numpy(np.ascontiguousarray(x))  # noqa: E731
    pool = torch.zeros(2, HV, K, V)
    ck = torch.full((2, 2, HV, K, V), float("nan"))
    gdn.prefill_(t(q), t(k), t(v), t(g), t(beta), pool, cu_seqlens=t(cu), checkpoints=ck)
    ref = _prefix_state(q, k, v, g, beta, 0, 128, np.zeros((HV, K, V), np.float32), False)
    np.testing.assert_array_equal(ck[0, 1].numpy(), ref)
    assert torch.isnan(ck[1, 1]).all()  # sequence 1 has one boundary


def _cuda_ready():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and gdn.cuda_available()


# (input dtype, K, V, pool dtype): on CUDA the exact stages (fp32, K != V), the wgmma chain (D = 64
# padded to 128 columns, and D = 128) with fp32 and 16-bit pools (written by the chain, rounded once).
TORCH_CONFIGS = [("float32", 32, 16, "float32"), ("bfloat16", 64, 64, "float32"), ("float16", 64, 64, "float16"),
                 ("bfloat16", 128, 128, "float32"), ("bfloat16", 128, 128, "bfloat16")]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not _cuda_ready(), reason="needs a CUDA device and gdn built with CUDA"))])
@pytest.mark.parametrize("dtype, Kd, Vd, state_dtype", TORCH_CONFIGS)
@pytest.mark.parametrize("state_v_first", [False, True])
def test_prefill_checkpoints_torch_paths(device, dtype, Kd, Vd, state_dtype, state_v_first):
    """Each stored row bitwise the final state of a prefill_ on the prefix (same device and path: no
    split, the sequences are short), close to the float64 recurrence; unnamed rows untouched."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    lens = np.array([200, 0, 128, 330, 64])
    N, M, every = len(lens), 3, 2 if state_v_first else 1
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tdt, sdt = getattr(torch, dtype), getattr(torch, state_dtype)
    on = lambda x, dt: torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=dt)  # noqa: E731
    q, k, v, g, beta = make_inputs(rng, (1, int(cu[-1])), H, HV, Kd, Vd)
    q, k, v, g, beta = on(q, tdt), on(k, tdt), on(v, tdt), on(g, torch.float32), on(beta, torch.float32)
    row = (HV, Vd, Kd) if state_v_first else (HV, Kd, Vd)
    state0 = on(0.5 * rng.standard_normal((N,) + row), sdt)
    pool = state0.clone()
    slots = N * M + 3
    idx = rng.permutation(slots)[: N * M].reshape(N, M).astype(np.int64)
    idx[0, 1] = -1  # not stored
    ck = torch.full((slots,) + row, float("nan"), dtype=sdt, device=device)
    gdn.prefill_(q, k, v, g, beta, pool, torch.arange(N, dtype=torch.int32, device=device),
                 cu_seqlens=on(cu, torch.int32), state_v_first=state_v_first, checkpoints=ck,
                 checkpoint_indices=on(idx, torch.int64), checkpoint_every_chunks=every)
    host = lambda x: x.double().cpu().numpy()  # noqa: E731
    _, _, rt = recurrence(host(q), host(k), host(v), host(g), host(beta), initial_state=host(state0), cu_seqlens=cu,
                          state_v_first=state_v_first, token_states=True)
    coarse = dtype != "float32" or state_dtype != "float32"
    tol = 5e-3 if coarse else (2e-3 if device == "cuda" else F32_TOL)
    written = set()
    for n in range(N):
        for j in range(M):
            b, r = (j + 1) * every * 64, int(idx[n, j])
            if b > lens[n] or r < 0:
                continue
            written.add(r)
            st = state0[n:n + 1].clone()
            sl = slice(int(cu[n]), int(cu[n]) + b)
            gdn.prefill_(q[:, sl], k[:, sl], v[:, sl], g[:, sl], beta[:, sl], st, state_v_first=state_v_first,
                         cu_seqlens=on(np.array([0, b]), torch.int32))
            assert torch.equal(ck[r], st[0]), (n, j)
            assert rel_err(host(ck[r]), rt[cu[n] + b - 1]) <= tol, (n, j)
    assert written
    untouched = sorted(set(range(slots)) - written)
    assert torch.isnan(ck[untouched]).all()


def test_prefill_checkpoints_bad_args():
    rng = np.random.default_rng(6)
    cu, (q, k, v, g, beta) = _inputs(rng, np.array([128, 64]))
    pool = np.zeros((2, HV, K, V), np.float32)
    ck = np.zeros((5, HV, K, V), np.float32)
    idx = np.array([[0, 1], [2, 3]], np.int64)
    run = lambda **kw: gdn.prefill_(q, k, v, g, beta, pool, cu_seqlens=cu, checkpoints=ck, **kw)  # noqa: E731
    with pytest.raises(ValueError, match=r"checkpoints.every_chunks is 0; expected >= 1"):
        run(checkpoint_indices=idx, checkpoint_every_chunks=0)
    with pytest.raises(ValueError, match=r"checkpoints.pool.indices\[1\]\[0\] is 5; expected < num_slots = 5"):
        run(checkpoint_indices=np.array([[0, 1], [5, 3]], np.int64))
    with pytest.raises(ValueError, match=r"row 1 is written twice"):
        run(checkpoint_indices=np.array([[0, 1], [1, 3]], np.int64))
    with pytest.raises(ValueError, match=r"checkpoint_indices has shape"):
        run(checkpoint_indices=np.array([0, 1], np.int64))
    with pytest.raises(ValueError, match=r"checkpoints has shape"):
        run()  # a 4-D pool needs indices
    with pytest.raises(ValueError, match=r"checkpoint_indices is given without checkpoints"):
        gdn.prefill_(q, k, v, g, beta, pool, cu_seqlens=cu, checkpoint_indices=idx)


def test_chunk_op_checkpoints():
    """fla-style chunk_gated_delta_rule takes the checkpoint keywords too; the recurrence rejects them."""
    rng = np.random.default_rng(7)
    cu, (q, k, v, g, beta) = _inputs(rng, np.array([192]))
    h0 = rng.standard_normal((1, HV, K, V)).astype(np.float32)
    ck = np.full((1, 3, HV, K, V), np.nan, np.float32)
    _, final = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                                          checkpoints=ck, checkpoint_every_chunks=1)
    np.testing.assert_array_equal(ck[0, 2], final[0])  # the last boundary is the end: the final state
    np.testing.assert_array_equal(ck[0, 0], _prefix_state(q, k, v, g, beta, 0, 64, h0[0], False))
    with pytest.raises(ValueError, match=r"checkpoints are for the chunked forward"):
        gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=h0, cu_seqlens=cu, checkpoints=ck)
