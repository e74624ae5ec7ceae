#!/usr/bin/env python3
"""flash-linear-attention on the cases of bench/cases.txt, for the C++ CLI's numbers beside it.

The CLI (`gdn --backend cuda --json cli.json`) times gdn through the C++ API; this script times fla's
chunk_gated_delta_rule and fused_recurrent_gated_delta_rule in the same device call on inputs of
the same shape and distribution (CUDA graph, median of replays), checks one value head of each
case against a float64 recurrence, and merges both into one JSON:

    python3 bench/fla_side.py --cli cli.json --json h200.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "tests"))
from gdn_ref import BENCH_CASES, torch_case_gates  # noqa: E402  (the parser of bench/cases.txt)

os.environ["FLA_FLASH_QLA"] = "0"  # fla's own kernels, not its dispatch to FlashQLA
H, HV, K, V = 16, 32, 128, 128  # the decode shape; prefill heads come per case from cases.txt


def graph_ms(fn, reps=30):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def ref_head(q, k, v, g, beta, h0, bounds, hv):
    """fp64 recurrence of value head hv (all sequences): o [T, V]."""
    hk = hv // (v.shape[2] // q.shape[2])
    kd = k[0, :, hk].double()
    kd = kd / torch.sqrt((kd * kd).sum(-1, keepdim=True) + 1e-6)
    qd = q[0, :, hk].double()
    qd = qd / torch.sqrt((qd * qd).sum(-1, keepdim=True) + 1e-6)
    vd, gd, bd = v[0, :, hv].double(), g[0, :, hv].double(), beta[0, :, hv].double()
    o = torch.empty(qd.shape[0], V, dtype=torch.float64, device=q.device)
    for n in range(len(bounds) - 1):
        S = h0[n, hv].double().clone()
        for t in range(bounds[n], bounds[n + 1]):
            S *= torch.exp(gd[t])
            S += torch.outer(kd[t], bd[t] * (vd[t] - kd[t] @ S))
            o[t] = (qd[t] @ S) * K ** -0.5
    return o


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

    cli = json.load(open(args.cli))
    dev = torch.device("cuda")
    torch.manual_seed(0)
    u = lambda *s: torch.rand(*s, device=dev) * 2 - 1  # noqa: E731
    out = {"gpu": torch.cuda.get_device_name(), "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
           or "unknown", "copy_GBps": cli.get("copy_GBps"), "shape": {"H": H, "HV": HV, "K": K, "V": V},
           "method": "gdn: C++ CLI (tools/gdn, CUDA graph, median of 30 replays, err = one or two value heads vs "
                     "the fp64 recurrence); fla 0.6: this script in the same device call, same shapes and input "
                     "distribution (CUDA graph, median of 30 replays, err = value head 0 vs the fp64 recurrence)",
           "prefill": [], "decode": []}
    gdn_rows = {(c["name"], c.get("layout")): c for c in cli["cases"]}
    for case in BENCH_CASES.values():
        name, lens, h, hv = case.name, case.lengths, case.H, case.HV
        T = sum(lens)
        bounds = [0]
        for l in lens:
            bounds.append(bounds[-1] + l)
        cu = torch.tensor(bounds, dtype=torch.int32, device=dev)
        q, k = u(1, T, h, K).bfloat16(), u(1, T, h, K).bfloat16()
        v = u(1, T, hv, V).bfloat16()
        g = torch_case_gates(case.gates, 3 * u(1, T, hv))
        beta = torch.sigmoid(3 * u(1, T, hv))
        h0 = 0.1 * u(len(lens), hv, K, V)
        call = lambda: chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,  # noqa
                                              cu_seqlens=cu, use_qk_l2norm_in_kernel=True)
        o, _ = call()
        err = rel(o[0, :, 0], ref_head(q, k, v, g, beta, h0, bounds, 0)) if T <= 32768 else None
        ms = graph_ms(call)
        row = gdn_rows.get((name, "k-major"), {})
        out["prefill"].append({"name": name, "H": h, "HV": hv, "gates": case.gates, "tokens": T, "seqs": len(lens),
                               "gdn_ms": row.get("ms"),
                               "fla_ms": ms, "gdn_err": row.get("err"), "gdn_state_err": row.get("state_err"),
                               "fla_err": err, "speedup_vs_fla": (ms / row["ms"]) if row.get("ms") else None})
        print(f"{name:8s} T={T:7d} gdn {row.get('ms', float('nan')):8.3f} ms  fla {ms:8.3f} ms  "
              f"gdn_err {row.get('err', float('nan')):.2e}  fla_err {err if err is not None else float('nan'):.2e}",
              flush=True)
        del q, k, v, g, beta, h0, o
    for c in cli["cases"]:
        if c["kind"] != "decode":
            continue
        N = c["seqs"]
        q, k = u(N, 1, H, K).bfloat16(), u(N, 1, H, K).bfloat16()
        v = u(N, 1, HV, V).bfloat16()
        g = F.logsigmoid(3 * u(N, 1, HV))
        beta = torch.sigmoid(3 * u(N, 1, HV))
        h0 = 0.1 * u(N, HV, K, V)
        fla_ms, reason = None, None
        try:
            call = lambda: fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0,  # noqa
                                                            output_final_state=True, use_qk_l2norm_in_kernel=True)
            fla_ms = graph_ms(call)
        except Exception as e:  # noqa: BLE001
            reason = f"{type(e).__name__}: {e}"[:200]
        bytes_ = 2.0 * N * HV * K * V * 4
        out["decode"].append({"n": N, "layout": c["layout"], "gdn_ms": c["ms"], "fla_ms": fla_ms,
                              "fla_note": reason or "fla: dense K-major initial/final state (no pool indexing)",
                              "gdn_GBps": c["GBps"], "fla_GBps": bytes_ / fla_ms / 1e6 if fla_ms else None,
                              "copy_GBps": cli.get("copy_GBps"), "gdn_err": c["err"]})
        print(f"decode N={N:5d} {c['layout']}: gdn {c['ms']:.3f} ms ({c['GBps']:.0f} GB/s)  fla "
              f"{fla_ms if fla_ms else float('nan'):.3f} ms", flush=True)
        del q, k, v, g, beta, h0
        torch.cuda.empty_cache()
    json.dump(out, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
