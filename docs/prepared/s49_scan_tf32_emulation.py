# Session 49: the tensor-core scan's index mapping (split_scan.cu, landed in session 49 from
# s49_scan_tf32.patch) checked at the desk before its device run: each lane's A / B elements as the
# kernel loads them (the k index permuted within 32 columns, S_p transposed and split into tf32
# hi + lo), the mma.m16n8k8 fragment layout, the accumulators by pass kind and k parity; the result
# against M S + B in fp64 for (kCols, d) = (8, 128), (16, 64), (32, 128). Printed: ~7e-8 relative
# (this emulation sums each mma in fp64), and rows past d never written.
import numpy as np
def tf32(x):
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    # round to nearest (ties away) at bit 13
    b = (b + 0x1000) & 0xFFFFE000
    return b.astype(np.uint32).view(np.float32)
def trunc_tf32(x):
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
def mma(d, a, b0, b1):
    # a[lane][4], b0/b1[lane]; d[lane][4]; m16n8k8: A(g,t)=a0, A(g+8,t)=a1, A(g,t+4)=a2, A(g+8,t+4)=a3
    A = np.zeros((16, 8)); B = np.zeros((8, 8))
    for l in range(32):
        g, t = l // 4, l % 4
        A[g, t], A[g + 8, t], A[g, t + 4], A[g + 8, t + 4] = [trunc_tf32(np.float32(v)) for v in a[l]]
        B[t, g], B[t + 4, g] = trunc_tf32(np.float32(b0[l])), trunc_tf32(np.float32(b1[l]))
    C = A @ B
    for l in range(32):
        g, t = l // 4, l % 4
        d[l][0] += C[g, 2 * t]; d[l][1] += C[g, 2 * t + 1]; d[l][2] += C[g + 8, 2 * t]; d[l][3] += C[g + 8, 2 * t + 1]
def step(M, X, B, kCols, d):
    kNT = kCols // 8
    Xhi = np.zeros((kCols, 128), np.float32); Xlo = np.zeros((kCols, 128), np.float32)
    for r in range(d):
        for c in range(kCols):
            h = tf32(np.array([X[r, c]], np.float32))[0]
            Xhi[c, r] = h; Xlo[c, r] = np.float32(X[r, c]) - h
    out = np.full((128, kCols), np.nan)
    for w in range(8):
        r0 = 16 * w
        if r0 >= d: continue
        hh = [[[0.0] * 4 for _ in range(32)] for _ in range(2 * kNT)]
        cr = [[[0.0] * 4 for _ in range(32)] for _ in range(2 * kNT)]
        for l in range(32):
            g, t = l // 4, l % 4
            for nt in range(kNT):
                hh[nt][l] = [B[r0 + g, 8 * nt + 2 * t], B[r0 + g, 8 * nt + 2 * t + 1], B[r0 + g + 8, 8 * nt + 2 * t], B[r0 + g + 8, 8 * nt + 2 * t + 1]]
        for j in range(0, d, 32):
            for s in range(4):
                ahi, alo, = [], []
                bh = {}; bl = {}
                for l in range(32):
                    g, t = l // 4, l % 4
                    a = [M[r0 + g, j + 8 * t + s], M[r0 + g + 8, j + 8 * t + s], M[r0 + g, j + 8 * t + 4 + s], M[r0 + g + 8, j + 8 * t + 4 + s]]
                    hi = [tf32(np.array([v], np.float32))[0] for v in a]
                    ahi.append(hi); alo.append([np.float32(v) - h for v, h in zip(a, hi)])
                    for nt in range(kNT):
                        at = 8 * nt + g
                        bh.setdefault(nt, []).append((Xhi[at, j + 8 * t + s], Xhi[at, j + 8 * t + 4 + s]))
                        bl.setdefault(nt, []).append((Xlo[at, j + 8 * t + s], Xlo[at, j + 8 * t + 4 + s]))
                for nt in range(kNT):
                    idx = (s & 1) * kNT + nt
                    mma(cr[idx], alo, [x[0] for x in bh[nt]], [x[1] for x in bh[nt]])
                    mma(cr[idx], ahi, [x[0] for x in bl[nt]], [x[1] for x in bl[nt]])
                    mma(hh[idx], ahi, [x[0] for x in bh[nt]], [x[1] for x in bh[nt]])
        for l in range(32):
            g, t = l // 4, l % 4
            for nt in range(kNT):
                v = [(hh[nt][l][e] + hh[kNT + nt][l][e]) + (cr[nt][l][e] + cr[kNT + nt][l][e]) for e in range(4)]
                c = 8 * nt + 2 * t
                out[r0 + g, c], out[r0 + g, c + 1], out[r0 + g + 8, c], out[r0 + g + 8, c + 1] = v
    return out
rng = np.random.default_rng(1)
for kCols, d in [(8, 128), (16, 64), (32, 128)]:
    M = rng.standard_normal((128, 128)).astype(np.float32) * 0.1
    X = rng.standard_normal((128, kCols)).astype(np.float32)
    B = rng.standard_normal((128, kCols)).astype(np.float32)
    ref = M[:d, :d].astype(np.float64) @ X[:d].astype(np.float64) + B[:d]
    out = step(M, X, B, kCols, d)
    err = np.abs(out[:d] - ref).max() / np.abs(ref).max()
    print(kCols, d, "rel max err", err, "rows past d nan:", np.isnan(out[d:]).all())
