# Lane-level check of the new shared-memory paths: store_x -> frag_a (load_a), and out_block's stage.
import numpy as np
def stsm_x4(mem, addr_of_lane, regs):  # regs[lane][q] = (lo, hi) 16-bit values; mem: dict elem-address -> value
    for q in range(4):
        for T in range(32):
            row = T // 4
            base = addr_of_lane[8 * q + row]
            mem[base + 2 * (T % 4)] = regs[T][q][0]
            mem[base + 2 * (T % 4) + 1] = regs[T][q][1]
def ldsm_x4(mem, addr_of_lane):
    out = [[None] * 4 for _ in range(32)]
    for q in range(4):
        for T in range(32):
            base = addr_of_lane[8 * q + T // 4]
            out[T][q] = (mem[base + 2 * (T % 4)], mem[base + 2 * (T % 4) + 1])
    return out
SX, SE = 72, 40
# A fragments of block X (16x16): h[0] (g, 2t), h[1] (g+8, 2t), h[2] (g, 2t+8), h[3] (g+8, 2t+8)
X = np.arange(256).reshape(16, 16) + 1000
def afrag(X):
    return [[(X[T//4 + 8*(q%2), 2*(T%4) + 8*(q//2)], X[T//4 + 8*(q%2), 2*(T%4) + 8*(q//2) + 1]) for q in range(4)] for T in range(32)]
A = afrag(X)
for ib in range(4):
    for jb in range(4):
        mem = {}
        st = [(16*ib + l % 8 + ((l // 8) % 2) * 8) * SX + 16*jb + (l // 16) * 8 for l in range(32)]  # store_x
        stsm_x4(mem, st, A)
        ld = [(16*ib + l % 16) * SX + 16*jb + (l // 16) * 8 for l in range(32)]  # frag_a(m0 = 16 ib, k0 = 16 jb)
        assert ldsm_x4(mem, ld) == A
        # the tile holds X at rows 16 ib + r, cols 16 jb + c
        assert all(mem[(16*ib + r) * SX + 16*jb + c] == X[r, c] for r in range(16) for c in range(16))
# out_block: stage rows of SE elements: hi at cols 0..15, lo at 16..31; lanes read (pr, pc) pieces
Xlo = X + 5000
mem = {}
rowaddr = [(l % 8 + ((l // 8) % 2) * 8) * SE + (l // 16) * 8 for l in range(32)]
stsm_x4(mem, rowaddr, afrag(X)); stsm_x4(mem, [a + 16 for a in rowaddr], afrag(Xlo))
W = {}
for l in range(32):
    pr, pc = l % 16, 8 * (l // 16)
    for k in range(8):
        W[(pr, pc + k)] = mem[pr * SE + pc + k]          # hi -> global cols 16 jb + pc + k
        W[(pr, 64 + pc + k)] = mem[pr * SE + 16 + pc + k]  # lo -> global cols C + 16 jb + pc + k
assert all(W[(r, c)] == X[r, c] and W[(r, 64 + c)] == Xlo[r, c] for r in range(16) for c in range(16))
assert max(mem) < 16 * SE and all(a % 8 == 0 for a in rowaddr)  # within the 16-row stage; 16-byte rows
print("ok: store_x/frag_a round trip and the stage's pieces")
