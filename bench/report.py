#!/usr/bin/env python3
"""Turn the JSON of bench/bench_gpu.py into a Markdown report with tables and a PNG chart of gdn
against flash-linear-attention per case.

    python3 bench/report.py bench/results/h200.json [--md BENCHMARK_H200.md] [--png bench/results/h200.png]
"""

from __future__ import annotations

import argparse
import json
import os


def fmt(x, spec, none="—"):
    return none if x is None else format(x, spec)


def serving_markdown(rows):
    """bench_serving.py's rows as markdown tables (report.py writes them, bench_gpu.py prints them)."""
    out = []
    verify = [r for r in rows if r["kind"] == "verify"]
    if verify:
        out += ["| verify N x T | layout | gdn ms | GB/s | % copy BW | err o |", "|---|---|---:|---:|---:|---:|"]
        out += [f"| {r['n']} x {r['tokens_per_seq']} | {r['layout']} | {r['gdn_ms']:.4f} | {r['gdn_GBps']:.0f} | "
                f"{100 * r['frac_copy_bw']:.1f} | {fmt(r.get('gdn_err'), '.2e')} |" for r in verify]
        out.append("")
    pool = [r for r in rows if r["kind"] == "pool"]
    if pool:
        out += ["| decode N | layout | pool | gdn ms | GB/s | % copy BW | speedup vs fp32 pool | err o |",
                "|---:|---|---|---:|---:|---:|---:|---:|"]
        out += [f"| {r['n']} | {r['layout']} | {r['pool']} | {r['gdn_ms']:.4f} | {r['gdn_GBps']:.0f} | "
                f"{100 * r['frac_copy_bw']:.1f} | {fmt(r.get('speedup_vs_fp32'), '.2f')} | "
                f"{fmt(r.get('gdn_err'), '.2e')} |" for r in pool]
        out.append("")
    ck = [r for r in rows if r["kind"] == "checkpoints"]
    if ck:
        out += ["| checkpoints: case | H/HV | every (chunks) | plain ms | with checkpoints ms | cost |",
                "|---|---|---:|---:|---:|---:|"]
        out += [f"| {r['case']} | {r['H']}/{r['HV']} | {r['every_chunks']} | {r['plain_ms']:.3f} | "
                f"{fmt(r.get('checkpoints_ms'), '.3f')} | "
                f"{fmt(None if r.get('cost') is None else 100 * r['cost'], '+.1f')}{'%' if r.get('cost') is not None else ''}"
                f"{' (' + r['note'] + ')' if r.get('note') else ''} |" for r in ck]
        out.append("")
    return out


def chart(res, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pre, dec = res.get("prefill", []), res.get("decode", [])
    ncols = 2 if dec else 1
    fig, axes = plt.subplots(1, ncols, figsize=(7 * ncols, 4.8), squeeze=False)
    w = 0.38

    def bars(ax, labels, gdn_ms, fla_ms, title, ylabel):
        xs = list(range(len(labels)))
        ax.bar([x - w / 2 for x in xs], gdn_ms, w, label="gdn", color="#1f77b4")
        ax.bar([x + w / 2 for x in xs], [f if f is not None else 0 for f in fla_ms], w, label="fla 0.6",
               color="#ff7f0e")
        for x, g, f in zip(xs, gdn_ms, fla_ms):
            if f:
                ax.annotate(f"{f / g:.2f}x", (x, max(g, f)), ha="center", va="bottom", fontsize=7)
            else:
                ax.annotate("fla n/a", (x + w / 2, g), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)

    if pre:
        bars(axes[0][0], [r["name"] for r in pre], [r["gdn_ms"] for r in pre], [r.get("fla_ms") for r in pre],
             "prefill (bench/cases.txt, K=V=128, bf16); label: fla/gdn time", "ms (CUDA graph, median)")
    if dec:
        bars(axes[0][ncols - 1], [f"{r['n']} {r['layout'][0]}" for r in dec], [r["gdn_ms"] for r in dec],
             [r.get("fla_ms") for r in dec], "decode (1 token, pool of 2N; V/K-major)", "ms (CUDA graph, median)")
    fig.suptitle(f"gdn vs flash-linear-attention on {res.get('gpu')} (commit {res.get('commit')})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(res, png_rel):
    out = []
    out.append(f"# Benchmark: {res.get('gpu')}\n")
    out.append(f"- commit `{res.get('commit')}`, {res.get('date')}; torch {res.get('torch')}, "
               f"flash-linear-attention {res.get('fla_version')} (with FLA_FLASH_QLA=0: its own kernels), "
               f"FlashQLA {res.get('flashqla_version')}")
    out.append(f"- measured in the same run: device-to-device copy **{res['copy_GBps']:.0f} GB/s** "
               f"(bytes read + written; memcpy {fmt(res.get('copy_memcpy_GBps'), '.0f')}, copy kernel "
               f"{fmt(res.get('copy_kernel_GBps'), '.0f')}), bf16 matmul (8192³) **{res['matmul_TFLOPs']:.0f} TFLOP/s**")
    out.append(f"- timing: {res.get('timing')}")
    if not res.get("complete"):
        out.append(f"- **partial run**: {res.get('partial_note', 'the run stopped before every case was measured')}"
                   + (f"; skipped: {', '.join(res['skipped'])}" if res.get("skipped") else ""))
    sh = res.get("shape", {})
    out.append(f"- prefill: the cases of bench/cases.txt (heads H/HV per case), K=V={sh.get('K')}, {sh.get('dtype')} "
               "q/k/v, fp32 g and beta (g = 0 exactly for the 'zero' gates; 'model': Qwen3-Next's gate, "
               "per-token decays from 1e-3 to 1.35 by head), qk l2-norm in the kernel, fp32 initial "
               "state given, final state returned; `gdn.chunk_gated_delta_rule` vs fla's and FlashQLA's "
               "`chunk_gated_delta_rule` on the same inputs")
    out.append("- decode: N sequences of one token, states in a pool of 2N slots updated in place by index "
               "(`gdn.decode_`); fla's `fused_recurrent_gated_delta_rule` has no pool indexing and gets the "
               "same N states dense (initial_state, output_final_state=True: the same bytes)")
    out.append("- err: relative RMS error of o against the float64 recurrence on the same (rounded) inputs "
               "(SPEC section 4; bound 5e-3 for bf16)\n")
    out.append(f"![gdn vs fla]({png_rel})\n")
    pre = res.get("prefill", [])
    if pre:
        out.append("## Prefill\n")
        out.append("| case | H/HV | tokens | gdn ms | fla ms | fla/gdn | FlashQLA ms | FlashQLA/gdn | gdn Mtok/s | "
                   "% copy BW | % bf16 MMA | gdn err | fla err | FlashQLA err | gdn state err | fla state err |")
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in pre:
            heads = f"{r['H']}/{r['HV']}" if "H" in r else "—"
            out.append(f"| {r['name']} | {heads} | {r['tokens']} | {r['gdn_ms']:.3f} | {fmt(r.get('fla_ms'), '.3f')} | "
                       f"{fmt(r.get('speedup_vs_fla'), '.2f')} | {fmt(r.get('flashqla_ms'), '.3f')} | "
                       f"{fmt(r.get('speedup_vs_flashqla'), '.2f')} | {r['gdn_tok_per_s'] / 1e6:.1f} | "
                       f"{100 * r['frac_copy_bw']:.1f} | {100 * r['frac_matmul']:.1f} | "
                       f"{fmt(r.get('gdn_err'), '.2e')} | {fmt(r.get('fla_err'), '.2e')} | "
                       f"{fmt(r.get('flashqla_err'), '.2e')} | "
                       f"{fmt(r.get('gdn_state_err'), '.2e')} | {fmt(r.get('fla_state_err'), '.2e')} |")
        out.append("")
        out.append("% copy BW: the minimum bytes (inputs, states, outputs) over the time, as a fraction of the "
                   "measured copy bandwidth; % bf16 MMA: the chunked algorithm's matrix-product FLOPs over the "
                   "time, as a fraction of the measured bf16 matmul rate.\n")
    dec = res.get("decode", [])
    if dec:
        out.append("## Decode\n")
        out.append("| N | layout | gdn ms | fla ms | fla/gdn | gdn GB/s | % copy BW | gdn err | fla err |")
        out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in dec:
            out.append(f"| {r['n']} | {r['layout']} | {r['gdn_ms']:.4f} | {fmt(r.get('fla_ms'), '.4f')} | "
                       f"{fmt(r.get('speedup_vs_fla'), '.2f')} | {r['gdn_GBps']:.0f} | "
                       f"{100 * r['frac_copy_bw']:.1f} | {fmt(r.get('gdn_err'), '.2e')} | "
                       f"{fmt(r.get('fla_err'), '.2e')} |")
        out.append("")
    if res.get("serving"):
        out.append("## Serving (gdn only: speculative verify, 16-bit pools, prefill checkpoints)\n")
        if res.get("serving_note"):
            out.append(f"{res['serving_note']}\n")
        out.extend(serving_markdown(res["serving"]))
    notes = [f"- {r.get('name', r.get('n'))}: {r['fla_note']}" for r in pre + dec if r.get("fla_note")]
    notes += [f"- {r['name']}: {r['flashqla_note']}" for r in pre if r.get("flashqla_note")]
    if notes:
        out.append("## Notes\n")
        out.extend(notes)
        out.append("")
    out.append(f"Generated by `bench/report.py` from `bench/bench_gpu.py` output ({res.get('wall_s')} s run).\n")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--md", default="BENCHMARK_H200.md")
    ap.add_argument("--png", default="bench/results/h200.png")
    args = ap.parse_args()
    with open(args.json) as f:
        res = json.load(f)
    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
    chart(res, args.png)
    png_rel = os.path.relpath(os.path.abspath(args.png), os.path.dirname(os.path.abspath(args.md)))
    with open(args.md, "w") as f:
        f.write(markdown(res, png_rel))
    print(f"wrote {args.md} and {args.png}")


if __name__ == "__main__":
    main()
