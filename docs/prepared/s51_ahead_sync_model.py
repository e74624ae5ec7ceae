#!/usr/bin/env python3
"""The look-ahead summary kernel's synchronization (src/cuda/chunk/summary_ahead.cuh), checked by
random interleavings before any GPU ran it (session 51: no device).

Three agents: the chain warpgroup (WG0), the state warpgroup (WG1) and the TMA engine (a fill
issued by WG1's prefetch lands at a random later time and completes the stage's full barrier).
Each warpgroup is one sequential agent (its threads' own barriers are not modelled), its program
written as the kernel's loops with every shared buffer's use as a span: a read or write begins
after the waits that guard it and ends before the arrival that releases it. mbarriers follow
PTX: try_wait.parity(P) passes once the phase of parity P completed, i.e. completed % 2 != P.

Checked on every trial: no deadlock; every read sees the version (chunk) the kernel means; no
write span overlaps another agent's read or write span of the same buffer.

    python3 docs/prepared/s51_ahead_sync_model.py [--trials 20000]
"""
import argparse
import random

ST = 3


class Barrier:
    def __init__(self, count):
        self.count, self.arrived, self.completed = count, 0, 0

    def arrive(self, n=1):
        self.arrived += n
        assert self.arrived <= self.count, "more arrivals than the count"
        if self.arrived == self.count:
            self.arrived, self.completed = 0, self.completed + 1

    def passes(self, parity):
        return self.completed % 2 != parity


def wg1(nch):  # the state warpgroup
    for c in range(min(ST, nch)):
        yield ("prefetch", c)

    def landed(c):
        yield ("wait", ("full", c % ST), (c // ST) & 1)
        yield ("begin", ("stage", c % ST), "w", c)  # a partial chunk's rows zeroed
        yield ("end", ("stage", c % ST), "w")

    def form_u_base(c):
        yield ("begin", ("stage", c % ST), "r", c)
        if c > 0:
            yield ("begin", ("stage", (c - 1) % ST), "r", c - 1)
        yield ("begin", ("base", c % 2), "w", c)
        yield ("begin", ("kk", c % 2), "w", c)
        yield ("end", ("base", c % 2), "w")
        yield ("end", ("kk", c % 2), "w")
        if c > 0:
            yield ("end", ("stage", (c - 1) % ST), "r")
        yield ("end", ("stage", c % ST), "r")
        yield ("arrive", ("u_ready", c % 2))

    if nch > 0:
        yield from landed(0)
        yield from form_u_base(0)
    if nch > 1:
        yield from landed(1)
        yield from form_u_base(1)
    for c in range(nch):
        yield ("wait", ("vs_ready", c % 2), (c // 2) & 1)
        yield ("begin", ("stage", c % ST), "r", c)  # eg (dl, precise) and k_c in the update
        yield ("begin", ("vs", c % 2), "r", c)
        yield ("end", ("vs", c % 2), "r")
        yield ("end", ("stage", c % ST), "r")
        if c + 2 < nch:
            yield from landed(c + 2)
            yield from form_u_base(c + 2)
        if c + ST < nch:
            yield ("prefetch", c + ST)


def wg0(nch):  # the chain warpgroup
    for c in range(nch):
        yield ("wait", ("full", c % ST), (c // ST) & 1)
        yield ("wait", ("u_ready", c % 2), (c // 2) & 1)
        yield ("begin", ("base", c % 2), "r", c)
        if c > 0:
            yield ("begin", ("kk", c % 2), "r", c)
        yield ("begin", ("stage", c % ST), "r", c)  # A_s, v, eg, rk
        yield ("end", ("stage", c % ST), "r")
        if c > 0:
            yield ("end", ("kk", c % 2), "r")
        yield ("end", ("base", c % 2), "r")
        yield ("begin", ("vs", c % 2), "w", c)
        yield ("end", ("vs", c % 2), "w")
        yield ("arrive", ("vs_ready", c % 2))


def trial(nch, rng):
    bars = {("full", s): Barrier(2) for s in range(ST)}  # (the arrival + the landing)
    bars.update({(n, b): Barrier(1) for n in ("vs_ready", "u_ready") for b in range(2)})
    version = {}  # buffer -> the chunk its last completed write holds
    spans = {}  # buffer -> list of (agent, kind)
    agents = {"wg0": wg0(nch), "wg1": wg1(nch)}
    nxt = {a: next(g, None) for a, g in agents.items()}
    fills = []  # (stage, chunk) in flight

    def begin(agent, buf, kind, chunk):
        for other, k in spans.get(buf, []):
            assert other == agent or (kind == "r" and k == "r"), f"{agent} {kind} {buf} overlaps {other} {k}"
        if kind == "r":
            assert version.get(buf) == chunk, f"{agent} reads {buf} as {version.get(buf)}, means {chunk}"
        else:
            version[buf] = chunk
        spans.setdefault(buf, []).append((agent, kind))

    def end(agent, buf, kind):
        spans[buf].remove((agent, kind))

    steps = 0
    while True:
        steps += 1
        assert steps < 100000
        runnable = []
        for a, op in nxt.items():
            if op is None:
                continue
            if op[0] == "wait" and not bars[op[1]].passes(op[2]):
                continue
            runnable.append(a)
        choices = runnable + (["tma"] if fills else [])
        if not choices:
            assert all(op is None for op in nxt.values()), f"deadlock: {nxt}"
            return
        a = rng.choice(choices)
        if a == "tma":
            s, c = fills.pop(rng.randrange(len(fills)))
            end("tma", ("stage", s), "w")
            bars[("full", s)].arrive()
            continue
        op = nxt[a]
        if op[0] == "prefetch":
            c = op[1]
            begin("tma", ("stage", c % ST), "w", c)  # the TMA engine writes it until it lands
            fills.append((c % ST, c))
            bars[("full", c % ST)].arrive()  # (thread 0's expect_tx; the landing is the other)
        elif op[0] == "arrive":
            bars[op[1]].arrive()
        elif op[0] == "begin":
            begin(a, op[1], op[2], op[3])
        elif op[0] == "end":
            end(a, op[1], op[2])
        nxt[a] = next(agents[a], None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20000)
    args = ap.parse_args()
    rng = random.Random(51)
    for i in range(args.trials):
        trial(1 + i % 12, rng)
    print(f"{args.trials} trials (1-12 chunks a part): no deadlock, every read its chunk, no overlapping spans")


if __name__ == "__main__":
    main()
