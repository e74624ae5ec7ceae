"""CUDA graphs (issue 12): each serving call, captured in a torch.cuda.CUDAGraph and replayed,
equals the eager call bitwise (gdn's kernels use no atomics), on the same inputs and again after new
inputs (q / k / v, gates, slots, lengths, num_accepted_tokens, parents) are written into the same
buffers: the outputs (NaN-filled before each replay) and every pool and buffer the call writes (all
restored to one starting copy before every run); rows the call must not write (padding, the null
slot, rows nothing names, index rows past N) stay bitwise unchanged.

Calls: gdn.compat.vllm's and gdn.compat.sglang's, gdn.decode_ with per-token states (both engines'
conventions, EAGLE parents), prefill_ / decode_ with separate read and write slots and
has_initial_state, prefill checkpoints. Qwen3-Next's head sizes
with few heads, bf16 inputs, ragged batches with zero-length sequences, fp32 / bf16 (/ fp16) pools as
views with a padded slot stride, both layouts where the call takes either. Not here: SGLang's chunk
with output_h=True reads cu_seqlens on the host (as SGLang's does): no graph captures it."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gdn  # noqa: E402
from gdn.compat import sglang, vllm  # noqa: E402
from gdn_ref import make_inputs  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and gdn.cuda_available()
if os.environ.get("GDN_TEST_DEVICES"):
    HAS_CUDA = HAS_CUDA and "cuda" in os.environ["GDN_TEST_DEVICES"].split(",")
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and gdn built with CUDA")

H, HV, K, V = 2, 4, 128, 128  # K == V: a pool row has one shape in either layout
DEV = "cuda"
NAN = float("nan")
POOLS = [torch.float32, torch.bfloat16]
ALL_POOLS = POOLS + [torch.float16]


def bits(x):
    return x.detach().contiguous().view(torch.uint8)


def equal_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def untouched(n_rows, written):
    """The rows of [0, n_rows) that no entry of `written` names."""
    return sorted(set(range(n_rows)) - {int(w) for w in np.ravel(written)})


class Batch:
    """A call's inputs on a ragged batch, static buffers as an engine keeps them: q, k [1, T, H, K],
    v [1, T, HV, V] (bf16), g, beta [1, T, HV] (fp32; the raw a and b where the gate is fused),
    cu_seqlens [N + 1], A_log / dt_bias [HV]. fill() writes new values into the same tensors."""

    def __init__(self, rng, lens, cu_dtype=torch.int32):
        T = int(sum(lens))
        self.q, self.k = (torch.empty(1, T, H, K, dtype=torch.bfloat16, device=DEV) for _ in range(2))
        self.v = torch.empty(1, T, HV, V, dtype=torch.bfloat16, device=DEV)
        self.g, self.beta = (torch.empty(1, T, HV, device=DEV) for _ in range(2))
        self.cu = torch.empty(len(lens) + 1, dtype=cu_dtype, device=DEV)
        self.A_log = torch.from_numpy(rng.standard_normal(HV, dtype=np.float32) * 0.5).to(DEV)
        self.dt_bias = torch.from_numpy(rng.standard_normal(HV, dtype=np.float32)).to(DEV)

    def fill(self, rng, lens):
        for dst, src in zip(self.args(), make_inputs(rng, self.q.shape[:2], H, HV, K, V)):
            dst.copy_(torch.from_numpy(src))
        self.cu.copy_(torch.from_numpy(np.concatenate([[0], np.cumsum(lens)])))

    def args(self):
        return self.q, self.k, self.v, self.g, self.beta


def pool(rng, slots, dtype, pad=64):
    """A state pool [slots, HV, K, V] of random rows in `dtype`, a view with a padded slot stride
    into its base [slots, HV * K * V + pad] (an engine's cache); returns (base, pool)."""
    row = HV * K * V
    base = torch.from_numpy(rng.standard_normal((slots, row + pad), dtype=np.float32)).to(DEV, dtype)
    return base, base[:, :row].view(slots, HV, K, V)


def put(*pairs):
    """Host arrays into static device tensors: (tensor, array), ..."""
    for dst, src in pairs:
        dst.copy_(torch.from_numpy(src).view(dst.shape))


def vllm_slots(rng, lens, M, rows, slots):
    """vLLM's verify slots [rows, M] (distinct rows >= 1; rows past N are CUDA-graph padding, never
    read) and num_accepted_tokens [rows] in [1, M]; a zero-length (padding) sequence: all 0
    (NULL_BLOCK_ID), num_accepted 1; one sequence's read slot and one more token's slot are 0.
    Also the [N, M] masks of the token states gdn.decode_ stores and of those vLLM's convention
    stores (nothing for a sequence whose read slot is 0)."""
    N, lens = len(lens), np.asarray(lens)
    idx = (1 + rng.permutation(slots - 1)[: rows * M]).reshape(rows, M).astype(np.int32)
    nat = rng.integers(1, M + 1, size=rows).astype(np.int32)
    pad = lens == 0
    idx[:N][pad], nat[:N][pad] = 0, 1
    real = np.flatnonzero(~pad)
    idx[real[0], nat[real[0]] - 1] = 0
    idx[real[-1], rng.integers(M)] = 0
    stored = (np.arange(M)[None] < lens[:, None]) & (idx[:N] > 0)
    reads = idx[np.arange(N), nat[:N] - 1] > 0
    return idx, nat, stored, stored & reads[:, None]


def sglang_slots(rng, lens, slots, groups):
    """SGLang's indices: distinct pool rows and intermediate-buffer groups per sequence; -1 pads
    (the zero-length sequences and one with tokens) and one more sequence caches no token state."""
    N = len(lens)
    idx = rng.permutation(slots)[:N].astype(np.int32)
    tok = rng.permutation(groups)[:N].astype(np.int32)
    pad = np.asarray(lens) == 0
    pad[rng.choice(np.flatnonzero(~pad))] = True
    idx[pad] = tok[pad] = -1
    tok[rng.integers(N)] = -1
    return idx, tok


def eagle_parents(rng, stored):
    """EAGLE tree parents [N, M]: token t >= 1 continues from a random earlier token whose state is
    stored, or (-1) from token t - 1."""
    par = np.full(stored.shape, -1, np.int32)
    for n, t in np.ndindex(*stored.shape):
        if t:
            par[n, t] = rng.choice([-1] + [u for u in range(t) if stored[n, u]])
    return par


def check_graph(call, state, fill):
    """Captures call() (returning its outputs, a tuple of tensors) in a CUDA graph; checks bitwise
    that a replay equals an eager call, outputs and each tensor of `state` (what the call writes in
    place, restored to one starting copy before every run); then the same after fill() writes new
    inputs into the same tensors. fill() returns, per tensor of `state`, the rows (first dimension)
    that the call must leave unchanged."""
    keep = fill()
    start = [s.clone() for s in state]

    def run(fn):
        for s, s0 in zip(state, start):
            s.copy_(s0)
        outs = fn()
        torch.cuda.synchronize()
        return [o.clone() for o in outs] + [s.clone() for s in state]

    def eager(rows):
        got = run(call)
        for i, (s, s0, r) in enumerate(zip(got[len(got) - len(state):], start, rows)):
            assert r and equal_bits(s[r], s0[r]), f"state {i}: a row the call must not write changed"
        return got

    def same(got, want, what):
        for i, (a, b) in enumerate(zip(got, want)):
            assert equal_bits(a, b), f"{what}: result {i}: {int((bits(a) != bits(b)).sum())} bytes differ"

    first = eager(keep)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as torch recommends
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = call()

    def replay():
        for o in static:
            o.fill_(NAN)  # an element the replay does not write shows
        graph.replay()
        return static

    same(run(replay), first, "replay vs eager")
    second = eager(fill())
    assert not equal_bits(second[0], first[0]), "the new inputs did not change the output"
    same(run(replay), second, "replay on new inputs vs eager")


# ------------------------------------------------------------------------------------------------
# gdn.compat.vllm


@pytest.mark.parametrize("h0_dtype", POOLS)
def test_vllm_chunk(rng, h0_dtype):
    """vllm.chunk_gated_delta_rule: dense V-major initial states (read as fp32), fp32 final states,
    o into core_attn_out (a flat buffer whose tail stays untouched)."""
    lens = [70, 0, 5, 130, 64]
    x = Batch(rng, lens)
    n_o = x.v.numel()
    h0 = torch.empty(len(lens), HV, V, K, dtype=h0_dtype, device=DEV)
    out = torch.full((n_o + 37,), NAN, dtype=torch.bfloat16, device=DEV)

    def fill():
        x.fill(rng, rng.permutation(lens))
        put((h0, rng.standard_normal(h0.shape, dtype=np.float32)))
        return [list(range(n_o, out.numel()))]

    def call():
        return vllm.chunk_gated_delta_rule(*x.args(), initial_state=h0, output_final_state=True, cu_seqlens=x.cu,
                                           use_qk_l2norm_in_kernel=True, core_attn_out=out)

    check_graph(call, [out], fill)


@pytest.mark.parametrize("pool_dtype", POOLS)
@pytest.mark.parametrize("fn, verify", [("fused_recurrent", True), ("fused_sigmoid", True), ("fused_sigmoid", False)])
def test_vllm_recurrent(rng, fn, verify, pool_dtype):
    """vLLM's pool updated in place: verify with 2-D ssm_state_indices and num_accepted_tokens
    (padding rows all NULL_BLOCK_ID, num_accepted 1, zero-length), or the one-token decode with
    1-D slots; index arrays two rows longer than N (CUDA-graph padding)."""
    M = 4 if verify else 1
    lens = [4, 2, 0, 3, 1, 0] if verify else [1, 1, 0, 1, 1, 0]
    N, rows = len(lens), len(lens) + 2
    slots = 1 + rows * M + 3
    x = Batch(rng, lens)
    base, P = pool(rng, slots, pool_dtype)
    idx = torch.empty((rows, M) if verify else (rows,), dtype=torch.int32, device=DEV)
    nat = torch.empty(rows, dtype=torch.int32, device=DEV)

    def fill():
        now = rng.permutation(lens)
        x.fill(rng, now)
        ix, na, _, written = vllm_slots(rng, now, M, rows, slots)
        put((idx, ix), (nat, na))
        return [untouched(slots, ix[:N][written])]

    def call():
        kw = dict(initial_state=P, inplace_final_state=True, cu_seqlens=x.cu, ssm_state_indices=idx,
                  num_accepted_tokens=nat if verify else None, use_qk_l2norm_in_kernel=True)
        if fn == "fused_recurrent":
            return vllm.fused_recurrent_gated_delta_rule(*x.args(), **kw)[:1]
        return vllm.fused_sigmoid_gating_delta_rule_update(x.A_log, x.g[0], x.beta[0], x.dt_bias, x.q, x.k, x.v,
                                                           **kw)[:1]

    check_graph(call, [base], fill)


# ------------------------------------------------------------------------------------------------
# gdn.compat.sglang


@pytest.mark.parametrize("pool_dtype", POOLS)
def test_sglang_chunk(rng, pool_dtype):
    """sglang.chunk_gated_delta_rule (extend) updating pool rows in place through
    initial_state_indices, one negative (padding) index, int64 cu_seqlens; output_h=False."""
    lens = [70, 0, 5, 130, 64]
    N, slots = len(lens), len(lens) + 4
    x = Batch(rng, lens, torch.int64)
    base, P = pool(rng, slots, pool_dtype)
    idx = torch.empty(N, dtype=torch.int32, device=DEV)

    def fill():
        x.fill(rng, rng.permutation(lens))
        ix = rng.permutation(slots)[:N].astype(np.int32)
        ix[rng.integers(N)] = -1
        put((idx, ix))
        return [untouched(slots, ix[ix >= 0])]

    def call():
        return sglang.chunk_gated_delta_rule(*x.args(), initial_state=P, initial_state_indices=idx, cu_seqlens=x.cu,
                                             use_qk_l2norm_in_kernel=True, inplace_update=True, output_h=False)[:1]

    check_graph(call, [base], fill)


@pytest.mark.parametrize("pool_dtype", POOLS)
@pytest.mark.parametrize("disable_state_update", [True, False])
@pytest.mark.parametrize("tree", [False, True])
def test_sglang_verify(rng, tree, disable_state_update, pool_dtype):
    """sglang.fused_sigmoid_gating_delta_rule_update (target_verify): the state after each token
    into the intermediate buffer [S, M, HV, V, K] by group, the pool read and (unless
    disable_state_update) written; negative indices pad; EAGLE parents when tree."""
    lens, M = [3, 2, 0, 3, 1, 3], 3
    N, slots, S = len(lens), len(lens) + 3, len(lens) + 2
    x = Batch(rng, lens)
    base, P = pool(rng, slots, pool_dtype)
    buf = torch.full((S, M, HV, V, K), NAN, dtype=pool_dtype, device=DEV)
    idx, tok = (torch.empty(N, dtype=torch.int32, device=DEV) for _ in range(2))
    par = torch.empty(N, M, dtype=torch.int32, device=DEV)

    def fill():
        now = rng.permutation(lens)
        x.fill(rng, now)
        ix, tk = sglang_slots(rng, now, slots, S)
        stored = (np.arange(M)[None] < now[:, None]) & (tk >= 0)[:, None]
        put((idx, ix), (tok, tk), (par, eagle_parents(rng, stored)))
        return [list(range(slots)) if disable_state_update else untouched(slots, ix[ix >= 0]),
                untouched(S, tk[tk >= 0])]

    def call():
        return (sglang.fused_sigmoid_gating_delta_rule_update(
            x.A_log, x.g[0], x.dt_bias, 1.0, 20.0, x.q, x.k, x.v, x.beta[0], P, idx, cu_seqlens=x.cu,
            use_qk_l2norm_in_kernel=True, disable_state_update=disable_state_update, intermediate_states_buffer=buf,
            intermediate_state_indices=tok, retrieve_parent_token=par if tree else None),)

    check_graph(call, [base, buf], fill)


# ------------------------------------------------------------------------------------------------
# gdn's own calls


@pytest.mark.parametrize("pool_dtype", ALL_POOLS)
@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("tree", [False, True])
@pytest.mark.parametrize("style", ["vllm", "sglang", "sglang_no_update"])
def test_decode_token_states(rng, style, tree, state_v_first, pool_dtype):
    """gdn.decode_ with per-token states: vLLM's convention (2-D slots, num_accepted_tokens,
    null_slot 0) or SGLang's (the pool row read, a token-state buffer by group in the pool's
    dtype, the pool written or not); EAGLE parents when tree."""
    lens, M = [4, 2, 0, 3, 1, 0], 4
    N, slots, S = len(lens), 1 + len(lens) * M + 3, len(lens) + 2
    x = Batch(rng, lens)
    base, P = pool(rng, slots, pool_dtype)
    buf = torch.full((S, M, HV, K, V), NAN, dtype=pool_dtype, device=DEV)
    idx = torch.empty((N, M) if style == "vllm" else (N,), dtype=torch.int32, device=DEV)
    tok, nat = (torch.empty(N, dtype=torch.int32, device=DEV) for _ in range(2))
    par = torch.empty(N, M, dtype=torch.int32, device=DEV)

    def fill():
        now = rng.permutation(lens)
        x.fill(rng, now)
        if style == "vllm":
            ix, na, stored, _ = vllm_slots(rng, now, M, N, slots)
            tk, keep = np.zeros(N, np.int32), [untouched(slots, ix[stored])]
        else:
            ix, tk = sglang_slots(rng, now, slots, S)
            na = np.ones(N, np.int32)
            stored = (np.arange(M)[None] < now[:, None]) & (tk >= 0)[:, None]
            keep = [list(range(slots)) if style == "sglang_no_update" else untouched(slots, ix[ix >= 0]),
                    untouched(S, tk[tk >= 0])]
        put((idx, ix), (tok, tk), (nat, na), (par, eagle_parents(rng, stored)))
        return keep

    def call():
        kw = dict(cu_seqlens=x.cu, state_v_first=state_v_first, use_qk_l2norm_in_kernel=True,
                  retrieve_parent_token=par if tree else None)
        if style == "vllm":
            return (gdn.decode_(*x.args(), P, idx, null_slot=0, num_accepted_tokens=nat, **kw),)
        return (gdn.decode_(*x.args(), P, idx, token_states=buf, token_state_indices=tok,
                            disable_state_update=style == "sglang_no_update", **kw),)

    check_graph(call, [base] if style == "vllm" else [base, buf], fill)


@pytest.mark.parametrize("pool_dtype", ALL_POOLS)
@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("fn", ["prefill_", "decode_"])
def test_read_write_slots(rng, fn, state_v_first, pool_dtype):
    """prefill_ / decode_ reading a sequence's state from one slot and writing it to another
    (final_state_indices; one sequence in place), one from no slot (-1) and one with
    has_initial_state False (both start from zeros and are still written), padding on null_slot 0;
    decode_ (up to 3 tokens a sequence) with the fused gate."""
    lens = [70, 0, 5, 130, 64] if fn == "prefill_" else [1, 0, 3, 2, 1]
    N, slots = len(lens), 2 * len(lens) + 3
    x = Batch(rng, lens)
    base, P = pool(rng, slots, pool_dtype)
    read, write = (torch.empty(N, dtype=torch.int32, device=DEV) for _ in range(2))
    present = torch.empty(N, dtype=torch.bool, device=DEV)

    def fill():
        x.fill(rng, rng.permutation(lens))
        perm = (1 + rng.permutation(slots - 1)[: 2 * N]).astype(np.int32)
        r, w, n = perm[:N], perm[N:], rng.permutation(N)
        w[n[0]] = r[n[0]]  # in place
        r[n[1]] = w[n[1]] = 0  # padding
        r[n[2]] = -1  # a new request: no state to read
        put((read, r), (write, w), (present, np.arange(N) != n[3]))
        return [untouched(slots, w[w > 0])]

    def call():
        f = gdn.prefill_ if fn == "prefill_" else gdn.decode_
        fused = dict(A_log=x.A_log, dt_bias=x.dt_bias) if fn == "decode_" else {}
        return (f(*x.args(), P, read, cu_seqlens=x.cu, state_v_first=state_v_first, use_qk_l2norm_in_kernel=True,
                  null_slot=0, has_initial_state=present, final_state_indices=write, **fused),)

    check_graph(call, [base], fill)


@functools.lru_cache(maxsize=None)
@pytest.mark.parametrize("pool_dtype", ALL_POOLS)
@pytest.mark.parametrize("state_v_first", [False, True])
@pytest.mark.parametrize("every", [1, 2])
def test_prefill_checkpoints(rng, every, state_v_first, pool_dtype):
    """prefill_ storing the state every 64 * `every` tokens into named rows of a checkpoint pool
    (one index -1; rows of boundaries past a sequence's end untouched), the state pool in place."""
    lens, M = [200, 0, 128, 330, 64], 3
    N, slots, ck_slots = len(lens), len(lens) + 2, len(lens) * M + 3
    x = Batch(rng, lens)
    base, P = pool(rng, slots, pool_dtype)
    ck_base, CK = pool(rng, ck_slots, pool_dtype)
    idx = torch.empty(N, dtype=torch.int32, device=DEV)
    ck_idx = torch.empty(N, M, dtype=torch.int64, device=DEV)

    def fill():
        now = rng.permutation(lens)
        x.fill(rng, now)
        ix = rng.permutation(slots)[:N].astype(np.int32)
        ix[rng.integers(N)] = -1
        cix = rng.permutation(ck_slots)[: N * M].reshape(N, M)
        cix[rng.integers(N), rng.integers(M)] = -1
        stored = (64 * every * np.arange(1, M + 1)[None] <= now[:, None]) & (cix >= 0)
        put((idx, ix), (ck_idx, cix))
        return [untouched(slots, ix[ix >= 0]), untouched(ck_slots, cix[stored])]

    def call():
        return (gdn.prefill_(*x.args(), P, idx, cu_seqlens=x.cu, state_v_first=state_v_first,
                             use_qk_l2norm_in_kernel=True, checkpoints=CK, checkpoint_indices=ck_idx,
                             checkpoint_every_chunks=every),)

    check_graph(call, [base, ck_base], fill)
