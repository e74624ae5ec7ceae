#!/usr/bin/env python3
"""Flags kernels whose global loads wait for one another: many LDGs into one register mean each
load's value was used (and waited for) before the next was issued, e.g. a load inside a branch
that converts it (session 43: the chain's 16-bit state rows, 64 loads into one register, made
256x64 with a bf16 pool 2.4x slower). Loads into distinct registers go out back to back.

    cuobjdump -sass build/src/cuda/libgdn_cuda.a > /tmp/gdn.sass   # or a -cubin of one file
    python3 scripts/sass_load_chains.py /tmp/gdn.sass [--min 8]

(cuobjdump comes with the CUDA toolkit; without it, triton's wheel carries one under
triton/backends/nvidia/bin/.) Prints, for each kernel with at least --min loads into one register,
its total LDG count and the register taken most often."""
import argparse
import collections
import re

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("sass", nargs="+")
ap.add_argument("--min", type=int, default=8, help="loads into one register to report (default 8)")
args = ap.parse_args()

for path in args.sass:
    kernel, dests, total = None, collections.Counter(), 0

    def report():
        if kernel and dests:
            reg, n = dests.most_common(1)[0]
            if n >= args.min:
                print(f"{kernel}: {total} LDG, {n} into {reg}")

    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            report()
            kernel, dests, total = m.group(1), collections.Counter(), 0
            continue
        m = re.search(r"\bLDG\.E[.\w]*\s+(R\d+)", line)
        if m:
            dests[m.group(1)] += 1
            total += 1
    report()
