#!/usr/bin/env python3
"""Per-kernel GPU time of flash-linear-attention's chunk_gated_delta_rule on one SPEC case (torch
profiler, after warm-up), to compare stage by stage with gdn's phases (`gdn_cuda_check --profile`).

    python3 bench/fla_kernels.py [--case 1x32k | --lens 32768] [--reps 5]
"""
import argparse
import os
import sys

import torch

os.environ["FLA_FLASH_QLA"] = "0"  # fla's own kernels, not its dispatch to FlashQLA
from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "tests"))
from gdn_ref import BENCH_CASES, torch_case_gates  # noqa: E402  (the parser of bench/cases.txt)
from timing import kernel_times, print_kernel_times  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--case", default=None, help="a case of bench/cases.txt (its lengths, heads and gates)")
ap.add_argument("--lens", default="32768", help="comma list of sequence lengths (H = 16, HV = 32)")
ap.add_argument("--reps", type=int, default=5)
args = ap.parse_args()
lens = [int(x) for x in args.lens.split(",")]
H, HV, D, gates = 16, 32, 128, "normal"
if args.case:
    if args.case not in BENCH_CASES:
        sys.exit(f"fla_kernels.py: unknown case {args.case}; the cases: {', '.join(BENCH_CASES)}")
    c = BENCH_CASES[args.case]
    lens, H, HV, gates = c.lengths, c.H, c.HV, c.gates
    args.lens = args.case
T, N = sum(lens), len(lens)
dev = "cuda"
torch.manual_seed(0)
q = torch.randn(1, T, H, D, device=dev, dtype=torch.bfloat16)
k = torch.randn(1, T, H, D, device=dev, dtype=torch.bfloat16)
v = torch.randn(1, T, HV, D, device=dev, dtype=torch.bfloat16)
g = torch_case_gates(gates, torch.randn(1, T, HV, device=dev, dtype=torch.float32))
beta = torch.rand(1, T, HV, device=dev, dtype=torch.float32)
h0 = torch.randn(N, HV, D, D, device=dev, dtype=torch.float32) * 0.1
cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device=dev, dtype=torch.int32)


def call():
    return chunk_gated_delta_rule(q, k, v, g, beta, scale=D**-0.5, initial_state=h0, output_final_state=True,
                                  use_qk_l2norm_in_kernel=True, cu_seqlens=cu)


print_kernel_times(f"fla kernels, lens={args.lens}, per call (us):", kernel_times(call, args.reps))
