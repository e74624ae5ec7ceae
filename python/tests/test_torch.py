"""gdn with PyTorch: the custom op (opcheck, torch.compile, CUDA graphs, streams) and, on a GPU,
agreement with flash-linear-attention and the float64 recurrence on the SPEC cases.
Skipped without torch; the CUDA tests are skipped without a GPU (or a gdn built without CUDA),
the fla comparisons without fla."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gdn  # noqa: E402
from gdn import _signature as sig  # noqa: E402
from gdn_ref import BENCH_CASES, recurrence, torch_chunked_reference, torch_recurrence, torch_rel_err  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and gdn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
if os.environ.get("GDN_TEST_DEVICES"):  # e.g. GDN_TEST_DEVICES=cuda on the GPU machine
    DEVICES = [d for d in os.environ["GDN_TEST_DEVICES"].split(",") if d in DEVICES]
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and gdn built with CUDA")

# fla's own kernels: with FLA_FLASH_QLA unset, fla dispatches to FlashQLA where that is installed.
os.environ["FLA_FLASH_QLA"] = "0"
try:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_recurrent
except Exception:  # noqa: BLE001
    fla_chunk = fla_recurrent = None
needs_fla = pytest.mark.skipif(fla_chunk is None or not HAS_CUDA, reason="needs flash-linear-attention and CUDA")

BF16_TOL = 5e-3


def assert_same(a, b, what=""):
    """Bitwise equal, or (a nondeterministic kernel) equal to within 1e-3 relative RMS."""
    if torch.equal(a, b):
        return
    err = torch_rel_err(a, b.double())
    print(f"note: {what} not bitwise equal (rel err {err:.2e})")
    assert err <= 1e-3, f"{what}: rel err {err}"


def gen(seed, B, T, H, HV, K, V, dtype, device, gate_scale=1.0, n_states=None, state_v_first=False):
    """Fresh inputs: l2-normed k (q too, as models do after their own norm), logsigmoid gates."""
    gen_ = torch.Generator(device="cpu").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen_)  # noqa: E731
    q = r(B, T, H, K)
    k = torch.nn.functional.normalize(r(B, T, H, K), dim=-1)
    v = r(B, T, HV, V)
    g = gate_scale * torch.nn.functional.logsigmoid(r(B, T, HV))
    beta = r(B, T, HV).sigmoid()
    n = B if n_states is None else n_states
    h0 = r(n, HV, V, K) if state_v_first else r(n, HV, K, V)
    to = lambda x, dt: x.to(dtype=dt, device=device)  # noqa: E731
    return (to(q, dtype), to(k, dtype), to(v, dtype), to(g, torch.float32), to(beta, torch.float32),
            to(h0, torch.float32))


# ------------------------------------------------------------------------------------------------
# Correctness through torch (CPU and CUDA)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("state_v_first", [False, True])
def test_torch_matches_reference(device, state_v_first):
    K = V = 64
    cu_cpu = torch.tensor([0, 33, 33, 200, 321], dtype=torch.int64)
    T, N = int(cu_cpu[-1]), 4
    q, k, v, g, beta, h0 = gen(1, 1, T, 2, 4, K, V, torch.bfloat16, device, n_states=N, state_v_first=state_v_first)
    cu = cu_cpu.to(device)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                                       cu_seqlens_cpu=cu_cpu, use_qk_l2norm_in_kernel=True,
                                       state_v_first=state_v_first)
    assert o.dtype == torch.bfloat16 and o.shape == v.shape and o.device == q.device
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu_cpu, use_qk_l2norm=True,
                              state_v_first=state_v_first)
    assert torch_rel_err(o, ro) <= BF16_TOL
    assert torch_rel_err(ht, rh) <= BF16_TOL
    o2, ht2 = gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True,
                                                   cu_seqlens=cu, use_qk_l2norm_in_kernel=True,
                                                   state_v_first=state_v_first)
    assert torch_rel_err(o2, ro) <= BF16_TOL
    assert torch_rel_err(ht2, rh) <= BF16_TOL


@pytest.mark.parametrize("device", DEVICES)
def test_torch_pool_decode_in_place(device):
    N, slots, H, HV, K, V = 6, 13, 2, 4, 64, 64
    q, k, v, _, _, _ = gen(2, N, 1, H, HV, K, V, torch.float16, device)
    a = torch.randn(N, 1, HV, device=device)
    b = torch.randn(N, 1, HV, device=device)
    A_log = torch.rand(HV, device=device) - 0.5
    dt_bias = torch.randn(HV, device=device)
    pool = torch.randn(slots, HV, V, K, device=device)
    before = pool.clone()
    idx = torch.randperm(slots)[:N].to(torch.int32)
    idx[2] = -1
    o = gdn.decode_(q, k, v, a, b, pool, idx.to(device), A_log=A_log, dt_bias=dt_bias, state_v_first=True,
                    use_qk_l2norm_in_kernel=True, state_indices_cpu=idx)
    g = -A_log.exp() * torch.nn.functional.softplus(a + dt_bias)
    ro, rh = torch_recurrence(q, k, v, g, b.sigmoid(), initial_state=before, state_indices=idx,
                              use_qk_l2norm=True, state_v_first=True)
    assert torch_rel_err(o, ro) <= BF16_TOL
    for n in range(N):
        if idx[n] >= 0:
            assert torch_rel_err(pool[int(idx[n])], rh[n]) <= 1e-4
    untouched = sorted(set(range(slots)) - {int(i) for i in idx if i >= 0})
    assert torch.equal(pool[untouched], before[untouched])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("state_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fn", ["prefill_", "decode_"])
def test_torch_low_precision_pool_padded_rows(device, state_dtype, fn):
    """bf16 / fp16 pools as views with a padded slot stride (an engine's cache): fp32 arithmetic, one
    rounding on write; padding and untouched rows bitwise unchanged."""
    N, slots, H, HV, K, V, pad = 5, 11, 2, 4, 64, 64, 64
    T = 2 if fn == "decode_" else 70
    q, k, v, g, beta, _ = gen(3, N, T, H, HV, K, V, torch.bfloat16, device)
    row = HV * K * V
    base = torch.randn(slots, row + pad, device=device).to(state_dtype)
    pool = base[:, :row].view(slots, HV, V, K)
    assert pool.stride(0) == row + pad
    before = base.clone()
    idx = torch.randperm(slots)[:N].to(torch.int32)
    idx[1] = -1
    h0 = pool.float().clone()
    f = gdn.prefill_ if fn == "prefill_" else gdn.decode_
    o = f(q, k, v, g, beta, pool, idx.to(device), state_v_first=True, use_qk_l2norm_in_kernel=True,
          state_indices_cpu=idx)
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, state_indices=idx, use_qk_l2norm=True,
                              state_v_first=True)
    assert torch_rel_err(o, ro) <= BF16_TOL
    # The coarser of the inputs' bound (bf16 here: on CUDA the tensor-core path's bf16 intermediates)
    # and the pool's own rounding.
    state_tol = BF16_TOL
    for n in range(N):
        if idx[n] >= 0:
            assert torch_rel_err(pool[int(idx[n])].float(), rh[n]) <= state_tol
    assert torch.equal(base[:, row:].view(torch.int16), before[:, row:].view(torch.int16))
    untouched = sorted(set(range(slots)) - {int(i) for i in idx if i >= 0})
    assert torch.equal(base[untouched].view(torch.int16), before[untouched].view(torch.int16))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_nan_stays_in_its_sequence(device, dtype):
    """A batch's requests are independent on every path (bf16 / fp16: the tensor-core forward at
    D = 128): NaN in one sequence's q, k, v, g, beta and initial state leaves every other
    sequence's o and final state finite and as without it (assert_same). The NaN sequence sits
    between partial chunks (70 = 64 + 6 tokens before it, 130 = 2 x 64 + 2 its own), whose rows
    past their end hold its tokens, and the sequence after it ends the batch on a partial chunk."""
    gen = torch.Generator().manual_seed(11)
    H, HV, D = 2, 4, 128
    cu = torch.tensor([0, 70, 200, 400, 445], dtype=torch.int32)
    T = int(cu[-1])
    q = torch.randn(1, T, H, D, generator=gen).to(dtype)
    k = torch.randn(1, T, H, D, generator=gen).to(dtype)
    v = torch.randn(1, T, HV, D, generator=gen).to(dtype)
    g = torch.nn.functional.logsigmoid(torch.randn(1, T, HV, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, HV, generator=gen))
    h0 = 0.1 * torch.randn(4, HV, D, D, generator=gen)

    def run(*xs):
        args = [x.to(device) for x in xs]
        o, ht = gdn.chunk_gated_delta_rule(*args[:5], initial_state=args[5], output_final_state=True,
                                           cu_seqlens=cu.to(device), use_qk_l2norm_in_kernel=True)
        return o.cpu(), ht.cpu()

    o, ht = run(q, k, v, g, beta, h0)
    for x in (q, k, v, g, beta):
        x[:, 70:200] = float("nan")
    h0[1] = float("nan")
    o2, ht2 = run(q, k, v, g, beta, h0)
    keep, rows = torch.cat([torch.arange(0, 70), torch.arange(200, T)]), [0, 2, 3]
    assert torch.isfinite(o2[:, keep]).all() and torch.isfinite(ht2[rows]).all()
    assert_same(o2[:, keep].float(), o[:, keep].float(), "o of the other sequences")
    assert_same(ht2[rows], ht[rows], "their final states")


@pytest.mark.parametrize("device", DEVICES)
def test_torch_errors_name_the_argument(device):
    q, k, v, g, beta, h0 = gen(3, 1, 64, 2, 4, 64, 64, torch.bfloat16, device)
    with pytest.raises(ValueError, match="HV"):
        gdn.chunk_gated_delta_rule(q, k, v[:, :, :3], g[..., :3], beta[..., :3])
    with pytest.raises(TypeError, match="k has dtype"):  # q and k share one dtype (v may have another)
        gdn.chunk_gated_delta_rule(q, k.half(), v, g, beta)
    with pytest.raises(ValueError, match="initial_state"):
        gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=torch.cat([h0, h0]))
    with pytest.raises(TypeError, match="k is a numpy"):
        gdn.chunk_gated_delta_rule(q, k.float().cpu().numpy(), v, g, beta)
    if device == "cuda":
        with pytest.raises(TypeError, match="cu_seqlens is on cpu"):
            gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 64]))
        with pytest.raises(ValueError, match=r"cu_seqlens\[N = 1\] is 63"):  # the host copy is validated
            gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 64], device=device),
                                       cu_seqlens_cpu=torch.tensor([0, 63]))


@pytest.mark.parametrize("device", DEVICES)
def test_requires_grad_inputs_run(device):
    q, k, v, g, beta, h0 = gen(4, 2, 64, 1, 2, 64, 64, torch.float32, device)
    q.requires_grad_(True)
    v.requires_grad_(True)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    ro, rh = torch_recurrence(q.detach(), k, v.detach(), g, beta, initial_state=h0)
    assert torch_rel_err(o.detach(), ro) <= 2e-3


def test_references_agree():
    """The float64 oracles: the numpy recurrence, the torch recurrence and the torch chunked form
    (which bench/bench_gpu.py uses for long sequences) agree to float64 rounding."""
    cu = torch.tensor([0, 1, 70, 70, 200, 333])
    q, k, v, g, beta, h0 = gen(13, 1, 333, 2, 4, 32, 16, torch.float32, "cpu", gate_scale=3.0, n_states=5)
    beta = beta * 2
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu, use_qk_l2norm=True)
    co, ch = torch_chunked_reference(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu, use_qk_l2norm=True)
    no, nh = recurrence(q.numpy(), k.numpy(), v.numpy(), g.numpy(), beta.numpy(), initial_state=h0.numpy(),
                        cu_seqlens=cu.numpy(), use_qk_l2norm=True)
    assert torch_rel_err(co, ro) <= 1e-12 and torch_rel_err(ch, rh) <= 1e-12
    assert torch_rel_err(ro, torch.from_numpy(no)) <= 1e-12 and torch_rel_err(rh, torch.from_numpy(nh)) <= 1e-12
    # In groups of sequences (as for a long prompt among short ones): a budget that fits one or two.
    go, gh = torch_chunked_reference(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu, use_qk_l2norm=True,
                                     max_bytes=200_000)
    assert torch_rel_err(go, ro) <= 1e-12 and torch_rel_err(gh, rh) <= 1e-12


# ------------------------------------------------------------------------------------------------
# The custom op: opcheck, torch.compile


def _op_args(device, pool=False, fused=False):
    N, H, HV, K, V = 3, 2, 4, 64, 64
    cu_cpu = torch.tensor([0, 10, 70, 100], dtype=torch.int32)
    T = int(cu_cpu[-1])
    q, k, v, g, beta, h0 = gen(5, 1, T, H, HV, K, V, torch.bfloat16, device, n_states=N)
    o = torch.empty_like(v)
    cu = cu_cpu.to(device)
    A_log = dt_bias = None
    if fused:
        A_log = torch.randn(HV, device=device)
        dt_bias = torch.randn(HV, device=device)
        beta = torch.randn_like(beta)
        g = torch.randn_like(g)
    values = {n: None for n in sig.OP_ARG_NAMES}  # the op's arguments by name (gdn/_signature.py)
    values.update(q=q, k=k, v=v, g=g, beta=beta, o=o, A_log=A_log, dt_bias=dt_bias, cu_seqlens=cu,
                  cu_seqlens_cpu=cu_cpu, scale=K ** -0.5, use_qk_l2norm=True, state_v_first=False, fused_gate=fused,
                  recurrent=False, null_slot=-1, checkpoint_every_chunks=1)
    if pool:  # a pool updated in place; the padding on the null slot 6, one sequence starting from zeros
        values.update(final_state=torch.randn(7, HV, K, V, device=device), final_is_initial=True, null_slot=6,
                      final_state_indices=torch.tensor([4, 6, 0], dtype=torch.int32, device=device),
                      initial_state_present=torch.tensor([True, True, False], device=device))
    else:
        values.update(initial_state=h0, final_state=torch.empty(N, HV, K, V, device=device), final_is_initial=False)
    return sig.pack_op_args(**values)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", ["dense", "pool", "fused"])
def test_opcheck(device, variant):
    args = _op_args(device, pool=variant == "pool", fused=variant == "fused")
    torch.library.opcheck(torch.ops.gdn.forward_.default, args)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    N, H, HV, K, V = 3, 2, 4, 64, 64
    q, k, v, g, beta, h0 = gen(6, N, 80, H, HV, K, V, torch.bfloat16, device)
    pool = torch.randn(2 * N, HV, K, V, device=device)
    idx = torch.tensor([5, 0, 2], dtype=torch.int32, device=device)

    def layer(q, k, v, g, beta, h0, pool, idx):
        o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                           use_qk_l2norm_in_kernel=True)
        o2 = gdn.decode_(q[:, -1:], k[:, -1:], v[:, -1:], g[:, -1:], beta[:, -1:], pool, idx,
                         use_qk_l2norm_in_kernel=True)
        return o.float().sum(-1) * 2, ht + 1, o2

    pool_eager = pool.clone()
    ref = layer(q, k, v, g, beta, h0, pool_eager, idx)
    compiled = torch.compile(layer, fullgraph=True)
    got = compiled(q, k, v, g, beta, h0, pool, idx)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(pool, pool_eager)  # the in-place pool update happened under compile too


# ------------------------------------------------------------------------------------------------
# CUDA: graphs, streams, fla


@needs_cuda
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_cuda_graph_capture_replay(pool_dtype):
    N, H, HV, K, V = 4, 2, 8, 128, 128
    cu_cpu = torch.tensor([0, 100, 164, 400, 401], dtype=torch.int64)
    T = int(cu_cpu[-1])
    q, k, v, g, beta, h0 = gen(7, 1, T, H, HV, K, V, torch.bfloat16, "cuda", n_states=N)
    cu = cu_cpu.cuda()
    pool = torch.randn(2 * N, HV, V, K, device="cuda").to(pool_dtype)
    idx = torch.tensor([3, 0, -1, 6], dtype=torch.int32, device="cuda")
    dq, dk, dv, dg, db, _ = gen(8, N, 1, H, HV, K, V, torch.bfloat16, "cuda")

    def step(with_cpu):
        o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                           cu_seqlens=cu, cu_seqlens_cpu=cu_cpu if with_cpu else None,
                                           use_qk_l2norm_in_kernel=True)
        # The pool's prefill (a bf16 pool: through the forward's fp32 copy of the rows), then decode.
        op = gdn.prefill_(q, k, v, g, beta, pool, idx, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu if with_cpu else None,
                          state_v_first=True, use_qk_l2norm_in_kernel=True)
        od = gdn.decode_(dq, dk, dv, dg, db, pool, idx, state_v_first=True, use_qk_l2norm_in_kernel=True)
        return o, ht, op, od

    for with_cpu in (True, False):
        pool0 = pool.clone()
        eager = step(with_cpu)
        pool_eager = pool.clone()
        pool.copy_(pool0)
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up on a side stream, as torch recommends
            step(with_cpu)
        torch.cuda.current_stream().wait_stream(s)
        pool.copy_(pool0)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = step(with_cpu)
        # capture does not run the work: replay computes from the current inputs
        pool.copy_(pool0)
        graph.replay()
        torch.cuda.synchronize()
        for a, b in zip(static, eager):
            assert_same(a, b, "replay vs eager")
        assert_same(pool, pool_eager, "pool after replay vs eager")
        # new data in the same buffers, replay again
        q.copy_(torch.randn_like(q))
        v.copy_(torch.randn_like(v))
        pool.copy_(pool0)
        graph.replay()
        pool_after = pool.clone()
        pool.copy_(pool0)
        eager2 = step(with_cpu)
        torch.cuda.synchronize()
        for a, b in zip(static, eager2):
            assert_same(a, b, "replay on new data vs eager")
        assert_same(pool_after, pool, "pool after replay on new data")


@needs_cuda
def test_non_default_stream_is_honoured():
    H, HV, K, V = 2, 4, 128, 128
    q, k, v, g, beta, h0 = gen(9, 2, 512, H, HV, K, V, torch.bfloat16, "cuda")
    ref_o, ref_h = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    q2 = torch.zeros_like(q)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # keeps stream s busy: q2 is filled late on s
        q2.copy_(q)
        o, ht = gdn.chunk_gated_delta_rule(q2, k, v, g, beta, initial_state=h0, output_final_state=True)
        od = gdn.fused_recurrent_gated_delta_rule(q2[:, :1], k[:, :1], v[:, :1], g[:, :1], beta=beta[:, :1],
                                                  initial_state=h0)[0]
    torch.cuda.synchronize()
    assert_same(o, ref_o, "o on a side stream")
    assert_same(ht, ref_h, "final state on a side stream")
    od_ref = gdn.fused_recurrent_gated_delta_rule(q[:, :1], k[:, :1], v[:, :1], g[:, :1], beta=beta[:, :1],
                                                  initial_state=h0)[0]
    assert_same(od, od_ref, "decode on a side stream")


@needs_cuda
def test_cuda_stages_compose():
    import gdn.stages as st

    H, HV, K, V = 2, 4, 128, 128
    cu_cpu = torch.tensor([0, 130, 131, 300], dtype=torch.int32)
    T, N = int(cu_cpu[-1]), 3
    q, k, v, g, beta, h0 = gen(10, 1, T, H, HV, K, V, torch.bfloat16, "cuda", n_states=N)
    cu = cu_cpu.cuda()
    qn, kn = st.l2norm(q), st.l2norm(k)
    G = st.chunk_local_cumsum(g, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu)
    L = st.chunk_scaled_dot_kkt(kn, beta, G, cu_seqlens=cu)
    A = st.solve_tril(L, cu_seqlens=cu)
    w, u = st.recompute_w_u(kn, v, beta, A, G, cu_seqlens=cu)
    h, v_new, ht = st.chunk_fwd_h(kn, w, u, G, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    o = st.chunk_fwd_o(qn, kn, v_new, h, G, cu_seqlens=cu)
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu_cpu, use_qk_l2norm=True)
    assert torch_rel_err(o, ro) <= BF16_TOL and torch_rel_err(ht, rh) <= BF16_TOL


# Cases of bench/cases.txt; the long single-sequence ones are in bench/bench_gpu.py. (tail-16k: the
# serial fused chain for 256x64 and 64x256, kFusedO for the long-tail mix, both from cu_seqlens_cpu.)
SPEC_CASES = ("1x4k", "4x8k", "8x1k", "mixed", "64x256", "256x64", "tp4-8x4k", "tail-16k")


@needs_fla
@pytest.mark.parametrize("case", SPEC_CASES)
def test_matches_fla_on_spec_cases(case):
    c = BENCH_CASES[case]
    lens = c.lengths
    H, HV, K, V = c.H, c.HV, 128, 128
    T, N = sum(lens), len(lens)
    cu_cpu = torch.tensor([0] + list(np.cumsum(lens)), dtype=torch.int64)
    cu = cu_cpu.cuda()
    q, k, v, g, beta, h0 = gen(11, 1, T, H, HV, K, V, torch.bfloat16, "cuda", n_states=N)
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens_cpu=cu_cpu, **kw)
    fo, fht = fla_chunk(q, k, v, g, beta, cu_seqlens_cpu=cu_cpu, **kw)
    ro, rh = torch_chunked_reference(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu_cpu, use_qk_l2norm=True)
    e = dict(gdn_o=torch_rel_err(o, ro), fla_o=torch_rel_err(fo, ro), gdn_h=torch_rel_err(ht, rh),
             fla_h=torch_rel_err(fht, rh), diff_o=torch_rel_err(o, fo.double()))
    print(f"{case}: " + " ".join(f"{k}={v:.2e}" for k, v in e.items()))
    assert e["gdn_o"] <= BF16_TOL and e["gdn_h"] <= BF16_TOL
    assert e["diff_o"] <= 2 * BF16_TOL  # gdn equals fla within the bf16 tolerance
    # at least as accurate as fla (with slack for rounding noise)
    assert e["gdn_o"] <= max(1.25 * e["fla_o"], 2e-3)
    assert e["gdn_h"] <= max(1.25 * e["fla_h"], 2e-3)


@needs_fla
@pytest.mark.parametrize("state_v_first", [False, True])
def test_decode_matches_fla(state_v_first):
    N, H, HV, K, V = 64, 16, 32, 128, 128
    q, k, v, g, beta, h0 = gen(12, N, 1, H, HV, K, V, torch.bfloat16, "cuda", state_v_first=state_v_first)
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True, state_v_first=state_v_first)
    o, ht = gdn.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, **kw)
    fo, fht = fla_recurrent(q, k, v, g, beta=beta, **kw)
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, use_qk_l2norm=True, state_v_first=state_v_first)
    assert torch_rel_err(o, ro) <= BF16_TOL and torch_rel_err(ht, rh) <= 1e-4
    assert torch_rel_err(o, fo.double()) <= 2 * BF16_TOL
    assert torch_rel_err(ht, fht.double()) <= 1e-4


if os.environ.get("GDN_TEST_VERBOSE"):
    print("devices:", DEVICES, "fla:", fla_chunk is not None)
