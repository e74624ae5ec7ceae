"""The benchmark scripts stay runnable: bench/bench_gpu.py --dry-run (the same code paths on the
CPU, tiny sizes, no graphs) and bench/report.py on its output. Needs torch (and matplotlib for the
report); skipped otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_dry_run_and_report(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "dry.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_gpu.py"), "--dry-run", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(out.read_text())
    assert res["complete"] and len(res["prefill"]) == 4 and len(res["decode"]) == 4
    assert [row["gates"] for row in res["prefill"]] == ["normal", "normal", "zero", "model"]
    for row in res["prefill"]:
        assert row["gdn_err"] <= 5e-3 and row["gdn_ms"] > 0
        for key in ("name", "tokens", "gdn_ms", "fla_ms", "gdn_err", "fla_err"):
            assert key in row
    for row in res["decode"]:
        assert row["gdn_err"] <= 5e-3
        for key in ("n", "layout", "gdn_ms", "fla_ms", "gdn_GBps", "copy_GBps"):
            assert key in row
    pytest.importorskip("matplotlib")
    md, png = tmp_path / "B.md", tmp_path / "b.png"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "report.py"), str(out), "--md", str(md),
                        "--png", str(png)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| dry_mixed |" in md.read_text() and png.stat().st_size > 0


@pytest.mark.parametrize("dtype, name, bound", [("fp16", "float16", 5e-4), ("fp32", "float32", 1e-4)])
def test_bench_dry_run_other_dtypes(tmp_path, dtype, name, bound):
    # --dtype: the prefill rows' q, k, v in fp16 or fp32, named CASE/DTYPE, the JSON's shape saying so.
    pytest.importorskip("torch")
    out = tmp_path / "dry.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_gpu.py"), "--dry-run", "--no-decode",
                        "--no-serving", "--dtype", dtype, "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(out.read_text())
    assert res["shape"]["dtype"] == name
    assert [row["name"] for row in res["prefill"]] == [f"dry_{c}/{dtype}" for c in ("2x100", "mixed", "1x64", "model")]
    for row in res["prefill"]:
        assert 0 < row["gdn_err"] <= bound


def _readme_blocks():
    import re

    with open(os.path.join(ROOT, "python", "README.md")) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_readme_numpy_example_runs():
    blocks = [b for b in _readme_blocks() if "import numpy" in b]
    assert blocks
    for b in blocks:
        exec(compile(b, "python/README.md", "exec"), {})


def test_readme_torch_examples_run():
    pytest.importorskip("torch")
    blocks = [b for b in _readme_blocks() if "import numpy" not in b]
    assert len(blocks) >= 2
    ns = {}
    for b in blocks:  # later blocks use the names of the first
        exec(compile(b, "python/README.md", "exec"), ns)


def test_precision_emulation_adaptive():
    """tools/precision/emulate_roundings.py (docs/perf.md, g = 0 accuracy): without roundings its
    model meets the float64 recurrence; with --adaptive the variant applies only to weakly decaying
    chunks (g = 0: every chunk; the normal gates, G_last ~ -50 per chunk: none)."""
    pytest.importorskip("numpy")
    exact = "h_U=fp32,h_o=fp32,W=fp32,vs=fp32,vnew_o=fp32,o=fp32,P=fp32"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "precision", "emulate_roundings.py"), "--tokens",
                        "256", "--gates", "zero,normal", "--adaptive", "32", "--set", exact, "--set", "W=bf16"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    errs = [float(line.split("err_o")[1].split()[0]) for line in r.stdout.splitlines() if "err_o" in line]
    assert len(errs) == 4, r.stdout
    zero_exact, zero_bf16, normal_exact, normal_bf16 = errs
    assert zero_exact < 2e-5 and 1e-3 < zero_bf16 < 6e-3, r.stdout
    assert normal_exact == normal_bf16 and 1e-3 < normal_bf16 < 6e-3, r.stdout


def test_precision_emulation_tiers():
    """emulate_roundings.py --tiers: a chunk takes the first tier whose decay G_last > -A. One tier
    reproduces --adaptive with the same modes to the digit; g = 0 chunks take the first tier
    (exact: the fp32 model's error), the normal gates' chunks (G_last ~ -50) the second one's."""
    pytest.importorskip("numpy")
    exact = "h_U=fp32,h_o=fp32,W=fp32,vs=fp32,vnew_o=fp32,o=fp32,P=fp32"
    script = os.path.join(ROOT, "tools", "precision", "emulate_roundings.py")

    def errs(*args):
        r = subprocess.run([sys.executable, script, "--tokens", "256", "--gates", "zero,normal", *args],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return [float(line.split("err_o")[1].split()[0]) for line in r.stdout.splitlines() if "err_o" in line]

    assert errs("--tiers", "32:W=hilo,vs=hilo,h_o=hilo") == errs("--adaptive", "32", "--set", "W=hilo,vs=hilo,h_o=hilo")
    zero_first, normal_first = errs("--tiers", f"1:{exact};100:W=bf16")
    zero_second, normal_second = errs("--tiers", f"1:W=bf16;100:{exact}")
    assert zero_first < 2e-5 and normal_second < 2e-5
    assert zero_second > 1e-3 and normal_first > 1e-3


def test_precision_emulation_fp16col_keeps_range():
    """emulate_roundings.py's "fp16col" (v_new's fp16 operand after a power-of-two scale per
    column): the rounding of a column does not depend on its magnitude (bf16 inputs' range:
    1e30 stays finite, where plain fp16 overflows), and each column is scaled on its own."""
    np = pytest.importorskip("numpy")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "emulate_roundings", os.path.join(ROOT, "tools", "precision", "emulate_roundings.py"))
    em = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(em)
    x = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    base = em.rnd(x, "fp16col")
    assert np.any(base != x) and np.max(np.abs(base - x) / np.abs(x)) < 2 ** -10  # rounded, to fp16's 11 bits
    big = x * np.float32(2.0 ** 100)  # ~1.3e30
    assert np.array_equal(em.rnd(big, "fp16col"), base * np.float32(2.0 ** 100))
    with np.errstate(over="ignore"):
        assert not np.all(np.isfinite(em.rnd(big, "fp16")))
    mixed = x.copy()
    mixed[:, 0] *= np.float32(2.0 ** -40)  # one column far smaller: rounded at its own scale
    assert np.array_equal(em.rnd(mixed, "fp16col")[:, 1:], base[:, 1:])
    assert np.array_equal(em.rnd(mixed, "fp16col")[:, 0], base[:, 0] * np.float32(2.0 ** -40))


def test_sass_load_chains_flags_loads_into_one_register(tmp_path):
    """scripts/sass_load_chains.py on a synthetic listing: the kernel whose loads all land in one
    register (each waited for before the next) is reported, the one with distinct registers not."""
    lines = ["\t\tFunction : chained_kernel"]
    lines += [f"        /*{16 * i:04x}*/                   LDG.E.U16 R20, desc[UR4][R{22 + 2 * i}.64] ;" for i in range(10)]
    lines += ["\t\tFunction : pipelined_kernel"]
    lines += [f"        /*{16 * i:04x}*/                   LDG.E R{30 + i}, desc[UR4][R2.64+0x{128 * i:x}] ;" for i in range(10)]
    sass = tmp_path / "k.sass"
    sass.write_text("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sass_load_chains.py"), str(sass)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["chained_kernel: 10 LDG, 10 into R20"]
