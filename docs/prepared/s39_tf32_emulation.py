"""The accuracy of s39_stages_tf32_1pass.patch, predicted without a GPU: the exact forward's stages
(K = V = 256, chunk 64; fp32 l2-normalized copies of q and k, fp64 G, solve_tril in fp32) emulated
in numpy with each product's operands rounded as the patch rounds them, against the fp64
recurrence on the same bf16-rounded inputs (relative RMS error of o and of the final state).

    python3 docs/prepared/s39_tf32_emulation.py [seed] [tokens]

Session 39 (seed 0, 1024 tokens; seed 1, 4096): fp32 products 6.6e-8 - 1.1e-7; tf32 one pass
4.6-5.5e-4 (g = 0 the largest); tf32 three passes 1.3-1.7e-7."""
import sys

import numpy as np


def bf16(x):  # round to nearest even
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return b.view(np.float32).astype(np.float64)


def tf32(x):  # cvt.rna.tf32.f32: 10 explicit bits, ties away from zero
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return b.view(np.float32).astype(np.float64)


def f32(x):
    return np.asarray(x, np.float32).astype(np.float64)


def mm_fp32(a, b):
    return f32(a @ b)


def mm_one(a, b):  # hi x hi
    return f32(tf32(a) @ tf32(b))


def mm_three(a, b):  # lo x hi + hi x lo + hi x hi (split_tf32: lo = tf32(x - hi))
    ah, bh = tf32(a), tf32(b)
    al, bl = tf32(f32(a) - ah), tf32(f32(b) - bh)
    return f32(al @ bh + ah @ bl + ah @ bh)


def recurrence(q, k, v, g, beta, scale):
    T, K = q.shape
    S = np.zeros((K, v.shape[1]))
    o = np.zeros_like(v)
    for t in range(T):
        S *= np.exp(g[t])
        S += np.outer(k[t], beta[t] * (v[t] - k[t] @ S))
        o[t] = scale * (q[t] @ S)
    return o, S


def chunked(q, k, v, g, beta, scale, mm, C=64):
    T, K = q.shape
    S = np.zeros((K, v.shape[1]))
    o = np.zeros_like(v)
    for t0 in range(0, T, C):
        sl = slice(t0, min(t0 + C, T))
        n = sl.stop - t0
        qc, kc, vc, bc = q[sl], k[sl], v[sl], beta[sl]
        G = np.cumsum(g[sl])
        L = np.tril(f32(bc[:, None] * mm(kc, kc.T) * np.exp(G[:, None] - G[None, :])), -1)  # kkt
        A = f32(np.linalg.inv(np.eye(n) + L))  # solve_tril (fp32 FMA)
        w = mm(A, f32(bc[:, None] * np.exp(G)[:, None] * kc))  # w_u
        u = mm(A, f32(bc[:, None] * vc))
        h = S.copy()  # fwd_h
        vn = f32(u - mm(w, S))
        S = f32(np.exp(G[-1]) * S + mm(kc.T, f32(vn * np.exp(G[-1] - G)[:, None])))
        P = np.where(np.tril(np.ones((n, n))) > 0, f32(mm(qc, kc.T) * np.exp(G[:, None] - G[None, :])), 0.0)  # fwd_o
        o[sl] = f32(scale * f32(f32(np.exp(G)[:, None] * mm(qc, h)) + mm(P, vn)))
    return o, S


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
T = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
K = V = 256
scale = K**-0.5
for name in ["normal gates", "g = 0", "gates x0.01"]:
    q, k, v = (bf16(rng.standard_normal((T, d))) for d in (K, K, V))
    qn = f32(q / np.linalg.norm(q, axis=1, keepdims=True))  # the l2norm copies
    kn = f32(k / np.linalg.norm(k, axis=1, keepdims=True))
    ls = -np.log1p(np.exp(-rng.standard_normal(T)))  # logsigmoid(randn)
    g = f32({"normal gates": ls, "g = 0": 0 * ls, "gates x0.01": 0.01 * ls}[name])
    beta = f32(1 / (1 + np.exp(-rng.standard_normal(T))))
    o_ref, S_ref = recurrence(q / np.linalg.norm(q, axis=1, keepdims=True),
                              k / np.linalg.norm(k, axis=1, keepdims=True), v, g, beta, scale)
    for mode, mm in [("fp32 products", mm_fp32), ("tf32 one pass", mm_one), ("tf32 three passes", mm_three)]:
        o, S = chunked(qn, kn, v, g, beta, scale, mm)
        print(f"{name:13s} T={T} {mode:17s} err_o {rel(o, o_ref):.2e}  err_state {rel(S, S_ref):.2e}")
