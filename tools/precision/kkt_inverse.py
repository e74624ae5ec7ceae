#!/usr/bin/env python3
"""A CPU model of kkt_solve's inverse (src/cuda/chunk/kkt_solve.cu), against float64 and against the
fp32 block substitution it replaced (v11's fwd_prep), on inputs chosen to stress it: repeated and
near-identical keys, beta = 1, no decay (the cases where (I + L)^-1 cancels most).

Both models solve (I + L)^-1 for one 64-row chunk in 16 x 16 blocks: the diagonal blocks by fp32
forward substitution (one column at a time, as the kernels), the off-diagonal ones by block rows,
X_mj = -D_m sum_{j <= k < m} L_mk X_kj, with fp32 products (v11) or with three bf16 passes of hi + lo
operands, fp32 accumulation (v13: hi hi + lo hi + hi lo). Printed: the relative RMS error of A v
(v random) against float64, for each, and again after A is stored as the kernels store it (bf16
hi + lo parts), the part of the error the chain sees.

    python3 tools/precision/kkt_inverse.py
Session 17's table: docs/perf.md (v13).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulate_roundings import bf16, rnd  # noqa: E402  (the kernels' roundings, modelled once)

B = 16  # block size; the chunk has 4 x 4 blocks


def product_3xbf16(a, b):
    """a b from hi + lo bf16 parts in three passes, fp32 accumulation (the kernel's mma3)."""
    ah = bf16(a)
    al = bf16(a - ah)
    bh = bf16(b)
    bl = bf16(b - bh)
    return (ah @ bh + al @ bh + ah @ bl).astype(np.float32)


def product_fp32(a, b):
    return (a @ b).astype(np.float32)


def diagonal_inverse(n_block):
    """(I + N)^-1, N strictly lower triangular, by fp32 substitution one column at a time."""
    x_all = np.zeros((B, B), np.float32)
    for c in range(B):
        x = np.zeros(B, np.float32)
        x[c] = 1
        for i in range(c + 1, B):
            s = np.float32(0)
            for j in range(i):
                s = np.float32(s + np.float32(n_block[i, j]) * x[j])
            x[i] = -s
        x_all[:, c] = x
    return x_all


def block_inverse(L, product):
    L = L.astype(np.float32)
    blk = lambda i, j: L[i * B:(i + 1) * B, j * B:(j + 1) * B]
    X = {(m, m): diagonal_inverse(blk(m, m)) for m in range(4)}
    for m in range(1, 4):
        for j in range(m):
            T = np.zeros((B, B), np.float32)
            for k in range(j, m):
                T = (T + product(blk(m, k), X[(k, j)])).astype(np.float32)
            X[(m, j)] = -product(X[(m, m)], T)
    A = np.zeros((4 * B, 4 * B), np.float32)
    for (i, j), x in X.items():
        A[i * B:(i + 1) * B, j * B:(j + 1) * B] = x
    return A


def errors(keys, beta, g, rng):
    keys = keys / np.linalg.norm(keys, axis=1, keepdims=True)
    G = np.cumsum(g)
    L = np.tril(beta[:, None] * (keys @ keys.T) * np.exp(G[:, None] - G[None, :]), -1)
    exact = np.linalg.inv(np.eye(4 * B) + L)
    v = rng.standard_normal((4 * B, 128))
    ref = exact @ v
    rel = lambda A: np.sqrt(np.mean((A.astype(np.float64) @ v - ref) ** 2) / np.mean(ref**2))
    stored = lambda A: rnd(A, "hilo").astype(np.float64)  # A_s as stored: bf16 hi + lo
    a32, a3 = block_inverse(L, product_fp32), block_inverse(L, product_3xbf16)
    return rel(a32), rel(a3), rel(stored(a32)), rel(stored(a3))


def main():
    rng = np.random.default_rng(0)
    n = 4 * B
    one_key = rng.standard_normal(128)
    cases = [
        ("random keys, beta ~ U(0, 1), logsigmoid g", rng.standard_normal((n, 128)), rng.uniform(0, 1, n),
         -np.log1p(np.exp(-rng.standard_normal(n)))),
        ("random keys, beta = 1, g = 0", rng.standard_normal((n, 128)), np.ones(n), np.zeros(n)),
        ("one key repeated, beta = 0.9, g = 0", np.tile(one_key, (n, 1)), np.full(n, 0.9), np.zeros(n)),
        ("4 keys repeated, beta = 1, g = 0", np.repeat(rng.standard_normal((4, 128)), n // 4, axis=0)[rng.permutation(n)],
         np.ones(n), np.zeros(n)),
        ("near-identical keys, beta = 1, g = 0", np.tile(one_key, (n, 1)) + 0.05 * rng.standard_normal((n, 128)),
         np.ones(n), np.zeros(n)),
    ]
    print(f"{'case':42s} {'fp32 (v11)':>11s} {'3 x bf16 (v13)':>15s} {'v11 stored':>11s} {'v13 stored':>11s}")
    for name, keys, beta, g in cases:
        e32, e3, s32, s3 = errors(keys, beta, g, rng)
        print(f"{name:42s} {e32:11.2e} {e3:15.2e} {s32:11.2e} {s3:11.2e}")


if __name__ == "__main__":
    main()
