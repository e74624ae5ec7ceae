"""gdn.compat, both engines: 16-bit pools (updated in place, fp32 inside), the packed decode
(q / k / v views of mixed_qkv, o into out), and item 6's Python side for gdn's own ops: q, k, v
as strided views of one packed projection and o into a caller's strided buffer, with no copy
(checked with the profiler); and each adapter's signature against the engine's, written out from
the engines' code."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from compat_models import (  # noqa: E402
    BF16_TOL, CHUNK_F32_TOL, DEVICES, F32_TOL, HV, K, NAN, V, _flat, _gate_model, _gen, _no_copies, _packed,
    _packed_views, _step, check_pool, chunk_model, gate_params, inputs, on, pool_of, ragged, rel,
    sglang_decode_model, vllm_recurrent_model,
)
import gdn  # noqa: E402
from gdn.compat import sglang, vllm  # noqa: E402

# ---------------------------------------------------------------------------------------------
# 16-bit pools: updated in place where gdn has them; a clear NotImplementedError where it has not.

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("device", DEVICES)
def test_low_precision_pools(rng, device, dtype):
    """A bf16 / fp16 pool, updated in place (fp32 inside, one rounding on write) by the vLLM decode,
    the SGLang decode and the SGLang extend (both paths)."""
    gen = _gen(rng)
    N = 3
    q, k, v, a, b, g, beta = inputs(gen, (1, N))
    A_log, dt_bias = gate_params(gen)
    cu = torch.arange(N + 1)
    pool = pool_of(gen, 5, dtype)
    idx = torch.tensor([3, 0, 1])
    P = on(device, pool.clone())
    A_log_d, a_d, b_d, dt_d, q_d, k_d, v_d, g_d, beta_d, idx_d, cu_d = on(device, A_log, a, b, dt_bias, q, k, v, g,
                                                                          beta, idx, cu)
    calls = {
        "vllm": lambda: vllm.fused_sigmoid_gating_delta_rule_update(A_log_d, a_d, b_d, dt_d, q_d, k_d, v_d,
                                                                    initial_state=P, cu_seqlens=cu_d,
                                                                    ssm_state_indices=idx_d)[0],
        "sglang": lambda: sglang.fused_sigmoid_gating_delta_rule_update(A_log_d, a_d, dt_d, 1.0, 20.0, q_d, k_d, v_d,
                                                                        b_d, P, idx_d, cu_seqlens=cu_d),
        "sglang_chunk": lambda: sglang.chunk_gated_delta_rule(q_d, k_d, v_d, g_d, beta_d, None, P, idx_d, cu_d)[0],
        "sglang_chunk_fast": lambda: sglang.chunk_gated_delta_rule(q_d, k_d, v_d, g_d, beta_d, None, P, idx_d, cu_d,
                                                                   output_h=False)[0],
    }
    gm, bm = _gate_model(a, b, A_log, dt_bias)
    for name, call in calls.items():
        P.copy_(on(device, pool))
        chunk = name.startswith("sglang_chunk")
        gg, bb = (g, beta) if chunk else (gm, bm)
        ro, rp = vllm_recurrent_model(q, k, v, gg, bb, K ** -0.5, pool, True, cu, idx, None, False)
        if name != "vllm":  # slot 0 is a real slot in SGLang (the vLLM model skips it): redo sequence 1
            S, o1 = _step(pool[0].double(), _flat(q)[1], _flat(k)[1], _flat(v)[1], gg[0, 1], bb[0, 1], K ** -0.5,
                          False)
            ro[0, 1], rp[0] = o1, S
        live = [0, 2] if name == "vllm" else [0, 1, 2]
        o = call().cpu()
        assert rel(o[0, live], ro[0, live]) <= CHUNK_F32_TOL[device], name
        check_pool(P.cpu(), pool, rp, [int(idx[n]) for n in live], 5e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("device", DEVICES)
def test_low_precision_pools_verify(rng, device, dtype):
    """Speculative verify on a 16-bit pool: vLLM's per-token slots and SGLang's intermediate buffer
    (the pool's dtype), one rounding per stored state; a buffer of another dtype than the pool is
    refused by gdn with a TypeError naming both."""
    gen = _gen(rng)
    lens = [3, 0, 2]
    cu = ragged(gen, lens)
    q, k, v, a, b, _, _ = inputs(gen, (1, int(cu[-1])))
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, 9, dtype)
    args = on(device, A_log, a, b, dt_bias, q, k, v)
    A_log_d, a_d, b_d, dt_d, q_d, k_d, v_d = args
    idx, nat = torch.tensor([[1, 2, 3], [0, 0, 0], [4, 5, 6]]), torch.tensor([2, 1, 1])
    sidx, bidx = torch.tensor([7, -1, 8]), torch.tensor([0, -1, 2])
    buf = torch.full((4, 3, HV, V, K), NAN, dtype=dtype)
    P, P2, Bf = on(device, pool.clone(), pool.clone(), buf)
    gm, bm = _gate_model(a, b, A_log, dt_bias)
    ro, rp = vllm_recurrent_model(q, k, v, gm, bm, K ** -0.5, pool, True, cu, idx, nat, False)
    o, _ = vllm.fused_sigmoid_gating_delta_rule_update(*args, initial_state=P, cu_seqlens=on(device, cu),
                                                       ssm_state_indices=on(device, idx),
                                                       num_accepted_tokens=on(device, nat))
    live = torch.isfinite(ro)
    assert rel(o.cpu()[live], ro[live]) <= F32_TOL
    check_pool(P.cpu(), pool, rp, [1, 2, 3, 4, 5], 5e-3)
    ro2, _, rb2 = sglang_decode_model(q, k, v, gm, bm, K ** -0.5, pool, sidx, cu, False, True, buf, bidx)
    o2 = sglang.fused_sigmoid_gating_delta_rule_update(A_log_d, a_d, dt_d, 1.0, 20.0, q_d, k_d, v_d, b_d, P2,
                                                       on(device, sidx), cu_seqlens=on(device, cu),
                                                       disable_state_update=True, intermediate_states_buffer=Bf,
                                                       intermediate_state_indices=on(device, bidx))
    assert rel(o2.cpu(), ro2) <= F32_TOL and torch.equal(P2.cpu(), pool)
    got, ref = Bf.cpu().reshape(12, -1), rb2.reshape(12, -1)
    stored = torch.isfinite(ref).all(-1)
    assert stored.any() and rel(got[stored], ref[stored]) <= 5e-3 and torch.isnan(got[~stored]).all()
    with pytest.raises(TypeError, match="token_states has dtype float32; expected that of the state pool"):
        sglang.fused_sigmoid_gating_delta_rule_update(A_log_d, a_d, dt_d, 1.0, 20.0, q_d, k_d, v_d, b_d, P2,
                                                      on(device, sidx), cu_seqlens=on(device, cu),
                                                      disable_state_update=True,
                                                      intermediate_states_buffer=Bf.float(),
                                                      intermediate_state_indices=on(device, bidx))


@pytest.mark.parametrize("device", DEVICES)
def test_padded_pool_rows(rng, device):
    """vLLM's pool rows may carry more than the state (a padded stride(0)): the adapters pass the
    view as it is; the padding elements stay bitwise unchanged."""
    gen = _gen(rng)
    slots, pad = 6, 24
    q, k, v, a, b, _, _ = inputs(gen, (4, 1))
    A_log, dt_bias = gate_params(gen)
    wide = torch.randn(slots, HV * V * K + pad, generator=gen)
    W = on(device, wide.clone())
    P = W[:, : HV * V * K].view(slots, HV, V, K)
    assert P.stride(0) == HV * V * K + pad
    idx = torch.tensor([5, 0, 2, 3], dtype=torch.int32)
    pool = wide[:, : HV * V * K].reshape(slots, HV, V, K)
    gm, bm = _gate_model(a, b, A_log, dt_bias)
    ro, rp = vllm_recurrent_model(q, k, v, gm, bm, K ** -0.5, pool, True, None, idx, None, True)
    o, state = vllm.fused_sigmoid_gating_delta_rule_update(*on(device, A_log, a, b, dt_bias, q, k, v), initial_state=P,
                                                           ssm_state_indices=on(device, idx),
                                                           use_qk_l2norm_in_kernel=True)
    assert state is P
    live = torch.isfinite(ro)
    assert rel(o.cpu()[live], ro[live]) <= F32_TOL
    check_pool(P.cpu(), pool, rp, [5, 2, 3])
    assert torch.equal(W.cpu()[:, HV * V * K:], wide[:, HV * V * K:])


# ---------------------------------------------------------------------------------------------
# Item 6 (Python side): q, k, v as views of one packed projection, o into a strided buffer.

@pytest.mark.parametrize("op", ["prefill_", "decode_", "chunk_gated_delta_rule"])
@pytest.mark.parametrize("device", DEVICES)
def test_packed_projection_views(rng, device, op):
    gen = _gen(rng)
    lens = [3, 0, 70, 2]
    cu = ragged(gen, lens)
    T, N = int(cu[-1]), len(lens)
    mixed, q, k, v = _packed(gen, T)
    kn = torch.nn.functional.normalize(k.float(), dim=-1)  # the model's keys: gdn l2-norms them in the kernel
    g = torch.nn.functional.logsigmoid(torch.randn(1, T, HV, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, HV, generator=gen))
    pool = pool_of(gen, 6)
    idx = torch.tensor([5, 1, 0, 3], dtype=torch.int32)
    ro, rf, _ = chunk_model(q, kn, v, g, beta, K ** -0.5, pool, idx, cu, True)
    _, qd, kd, vd = _packed_views(on(device, mixed), T)
    assert not qd.is_contiguous() and not vd.is_contiguous()
    P, gd, bd, idxd, cud = on(device, pool.clone(), g, beta, idx, cu)
    obuf = on(device, torch.full((T, HV, V + 8), NAN))  # o lands in [..., :V]; the padding must stay NaN
    out = obuf[:, :, :V].unsqueeze(0)
    kw = dict(use_qk_l2norm_in_kernel=True, state_v_first=True, cu_seqlens=cud, out=out)
    if op == "prefill_":
        o = _no_copies(lambda: gdn.prefill_(qd, kd, vd, gd, bd, P, idxd, **kw))
    elif op == "decode_":
        o = _no_copies(lambda: gdn.decode_(qd, kd, vd, gd, bd, P, idxd, **kw))
    else:
        o, _ = _no_copies(lambda: gdn.chunk_gated_delta_rule(qd, kd, vd, gd, bd, initial_state=P, state_indices=idxd,
                                                             inplace_final_state=True, **kw))
    assert o is out and torch.isnan(obuf[:, :, V:]).all()
    tol = F32_TOL if op == "decode_" else CHUNK_F32_TOL[device]
    assert rel(o.cpu(), ro) <= tol
    ref = pool.double().clone()
    for n in range(N):
        ref[int(idx[n])] = rf[n]
    check_pool(P.cpu(), pool, ref, [5, 1, 0, 3], tol)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("device", DEVICES)
def test_packed_decode(rng, device, engine, dtype):
    """fused_recurrent_gated_delta_rule_packed_decode: q / k / v read from mixed_qkv (no copy),
    o into out, the pool in place; padding (vLLM: slot <= 0, SGLang: slot < 0) gets o = 0 and
    touches no state; beta = sigmoid(b) rounded to b's dtype."""
    gen = _gen(rng)
    B, slots = 6, 9
    mixed, q, k, v = _packed(gen, B, dtype)
    a = torch.randn(B, HV, generator=gen).to(dtype)
    b = torch.randn(B, HV, generator=gen).to(dtype)
    A_log, dt_bias = gate_params(gen)
    pool = pool_of(gen, slots)
    if engine == "vllm":
        mod, idx, live = vllm, torch.tensor([3, 0, 8, 1, 0, 6], dtype=torch.int32), [0, 2, 3, 5]
    else:
        mod, idx, live = sglang, torch.tensor([3, -1, 8, 0, -1, 6], dtype=torch.int32), [0, 2, 3, 5]
    g, beta = _gate_model(a, b, A_log, dt_bias)
    beta = beta.to(dtype).double()
    qb, kb, vb = (x.reshape(1, B, *x.shape[2:]) for x in (q, k, v))
    ro, rp = vllm_recurrent_model(qb, kb, vb, g.reshape(1, B, HV), beta.reshape(1, B, HV), 0.2, pool, True,
                                  torch.arange(B + 1), torch.where(idx < 0, 0, idx) if engine == "sglang" else idx,
                                  None, True)
    if engine == "sglang":  # slot 0 is a real slot in SGLang: the model above skips it, redo that one
        S, o3 = _step(pool[0].double(), _flat(q)[3], _flat(k)[3], _flat(v)[3], g[3], beta[3], 0.2, True)
        ro[0, 3], rp[0] = o3, S
    P, out = on(device, pool.clone(), torch.full((B, 1, HV, V), NAN, dtype=dtype))
    args = on(device, mixed, a, b, A_log, dt_bias)

    def call():
        return mod.fused_recurrent_gated_delta_rule_packed_decode(*args, 0.2, P, out, on(device, idx),
                                                                  use_qk_l2norm_in_kernel=True)

    o, state = _no_copies(call) if dtype == torch.float32 else call()
    assert o is out and state is P
    tol = F32_TOL if dtype == torch.float32 else BF16_TOL
    o = o.cpu()
    assert rel(o[live, 0], ro[0, live]) <= tol
    pad = [n for n in range(B) if n not in live]
    assert torch.equal(o[pad], torch.zeros_like(o[pad]))
    check_pool(P.cpu(), pool, rp, [int(idx[n]) for n in live], tol)


# ---------------------------------------------------------------------------------------------
# The signatures: the engines' parameter names, order and defaults (as in their code), written out
# here; gdn's own extras may only follow as keyword-only parameters.

_E = inspect.Parameter.empty
_PACKED = [("mixed_qkv", _E), ("a", _E), ("b", _E), ("A_log", _E), ("dt_bias", _E), ("scale", _E),
           ("initial_state", _E), ("out", _E), ("ssm_state_indices", _E), ("use_qk_l2norm_in_kernel", False)]
ENGINE_SIGNATURES = {
    "vllm.chunk_gated_delta_rule": [
        ("q", _E), ("k", _E), ("v", _E), ("g", _E), ("beta", _E), ("scale", None), ("initial_state", None),
        ("output_final_state", False), ("cu_seqlens", None), ("chunk_indices", None), ("chunk_offsets", None),
        ("use_qk_l2norm_in_kernel", False), ("core_attn_out", None)],
    "vllm.fused_recurrent_gated_delta_rule": [
        ("q", _E), ("k", _E), ("v", _E), ("g", _E), ("beta", None), ("scale", None), ("initial_state", None),
        ("inplace_final_state", True), ("cu_seqlens", None), ("ssm_state_indices", None),
        ("num_accepted_tokens", None), ("use_qk_l2norm_in_kernel", False)],
    "vllm.fused_sigmoid_gating_delta_rule_update": [
        ("A_log", _E), ("a", _E), ("b", _E), ("dt_bias", _E), ("q", _E), ("k", _E), ("v", _E), ("beta", 1.0),
        ("threshold", 20.0), ("scale", None), ("initial_state", None), ("inplace_final_state", True),
        ("cu_seqlens", None), ("ssm_state_indices", None), ("num_accepted_tokens", None),
        ("use_qk_l2norm_in_kernel", False), ("is_kda", False)],
    "vllm.fused_recurrent_gated_delta_rule_packed_decode": _PACKED,
    "sglang.chunk_gated_delta_rule": [
        ("q", _E), ("k", _E), ("v", _E), ("g", _E), ("beta", _E), ("scale", None), ("initial_state", None),
        ("initial_state_indices", None), ("cu_seqlens", None), ("head_first", False),
        ("use_qk_l2norm_in_kernel", False), ("inplace_update", True)],
    "sglang.fused_sigmoid_gating_delta_rule_update": [
        ("A_log", _E), ("a", _E), ("dt_bias", _E), ("softplus_beta", _E), ("softplus_threshold", _E), ("q", _E),
        ("k", _E), ("v", _E), ("b", _E), ("initial_state_source", _E), ("initial_state_indices", _E), ("scale", None),
        ("use_qk_l2norm_in_kernel", False), ("cu_seqlens", None), ("is_kda", False), ("disable_state_update", False),
        ("intermediate_states_buffer", None), ("intermediate_state_indices", None), ("cache_steps", None),
        ("retrieve_parent_token", None)],
    "sglang.fused_recurrent_gated_delta_rule_packed_decode": _PACKED,
}


@pytest.mark.parametrize("name", sorted(ENGINE_SIGNATURES))
def test_engine_signatures(name):
    module, fn = name.split(".")
    params = list(inspect.signature(getattr({"vllm": vllm, "sglang": sglang}[module], fn)).parameters.values())
    want = ENGINE_SIGNATURES[name]
    got = [(p.name, p.default) for p in params[: len(want)]]
    assert got == want
    assert all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params[: len(want)])
    assert all(p.kind == p.KEYWORD_ONLY for p in params[len(want):]), params[len(want):]
    assert fn in {"vllm": vllm, "sglang": sglang}[module].__all__
