"""Step-by-step smoke run of gdn on a GPU, printing each step before it runs (with faulthandler),
to locate a crash:  python3 python/tests/diagnose_gpu.py"""
import faulthandler
import sys

faulthandler.enable()
import torch  # noqa: E402

import gdn  # noqa: E402
from gdn import _signature as sig  # noqa: E402

print("gdn", gdn.__file__, gdn._C.__file__, "cuda", gdn.cuda_available(), torch.__version__, flush=True)
dev = "cuda"


def step(name, fn):
    print("step:", name, flush=True)
    fn()
    torch.cuda.synchronize()
    print("  ok", flush=True)


def inputs(dtype, T=128, H=2, HV=4, D=64):
    q = torch.randn(1, T, H, D, device=dev, dtype=dtype)
    k = torch.nn.functional.normalize(torch.randn(1, T, H, D, device=dev), dim=-1).to(dtype)
    v = torch.randn(1, T, HV, D, device=dev, dtype=dtype)
    g = torch.nn.functional.logsigmoid(torch.randn(1, T, HV, device=dev))
    b = torch.rand(1, T, HV, device=dev)
    return q, k, v, g, b


for dtype in (torch.float32, torch.bfloat16):
    q, k, v, g, b = inputs(dtype)
    o = torch.empty_like(v)
    ws = (lambda n: torch.empty(n, dtype=torch.uint8, device=dev))
    s = torch.cuda.current_stream().cuda_stream
    def binding(recurrent, q=q, k=k, v=v, g=g, b=b, o=o, ws=ws, s=s):
        values = {n: None for n in sig.OP_ARG_NAMES}
        values.update(q=q, k=k, v=v, g=g, beta=b, o=o, final_is_initial=False, null_slot=-1, scale=0.125,
                      use_qk_l2norm=False, state_v_first=False, fused_gate=False, recurrent=recurrent)
        sig.binding_call(gdn._C.forward, sig.pack_op_args(**values), lambda x: x.detach(), workspace=ws, stream=s,
                         num_threads=0)

    step(f"_C.forward recurrent {dtype}", lambda: binding(True))
    step(f"_C.forward chunk {dtype}", lambda: binding(False))
    step(f"chunk_gated_delta_rule {dtype}", lambda: gdn.chunk_gated_delta_rule(q, k, v, g, b))
    step(f"chunk l2norm + states {dtype}", lambda: gdn.chunk_gated_delta_rule(
        q, k, v, g, b, initial_state=torch.randn(1, 4, 64, 64, device=dev), output_final_state=True,
        use_qk_l2norm_in_kernel=True))
    cu = torch.tensor([0, 33, 33, 128], device=dev)
    step(f"chunk varlen {dtype}", lambda: gdn.chunk_gated_delta_rule(q, k, v, g, b, cu_seqlens=cu,
                                                                      cu_seqlens_cpu=cu.cpu()))
print("all steps ok")
sys.exit(0)
