#!/usr/bin/env python3
"""Merges a device run's prefill-only benchmark JSON (bench/bench_gpu.py --no-decode --no-serving, e.g. from
docs/prepared/device_bench3.sh) into the committed one, keeping the committed decode and serving rows (and their
note) where the new run has none. Each prefill row records its run (`run`: the --note of the merge that
brought it), and `partial_note` lists the rows by run. With --keep-skipped, the prefill cases the new run
skipped (its time budget) keep their committed rows (and runs), in the committed order; FROM names the
run of kept rows that carry none.

    python3 scripts/merge_bench.py NEW.json bench/results/h200.json --note "prefill: commit abc1234 (session N: ...)"
        [--keep-skipped "commit def5678, session M"]
    python3 bench/report.py bench/results/h200.json        (BENCHMARK_H200.md and the plot)

Also copy NEW.json to bench/results/h200_sNN.json: the run as measured.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new", help="the device run's JSON (prefill rows)")
    ap.add_argument("target", help="the committed JSON to update in place")
    ap.add_argument("--note", required=True, help="what the prefill rows are (commit, session, changes)")
    ap.add_argument("--keep-skipped", metavar="FROM", help="keep the committed rows of skipped cases; FROM: their run")
    a = ap.parse_args()
    new = json.load(open(a.new))
    old = json.load(open(a.target))
    if not new.get("prefill"):
        sys.exit(f"{a.new}: no prefill rows")
    kept = [k for k in ("decode", "serving") if not new.get(k) and old.get(k)]
    merged = dict(new)
    merged.pop("complete", None)
    for k in kept:
        merged[k] = old[k]
    if "serving" in kept and "serving_note" in old:
        merged["serving_note"] = old["serving_note"]
    # The decode and serving rows kept from the committed run keep their provenance: the part of its
    # note from "decode".
    prior = old.get("partial_note", "")
    at = prior.find("decode and serving") if "decode and serving" in prior else prior.find("decode")
    tail = prior[at:] if kept and at >= 0 else ""
    # Each prefill row carries its run ("run": the note of the merge that brought it); rows kept
    # from the committed run keep theirs (--keep-skipped names the run of those that have none).
    for r in new["prefill"]:
        r["run"] = a.note
    merged["prefill"] = new["prefill"]
    if a.keep_skipped:
        fresh = {r["name"]: r for r in new["prefill"]}
        old_names = [r["name"] for r in old.get("prefill", [])]
        merged["prefill"] = [fresh.get(r["name"], r) for r in old.get("prefill", [])]
        merged["prefill"] += [r for r in new["prefill"] if r["name"] not in old_names]
        for r in merged["prefill"]:
            r.setdefault("run", a.keep_skipped)
    # The note: the rows grouped by run, in the order their runs first appear; skipped: the cases
    # with no row at all.
    runs = {}
    for r in merged["prefill"]:
        runs.setdefault(r["run"], []).append(r["name"])
    note = "prefill rows by run: " + "; ".join(f"{', '.join(names)}: {run}" for run, names in runs.items())
    merged["partial_note"] = note + (f"; {tail}" if tail else "")
    present = {r["name"] for r in merged["prefill"]}
    merged["skipped"] = [n for n in new.get("skipped", []) if n not in present]
    json.dump(merged, open(a.target, "w"), indent=1)
    print(f"{a.target}: prefill from {a.new} ({len(new['prefill'])} rows); kept from before: {', '.join(kept) or 'nothing'}")


if __name__ == "__main__":
    main()
