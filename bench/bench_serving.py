"""The serving-engine rows of bench/bench_gpu.py (issue 12's speed targets), gdn only (fla 0.6 has
no pool indexing, per-token states or checkpoints):

- verify: N sequences x T = 4 tokens (speculative decoding, vLLM's convention: 2-D state_indices
  [N, 4] and num_accepted_tokens), fp32 pool; bytes = one state read + 4 state writes per sequence
  plus the inputs and o; target >= 85% of the copy bandwidth;
- pool dtype: one-token decode with fp32, bf16 and fp16 pools (N states updated in place); target
  bf16 >= 1.8x faster than fp32 at N >= 256;
- checkpoints: the pool prefill with a checkpoint every 16 chunks against the same call without;
  target <= 10% more time.

Each row's o is checked against the float64 recurrence (first sequences) from the rounded states.
"""

from __future__ import annotations

import math

import torch

from gdn_ref import torch_recurrence, torch_rel_err

import gdn

POOL_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Ctx:
    """What bench_gpu.py lends: the device, the shape, its graph timer and the copy bandwidth."""

    def __init__(self, dev, H, HV, K, V, graph_time, copy_GBps, rotate_bytes, no_ref):
        self.dev, self.H, self.HV, self.K, self.V = dev, H, HV, K, V
        self.graph_time, self.copy_GBps, self.rotate_bytes, self.no_ref = graph_time, copy_GBps, rotate_bytes, no_ref

    def rand(self, gen, *shape, dt=torch.bfloat16):
        return torch.randn(*shape, generator=gen, device=self.dev, dtype=torch.float32).to(dt)

    def state_shape(self, v_major):
        return (self.HV, self.V, self.K) if v_major else (self.HV, self.K, self.V)

    def tokens(self, gen, n, t):
        """q, k, v, g, beta for n sequences of t tokens ([n, t, heads, dim])."""
        c = self
        return dict(q=c.rand(gen, n, t, c.H, c.K), k=c.rand(gen, n, t, c.H, c.K), v=c.rand(gen, n, t, c.HV, c.V),
                    g=torch.nn.functional.logsigmoid(c.rand(gen, n, t, c.HV, dt=torch.float32)),
                    beta=c.rand(gen, n, t, c.HV, dt=torch.float32).sigmoid())

    def io_bytes(self, d):
        return sum(d[x].numel() * d[x].element_size() for x in ("q", "k", "v", "g", "beta")) + d["v"].numel() * 2

    def sets(self, make, touched):
        return [make(9000 + i) for i in range(min(16, max(1, math.ceil(self.rotate_bytes / touched))))]

    def o_err(self, o, d, initial, v_major, m):
        """Relative error of o for the first m sequences against the float64 recurrence."""
        if self.no_ref:
            return None
        ro, _ = torch_recurrence(d["q"][:m], d["k"][:m], d["v"][:m], d["g"][:m], d["beta"][:m],
                                 initial_state=initial[:m].float(), use_qk_l2norm=True, state_v_first=v_major)
        return torch_rel_err(o[:m], ro)


def run_verify(c, n, v_major, t=4):
    row = dict(kind="verify", n=n, tokens_per_seq=t, layout="V-major" if v_major else "K-major", pool="fp32")
    state = c.HV * c.K * c.V * 4

    def make(seed):
        gen = torch.Generator(device=c.dev).manual_seed(seed)
        d = c.tokens(gen, n, t)
        slots = n * (t + 1)
        d["pool"] = c.rand(gen, slots, *c.state_shape(v_major), dt=torch.float32)
        d["idx"] = torch.randperm(slots, device=c.dev, generator=gen)[: n * t].reshape(n, t).to(torch.int32)
        d["acc"] = torch.randint(1, t + 1, (n,), device=c.dev, generator=gen, dtype=torch.int32)
        return d

    def call(d):
        return gdn.decode_(d["q"], d["k"], d["v"], d["g"], d["beta"], d["pool"], d["idx"], state_v_first=v_major,
                           use_qk_l2norm_in_kernel=True, num_accepted_tokens=d["acc"])

    sets = c.sets(make, n * (t + 1) * state)
    d0 = sets[0]
    m = min(n, 64)
    read = d0["idx"].long()[torch.arange(n, device=c.dev), d0["acc"].long() - 1]
    initial = d0["pool"][read[:m]].clone()
    row["gdn_err"] = c.o_err(call(d0), d0, initial, v_major, m)
    row["gdn_ms"] = c.graph_time([lambda d=d: call(d) for d in sets])
    moved = n * (1 + t) * state + c.io_bytes(d0) + d0["idx"].numel() * 4 + n * 4
    row["gdn_GBps"] = moved / (row["gdn_ms"] * 1e-3) / 1e9
    row["frac_copy_bw"] = row["gdn_GBps"] / c.copy_GBps
    return row


def run_pool_decode(c, n, v_major, pool_dtype):
    dt = POOL_DTYPES[pool_dtype]
    row = dict(kind="pool", n=n, layout="V-major" if v_major else "K-major", pool=pool_dtype)
    state = c.HV * c.K * c.V * dt.itemsize

    def make(seed):
        gen = torch.Generator(device=c.dev).manual_seed(seed)
        d = c.tokens(gen, n, 1)
        d["pool"] = c.rand(gen, 2 * n, *c.state_shape(v_major), dt=dt)
        d["idx"] = torch.randperm(2 * n, device=c.dev, generator=gen)[:n].to(torch.int32)
        return d

    def call(d):
        return gdn.decode_(d["q"], d["k"], d["v"], d["g"], d["beta"], d["pool"], d["idx"], state_v_first=v_major,
                           use_qk_l2norm_in_kernel=True)

    sets = c.sets(make, 2 * n * state)
    d0 = sets[0]
    m = min(n, 64)
    initial = d0["pool"][d0["idx"].long()[:m]].clone()
    row["gdn_err"] = c.o_err(call(d0), d0, initial, v_major, m)
    row["gdn_ms"] = c.graph_time([lambda d=d: call(d) for d in sets])
    moved = 2 * n * state + c.io_bytes(d0) + n * 4
    row["gdn_GBps"] = moved / (row["gdn_ms"] * 1e-3) / 1e9
    row["frac_copy_bw"] = row["gdn_GBps"] / c.copy_GBps
    return row


def run_checkpoints(c, name, lens, H, HV, every=16):
    """The pool prefill of one case with and without a checkpoint every `every` chunks (fp32 pool,
    V-major, a dense checkpoint buffer [N, M, HV, V, K])."""
    row = dict(kind="checkpoints", case=name, H=H, HV=HV, every_chunks=every)
    gen = torch.Generator(device=c.dev).manual_seed(77)
    T, n = sum(lens), len(lens)
    d = dict(q=c.rand(gen, 1, T, H, c.K), k=c.rand(gen, 1, T, H, c.K), v=c.rand(gen, 1, T, HV, c.V),
             g=torch.nn.functional.logsigmoid(c.rand(gen, 1, T, HV, dt=torch.float32)),
             beta=c.rand(gen, 1, T, HV, dt=torch.float32).sigmoid())
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    cu_dev = cu.to(c.dev)  # (no host-to-device copy inside the captured call)
    pool = c.rand(gen, n, HV, c.V, c.K, dt=torch.float32)
    M = max(1, max(lens) // (64 * every))
    ck = torch.empty(n, M, HV, c.V, c.K, device=c.dev, dtype=torch.float32)
    idx = torch.arange(n, device=c.dev, dtype=torch.int32)

    def call(with_ck):
        extra = dict(checkpoints=ck, checkpoint_every_chunks=every) if with_ck else {}
        return gdn.prefill_(d["q"], d["k"], d["v"], d["g"], d["beta"], pool, idx, cu_seqlens=cu_dev,
                            cu_seqlens_cpu=cu, state_v_first=True, use_qk_l2norm_in_kernel=True, **extra)

    row["plain_ms"] = c.graph_time([lambda: call(False)])
    try:
        call(True)
    except Exception as e:  # noqa: BLE001  (a backend without checkpoints says so)
        row["note"] = f"{type(e).__name__}: {str(e)[:160]}"
        return row
    row["checkpoints_ms"] = c.graph_time([lambda: call(True)])
    row["cost"] = row["checkpoints_ms"] / row["plain_ms"] - 1
    return row


# (name, lengths, H, HV, checkpoint every n chunks): the checkpoint rows
CHECKPOINT_CASES = [("1x32k", [32768], 16, 32, 16), ("tp4-1x32k", [32768], 4, 8, 16), ("4x8k", [8192] * 4, 16, 32, 16)]


def run_serving(c, quick=False, checkpoint_cases=None, rows=None, on_row=None):
    """Every serving row, in the order of the report, appended to `rows` (on_row() after each, so
    that a run cut short keeps what it measured)."""
    rows = [] if rows is None else rows
    done = on_row or (lambda: None)
    for n in ([256] if quick else [256, 1024]):
        for v_major in (True, False):
            rows.append(run_verify(c, n, v_major))
            done()
    for n in ([256] if quick else [256, 1024, 4096]):
        for v_major in (True, False):
            for p in POOL_DTYPES:
                rows.append(run_pool_decode(c, n, v_major, p))
                done()
    by = {(r["n"], r["layout"], r["pool"]): r for r in rows if r["kind"] == "pool"}
    for r in rows:
        if r["kind"] == "pool" and r["pool"] != "fp32":
            r["speedup_vs_fp32"] = by[(r["n"], r["layout"], "fp32")]["gdn_ms"] / r["gdn_ms"]
    for name, lens, H, HV, every in checkpoint_cases or CHECKPOINT_CASES:
        if not quick or checkpoint_cases or name == "tp4-1x32k":
            rows.append(run_checkpoints(c, name, lens, H, HV, every))
            done()
    if c.dev == "cuda":
        torch.cuda.empty_cache()
    return rows

