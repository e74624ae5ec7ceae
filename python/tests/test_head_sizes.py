"""Everything fla's forward accepts (issue 12, item 8), through torch on every device present: a grid
like flash-linear-attention's own tests/ops/test_gated_delta.py (head sizes 32, 60, 100, 256 and
others, K and V independently; fp32, fp16 and bf16; q/k in fp32 with v in fp16 or bf16, as fla's
test_fused_recurrent passes them; with and without the in-kernel qk l2-norm), against the float64
recurrence on the same rounded inputs. Every test draws fresh random inputs; outputs are NaN-filled."""

from __future__ import annotations

import itertools
import os

import pytest

torch = pytest.importorskip("torch")

import gdn  # noqa: E402
from gdn_ref import torch_recurrence, torch_rel_err  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and gdn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
if os.environ.get("GDN_TEST_DEVICES"):  # e.g. GDN_TEST_DEVICES=cuda on the GPU machine
    DEVICES = [d for d in os.environ["GDN_TEST_DEVICES"].split(",") if d in DEVICES]

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

# fla's own kernels, where installed (the GPU machine): gdn returns what they return.
os.environ["FLA_FLASH_QLA"] = "0"
try:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_recurrent
except Exception:  # noqa: BLE001
    fla_chunk = fla_recurrent = None
needs_fla = pytest.mark.skipif(fla_chunk is None or not HAS_CUDA, reason="needs flash-linear-attention and CUDA")


def bound(dtype, device):
    """SPEC section 4 (as tests/harness.cpp: CUDA fp32 may run tf32 tensor cores)."""
    if dtype == BF16:
        return 5e-3
    if dtype == F16:
        return 1e-3
    return 2e-3 if device == "cuda" else 1e-4


def inputs(seed, B, T, H, HV, K, V, qk_dtype, v_dtype, device, gate_normalizer=1.0, beta_dtype=F32):
    """fla's recipe: q, k from randn (normalized here unless the kernel does it), logsigmoid gates
    divided by a normalizer, sigmoid betas, random fp32 initial states."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    q, k, v = r(B, T, H, K), r(B, T, H, K), r(B, T, HV, V)
    g = torch.nn.functional.logsigmoid(torch.rand(B, T, HV, generator=gen)) / gate_normalizer
    beta = torch.rand(B, T, HV, generator=gen).sigmoid()
    h0 = r(B, HV, K, V)
    to = lambda x, dt: x.to(dtype=dt, device=device)  # noqa: E731
    return to(q, qk_dtype), to(k, qk_dtype), to(v, v_dtype), to(g, F32), to(beta, beta_dtype), to(h0, F32)


def check(fn, q, k, v, g, beta, h0, l2norm_in_kernel, device, tol):
    if not l2norm_in_kernel:  # as fla's tests: normalize outside, in fp32, then round to the dtype
        q = torch.nn.functional.normalize(q.float(), p=2, dim=-1).to(q.dtype)
        k = torch.nn.functional.normalize(k.float(), p=2, dim=-1).to(k.dtype)
    # o in fla 0.6's dtype: q's for the chunked form, v's for the recurrence; also into a NaN-filled out=.
    o_dtype = v.dtype if fn is gdn.fused_recurrent_gated_delta_rule else q.dtype
    o, ht = fn(q, k, v, g, beta=beta, scale=1.0, initial_state=h0.clone(), output_final_state=True,
               use_qk_l2norm_in_kernel=l2norm_in_kernel)
    assert o.dtype == o_dtype and o.shape == v.shape and ht.dtype == F32
    out = torch.full(v.shape, float("nan"), dtype=o_dtype, device=device)
    o2, _ = fn(q, k, v, g, beta=beta, scale=1.0, initial_state=h0.clone(), use_qk_l2norm_in_kernel=l2norm_in_kernel,
               out=out)
    assert o2 is out and torch.equal(o2, o)
    ro, rh = torch_recurrence(q, k, v, g, beta, scale=1.0, initial_state=h0, use_qk_l2norm=l2norm_in_kernel)
    assert torch_rel_err(o, ro) <= tol, f"o: {torch_rel_err(o, ro):.2e} > {tol}"
    assert torch_rel_err(ht, rh) <= tol, f"final state: {torch_rel_err(ht, rh):.2e} > {tol}"


FUNCTIONS = {"chunk": gdn.chunk_gated_delta_rule, "recurrent": gdn.fused_recurrent_gated_delta_rule}


# fla's test_chunk / test_fused_recurrent grid: D in {32, 64, 100, 256} (K = V = D), T from 1 token
# to several chunks, gate normalizers 0.1 .. 10, both l2-norm placements, fp32 and fp16.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", list(FUNCTIONS))
@pytest.mark.parametrize("D", [32, 60, 64, 100, 256])
@pytest.mark.parametrize("T", [1, 15, 63, 300])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_fla_grid(device, fn, D, T, dtype):
    seed = hash((fn, D, T, str(dtype))) % 2**31
    l2 = (D + T) % 2 == 0  # half the cases each way, deterministically spread
    normalizer = (1.0, 0.1, 10.0)[(D + T) % 3]
    q, k, v, g, beta, h0 = inputs(seed, 2, T, 2, 4, D, D, dtype, dtype, device, normalizer)
    check(FUNCTIONS[fn], q, k, v, g, beta, h0, l2, device, bound(dtype, device))


# K and V independently, including sizes that are not multiples of 16 and the edges of [1, 256].
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", list(FUNCTIONS))
@pytest.mark.parametrize("K,V", [(60, 100), (100, 60), (32, 256), (256, 32), (1, 1), (17, 255), (192, 80)])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_independent_head_sizes(device, fn, K, V, dtype):
    q, k, v, g, beta, h0 = inputs(hash((fn, K, V, str(dtype))) % 2**31, 1, 130, 1, 2, K, V, dtype, dtype, device)
    check(FUNCTIONS[fn], q, k, v, g, beta, h0, True, device, bound(dtype, device))


# Mixed input dtypes as fla's test_fused_recurrent passes them: q, k fp32 and v (and beta) in fp16
# or bf16; o comes back in fla's dtype (check()), held to the bound of the coarser dtype.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", list(FUNCTIONS))
@pytest.mark.parametrize("D", [32, 64, 100, 128])
@pytest.mark.parametrize("v_dtype", [F16, BF16])
@pytest.mark.parametrize("l2norm_in_kernel", [False, True])
def test_mixed_dtypes(device, fn, D, v_dtype, l2norm_in_kernel):
    q, k, v, g, beta, h0 = inputs(hash((fn, D, str(v_dtype), l2norm_in_kernel)) % 2**31, 2, 70, 2, 4, D, D, F32,
                                  v_dtype, device, beta_dtype=v_dtype)
    check(FUNCTIONS[fn], q, k, v, g, beta, h0, l2norm_in_kernel, device,
          max(bound(v_dtype, device), bound(F32, device)))


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtypes_varlen_pool(device):
    """The engine path with mixed dtypes: a pool updated in place, ragged sequences."""
    K, V, HV = 100, 60, 4
    q, k, v, g, beta, _ = inputs(7, 1, 200, 2, HV, K, V, F32, BF16, device)
    cu = torch.tensor([0, 1, 64, 64, 200], dtype=torch.int32)
    pool = torch.randn(6, HV, K, V, device=device)
    idx = torch.tensor([4, -1, 0, 2], dtype=torch.int32, device=device)
    before = pool.clone()
    o = gdn.prefill_(q, k, v, g, beta, pool, idx, use_qk_l2norm_in_kernel=True, cu_seqlens=cu.to(device),
                     cu_seqlens_cpu=cu)
    h0 = torch.stack([before[i] if i >= 0 else torch.zeros_like(before[0]) for i in idx.tolist()])
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu, use_qk_l2norm=True)
    assert o.dtype == F32  # q's, as the engines' kernels
    assert torch_rel_err(o, ro) <= bound(BF16, device)
    for n, i in enumerate(idx.tolist()):
        if i >= 0:
            assert torch_rel_err(pool[i], rh[n]) <= bound(BF16, device)
    for r in (1, 3, 5):  # rows nobody names are untouched
        assert torch.equal(pool[r], before[r])


# The cases of fla's grid that gdn rejected before (head sizes 32, 100; fp32 q/k with fp16 v) side
# by side with fla on the same inputs: the same dtypes and shapes, gdn within the SPEC bound of the
# float64 recurrence and at least as accurate as fla (with slack for rounding noise).
@needs_fla
@pytest.mark.parametrize("fn", list(FUNCTIONS))
@pytest.mark.parametrize("D", [32, 100, 256])
@pytest.mark.parametrize("mixed", [False, True])
def test_same_results_as_fla(fn, D, mixed):
    v_dtype = F16
    q, k, v, g, beta, h0 = inputs(hash((fn, D, mixed)) % 2**31, 2, 300, 2, 4, D, D, F32 if mixed else F16, v_dtype,
                                  "cuda", beta_dtype=v_dtype)
    kw = dict(scale=1.0, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)
    # fla 0.6's chunk kernels do not compile for fp32 q/k with fp16 v (a Triton dot of fp32 A and
    # fp16 v, session 30): there its recurrent kernel is the error baseline, and o takes q's dtype
    # as fla's chunk_gated_delta_rule casts it (`o.to(q.dtype)`).
    theirs = fla_chunk if fn == "chunk" and not mixed else fla_recurrent
    o, ht = FUNCTIONS[fn](q, k, v, g, beta=beta, **kw)
    fo, fht = theirs(q, k, v, g, beta=beta, **kw)
    assert o.dtype == (q.dtype if fn == "chunk" else fo.dtype)
    assert o.shape == fo.shape and ht.shape == fht.shape
    ro, rh = torch_recurrence(q, k, v, g, beta, scale=1.0, initial_state=h0, use_qk_l2norm=True)
    e = dict(gdn_o=torch_rel_err(o, ro), fla_o=torch_rel_err(fo, ro), gdn_h=torch_rel_err(ht, rh),
             fla_h=torch_rel_err(fht, rh))
    print(f"{fn} D={D} mixed={mixed}: " + " ".join(f"{k}={v:.2e}" for k, v in e.items()))
    assert e["gdn_o"] <= bound(v_dtype, "cuda") and e["gdn_h"] <= bound(v_dtype, "cuda")
    assert e["gdn_o"] <= max(1.25 * e["fla_o"], 2e-3) and e["gdn_h"] <= max(1.25 * e["fla_h"], 2e-3)


# State rows that do not start 16-byte aligned, on every device: packed pools of small heads
# (K = V = 1 with HV = 2: 8-byte fp32 rows; K = 3, V = 5: 15 elements a head), odd slot strides
# (views of a wider buffer), pools that start one element into their buffer; fp32, bf16 and fp16
# pools, both layouts, prefill_ and decode_ (several tokens per sequence). The tuned sizes
# (64, 128; bf16 inputs: the CUDA tensor-core forward) read such rows element by element in the
# forward, and their CUDA decode step runs the general kernel. Rows nobody names, the padding
# between rows and the elements around the pool stay bitwise unchanged.
UNALIGNED = [(1, 1, 2, 0, 0), (1, 1, 2, 3, 1), (3, 5, 3, 0, 0), (3, 5, 1, 1, 1), (60, 100, 2, 1, 1),
             (64, 64, 2, 1, 0), (128, 128, 1, 3, 1)]


def state_bound(in_dtype, state_dtype, device):
    """o and states: the input dtype's bound, or the pool's own rounding when coarser (docs/api.md)."""
    own = {BF16: 5e-3, F16: 1e-3}.get(state_dtype, 0.0)
    return max(bound(in_dtype, device), own)


def unaligned_pool(gen, slots, HV, K, V, pad, offset, state_dtype, state_v_first, device):
    """A pool [slots, HV, K, V] (or [.., V, K]) whose rows are HV K V + pad elements apart, starting
    `offset` elements into a flat buffer; returns (buffer, pool view)."""
    stride = HV * K * V + pad
    buf = torch.randn(offset + slots * stride + 3, generator=gen).to(dtype=state_dtype, device=device)
    rows = buf[offset:offset + slots * stride].view(slots, stride)[:, :HV * K * V]
    return buf, rows.view((slots, HV) + ((V, K) if state_v_first else (K, V)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["prefill_", "decode_"])
@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("K,V,HV,pad,offset", UNALIGNED)
@pytest.mark.parametrize("state_dtype", [F32, BF16, F16])
def test_unaligned_state_rows(device, op, state_v_first, K, V, HV, pad, offset, state_dtype):
    gen = torch.Generator(device="cpu").manual_seed(hash((op, state_v_first, K, V, HV, pad, str(state_dtype))) % 2**31)
    in_dtype = BF16 if K == V and K in (64, 128) else F32
    lens = [70, 1, 0, 60] if op == "prefill_" else [1, 3, 0, 2]
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32)
    T = int(cu[-1])
    H = 1
    q, k, v, g, beta, _ = inputs(int(gen.initial_seed()), 1, T, H, HV, K, V, in_dtype, in_dtype, device)
    buf, pool = unaligned_pool(gen, 5, HV, K, V, pad, offset, state_dtype, state_v_first, device)
    before = buf.clone()
    idx = torch.tensor([3, -1, 0, 4], dtype=torch.int32)
    h0 = pool.float().clone()
    out = torch.full(v.shape, float("nan"), dtype=in_dtype, device=device)
    fn = gdn.prefill_ if op == "prefill_" else gdn.decode_
    o = fn(q, k, v, g, beta, pool, idx.to(device), state_v_first=state_v_first, use_qk_l2norm_in_kernel=True,
           cu_seqlens=cu.to(device), cu_seqlens_cpu=cu, state_indices_cpu=idx, out=out)
    assert o is out
    ro, rh = torch_recurrence(q, k, v, g, beta, initial_state=h0, cu_seqlens_cpu=cu, use_qk_l2norm=True,
                              state_v_first=state_v_first, state_indices=idx)
    tol = state_bound(in_dtype, state_dtype, device)
    assert torch_rel_err(o, ro) <= bound(in_dtype, device)
    for n, r in enumerate(idx.tolist()):
        if r >= 0:
            assert torch_rel_err(pool[r], rh[n]) <= tol, f"row {r}"
    # Everything but the named rows' states is bitwise unchanged: the untouched rows, the padding
    # between rows, the elements before and after the pool.
    stride = HV * K * V + pad
    mask = torch.ones(buf.numel(), dtype=torch.bool, device=device)
    for r in idx.tolist():
        if r >= 0:
            mask[offset + r * stride:offset + r * stride + HV * K * V] = False
    assert torch.equal(buf[mask].view(torch.int16 if state_dtype != F32 else torch.int32),
                       before[mask].view(torch.int16 if state_dtype != F32 else torch.int32))


# Per-token states (speculative decoding's verify, vLLM's 2-D slots and an SGLang buffer) in pools
# whose rows are not 16-byte aligned: small heads and the tuned sizes with odd slot strides.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("K,V,HV,pad", [(3, 5, 2, 0), (1, 1, 2, 1), (128, 128, 1, 1), (64, 64, 1, 2)])
@pytest.mark.parametrize("state_dtype", [F32, BF16])
@pytest.mark.parametrize("vllm", [True, False])
def test_unaligned_token_states(device, K, V, HV, pad, state_dtype, vllm):
    import numpy as np

    from gdn_ref import recurrence

    gen = torch.Generator(device="cpu").manual_seed(hash((K, V, HV, pad, str(state_dtype), vllm)) % 2**31)
    N, M, H = 4, 3, 1
    lens = [3, 1, 0, 2]
    cu = torch.tensor([0, 3, 4, 4, 6], dtype=torch.int32)
    q, k, v, g, beta, _ = inputs(int(gen.initial_seed()), 1, 6, H, HV, K, V, F32, F32, device)
    state_v_first = K == 128 or K == 1
    tail = (HV, V, K) if state_v_first else (HV, K, V)
    slots = 1 + N * M
    buf, pool = unaligned_pool(gen, slots, HV, K, V, pad, 0, state_dtype, state_v_first, device)
    h0 = pool.float().cpu().numpy().copy()  # not a view of the pool: it changes in place
    args = [x.cpu().numpy() for x in (q, k, v, g, beta)]
    kw = dict(cu_seqlens=cu.to(device), cu_seqlens_cpu=cu, state_v_first=state_v_first, use_qk_l2norm_in_kernel=True)
    if vllm:  # slots 1.. per token; sequence n starts from its column num_accepted - 1
        idx = (1 + torch.arange(N * M, dtype=torch.int32)).view(N, M)
        idx[2] = 0  # padding: the null slot
        acc = torch.tensor([2, 1, 1, 3], dtype=torch.int32)
        read = np.array([int(idx[n, acc[n] - 1]) if n != 2 else -1 for n in range(N)])
        gdn.decode_(q, k, v, g, beta, pool, idx.to(device), state_indices_cpu=idx, null_slot=0,
                    num_accepted_tokens=acc.to(device), num_accepted_tokens_cpu=acc, **kw)
        stored = pool
        rows = {(n, t): int(idx[n, t]) for n in range(N) for t in range(lens[n])}
    else:  # the pool rows read, the states into a buffer [N, M, ...] with odd row strides too
        idx = torch.tensor([5, 2, -1, 7], dtype=torch.int32)
        read = idx.numpy()
        tbuf, tok = unaligned_pool(gen, N * M, HV, K, V, pad, 0, state_dtype, state_v_first, device)
        tok = tok.view((N, M) + tail)
        gdn.decode_(q, k, v, g, beta, pool, idx.to(device), state_indices_cpu=idx, token_states=tok,
                    disable_state_update=True, **kw)
        stored = tok.view((N * M,) + tail)
        rows = {(n, t): n * M + t for n in range(N) for t in range(lens[n])}
    _, _, rt = recurrence(*args, initial_state=h0, state_indices=read, cu_seqlens=cu.numpy(),
                          state_v_first=state_v_first, use_qk_l2norm=True, token_states=True)
    tol = state_bound(F32, state_dtype, device)
    for (n, t), r in rows.items():
        assert torch_rel_err(stored[r].cpu(), torch.from_numpy(rt[int(cu[n]) + t])) <= tol, (n, t)
