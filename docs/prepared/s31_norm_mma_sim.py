# CPU model of s31_norm_mma.patch's chain_q_inverse_norms (session 30): the SW128 q tile, the lanes' ldmatrix.x4
# addresses, the mma m16n8k16 fragments (PTX ISA layouts) and the diagonal's lanes; prints, for several
# chunk lengths, the largest difference from the rows' inverse norms in fp64 (0 up to rounding) and the
# NaNs left in rq (0). `python3 docs/prepared/s31_norm_mma_sim.py`
import numpy as np
C=64
rng=np.random.default_rng(1)
q=rng.standard_normal((C,128)).astype(np.float32)
# smem image: 2 atoms of [64 rows x 128 bytes]; 16-byte chunk ch of row r at r*128 + ((ch ^ (r&7))<<4)
mem=np.zeros(2*C*128//2, np.float32)  # in 2-byte elements
def sw128(row,ch): return row*128 + ((ch ^ (row & 7))<<4)
for r in range(C):
    for piece in range(16):
        atom=piece//8; ch=piece%8
        byte=atom*C*128 + sw128(r,ch)
        mem[byte//2: byte//2+8]=q[r,8*piece:8*piece+8]
def ldsm_x4(addrs):  # addrs[lane]: byte address of row (lane%8) of matrix lane//8
    regs=np.zeros((32,4,2),np.float32)
    for i in range(4):
        rows=[mem[addrs[8*i+j]//2: addrs[8*i+j]//2+8] for j in range(8)]
        for l in range(32):
            regs[l,i]=rows[l//4][2*(l%4):2*(l%4)+2]
    return regs
def mma(c,a,b0,b1):  # per-lane fragments -> full matrices
    A=np.zeros((16,16)); B=np.zeros((16,8)); Cm=np.zeros((16,8))
    for l in range(32):
        g,t=l//4,l%4
        A[g,2*t:2*t+2]=a[l,0]; A[g+8,2*t:2*t+2]=a[l,1]; A[g,2*t+8:2*t+10]=a[l,2]; A[g+8,2*t+8:2*t+10]=a[l,3]
        B[2*t:2*t+2,g]=b0[l]; B[2*t+8:2*t+10,g]=b1[l]
        Cm[g,2*t:2*t+2]=c[l,0:2]; Cm[g+8,2*t:2*t+2]=c[l,2:4]
    D=A@B+Cm
    out=np.zeros((32,4))
    for l in range(32):
        g,t=l//4,l%4
        out[l,0:2]=D[g,2*t:2*t+2]; out[l,2:4]=D[g+8,2*t:2*t+2]
    return out
for length in (64,37,16,9,1):
    rq=np.full(C,np.nan)
    for warp in range(4):
        r0=16*warp
        if r0>=length:
            rq[r0:r0+16]=0; continue
        c0=np.zeros((32,4)); c1=np.zeros((32,4))
        rows=[r0+l%16 if r0+l%16<length else r0 for l in range(32)]
        for ks in range(8):
            addrs=[]
            for l in range(32):
                row=rows[l]; y=(l//16)^(row&7)
                addrs.append(row*128 + (ks//4)*(C*128) + ((((2*ks)&7)^y)<<4))
            a=ldsm_x4(addrs)
            c0=mma(c0,a,a[:,0],a[:,2]); c1=mma(c1,a,a[:,1],a[:,3])
        for l in range(32):
            g,t=l//4,l%4
            if t==g//2:
                s0=c0[l,1] if g&1 else c0[l,0]; s1=c1[l,3] if g&1 else c1[l,2]
                i0=r0+g; i1=i0+8
                rq[i0]=1/np.sqrt(s0+1e-6) if i0<length else 0
                rq[i1]=1/np.sqrt(s1+1e-6) if i1<length else 0
    ref=np.where(np.arange(C)<length, 1/np.sqrt((q.astype(np.float64)**2).sum(1)+1e-6), 0)
    print(length, np.nanmax(np.abs(rq-ref)), np.isnan(rq).sum())
