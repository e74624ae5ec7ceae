#!/usr/bin/env python3
"""Per-kernel GPU time of gdn's chunk_gated_delta_rule (torch profiler, after warm-up), for the
paths the check tool's --profile does not phase (the exact stages: K != V, or K = V outside
{64, 128, 256}).

    python3 bench/gdn_kernels.py [--lens 8192,8192,8192,8192] [--D 100] [--dtype bf16] [--reps 3]
"""
import argparse
import torch

import gdn
from timing import kernel_times, print_kernel_times

ap = argparse.ArgumentParser()
ap.add_argument("--lens", default="8192,8192,8192,8192", help="comma list of sequence lengths")
ap.add_argument("--H", type=int, default=16)
ap.add_argument("--HV", type=int, default=32)
ap.add_argument("--D", type=int, default=100, help="K = V")
ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
ap.add_argument("--reps", type=int, default=3)
args = ap.parse_args()
dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
lens = [int(x) for x in args.lens.split(",")]
T, N, D = sum(lens), len(lens), args.D
dev = "cuda"
torch.manual_seed(0)
q = torch.randn(1, T, args.H, D, device=dev).to(dt)
k = torch.randn(1, T, args.H, D, device=dev).to(dt)
v = torch.randn(1, T, args.HV, D, device=dev).to(dt)
g = torch.nn.functional.logsigmoid(torch.randn(1, T, args.HV, device=dev))
beta = torch.rand(1, T, args.HV, device=dev)
h0 = torch.randn(N, args.HV, D, D, device=dev) * 0.1
cu_cpu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int64)
cu = cu_cpu.to(dev)


def call():
    return gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                      use_qk_l2norm_in_kernel=True, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu)


print_kernel_times(f"gdn kernels, lens {args.lens}, H={args.H} HV={args.HV} K=V={D} {args.dtype} (us per call):",
                   kernel_times(call, args.reps))
