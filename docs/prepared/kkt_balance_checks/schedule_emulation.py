# Block-level emulation of kkt_solve's new schedule: tiles in x become visible only at the next barrier.
import numpy as np
rng = np.random.default_rng(1)
L = np.tril(rng.standard_normal((64, 64)) * 0.3, -1)
B = lambda M, i, j: M[16*i:16*i+16, 16*j:16*j+16].copy()
Dm = [np.linalg.inv(np.eye(16) + B(L, m, m)) for m in range(4)]
out = {}
vis, pend = {}, {}
def store_x(f, ib, jb):
    assert (ib, jb) not in pend and (ib, jb) not in vis, ("tile written twice", ib, jb)
    pend[(ib, jb)] = f
def load(ib, jb):
    assert (ib, jb) in vis, ("tile not visible", ib, jb)
    return vis[(ib, jb)]
def sync():
    vis.update(pend); pend.clear()
def out_block(x, ib, jb):
    assert (ib, jb) not in out; out[(ib, jb)] = x
def finish(T, Di, ib, jb, keep):
    X = -(Di @ T); out_block(X, ib, jb)
    if keep: store_x(X, ib, jb)
state = {}
load_l = lambda i, j: load(j, i)
# before S2
for m in range(4):
    r1, c1 = (3 if m == 0 else m), (1 if m == 0 else m - 1)
    L1 = B(L, r1, c1); L2 = B(L, m, 0) if m >= 2 else None
    store_x(L1, c1, r1)
    if m >= 2: store_x(L2, 0, m)
    store_x(Dm[m], m, m); out_block(Dm[m], m, m)
    for jb in range(1, 4):
        if jb > m: out_block(np.zeros((16, 16)), m, jb)
    state[m] = {}
sync()  # S2
for m in range(4):
    s = state[m]; T0 = np.zeros((16, 16)); T1 = np.zeros((16, 16))
    if m == 0:
        d1 = load(1, 1); T0 += load_l(2, 1) @ d1; T1 += load_l(3, 1) @ d1; finish(T0, load(2, 2), 2, 1, True)
    elif m == 1:
        d0 = load(0, 0); T0 += load_l(1, 0) @ d0; T1 += load_l(3, 0) @ d0; finish(T0, load(1, 1), 1, 0, True)
    elif m == 2:
        T0 += load_l(2, 0) @ load(0, 0)
    else:
        T0 += load_l(3, 2) @ load(2, 2); finish(T0, load(3, 3), 3, 2, False)
    s['T0'], s['T1'] = T0, T1
sync()  # S3
for m in range(4):
    s = state[m]
    if m == 0:
        s['T1'] += load_l(3, 2) @ load(2, 1); finish(s['T1'], load(3, 3), 3, 1, False)
    elif m == 1:
        s['T1'] += load_l(3, 1) @ load(1, 0)
    elif m == 2:
        s['T0'] += load_l(2, 1) @ load(1, 0); finish(s['T0'], load(2, 2), 2, 0, True)
sync()  # S4
s = state[1]
s['T1'] += load_l(3, 2) @ load(2, 0); finish(s['T1'], load(3, 3), 3, 0, False)
A = np.block([[out[(i, j)] for j in range(4)] for i in range(4)])
ref = np.linalg.inv(np.eye(64) + L)
print("blocks written:", len(out), "max err", np.abs(A - ref).max())
