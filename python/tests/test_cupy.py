"""cupy arrays on the CUDA backend (zero-copy through DLPack, run on cupy's current stream).
Skipped without cupy, a GPU, or a gdn built with CUDA."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import gdn  # noqa: E402
from gdn_ref import make_inputs, recurrence, rel_err  # noqa: E402

try:
    _has_gpu = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001
    _has_gpu = False
pytestmark = pytest.mark.skipif(not (_has_gpu and gdn.cuda_available()), reason="needs a GPU and gdn with CUDA")

TOL = 2e-3  # fp32 inputs where tensor cores run in tf32 (SPEC section 4)


def test_cupy_chunk_decode_and_pool():
    rng = np.random.default_rng(7)
    H, HV, K, V = 2, 4, 64, 64
    cu = np.array([0, 50, 50, 200], np.int64)
    q, k, v, g, beta = make_inputs(rng, (1, 200), H, HV, K, V)
    h0 = rng.standard_normal((3, HV, K, V)).astype(np.float32)
    ro, rh = recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, use_qk_l2norm=True)
    d = [cp.asarray(x) for x in (q, k, v, g, beta)]
    o, ht = gdn.chunk_gated_delta_rule(*d, initial_state=cp.asarray(h0), output_final_state=True,
                                       cu_seqlens=cp.asarray(cu), cu_seqlens_cpu=cu, use_qk_l2norm_in_kernel=True)
    assert isinstance(o, cp.ndarray) and isinstance(ht, cp.ndarray)
    assert rel_err(cp.asnumpy(o), ro) <= TOL and rel_err(cp.asnumpy(ht), rh) <= TOL
    # decode on a non-default cupy stream, pool in place
    N = 3
    dq, dk, dv, dg, db = make_inputs(rng, (N, 1), H, HV, K, V)
    pool = rng.standard_normal((2 * N, HV, K, V)).astype(np.float32)
    idx = np.array([4, -1, 0], np.int32)
    ro, rh = recurrence(dq, dk, dv, dg, db, initial_state=pool, state_indices=idx)
    pool_d = cp.asarray(pool)
    with cp.cuda.Stream(non_blocking=True) as s:
        od = gdn.decode_(*[cp.asarray(x) for x in (dq, dk, dv, dg, db)], pool_d, cp.asarray(idx))
        s.synchronize()
    assert rel_err(cp.asnumpy(od), ro) <= TOL
    assert rel_err(cp.asnumpy(pool_d[4]), rh[0]) <= TOL and rel_err(cp.asnumpy(pool_d[0]), rh[2]) <= TOL
    np.testing.assert_array_equal(cp.asnumpy(pool_d[[1, 2, 3, 5]]), pool[[1, 2, 3, 5]])
