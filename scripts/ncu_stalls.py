#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction, from Nsight Compute's source page.

    ncu --set full --import-source no -o rep <app>             (on the GPU machine)
    ncu -i rep.ncu-rep --page source --csv --print-source sass > src.csv
    python3 scripts/ncu_stalls.py src.csv [--share 0.004] [--top-ops 12]

For each kernel in the file: its samples, the instructions holding at least `share` of them with
their three main stall reasons, and the samples per opcode. ncu's aggregate counters say that a
kernel stalls; these say where: e.g. three warps of a warpgroup sampled at a wgmma while the fourth
sits in a release fence (docs/perf.md, session 18). Samples with no reason column (such as the
GMMA stall) show only in the instruction's total.
"""
import argparse
import collections
import csv
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


def report(name, header, data, share, top_ops):
    ix = {h: k for k, h in enumerate(header)}
    col = ix.get("Warp Stall Sampling (All Samples)")
    if col is None:
        print(f"## {name[:150]}\n(no warp stall sampling column: profile with --set full)\n")
        return
    reasons = [h for h in header if h.startswith("stall_") and "(" not in h]

    def num(r, c):
        try:
            return int(float(r[c] or 0))
        except (ValueError, IndexError):
            return 0

    total = sum(num(r, col) for r in data)
    print(f"## {name[:150]}\n{total} samples, {len(data)} instructions")
    if not total:
        print()
        return
    by_reason = collections.Counter()
    by_op = collections.Counter()
    for n, r in enumerate(data):
        s = num(r, col)
        src = r[ix["Source"]].strip() if "Source" in ix else "?"
        by_op[opcode(src)] += s
        for x in reasons:
            by_reason[x[6:]] += num(r, ix[x])
        if s >= share * total:
            top = sorted(((num(r, ix[x]), x[6:]) for x in reasons), reverse=True)[:3]
            why = " ".join(f"{x}:{v}" for v, x in top if v)
            ex = r[ix["Instructions Executed"]] if "Instructions Executed" in ix else ""
            print(f"{n:5d} {s:7d} {100 * s / total:5.1f}% ex={ex:>8s} {src[:64]:64s} {why}")
    named = sum(by_reason.values())
    print("reasons: " + ", ".join(f"{x} {100 * v / total:.1f}%" for x, v in by_reason.most_common(8) if v) +
          f", unnamed (e.g. gmma) {100 * (total - named) / total:.1f}%")
    print("opcodes: " + ", ".join(f"{x} {100 * v / total:.1f}%" for x, v in by_op.most_common(top_ops)))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--share", type=float, default=0.004, help="list instructions with at least this share")
    ap.add_argument("--top-ops", type=int, default=12)
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    found = sections(rows)
    if not found:
        sys.exit(f"{a.csv}: no 'Kernel Name' section (ncu --page source --csv --print-source sass)")
    for name, header, data in found:
        report(name, header, data, a.share, a.top_ops)


if __name__ == "__main__":
    main()
