#!/usr/bin/env python3
"""GPU benchmark: gdn against flash-linear-attention (fla) and FlashQLA on the cases of bench/cases.txt.

Prefill: the cases of bench/cases.txt (the one case list; heads H / HV, the gate kind and the
lengths come from it; K=V=128), bf16 q/k/v (--dtype fp16 / fp32: rows named CASE/DTYPE), fp32 g
and beta (g = 0 exactly for "zero" gates, Qwen3-Next's gate per head for "model":
gdn_ref.model_gate_params), qk l2-norm in the kernel, fp32
initial state given, final state returned; gdn.chunk_gated_delta_rule,
fla's chunk_gated_delta_rule (run with FLA_FLASH_QLA=0, so that fla does not dispatch to FlashQLA)
and, when the flash_qla package imports, FlashQLA's chunk_gated_delta_rule, on the same inputs. Decode: N sequences of one token, states in a pool of
2N slots (V-major and K-major), gdn.decode_ (in place, by index) against fla's
fused_recurrent_gated_delta_rule (which has no pool indexing: it gets the N states as a dense
initial_state and returns new final states, the same bytes).

Every call is captured in a CUDA graph and replayed; the time is the median of many replays, each
timed with events, rotating between input sets so that the data touched exceeds the L2 cache. Each
output is checked against the float64 recurrence (python/tests/gdn_ref.py): relative RMS error of o
(and of the final state). The same run measures device-to-device copy bandwidth and the bf16
matrix rate, to express each time as a fraction of what the GPU does.

    python3 bench/bench_gpu.py [--json out.json] [--quick] [--cases 1x4k,mixed] [--no-decode]
                               [--no-fla] [--no-flashqla] [--no-ref] [--coverage] [--dtype bf16|fp16|fp32]

Serving rows (speculative verify, 16-bit pools, checkpoints): bench/bench_serving.py.

Writes JSON (gpu, commit, date, prefill[], decode[], serving[], copy_GBps, matmul_TFLOPs) and prints a table last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

# fla's column is fla's own (Triton) kernels: with FLA_FLASH_QLA unset, fla dispatches to FlashQLA
# when that is installed, and the two columns would time the same kernels.
os.environ["FLA_FLASH_QLA"] = "0"

import bench_serving  # noqa: E402
import timing  # noqa: E402
from report import serving_markdown  # noqa: E402
import gdn  # noqa: E402
from gdn_ref import (BENCH_CASES, torch_case_gates, torch_chunked_reference, torch_recurrence,  # noqa: E402
                     torch_rel_err)

try:
    import fla
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_recurrent
    FLA_VERSION = getattr(fla, "__version__", "?")
    FLA_IMPORT_ERROR = None
except Exception as e:  # noqa: BLE001
    fla_chunk = fla_recurrent = None
    FLA_VERSION = None
    FLA_IMPORT_ERROR = f"{type(e).__name__}: {e}"

try:
    import flash_qla
    from flash_qla import chunk_gated_delta_rule as qla_chunk
    QLA_VERSION = getattr(flash_qla, "__version__", "?")
    QLA_IMPORT_ERROR = None
except Exception as e:  # noqa: BLE001
    qla_chunk = None
    QLA_VERSION = None
    QLA_IMPORT_ERROR = f"{type(e).__name__}: {e}"

H, HV, K, V = 16, 32, 128, 128
C = 64
L2_ROTATE_BYTES = 256 << 20  # rotate input sets until this many bytes are touched per round
DEV = "cuda"  # "cpu" with --dry-run: the same code paths on tiny sizes, timed without graphs


# name -> (lengths, H, HV, K, V, gates): every case of bench/cases.txt (K = V = 128)
PREFILL_CASES = {c.name: (c.lengths, c.H, c.HV, K, V, c.gates) for c in BENCH_CASES.values()}
QUICK_CASES = {name: PREFILL_CASES[name] for name in ("1x4k", "8x1k", "mixed", "256x64")}
# --dtype: q, k, v (and o) of the prefill rows; gates, beta and states stay fp32.
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
PREFILL_DTYPE = torch.bfloat16
DECODE_N = [1, 64, 256, 1024, 4096]
# SPEC: also H = HV = 32 (no GVA) and K = V = 64 and 256, for coverage (with --coverage)
COVERAGE_CASES = {"4x8k_noGVA": ([8192] * 4, 32, 32, 128, 128, "normal"),
                  "4x8k_K64": ([8192] * 4, 16, 32, 64, 64, "normal"),
                  "4x8k_K256": ([8192] * 4, 16, 32, 256, 256, "normal"),
                  # more K = V = 64 rows, by name only (--cases): one long sequence, short batches
                  "1x32k_K64": ([32768], 16, 32, 64, 64, "normal"),
                  "8x1k_K64": ([1024] * 8, 16, 32, 64, 64, "normal"),
                  "256x64_K64": ([64] * 256, 16, 32, 64, 64, "normal"),
                  # K = V = 256 at tensor-parallel head counts and on short sequences (by name only)
                  "tp4-1x32k_K256": ([32768], 4, 8, 256, 256, "normal"),
                  "tp8-1x32k_K256": ([32768], 2, 4, 256, 256, "normal"),
                  "8x1k_K256": ([1024] * 8, 16, 32, 256, 256, "normal"),
                  "64x256_K256": ([256] * 64, 16, 32, 256, 256, "normal")}
COVERAGE_DEFAULT = ("4x8k_noGVA", "4x8k_K64", "4x8k_K256")  # what --coverage runs


def graph_time(fns):
    return timing.graph_time(fns, DEV)


# ------------------------------------------------------------------------------------------------
# Inputs


def make_prefill(lens, h, hv, k, v, gates, seed):
    g_ = torch.Generator(device=DEV).manual_seed(seed)
    T, N = sum(lens), len(lens)
    r = lambda *s, dt=torch.bfloat16: torch.randn(*s, generator=g_, device=DEV, dtype=torch.float32).to(dt)  # noqa
    q = r(1, T, h, k, dt=PREFILL_DTYPE)
    kk = r(1, T, h, k, dt=PREFILL_DTYPE)
    vv = r(1, T, hv, v, dt=PREFILL_DTYPE)
    g = torch_case_gates(gates, r(1, T, hv, dt=torch.float32))
    beta = r(1, T, hv, dt=torch.float32).sigmoid()
    h0 = r(N, hv, k, v, dt=torch.float32)
    cu_cpu = torch.tensor([0] + list(_cumsum(lens)), dtype=torch.int64)
    return dict(q=q, k=kk, v=vv, g=g, beta=beta, h0=h0, cu=cu_cpu.to(DEV), cu_cpu=cu_cpu)


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def prefill_bytes(d):
    return sum(t.numel() * t.element_size() for t in (d["q"], d["k"], d["v"], d["g"], d["beta"], d["h0"])) \
        + d["v"].numel() * d["v"].element_size() + d["h0"].numel() * 4  # o and the final state written


def prefill_flops(T, hv, k, v):
    # the chunked algorithm's matrix products per token and value head (C = 64):
    # kkt C*K, w C*K, u C*V, w h K*V, k^T v_new K*V, q h K*V, q k^T C*K, attn v C*V
    return 2.0 * T * hv * (3 * C * k + 2 * C * v + 3 * k * v)


def run_prefill(name, lens, h, hv, k, v, gates, args, copy_GBps, mm_TFLOPs):
    T, N = sum(lens), len(lens)
    sets = [make_prefill(lens, h, hv, k, v, gates, seed=1000 + i) for i in range(1)]
    set_bytes = prefill_bytes(sets[0])
    n_sets = min(4, max(1, math.ceil(L2_ROTATE_BYTES / set_bytes)))
    sets += [make_prefill(lens, h, hv, k, v, gates, seed=2000 + i) for i in range(n_sets - 1)]
    for d in sets[1:]:  # one cu_seqlens object for all sets: fla caches its chunk indices by identity
        d["cu"], d["cu_cpu"] = sets[0]["cu"], sets[0]["cu_cpu"]
    row = dict(name=name, tokens=T, seqs=N, H=h, HV=hv, K=k, V=v, gates=gates, input_sets=n_sets)

    def gdn_call(d):
        return gdn.chunk_gated_delta_rule(d["q"], d["k"], d["v"], d["g"], d["beta"], initial_state=d["h0"],
                                          output_final_state=True, use_qk_l2norm_in_kernel=True, cu_seqlens=d["cu"],
                                          cu_seqlens_cpu=d["cu_cpu"])

    def fla_call(d):
        return fla_chunk(d["q"], d["k"], d["v"], d["g"], d["beta"], initial_state=d["h0"], output_final_state=True,
                         use_qk_l2norm_in_kernel=True, cu_seqlens=d["cu"], cu_seqlens_cpu=d["cu_cpu"])

    def qla_call(d):
        return qla_chunk(d["q"], d["k"], d["v"], d["g"], d["beta"], initial_state=d["h0"], output_final_state=True,
                         use_qk_l2norm_in_kernel=True, cu_seqlens=d["cu"])

    d0 = sets[0]
    o, ht = gdn_call(d0)
    qo = qht = None
    if qla_chunk is not None and not args.no_flashqla:
        try:  # FlashQLA caches per cu_seqlens tensor with a host sync on first use: warm every set up
            for d in sets:
                qla_call(d)
            qo, qht = qla_call(d0)
        except Exception as e:  # noqa: BLE001
            row["flashqla_note"] = f"flashqla failed: {type(e).__name__}: {str(e)[:200]}"
    else:
        row["flashqla_note"] = "flashqla not run" if args.no_flashqla else \
            f"flash_qla not importable: {QLA_IMPORT_ERROR}"
    fo = fht = None
    if fla_chunk is not None and not args.no_fla:
        try:
            fo, fht = fla_call(d0)
        except Exception as e:  # noqa: BLE001
            row["fla_note"] = f"fla failed: {type(e).__name__}: {str(e)[:200]}"
    elif fla_chunk is None:
        row["fla_note"] = f"fla not importable: {FLA_IMPORT_ERROR}"
    if not args.no_ref:
        t0 = time.perf_counter()
        # the chunked form in float64 (equal to the recurrence to ~1e-15; python/tests checks it)
        ro, rh = torch_chunked_reference(d0["q"], d0["k"], d0["v"], d0["g"], d0["beta"], initial_state=d0["h0"],
                                         cu_seqlens_cpu=d0["cu_cpu"], use_qk_l2norm=True)
        row["gdn_err"] = torch_rel_err(o, ro)
        row["gdn_state_err"] = torch_rel_err(ht, rh)
        if fo is not None:
            row["fla_err"] = torch_rel_err(fo, ro)
            row["fla_state_err"] = torch_rel_err(fht, rh)
        if qo is not None:
            row["flashqla_err"] = torch_rel_err(qo, ro)
            row["flashqla_state_err"] = torch_rel_err(qht, rh)
        row["ref_s"] = round(time.perf_counter() - t0, 2)
        del ro, rh
    if fo is not None:
        row["gdn_vs_fla"] = torch_rel_err(o, fo.double())
    del o, ht, fo, fht, qo, qht
    row["gdn_ms"] = graph_time([lambda d=d: gdn_call(d) for d in sets])
    row["gdn_tok_per_s"] = T / (row["gdn_ms"] * 1e-3)
    # Each peer side by side, on the same inputs: its time, tokens/s and gdn's speedup over it.
    for peer, fn, off in (("fla", fla_chunk and fla_call, args.no_fla),
                          ("flashqla", qla_chunk and qla_call, args.no_flashqla)):
        if fn and not off and f"{peer}_note" not in row:
            try:
                row[f"{peer}_ms"] = graph_time([lambda d=d: fn(d) for d in sets])
            except Exception as e:  # noqa: BLE001
                row[f"{peer}_note"] = f"{peer} graph capture failed: {type(e).__name__}: {str(e)[:200]}"
        row.setdefault(f"{peer}_ms", None)
        row.setdefault(f"{peer}_err", None)
        if row[f"{peer}_ms"]:
            row[f"{peer}_tok_per_s"] = T / (row[f"{peer}_ms"] * 1e-3)
            row[f"speedup_vs_{peer}"] = row[f"{peer}_ms"] / row["gdn_ms"]
    row["gdn_GBps"] = set_bytes / (row["gdn_ms"] * 1e-3) / 1e9
    row["frac_copy_bw"] = row["gdn_GBps"] / copy_GBps
    row["gdn_TFLOPs"] = prefill_flops(T, hv, k, v) / (row["gdn_ms"] * 1e-3) / 1e12
    row["frac_matmul"] = row["gdn_TFLOPs"] / mm_TFLOPs
    del sets
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return row


def make_decode(n, v_major, seed):
    g_ = torch.Generator(device=DEV).manual_seed(seed)
    r = lambda *s, dt=torch.bfloat16: torch.randn(*s, generator=g_, device=DEV, dtype=torch.float32).to(dt)  # noqa
    slots = 2 * n
    pool = r(slots, HV, V, K, dt=torch.float32) if v_major else r(slots, HV, K, V, dt=torch.float32)
    idx = torch.randperm(slots, device=DEV, generator=g_)[:n].to(torch.int32)
    d = dict(q=r(n, 1, H, K), k=r(n, 1, H, K), v=r(n, 1, HV, V),
             g=torch.nn.functional.logsigmoid(r(n, 1, HV, dt=torch.float32)),
             beta=r(n, 1, HV, dt=torch.float32).sigmoid(), pool=pool, idx=idx)
    d["dense"] = pool[idx.long()].contiguous()  # fla: the same N states, dense
    return d


def decode_bytes(d):
    n = d["q"].shape[0]
    state = n * HV * K * V * 4
    io = sum(d[x].numel() * d[x].element_size() for x in ("q", "k", "v", "g", "beta")) + d["v"].numel() * 2
    return 2 * state + io + n * 4


def run_decode(n, v_major, args, copy_GBps):
    layout = "V-major" if v_major else "K-major"
    row = dict(n=n, layout=layout, slots=2 * n)
    touched = 2 * n * HV * K * V * 4
    n_sets = min(64, max(1, math.ceil(L2_ROTATE_BYTES / touched)))
    sets = [make_decode(n, v_major, seed=3000 + i) for i in range(n_sets)]
    row["input_sets"] = n_sets

    def gdn_call(d):
        return gdn.decode_(d["q"], d["k"], d["v"], d["g"], d["beta"], d["pool"], d["idx"], state_v_first=v_major,
                           use_qk_l2norm_in_kernel=True)

    def fla_call(d):
        return fla_recurrent(d["q"], d["k"], d["v"], d["g"], beta=d["beta"], initial_state=d["dense"],
                             output_final_state=True, use_qk_l2norm_in_kernel=True, state_v_first=v_major)

    d0 = sets[0]
    rows = d0["idx"].long()
    before = d0["pool"][rows]  # the rows the call updates (a copy)
    o = gdn_call(d0)
    ro = rh = None
    m = min(n, 256)  # the reference checks the first m sequences (a float64 copy of 4096 states is big)
    if not args.no_ref:
        ro, rh = torch_recurrence(d0["q"][:m], d0["k"][:m], d0["v"][:m], d0["g"][:m], d0["beta"][:m],
                                  initial_state=before[:m], use_qk_l2norm=True, state_v_first=v_major)
        row["gdn_err"] = torch_rel_err(o[:m], ro)
        row["gdn_state_err"] = torch_rel_err(d0["pool"][rows[:m]], rh)
        row["ref_rows"] = m
    d0["pool"][rows] = before
    del before
    if fla_recurrent is not None and not args.no_fla:
        try:
            fo, fht = fla_call(d0)
            if ro is not None:
                row["fla_err"] = torch_rel_err(fo[:m], ro)
                row["fla_state_err"] = torch_rel_err(fht[:m], rh)
            del fo, fht
            row["fla_ms"] = graph_time([lambda d=d: fla_call(d) for d in sets])
        except Exception as e:  # noqa: BLE001
            row["fla_note"] = f"fla failed: {type(e).__name__}: {str(e)[:200]}"
    else:
        row["fla_note"] = "fla not run" if args.no_fla else f"fla not importable: {FLA_IMPORT_ERROR}"
    row.setdefault("fla_ms", None)
    row.setdefault("fla_err", None)
    row["gdn_ms"] = graph_time([lambda d=d: gdn_call(d) for d in sets])
    row["gdn_GBps"] = decode_bytes(d0) / (row["gdn_ms"] * 1e-3) / 1e9
    row["copy_GBps"] = copy_GBps
    row["frac_copy_bw"] = row["gdn_GBps"] / copy_GBps
    if row["fla_ms"]:
        row["fla_GBps"] = decode_bytes(d0) / (row["fla_ms"] * 1e-3) / 1e9
        row["speedup_vs_fla"] = row["fla_ms"] / row["gdn_ms"]
    del sets
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return row


# ------------------------------------------------------------------------------------------------


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_table(res):
    print(f"\n{res['gpu']}  commit {res['commit']}  {res['date']}  fla {res.get('fla_version')}  "
          f"flashqla {res.get('flashqla_version')}")
    print(f"copy {res['copy_GBps']:.0f} GB/s, bf16 matmul {res['matmul_TFLOPs']:.0f} TFLOP/s")
    print(f"\n{'prefill':<12}{'H/HV':>6}{'tokens':>8}{'gdn ms':>10}{'fla ms':>10}{'fla/gdn':>9}{'qla ms':>10}"
          f"{'qla/gdn':>9}{'Mtok/s':>9}{'%copy':>7}{'%mma':>7}{'gdn err':>10}{'fla err':>10}{'qla err':>10}")
    for r in res["prefill"]:
        print(f"{r['name']:<12}{str(r['H']) + '/' + str(r['HV']):>6}{r['tokens']:>8}{fmt(r['gdn_ms'], '.3f'):>10}"
              f"{fmt(r['fla_ms'], '.3f'):>10}{fmt(r.get('speedup_vs_fla'), '.2f'):>9}"
              f"{fmt(r.get('flashqla_ms'), '.3f'):>10}{fmt(r.get('speedup_vs_flashqla'), '.2f'):>9}"
              f"{r['gdn_tok_per_s'] / 1e6:>9.1f}{100 * r['frac_copy_bw']:>7.1f}{100 * r['frac_matmul']:>7.1f}"
              f"{fmt(r.get('gdn_err'), '.2e'):>10}{fmt(r.get('fla_err'), '.2e'):>10}"
              f"{fmt(r.get('flashqla_err'), '.2e'):>10}")
    if res["decode"]:
        print(f"\n{'decode N':<10}{'layout':>9}{'gdn ms':>10}{'fla ms':>10}{'fla/gdn':>9}{'gdn GB/s':>10}"
              f"{'%copy':>7}{'gdn err':>10}{'fla err':>10}")
        for r in res["decode"]:
            print(f"{r['n']:<10}{r['layout']:>9}{r['gdn_ms']:>10.4f}{fmt(r['fla_ms'], '.4f'):>10}"
                  f"{fmt(r.get('speedup_vs_fla'), '.2f'):>9}{r['gdn_GBps']:>10.0f}{100 * r['frac_copy_bw']:>7.1f}"
                  f"{fmt(r.get('gdn_err'), '.2e'):>10}{fmt(r.get('fla_err'), '.2e'):>10}")
    if res.get("serving"):
        print("\nserving (bench/bench_serving.py)")
        print("\n".join(serving_markdown(res["serving"])))
    notes = [f"{r.get('name', r.get('n'))}: {r['fla_note']}" for r in res["prefill"] + res["decode"]
             if r.get("fla_note")]
    notes += sorted({r["flashqla_note"] for r in res["prefill"] if r.get("flashqla_note")})
    for n in notes:
        print("note:", n)
    if res.get("skipped"):
        print("skipped (time budget):", ", ".join(res["skipped"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="bench/results/h200.json")
    ap.add_argument("--quick", action="store_true", help="a few prefill cases, N <= 256 decode")
    ap.add_argument("--cases", default=None, help="comma list of prefill case names")
    ap.add_argument("--no-decode", action="store_true")
    ap.add_argument("--no-prefill", action="store_true")
    ap.add_argument("--no-serving", action="store_true", help="skip the serving rows (bench/bench_serving.py)")
    ap.add_argument("--no-fla", action="store_true")
    ap.add_argument("--no-flashqla", action="store_true", help="skip the FlashQLA column")
    ap.add_argument("--no-ref", action="store_true", help="skip the float64 reference (no errors)")
    ap.add_argument("--coverage", action="store_true", help="also H=HV=32 and K=V=64/256 cases")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES),
                    help="q, k, v (and o) in the prefill rows (default bf16); rows of another dtype are named "
                         "CASE/DTYPE: write them to a JSON of their own")
    ap.add_argument("--dry-run", action="store_true",
                    help="on the CPU, tiny sizes, no graphs: checks the script's code paths without a GPU")
    ap.add_argument("--time-budget", type=float, default=270.0,
                    help="seconds; cases that would start later are skipped (and listed as skipped)")
    args = ap.parse_args()
    global DEV, H, HV, K, V, DECODE_N, PREFILL_DTYPE
    PREFILL_DTYPE = DTYPES[args.dtype]
    suffix = "" if args.dtype == "bf16" else "/" + args.dtype  # the rows' names: CASE/DTYPE
    if args.dry_run:
        DEV, H, HV, K, V, DECODE_N = "cpu", 2, 4, 32, 32, [1, 3]
        PREFILL_CASES.clear()
        PREFILL_CASES.update({"dry_2x100": ([100, 100], H, HV, K, V, "normal"),
                              "dry_mixed": ([70, 0, 130, 1], H, HV, K, V, "normal"),
                              "dry_1x64": ([64], 1, 2, K, V, "zero"),
                              "dry_model": ([130], H, HV, K, V, "model")})
        QUICK_CASES.clear()
        QUICK_CASES.update(PREFILL_CASES)
    elif not torch.cuda.is_available() or not gdn.cuda_available():
        sys.exit("bench_gpu.py needs a CUDA device and gdn built with CUDA")
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.perf_counter()
    res = dict(gpu=torch.cuda.get_device_name() if DEV == "cuda" else "cpu (dry run)", commit=timing.git_commit(ROOT),
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               torch=torch.__version__, fla_version=FLA_VERSION, flashqla_version=QLA_VERSION, gdn=gdn.__version__,
               shape=dict(H=H, HV=HV, K=K, V=V, dtype=str(PREFILL_DTYPE).replace("torch.", ""), gates="float32",
                          qk_l2norm=True,
                          prefill_heads="per case (rows carry H and HV)"),
               fla_env=dict(FLA_FLASH_QLA=os.environ.get("FLA_FLASH_QLA")),
               timing="CUDA graph per call, median of replays (event-timed), inputs rotated past L2")
    res["copy_GBps"], res["copy_memcpy_GBps"], res["copy_kernel_GBps"] = timing.measure_copy_GBps(DEV)
    res["matmul_TFLOPs"] = timing.measure_matmul_TFLOPs(DEV)
    print(f"copy {res['copy_GBps']:.0f} GB/s, matmul {res['matmul_TFLOPs']:.0f} TFLOP/s", flush=True)
    cases = dict(QUICK_CASES if args.quick else PREFILL_CASES)
    if args.cases:
        allc = {**PREFILL_CASES, **COVERAGE_CASES}
        unknown = [c for c in args.cases.split(",") if c not in allc]
        if unknown:
            sys.exit(f"bench_gpu.py: unknown case(s) {', '.join(unknown)}; the cases: {', '.join(allc)}")
        cases = {c: allc[c] for c in args.cases.split(",")}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)

    def save():  # after every case: a run stopped by a time limit still leaves its results
        res["wall_s"] = round(time.perf_counter() - t_start, 1)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)

    res["prefill"] = []
    res["decode"] = []
    if not args.no_prefill:
        for name, case in cases.items():
            if time.perf_counter() - t_start > args.time_budget:
                res.setdefault("skipped", []).append(name)
                continue
            row = run_prefill(name + suffix, *case, args, res["copy_GBps"], res["matmul_TFLOPs"])
            res["prefill"].append(row)
            save()
            print(json.dumps(row), flush=True)
        if args.coverage:
            for name in COVERAGE_DEFAULT:
                case = COVERAGE_CASES[name]
                row = run_prefill(name + suffix, *case, args, res["copy_GBps"], res["matmul_TFLOPs"])
                res["prefill"].append(row)
                save()
                print(json.dumps(row), flush=True)
    if not args.no_decode:
        for n in ([n for n in DECODE_N if n <= 256] if args.quick else DECODE_N):
            for v_major in (True, False):
                if time.perf_counter() - t_start > args.time_budget:
                    res.setdefault("skipped", []).append(f"decode N={n} {'V' if v_major else 'K'}-major")
                    continue
                row = run_decode(n, v_major, args, res["copy_GBps"])
                res["decode"].append(row)
                save()
                print(json.dumps(row), flush=True)
    res["serving"] = []
    if not args.no_serving:
        if time.perf_counter() - t_start > args.time_budget:
            res.setdefault("skipped", []).append("serving")
        else:
            ctx = bench_serving.Ctx(DEV, H, HV, K, V, graph_time, res["copy_GBps"], L2_ROTATE_BYTES, args.no_ref)
            dry = [("dry_ck", [300, 0, 200], H, HV, 1)] if args.dry_run else None
            def on_row():
                save()
                print(json.dumps(res["serving"][-1]), flush=True)

            bench_serving.run_serving(ctx, quick=args.quick or args.dry_run, checkpoint_cases=dry,
                                      rows=res["serving"], on_row=on_row)
    res["complete"] = "skipped" not in res
    save()
    print_table(res)
    print(f"\nwrote {args.json} ({res['wall_s']} s)")


if __name__ == "__main__":
    main()
