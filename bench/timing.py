"""Timing and machine measurements of bench/bench_gpu.py: CUDA-graph replays timed with events
(median), the copy bandwidth and the bf16 matrix rate of the device, the commit measured."""

from __future__ import annotations

import os
import subprocess
import time
from collections import defaultdict

import torch

def git_commit(root):
    if os.environ.get("GDN_COMMIT"):
        return os.environ["GDN_COMMIT"]
    try:
        return subprocess.check_output(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], text=True,
                                       stderr=subprocess.devNULL).strip()
    except Exception:  # noqa: BLE001
        pass
    try:  # a copy of the tree without git: read .git directly
        head = open(os.path.join(root, ".git", "HEAD")).read().strip()
        if head.startswith("ref: "):
            return open(os.path.join(root, ".git", head[5:])).read().strip()[:12]
        return head[:12]
    except Exception:  # noqa: BLE001
        return "unknown"


def graph_time(fns, dev, min_reps=20, max_reps=400, target_s=0.25):
    """Capture each callable (one per input set) in a CUDA graph; replay them round-robin, each
    replay timed with events; return the median in ms."""
    if dev == "cpu":
        ts = []
        for r in range(min_reps):
            t0 = time.perf_counter()
            fns[r % len(fns)]()
            ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[len(ts) // 2]
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        for f in fns:
            f()
            f()
    cur.wait_stream(side)
    torch.cuda.synchronize()
    graphs = []
    for f in fns:
        gph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gph):
            f()
        graphs.append(gph)
    for gph in graphs:
        gph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for gph in graphs:
        gph.replay()
    torch.cuda.synchronize()
    est = max((time.perf_counter() - t0) / len(graphs), 1e-6)
    reps = int(min(max_reps, max(min_reps, target_s / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for r in range(reps):
        starts[r].record()
        graphs[r % len(graphs)].replay()
        ends[r].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    del graphs
    return times[len(times) // 2]


def measure_copy_GBps(dev):
    """Device-to-device copy of 1 GiB, bytes read + written: the better of a memcpy (which a CUDA
    graph may route to the copy engines) and an elementwise copy kernel."""
    n = 1 << 28  # floats: 1 GiB
    if dev == "cpu":
        n = 1 << 20
    x = torch.ones(n, dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    ms_memcpy = graph_time([lambda: y.copy_(x)], dev, min_reps=10, max_reps=30)
    ms_kernel = graph_time([lambda: torch.mul(x, 1.0, out=y)], dev, min_reps=10, max_reps=30)
    gbps = lambda ms: 2 * 4 * n / (ms * 1e-3) / 1e9  # noqa: E731
    return max(gbps(ms_memcpy), gbps(ms_kernel)), gbps(ms_memcpy), gbps(ms_kernel)


def measure_matmul_TFLOPs(dev):
    n = 8192 if dev == "cuda" else 256
    a = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    ms = graph_time([lambda: a @ b], dev, min_reps=10, max_reps=20)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def kernel_times(call, reps, warmup=3):
    """Per-kernel GPU time of call() under the torch profiler, after warm-up: {kernel name: (us per
    call, launches per call)}."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    tot, cnt = defaultdict(float), defaultdict(int)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            tot[e.name] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            cnt[e.name] += 1
    return {name: (us / reps, cnt[name] // reps) for name, us in tot.items()}


def print_kernel_times(title, times):
    print(title)
    total = 0.0
    for name, (us, launches) in sorted(times.items(), key=lambda x: -x[1][0]):
        total += us
        print(f"  {us:9.1f}  x{launches}  {name[:110]}")
    print(f"  {total:9.1f}  total")
