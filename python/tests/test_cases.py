"""bench/cases.txt, the one benchmark case list, and its parser (gdn_ref.load_cases)."""

from __future__ import annotations

import pytest

import math

from gdn_ref import BENCH_CASES, SPEC_PREFILL_CASES, load_cases, model_gate_params, parse_lengths, spec_mixed_lengths


def test_the_case_list():
    assert list(SPEC_PREFILL_CASES) == ["1x4k", "1x32k", "1x128k", "4x8k", "8x1k", "mixed", "64x256", "256x64"]
    assert SPEC_PREFILL_CASES["4x8k"] == [8192] * 4 and SPEC_PREFILL_CASES["256x64"] == [64] * 256
    mixed = spec_mixed_lengths()
    assert len(mixed) == 16 and sum(mixed) == 32768 and min(mixed) == 256 and max(mixed) == 4924
    tp4 = BENCH_CASES["tp4-8x4k"]
    assert (tp4.H, tp4.HV, tp4.gates, tp4.lengths) == (4, 8, "normal", [4096] * 8)
    g0 = BENCH_CASES["g0-1x32k"]
    assert (g0.H, g0.HV, g0.gates, g0.lengths) == (16, 32, "zero", [32768])
    g0_short = BENCH_CASES["g0-1x3k"]  # unsplit at HV = 32: the chain leaves o to fwd_o
    assert (g0_short.set, g0_short.gates, g0_short.lengths) == ("short", "zero", [3000])
    model = BENCH_CASES["model-1x32k"]
    assert (model.set, model.H, model.HV, model.gates, model.lengths) == ("model", 16, 32, "model", [32768])
    tail = BENCH_CASES["tail-16k"]  # one-chunk sequences and one long prompt: the long-tail rule
    assert (tail.set, tail.H, tail.HV, tail.lengths) == ("mix", 16, 32, [64] * 255 + [16384])
    assert all(c.HV % c.H == 0 for c in BENCH_CASES.values())


def test_model_gates_span_a_models_decays():
    # g = -A softplus(x + dt_bias): at x = 0 exactly -A dt (dt_bias = softplus^-1(dt)), with
    # A in (0, 16) and dt in [1e-3, 0.1] per head; the heads' decays span three decades.
    for hv in (4, 8, 32):
        A, bias = model_gate_params(hv)
        decay = [a * math.log1p(math.exp(b)) for a, b in zip(A, bias)]
        dts = [math.log1p(math.exp(b)) for b in bias]
        assert all(0 < a < 16 for a in A) and all(1e-3 <= dt <= 0.1 * (1 + 1e-12) for dt in dts)
        assert all(d > 0 for d in decay)
    A, bias = model_gate_params(32)
    decay = sorted(a * math.log1p(math.exp(b)) for a, b in zip(A, bias))
    assert decay[0] < 2e-3 and decay[-1] > 1.0 and decay[len(decay) // 2] < 0.1
    # The values tests/test_cases.cpp checks for tools/model_gate.h's model_gate (the same formula).
    for h, x, g in ((0, 0.0, -0.0010374662975845823), (17, 1.5, -1.565097529905131), (31, -2.0, -0.018469456358129188)):
        assert -A[h] * math.log1p(math.exp(x + bias[h])) == pytest.approx(g, rel=1e-12)


def test_parse_lengths():
    assert parse_lengths("3x2,5,1x0") == [2, 2, 2, 5, 0]
    for bad in ("", "x4", "4x", "a", "-1"):
        with pytest.raises(ValueError):
            parse_lengths(bad)


@pytest.mark.parametrize("line, what", [("a spec 16 32 normal", "5 fields"),
                                        ("a spec 16 32 wavy 64", "gates 'wavy'"),
                                        ("a spec 3 32 normal 64", "HV a multiple of H"),
                                        ("a spec 16 32 normal 6x", "lengths")])
def test_malformed_case_files_name_the_line(tmp_path, line, what):
    path = tmp_path / "cases.txt"
    path.write_text("# comment\n\nok spec 1 2 zero 64\n" + line + "\n")
    with pytest.raises(ValueError, match=rf"cases.txt:4: .*{what}"):
        load_cases(str(path))


def test_duplicate_case_names_are_refused(tmp_path):
    path = tmp_path / "cases.txt"
    path.write_text("a spec 1 2 zero 64\na spec 1 2 zero 64\n")
    with pytest.raises(ValueError, match="appears twice"):
        load_cases(str(path))
