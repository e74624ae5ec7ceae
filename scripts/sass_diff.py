#!/usr/bin/env python3
"""Compares two SASS listings kernel by kernel, for changes meant to leave the code alone (a file
split into inlined helpers, a renamed variable): which kernels are identical, which differ only in
register numbers and constants (the instructions, their order and reuse flags the same), and where
the others differ (instruction hunks, and how many lie past the kernel's first wgmma: the loop).

    nvcc ... -cubin -o /tmp/a.cubin FILE.cu   # each side (the library's flags, sm_90a)
    cuobjdump -sass /tmp/a.cubin > /tmp/a.sass
    python3 scripts/sass_diff.py /tmp/a.sass /tmp/b.sass

(cuobjdump comes with the CUDA toolkit; without it, triton's wheel carries one under
triton/backends/nvidia/bin/.) Kernels in an anonymous namespace are matched across builds: the
namespace's per-file hash is masked. Session 50 checked fwd_h_wgmma.cuh's split with it."""
import argparse
import difflib
import re

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--show", type=int, default=0, help="print up to N differing hunks a kernel")
args = ap.parse_args()

ANON = re.compile(r"[0-9]+_GLOBAL__N__[0-9a-f]+_[0-9]+_[A-Za-z0-9_]+?_cu_[0-9a-f]+_[0-9]+")


def kernels(path):
    """{kernel: [instruction text]} of a cuobjdump -sass listing."""
    out, cur = {}, None
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = ANON.sub("ANON", m.group(1))
            out[cur] = []
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and cur:
            out[cur].append(m.group(1).strip())
    return out


def masked(instrs):
    """Registers, predicates and immediates / constant offsets masked."""
    sub = [(r"0x[0-9a-f]+", "X"), (r"\bUR\d+", "UR"), (r"\bR\d+", "R"), (r"\bU?P\d\b", "P")]
    out = []
    for i in instrs:
        for pat, rep in sub:
            i = re.sub(pat, rep, i)
        out.append(i)
    return out


a, b = kernels(args.a), kernels(args.b)
for name in sorted(set(a) | set(b)):
    short = re.sub(r"^_Z.*?ANON", "", name)[:90]
    if name not in a or name not in b:
        print(f"only in {'b' if name not in a else 'a'}: {short}")
        continue
    x, y = a[name], b[name]
    if x == y:
        print(f"identical ({len(x)}): {short}")
        continue
    mx, my = masked(x), masked(y)
    if mx == my:
        n = sum(p != q for p, q in zip(x, y))
        print(f"registers / constants only ({n} of {len(x)} instructions): {short}")
        continue
    first_mma = next((k for k, i in enumerate(x) if "GMMA" in i), len(x))
    hunks = [o for o in difflib.SequenceMatcher(None, mx, my, autojunk=False).get_opcodes() if o[0] != "equal"]
    late = sum(o[2] > first_mma for o in hunks)
    print(f"differs ({len(x)} -> {len(y)} instructions, {len(hunks)} hunks, {late} past the first wgmma): {short}")
    for o in hunks[: args.show]:
        print(f"    a[{o[1]}:{o[2]}] {mx[o[1]:o[2]][:3]} -> b[{o[3]}:{o[4]}] {my[o[3]:o[4]][:3]}")
