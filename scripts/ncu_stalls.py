#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction, from Nsight Compute's source page.

    ncu --set full --import-source no -o rep <app>             (on the GPU machine)
    ncu -i rep.ncu-rep --page source --csv --print-source sass > src.csv
    python3 scripts/ncu_stalls.py src.csv [--share 0.004] [--top-ops 12] [--stretches]

For each kernel in the file: its samples, the instructions holding at least `share` of them with
their three main stall reasons, and the samples per opcode. ncu's aggregate counters say that a
kernel stalls; these say where: e.g. three warps of a warpgroup sampled at a wgmma while the fourth
sits in a release fence (docs/perf.md, session 18). Samples with no reason column (such as the
GMMA stall) show only in the instruction's total.

--stretches: the kernel cut at every wgmma issue end and wait, mbarrier wait and block barrier,
each stretch with its instructions per iteration and warp (one iteration: the execution count that
covers the most executions, e.g. a chunk of the chain kernels' loops, for both warpgroups), its
samples, main opcodes and
stall reasons: where one chunk's time goes (docs/perf.md, session 24: the o warpgroup paces the
fused chain). The input may be .xz.
"""
import argparse
import collections
import csv
import io
import lzma
import re
import sys


def sections(rows):
    """Splits the CSV into (kernel name, header, rows) per kernel."""
    out, i = [], 0
    while i < len(rows):
        if rows[i] and rows[i][0] == "Kernel Name":
            name = rows[i][1] if len(rows[i]) > 1 else "?"
            header, j = rows[i + 1], i + 2
            while j < len(rows) and not (rows[j] and rows[j][0] == "Kernel Name"):
                j += 1
            out.append((name, header, rows[i + 2:j]))
            i = j
        else:
            i += 1
    return out


def opcode(src):
    words = [w for w in src.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else "?"


def num_of(r, c):
    try:
        return int(float(r[c] or 0))
    except (ValueError, IndexError):
        return 0


def report(name, header, data, share, top_ops):
    ix = {h: k for k, h in enumerate(header)}
    col = ix.get("Warp Stall Sampling (All Samples)")
    if col is None:
        print(f"## {name[:150]}\n(no warp stall sampling column: profile with --set full)\n")
        return
    reasons = [h for h in header if h.startswith("stall_") and "(" not in h]
    total = sum(num_of(r, col) for r in data)
    print(f"## {name[:150]}\n{total} samples, {len(data)} instructions")
    if not total:
        print()
        return
    by_reason = collections.Counter()
    by_op = collections.Counter()
    for n, r in enumerate(data):
        s = num_of(r, col)
        src = r[ix["Source"]].strip() if "Source" in ix else "?"
        by_op[opcode(src)] += s
        for x in reasons:
            by_reason[x[6:]] += num_of(r, ix[x])
        if s >= share * total:
            top = sorted(((num_of(r, ix[x]), x[6:]) for x in reasons), reverse=True)[:3]
            why = " ".join(f"{x}:{v}" for v, x in top if v)
            ex = r[ix["Instructions Executed"]] if "Instructions Executed" in ix else ""
            print(f"{n:5d} {s:7d} {100 * s / total:5.1f}% ex={ex:>8s} {src[:64]:64s} {why}")
    named = sum(by_reason.values())
    print("reasons: " + ", ".join(f"{x} {100 * v / total:.1f}%" for x, v in by_reason.most_common(8) if v) +
          f", unnamed (e.g. gmma) {100 * (total - named) / total:.1f}%")
    print("opcodes: " + ", ".join(f"{x} {100 * v / total:.1f}%" for x, v in by_op.most_common(top_ops)))
    print()


def report_stretches(name, header, data, min_ins):
    ix = {h: k for k, h in enumerate(header)}
    if "Instructions Executed" not in ix:
        print(f"## {name[:150]}\n(no executed counts: profile with --set full)\n")
        return
    col, exe, src_c = ix.get("Warp Stall Sampling (All Samples)"), ix["Instructions Executed"], ix["Source"]
    reasons = [h for h in header if h.startswith("stall_") and "(" not in h]
    # One iteration = the execution count that accounts for the most executions (count x the
    # instructions with it): a chunk per warp for the chain kernels' loops (both warpgroups'), an
    # item per warp for the one-item kernels.
    counts = collections.Counter(num_of(r, exe) for r in data if num_of(r, exe) > 0)
    if not counts:
        return
    iters = max(counts, key=lambda c: c * counts[c])
    total = sum(num_of(r, col) for r in data) if col is not None else 0
    print(f"## {name[:150]}\n{total} samples, {len(data)} instructions; one iteration = {iters} warp-executions")
    cut = re.compile(r"WARPGROUP\.DEPBAR|SYNCS\.PHASECHK|BAR\.SYNC|HGMMA.*gsb0|WARPGROUP\.ARRIVE|EXIT")
    start, n_ins, n_smp, ops, why = 0, 0.0, 0, collections.Counter(), collections.Counter()
    for k, r in enumerate(data):
        ex = num_of(r, exe) / iters
        n_ins += ex
        n_smp += num_of(r, col) if col is not None else 0
        ops[opcode(r[src_c].strip())] += ex
        for x in reasons:
            why[x[6:]] += num_of(r, ix[x])
        if cut.search(r[src_c]) or k == len(data) - 1:
            if n_ins >= min_ins or n_smp >= 0.01 * max(total, 1):
                top = ", ".join(f"{o} {c:.0f}" for o, c in ops.most_common(4) if c >= 0.5)
                w = ", ".join(f"{x} {v}" for x, v in why.most_common(2) if v)
                print(f"{start:5d}-{k:5d} {n_ins:6.0f} instr {n_smp:6d} samples {100 * n_smp / max(total, 1):5.1f}%"
                      f"  to {r[src_c].strip()[:44]:44s} {top} | {w}")
            start, n_ins, n_smp, ops, why = k + 1, 0.0, 0, collections.Counter(), collections.Counter()
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--share", type=float, default=0.004, help="list instructions with at least this share")
    ap.add_argument("--top-ops", type=int, default=12)
    ap.add_argument("--stretches", action="store_true", help="per stretch between waits instead of per instruction")
    ap.add_argument("--min-ins", type=float, default=2, help="--stretches: the fewest instructions per iteration shown")
    a = ap.parse_args()
    if a.csv.endswith(".xz"):
        with lzma.open(a.csv, "rt", newline="") as f:
            rows = list(csv.reader(io.StringIO(f.read())))
    else:
        with open(a.csv, newline="") as f:
            rows = list(csv.reader(f))
    found = sections(rows)
    if not found:
        sys.exit(f"{a.csv}: no 'Kernel Name' section (ncu --page source --csv --print-source sass)")
    for name, header, data in found:
        if a.stretches:
            report_stretches(name, header, data, a.min_ins)
        else:
            report(name, header, data, a.share, a.top_ops)


if __name__ == "__main__":
    main()
