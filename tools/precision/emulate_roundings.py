#!/usr/bin/env python3
"""A CPU model of the CUDA tensor-core forward's roundings (D = 128 or 64, chunk 64, one value head),
to price an accuracy change before spending device time on it (docs/perf.md, "g = 0 accuracy").

Per chunk, as src/cuda/chunk/kkt_solve.cu, fwd_h_wgmma.cuh and chain_o.cuh compute it (fp32 arithmetic,
16-bit operands where the kernels round):
    A_s = (I + L)^-1 diag(beta)                  hi + lo parts (near fp32)
    h   = E(S)                                   the state as operand            (h_U, h_o)
    W   = E(v - diag(exp(G) r) k h)              rounded once                     (W)
    v_new = A_s W;  vs = E(diag(exp(G_last - G) r) v_new)                         (vs)
    S   = exp(G_last) S + k^T vs
    o   = E(scale (diag(exp(G) rq) q h + E(P) E(v_new)))                          (P, vnew_o, o)
With --form wy, the D = 64 path before session 37 (the mma.sync fwd_prep.cu, fwd_h_mma.cu, since
deleted: D = 64 now runs the a_last form on the wgmma chain): w and u stored in E, v_new = u - w h:
    u = E(A_s v);  w = E(A_s diag(exp(G) r) k)                                  (u, w)
    v_new = u - w h  (h = E(S): h_U)
and the rest as above.
With --form lookahead (a chain not yet built, docs/perf.md "Session 50"): each chunk's U from the
state at the previous chunk's start, so that the state's update leaves the chain's critical path:
    U_c = exp(G_last,c-1) k_c h_{c-1} + E(k_c k_{c-1}^T) vs_{c-1}   (h_{c-1} = E(S_{c-1}): h_U; kk)
(chunk 0: k_0 E(S_0)) and the rest as above.
Each named rounding can be "bf16" (as the kernels), "hilo" (a second bf16 part: the cost of one
more product), "fp16", "fp16col" (fp16 after a power-of-two scale per column: v_new's operand
with bf16's range), "hilo16" (fp16 hi + lo parts) or "fp32" (none). The reference is the float64 recurrence of the tests
(python/tests/gdn_ref.py). Inputs as bench/bench_gpu.py's: bf16 randn q, k, v, l2norm in the
kernel, beta = sigmoid(randn), g = logsigmoid(randn) ("normal") or 0 ("zero"), S0 = 0.1 randn.

    python3 tools/precision/emulate_roundings.py [--tokens 4096] [--gates zero,normal]
        [--set W=hilo,vs=hilo ...]     (each --set one variant; none: the main variants)
        [--adaptive A]                 (the variants only on chunks whose decay G_last > -A)
    [--strong NAME=MODE,...]       (with --adaptive: the other chunks' roundings, e.g. P=bf16)
    --gates: zero, normal, xF (the normal gates times F, e.g. x0.1) or modelH (value head H of 32 of
        Qwen3-Next's gate, tools/model_gate.h: the bench's model-* cases); a suffix +resets adds the
        check tool's extremes (g = -1e4 every 89 tokens, beta 0 / 2 every 83 / 79)
    [--rule last|tail]                 (with --adaptive: which chunks take the lo parts, emulate())
    [--base bf16|fp16]                 (the roundings --set leaves alone; fp16: the fp16 kernels)
    [--tiers "1:W=hilo,vs=hilo,h_o=hilo;32:W=hilo"]  (lo passes by tier of G_last; --strong: all tiers)
    [--dim 128|64] [--form a_last|wy|lookahead]  (the head size; the chain's form: D = 128's, D = 64's
        before session 37, or the look-ahead U)
Session 16's table (T = 4096 and 32768): docs/perf.md.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))
import gdn_ref  # noqa: E402  (the float64 oracle of the tests)

K = V = 128  # --dim sets both
C = 64
ROUNDINGS = ("h_U", "h_o", "W", "vs", "vnew_o", "o", "u", "w", "P", "kk")


def bf16(x):
    """float32 -> the nearest-even bfloat16, as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def rnd(x, mode):
    x = np.asarray(x, np.float32)
    if mode == "fp32":
        return x
    if mode == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if mode == "fp16col":  # fp16 after a power-of-two scale per column (its largest |x| to [2^14, 2^15))
        big = np.max(np.abs(x), axis=0, keepdims=True)
        e = np.where(big > 0, np.floor(np.log2(np.where(big > 0, big, 1))), 0)
        s = np.exp2(14 - e).astype(np.float32)
        return ((x * s).astype(np.float16).astype(np.float32) / s).astype(np.float32)
    hi = bf16(x)
    if mode == "bf16":
        return hi
    if mode == "hilo":
        return hi + bf16(x - hi)
    if mode == "hilo16":  # fp16 hi + lo parts (the fp16 kernels' lo passes)
        h16 = x.astype(np.float16).astype(np.float32)
        return h16 + (x - h16).astype(np.float16).astype(np.float32)
    raise ValueError(f"rounding mode {mode!r}: bf16, hilo, fp16, fp16col, hilo16 or fp32")


def partner(x, mode):
    """The bf16 input multiplied with an fp16 operand is converted to fp16 too."""
    return x.astype(np.float16).astype(np.float32) if mode == "fp16" else x


def make_inputs(T, gates, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (bf16(rng.standard_normal((T, n)).astype(np.float32)) for n in (K, K, V))
    beta = (1 / (1 + np.exp(-rng.standard_normal(T)))).astype(np.float32)
    x = rng.standard_normal(T)
    resets = gates.endswith("+resets")
    gates = gates.removesuffix("+resets")
    g = np.zeros(T, np.float32) if gates == "zero" else (-np.log1p(np.exp(-x))).astype(np.float32)
    if gates.startswith("x"):  # "x0.1": the normal gates times 0.1
        g = (float(gates[1:]) * -np.log1p(np.exp(-x))).astype(np.float32)
    if gates.startswith("model"):  # "model7": value head 7 of 32 of Qwen3-Next's gate (tools/model_gate.h)
        A, bias = gdn_ref.model_gate_params(32)
        z = x + bias[int(gates[5:])]
        g = (-A[int(gates[5:])] * np.where(z > 20.0, z, np.log1p(np.exp(np.minimum(z, 20.0))))).astype(np.float32)
    if resets:  # the check tool's extremes (tools/cuda_check/run_case.cu), for one head
        t = np.arange(T)
        g[t % 97 == 5] = 0
        g[t % 89 == 7] = -1e4
        beta[t % 83 == 3] = 0
        beta[t % 79 == 2] = 2
    S0 = (0.1 * rng.standard_normal((K, V))).astype(np.float32)  # (K, V: --dim)
    return q, k, v, g, beta, S0


def emulate(q, k, v, g, beta, S0, modes, adaptive=None, rule="last", base="bf16", form="a_last", strong=None,
            tiers=None):
    """modes apply to every chunk, or with `adaptive` = a only to chunks whose decay G_last > -a
    (the others as the kernels: all bf16). rule "last" is the kernels': h_o's lo part only where
    the chunk before was such a chunk too (the h_lo staging exists only then; before session 26
    this model took it on every such chunk, so older tables differ slightly in h_o's variants). rule "tail"
    (docs/prepared/s27_precise_resets.patch): the chunk's state is also weakly decayed where its
    last quarter decays by less than e^-4 (G_last - G_{3n/4} > -4: a reset early in the chunk),
    and W's and h_o's lo parts are also taken where the chunk before was such a chunk and this one
    starts weakly decaying (G_0 > -a: rows before a late reset see the whole state).
    `tiers` [(a, modes), ...] (a ascending; instead of modes / adaptive): a chunk takes the first
    tier's modes whose G_last > -a, none past the last; h_o's lo part only after a chunk that took
    vs's (the kernels stage h_lo after a precise-state chunk)."""
    m0 = dict.fromkeys(ROUNDINGS, base)  # the kernels' roundings: bf16, or fp16 for fp16 inputs
    m0["P"] = "hilo" if base == "bf16" else "hilo16"  # (the o warpgroup splits P into hi + lo parts)
    m1 = dict(m0)
    m1.update(modes)
    if strong:  # with adaptive: the other (strongly decaying) chunks' roundings, where not the kernels'
        m0.update(strong)
    T = len(q)
    f32 = np.float32
    S = S0.copy()
    o = np.empty((T, V), f32)
    scale = f32(K**-0.5)
    eps = f32(1e-6)
    rk_all = (1 / np.sqrt((k**2).sum(1) + eps)).astype(f32)
    rq_all = (1 / np.sqrt((q**2).sum(1) + eps)).astype(f32)
    strict, incl = np.tril(np.ones((C, C), bool), -1), np.tril(np.ones((C, C), bool))
    prev = True  # chunk -1 counts as weakly decaying (the kernels stage h_0's lo part)
    last = None  # form lookahead: the previous chunk's (state at its start, exp(G_last), raw k, vs)
    for c0 in range(0, T, C):
        sl = slice(c0, min(c0 + C, T))
        n = sl.stop - sl.start
        kr, qr, vv, b, rk, rq = k[sl], q[sl], v[sl], beta[sl], rk_all[sl], rq_all[sl]
        G = np.cumsum(g[sl], dtype=f32)
        m = m1  # (every chunk, unless tiers or adaptive choose below)
        if tiers is not None:
            m = dict(m0)
            for a, tier_modes in tiers:  # (rule tail: also where the last quarter decays by less than a / 4)
                if G[-1] > -a or (rule == "tail" and G[-1] - G[(3 * n) // 4] > -a / 4):
                    m.update(tier_modes)
                    break
            if not prev:
                m["h_o"] = m0["h_o"]
            prev = m["vs"] != m0["vs"]
        elif adaptive is not None:
            weak = G[-1] > -adaptive or (rule == "tail" and G[-1] - G[(3 * n) // 4] > -4)
            m = dict(m1 if weak else m0)
            if rule == "tail" and not weak and prev and G[0] > -adaptive:
                m.update(W=m1["W"], h_o=m1["h_o"])
            if not prev:
                m["h_o"] = m0["h_o"]
            prev = weak
        kn, qn = kr * rk[:, None], qr * rq[:, None]
        gated = np.where(incl[:n, :n], np.exp(np.where(incl[:n, :n], G[:, None] - G[None, :], 0)), 0).astype(f32)
        L = np.where(strict[:n, :n], b[:, None] * (kn @ kn.T) * gated, 0)
        A_s = rnd(np.linalg.inv(np.eye(n) + L).astype(f32) * b[None, :], "hilo")
        if form == "wy":  # D = 64: fwd_prep's u and w in E, then u - w h in fwd_h_mma
            u = rnd(A_s @ vv, m["u"])
            w = rnd(A_s @ ((np.exp(G) * rk)[:, None] * kr), m["w"])
            v_new = u - partner(w, m["h_U"]) @ rnd(S, m["h_U"])
        elif form == "lookahead" and last is not None:
            S_prev, decay_prev, k_prev, vs_prev = last
            U = decay_prev * (partner(kr, m["h_U"]) @ rnd(S_prev, m["h_U"])) + rnd(kr @ k_prev.T, m["kk"]) @ vs_prev
            W = rnd(vv - (np.exp(G) * rk)[:, None] * U, m["W"])
            v_new = A_s @ W
        else:
            U = partner(kr, m["h_U"]) @ rnd(S, m["h_U"])
            W = rnd(vv - (np.exp(G) * rk)[:, None] * U, m["W"])
            v_new = A_s @ W
        P = rnd(np.where(incl[:n, :n], (qn @ kn.T) * gated, 0).astype(f32), m["P"])
        qh = (partner(qr, m["h_o"]) @ rnd(S, m["h_o"])) * (np.exp(G) * rq)[:, None]
        o[sl] = rnd(scale * (qh + P @ rnd(v_new, m["vnew_o"])), m["o"])
        vs = rnd((np.exp(G[-1] - G) * rk)[:, None] * v_new, m["vs"])
        last = (S, np.exp(G[-1]).astype(f32), kr, vs)
        S = np.exp(G[-1]) * S + partner(kr, m["vs"]).T @ vs
    return o, S


MAIN_VARIANTS = {
    "as the kernels (all bf16)": {},
    "W, vs hi+lo": dict(W="hilo", vs="hilo"),
    "W, vs, h_o hi+lo": dict(W="hilo", vs="hilo", h_o="hilo"),
    "W, vs hi+lo, h_o fp16": dict(W="hilo", vs="hilo", h_o="fp16"),
    "all but o hi+lo": dict(h_U="hilo", h_o="hilo", W="hilo", vs="hilo", vnew_o="hilo"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--gates", default="zero,normal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--adaptive", type=float, default=None,
                    help="apply the --set modes only to chunks whose decay G_last > -ADAPTIVE")
    ap.add_argument("--set", action="append", default=[], help="one variant: NAME=MODE[,NAME=MODE...]")
    ap.add_argument("--rule", default="last", choices=["last", "tail"], help="with --adaptive: emulate()'s rules")
    ap.add_argument("--base", default="bf16", choices=["bf16", "fp16"],
                    help="the roundings not named by --set (fp16: the fp16 kernels)")
    ap.add_argument("--strong", default="", help="with --adaptive: NAME=MODE[,...] for the chunks that decay "
                    "strongly (default: the kernels' roundings), e.g. P=bf16")
    ap.add_argument("--tiers", default="", help="A1:NAME=MODE,...;A2:NAME=MODE,... (A ascending): a chunk "
                    "takes the first tier whose G_last > -A (the --strong modes under every tier); replaces --set and --adaptive")
    ap.add_argument("--dim", type=int, default=128, help="K = V (128 or 64)")
    ap.add_argument("--form", default="a_last", choices=["a_last", "wy", "lookahead"],
                    help="a_last: D = 128's chain (A applied last); wy: D = 64's before session 37 (u - w h); "
                    "lookahead: U from the previous chunk's state (not built)")
    args = ap.parse_args()
    global K, V
    K = V = args.dim
    variants = MAIN_VARIANTS
    if args.set:
        variants = {s: dict(kv.split("=") for kv in s.split(",")) for s in args.set}
    tiers = None
    if args.tiers:
        tiers = [(float(t.split(":")[0]), dict(kv.split("=") for kv in t.split(":")[1].split(",")))
                 for t in args.tiers.split(";")]
        variants = {"tiers " + args.tiers: {}}
    for gates in args.gates.split(","):
        q, k, v, g, beta, S0 = make_inputs(args.tokens, gates, args.seed)
        o_ref, S_ref = gdn_ref.recurrence(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None],
                                          initial_state=S0[None, None], use_qk_l2norm=True)
        print(f"T = {args.tokens}, gates {gates}")
        for name, modes in variants.items():
            strong = dict(kv.split("=") for kv in args.strong.split(",")) if args.strong else None
            o, S = emulate(q, k, v, g, beta, S0, modes, args.adaptive, args.rule, args.base, args.form, strong,
                           tiers)
            print(f"  {name:28s} err_o {gdn_ref.rel_err(o, o_ref[:, 0]):.3e}  "
                  f"err_state {gdn_ref.rel_err(S, S_ref[0, 0]):.3e}", flush=True)


if __name__ == "__main__":
    main()
