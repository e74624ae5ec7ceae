"""The stages of the chunked forward (SPEC.md section 3), each callable on its own, for users who
compose them. Composing them in order gives chunk_gated_delta_rule (with plain g and beta):

    G = chunk_local_cumsum(g)                      # [T, HV]
    L = chunk_scaled_dot_kkt(k, beta, G)           # [T, HV, 64]
    A = solve_tril(L)                              # [T, HV, 64]
    w, u = recompute_w_u(k, v, beta, A, G)         # [T, HV, K], [T, HV, V]
    h, v_new, ht = chunk_fwd_h(k, w, u, G, initial_state, output_final_state=True)
    o = chunk_fwd_o(q, k, v_new, h, G)             # like v

(run l2norm on q and k first to get use_qk_l2norm_in_kernel=True). q, k, v, g, beta take the shapes
of chunk_gated_delta_rule ([B, T, ...] or packed [T, ...]); the intermediates are fp32 and packed
over all tokens, [T, HV, ...]; h holds the state at each chunk's start, [max_num_chunks(T, N), HV, K, V]
(K-major), chunks numbered globally. Sequences: cu_seqlens ([N + 1]), else ``num_seqs`` equal
sequences, else B of a 4-D input, else one. Every function takes ``out=`` buffers where it has one
output. Not torch custom ops: call them eagerly (they run on the current CUDA stream)."""

from __future__ import annotations

from . import _C
from ._env import Env, same_framework

__all__ = ["l2norm", "chunk_local_cumsum", "chunk_scaled_dot_kkt", "solve_tril", "recompute_w_u", "chunk_fwd_h",
           "chunk_fwd_o", "max_num_chunks"]

_C_SIZE = 64


def max_num_chunks(num_tokens: int, num_seqs: int) -> int:
    """An upper bound on the chunks of N sequences of T tokens in all (rows of h)."""
    return _C.max_num_chunks(int(num_tokens), int(num_seqs))


def _tokens(x):
    return int(x.shape[0]) * int(x.shape[1]) if x.ndim == 4 else int(x.shape[0])


def _num_seqs(op, cu_seqlens, num_seqs, lead):
    if cu_seqlens is not None:
        if cu_seqlens.ndim != 1 or cu_seqlens.shape[0] < 2:
            raise ValueError(f"gdn.{op}: cu_seqlens has shape {tuple(cu_seqlens.shape)}; expected [N + 1], N >= 1")
        n = int(cu_seqlens.shape[0]) - 1
        if num_seqs is not None and int(num_seqs) != n:
            raise ValueError(f"gdn.{op}: num_seqs is {num_seqs}; expected len(cu_seqlens) - 1 = {n}")
        return n
    if num_seqs is not None:
        if int(num_seqs) < 1:
            raise ValueError(f"gdn.{op}: num_seqs is {num_seqs}; expected >= 1")
        return int(num_seqs)
    if lead is not None and lead.ndim == 4:
        return int(lead.shape[0])
    return 1


def _run(op, env, *, T, N, H, HV, K, V, scale=0.0, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
         final_is_initial=False, **bufs):
    """_C.stage by keyword: the binding's own argument table (_C.stage_args, python/src/ops.h) says
    which arguments may be left None; a buffer name it does not know is a TypeError from the binding."""
    a = env.arr
    if cu_seqlens is not None and cu_seqlens_cpu is not None:
        cu_seqlens_cpu = env.to_index_dtype_of(cu_seqlens_cpu, cu_seqlens)
    kw = {n: a(x) for n, x in bufs.items()}
    kw.update(which=op, T=int(T), N=int(N), H=int(H), HV=int(HV), K=int(K), V=int(V), scale=float(scale),
              state_v_first=bool(state_v_first), cu_seqlens=a(cu_seqlens), cu_seqlens_cpu=a(cu_seqlens_cpu),
              final_is_initial=bool(final_is_initial), workspace=env.workspace(), stream=env.stream(),
              num_threads=env.num_threads())
    for name, accepts_none in _C.stage_args:
        if accepts_none:
            kw.setdefault(name, None)
    with env.scope():
        _C.stage(**kw)


def _check_same(env, **arrays):
    for name, x in arrays.items():
        same_framework(env.kind, name, x)


def l2norm(x, out=None):
    """Stage 0: ``y = x / sqrt(sum(x^2) + 1e-6)`` per token and head (fp32 math), x ``[.., H, D]``."""
    env = Env(x, "x")
    _check_same(env, out=out)
    y = out if out is not None else env.empty(tuple(x.shape), like=x)
    with env.scope():
        _C.l2norm(env.arr(x), env.arr(y), env.stream(), env.num_threads())
    return y


def chunk_local_cumsum(g, cu_seqlens=None, cu_seqlens_cpu=None, num_seqs=None, out=None):
    """Stage 1: ``G_i = sum_{s <= i} g_s`` inside each chunk of 64 (natural log). g ``[.., T, HV]``."""
    op = "chunk_local_cumsum"
    env = Env(g, "g")
    _check_same(env, cu_seqlens=cu_seqlens, out=out)
    if g.ndim not in (2, 3):
        raise ValueError(f"gdn.{op}: g has shape {tuple(g.shape)}; expected [T, HV] or [B, T, HV]")
    T = int(g.shape[0]) * (int(g.shape[1]) if g.ndim == 3 else 1)
    HV = int(g.shape[-1])
    if g.ndim == 3 and cu_seqlens is None and num_seqs is None:
        N = int(g.shape[0])
    else:
        N = _num_seqs(op, cu_seqlens, num_seqs, None)
    G = out if out is not None else env.empty((T, HV), "float32")
    _run(op, env, T=T, N=N, H=1, HV=HV, K=64, V=64, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu, g=g, G=G)
    return G


def chunk_scaled_dot_kkt(k, beta, G, cu_seqlens=None, cu_seqlens_cpu=None, num_seqs=None, out=None):
    """Stage 2: ``L_ij = beta_i (k_i . k_j) exp(G_i - G_j)`` for ``j < i`` in each chunk, else 0."""
    op = "chunk_scaled_dot_kkt"
    env = Env(k, "k")
    _check_same(env, beta=beta, G=G, cu_seqlens=cu_seqlens, out=out)
    T, H, K = _tokens(k), int(k.shape[-2]), int(k.shape[-1])
    HV = int(beta.shape[-1])
    N = _num_seqs(op, cu_seqlens, num_seqs, k)
    L = out if out is not None else env.empty((T, HV, _C_SIZE), "float32")
    _run(op, env, T=T, N=N, H=H, HV=HV, K=K, V=K, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
         k=k, beta=beta, G=G, L=L)
    return L


def solve_tril(L, cu_seqlens=None, cu_seqlens_cpu=None, num_seqs=None, out=None):
    """Stage 3: ``A = (I + L)^-1`` per chunk (unit lower triangular 64x64), L ``[T, HV, 64]``."""
    op = "solve_tril"
    env = Env(L, "L")
    _check_same(env, cu_seqlens=cu_seqlens, out=out)
    if L.ndim != 3:
        raise ValueError(f"gdn.{op}: L has shape {tuple(L.shape)}; expected [T, HV, 64]")
    T, HV = int(L.shape[0]), int(L.shape[1])
    N = _num_seqs(op, cu_seqlens, num_seqs, None)
    A = out if out is not None else env.empty((T, HV, _C_SIZE), "float32")
    _run(op, env, T=T, N=N, H=1, HV=HV, K=64, V=64, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu, L=L, A=A)
    return A


def recompute_w_u(k, v, beta, A, G, cu_seqlens=None, cu_seqlens_cpu=None, num_seqs=None, out=None):
    """Stage 4: ``w = A (beta * exp(G) * k)`` ``[T, HV, K]`` and ``u = A (beta * v)`` ``[T, HV, V]``.
    out: optional (w, u)."""
    op = "recompute_w_u"
    env = Env(k, "k")
    _check_same(env, v=v, beta=beta, A=A, G=G, cu_seqlens=cu_seqlens)
    T, H, K = _tokens(k), int(k.shape[-2]), int(k.shape[-1])
    HV, V = int(v.shape[-2]), int(v.shape[-1])
    N = _num_seqs(op, cu_seqlens, num_seqs, k)
    w, u = out if out is not None else (env.empty((T, HV, K), "float32"), env.empty((T, HV, V), "float32"))
    _run(op, env, T=T, N=N, H=H, HV=HV, K=K, V=V, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
         k=k, v=v, beta=beta, A=A, G=G, w=w, u=u)
    return w, u


def chunk_fwd_h(k, w, u, G, initial_state=None, output_final_state=False, state_v_first=False, cu_seqlens=None,
                cu_seqlens_cpu=None, num_seqs=None, state_indices=None, state_indices_cpu=None,
                inplace_final_state=False, out=None):
    """Stage 5 (sequential over chunks): h (state at each chunk's start, K-major), ``v_new = u - w h``
    and the final states. States as in chunk_gated_delta_rule (dense ``[N, ...]`` or a pool with
    ``state_indices``; ``inplace_final_state`` writes them back). out: optional (h, v_new).
    Returns (h, v_new, final_state or None)."""
    op = "chunk_fwd_h"
    env = Env(k, "k")
    _check_same(env, w=w, u=u, G=G, initial_state=initial_state, cu_seqlens=cu_seqlens, state_indices=state_indices)
    T, H, K = _tokens(k), int(k.shape[-2]), int(k.shape[-1])
    if u.ndim != 3:
        raise ValueError(f"gdn.{op}: u has shape {tuple(u.shape)}; expected [T, HV, V]")
    HV, V = int(u.shape[1]), int(u.shape[2])
    N = _num_seqs(op, cu_seqlens, num_seqs, k)
    if out is not None:
        h, v_new = out
    else:
        h = env.empty((max_num_chunks(T, N), HV, K, V), "float32")
        v_new = env.empty((T, HV, V), "float32")
    bufs = dict(k=k, w=w, u=u, G=G, h=h, v_new=v_new)
    final = None
    if initial_state is not None and state_indices is None and not env.is_f32(initial_state) \
            and not inplace_final_state:
        initial_state = env.contiguous(env.to_f32(initial_state))
    if inplace_final_state:
        if initial_state is None:
            raise ValueError(f"gdn.{op}: inplace_final_state=True needs initial_state (the state pool)")
        bufs.update(final_state=initial_state, final_state_indices=state_indices,
                    final_state_indices_cpu=state_indices_cpu, final_is_initial=True)
        final = initial_state
    else:
        bufs.update(initial_state=initial_state, initial_state_indices=state_indices,
                    initial_state_indices_cpu=state_indices_cpu)
        if output_final_state:
            final = env.empty((N, HV, V, K) if state_v_first else (N, HV, K, V), "float32")
            bufs.update(final_state=final)
    _run(op, env, T=T, N=N, H=H, HV=HV, K=K, V=V, state_v_first=state_v_first, cu_seqlens=cu_seqlens,
         cu_seqlens_cpu=cu_seqlens_cpu, **bufs)
    return h, v_new, final


def chunk_fwd_o(q, k, v_new, h, G, scale=None, cu_seqlens=None, cu_seqlens_cpu=None, num_seqs=None, out=None):
    """Stage 6: ``o_i = scale (exp(G_i) q_i^T h_c + sum_{j <= i} (q_i . k_j) exp(G_i - G_j) v_new_j)``.
    o has q's leading shape, ``[.., HV, V]``, and q's dtype."""
    op = "chunk_fwd_o"
    env = Env(q, "q")
    _check_same(env, k=k, v_new=v_new, h=h, G=G, cu_seqlens=cu_seqlens, out=out)
    T, H, K = _tokens(q), int(q.shape[-2]), int(q.shape[-1])
    if v_new.ndim != 3:
        raise ValueError(f"gdn.{op}: v_new has shape {tuple(v_new.shape)}; expected [T, HV, V]")
    HV, V = int(v_new.shape[1]), int(v_new.shape[2])
    N = _num_seqs(op, cu_seqlens, num_seqs, q)
    o = out if out is not None else env.empty(tuple(q.shape[:-2]) + (HV, V), like=q)
    _run(op, env, T=T, N=N, H=H, HV=HV, K=K, V=V, scale=0.0 if scale is None else float(scale),
         cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu, q=q, k=k, v_new=v_new, h=h, G=G, o=o)
    return o
