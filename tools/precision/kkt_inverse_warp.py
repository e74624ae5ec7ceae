#!/usr/bin/env python3
"""A host model of unit_lower_inverse16_warp (kkt_solve.cu, session 26): the 32 lanes' blocked
substitution for (I + N)^-1, N strictly lower 16 x 16, in fp32 step by step (lane roles, shuffles, in-place writes),
against one column per lane (unit_lower_inverse_column<16>, the kernel before) and float64. Prints the relative error
of both on random blocks (by scale) and on blocks of repeated unit keys (L = beta k_i . k_j). Both stay ~1e-7 where
the inverse is well conditioned, far below A_s's hi + lo precision (~2^-17).
    python3 tools/precision/kkt_inverse_warp.py
"""
import numpy as np
rng = np.random.default_rng(1)
def warp_inverse(N):  # N: 16x16 strictly lower, float32; emulate the lane algorithm in fp32
    M = N.astype(np.float32).copy()
    X = np.zeros((32, 8), np.float32)
    for lane in range(32):
        c, q = lane % 8, (lane // 8) % 2
        blk = M[8*q:8*q+8, 8*q:8*q+8]
        x = np.array([1.0 if i == c else 0.0 for i in range(8)], np.float32)
        for i in range(1, 8):
            s = np.float32(0)
            for j in range(i):
                s = np.float32(np.float32(blk[i, j]) * x[j] + s)
            if i > c: x[i] = -s
        X[lane] = x
    # writes (lanes < 16)
    for lane in range(16):
        c, q = lane % 8, lane // 8
        for i in range(8): M[8*q + i, 8*q + c] = X[lane, i]
    Y = np.zeros((32, 2), np.float32)
    for lane in range(32):
        c, r0 = lane % 8, lane // 8
        a = X[c]  # column c of A from lane c
        for h in range(2):
            r = r0 + 4*h
            s = np.float32(0)
            for k in range(8): s = np.float32(np.float32(N[8 + r, k]) * a[k] + s)
            Y[lane, h] = s
    Xo = np.zeros((32, 2), np.float32)
    for lane in range(32):
        c, r0 = lane % 8, lane // 8
        yk = [Y[(k % 4)*8 + c, k // 4] for k in range(8)]
        for h in range(2):
            r = r0 + 4*h
            s = np.float32(0)
            for k in range(8): s = np.float32(np.float32(M[8 + r, 8 + k]) * yk[k] + s)
            Xo[lane, h] = -s
    for lane in range(32):
        c, r0 = lane % 8, lane // 8
        for h in range(2): M[8 + r0 + 4*h, c] = Xo[lane, h]
    return M
def column_subst(N):
    D = np.zeros((16,16), np.float32)
    for c in range(16):
        x = np.array([1.0 if i == c else 0.0 for i in range(16)], np.float32)
        for i in range(1, 16):
            s = np.float32(0)
            for j in range(i): s = np.float32(np.float32(N[i, j]) * x[j] + s)
            if i > c: x[i] = -s
        D[:, c] = x
    return D
rng = np.random.default_rng(2)
for scale in [0.1, 0.5, 1, 3, 10]:
    eb, ec = [], []
    for t in range(100):
        N = np.tril(rng.standard_normal((16, 16)) * scale, -1).astype(np.float32)
        ref = np.linalg.inv(np.eye(16) + N.astype(np.float64))
        nr = np.abs(ref).max()
        eb.append(np.abs(warp_inverse(N) - ref).max() / nr); ec.append(np.abs(column_subst(N) - ref).max() / nr)
    print(f"scale {scale}: blocked median {np.median(eb):.2e} max {max(eb):.2e} | column median {np.median(ec):.2e} max {max(ec):.2e}")
# repeated keys: L = beta * k_i . k_j with near-identical unit keys, gates 0
for noise in [0.0, 1e-3, 1e-2]:
    eb, ec = [], []
    for t in range(100):
        k = rng.standard_normal(128); K = k[None, :] + noise * rng.standard_normal((16, 128)); K /= np.linalg.norm(K, axis=1, keepdims=True)
        beta = rng.uniform(0, 1, 16)
        N = np.tril(beta[:, None] * (K @ K.T), -1).astype(np.float32)
        ref = np.linalg.inv(np.eye(16) + N.astype(np.float64)); nr = np.abs(ref).max()
        eb.append(np.abs(warp_inverse(N) - ref).max() / nr); ec.append(np.abs(column_subst(N) - ref).max() / nr)
    print(f"repeated keys noise {noise}: blocked median {np.median(eb):.2e} max {max(eb):.2e} | column median {np.median(ec):.2e} max {max(ec):.2e}")
