"""PyTorch custom ops (torch.library): gdn::forward_ mutates its preallocated outputs (o and the
final state, which may be a state pool updated in place), has a fake (meta) implementation so that
torch.compile traces it without graph breaks, runs on the current CUDA stream, allocates its
workspace from PyTorch's caching allocator, and never synchronizes with the host (CUDA graphs can
capture it; pass cu_seqlens_cpu / state_indices_cpu for host-side validation of device indices).

The op's schema, its mutated arguments, the implementation's and the fake's argument lists and the
call into the binding all come from the table in _signature.py."""

from __future__ import annotations

import torch

from . import _C
from . import _signature as sig

_OP_NAME = "gdn::forward_"


def _detach(t):
    return t.detach()  # DLPack refuses tensors that require grad


def _forward_impl(*args):
    """Chunked (recurrent=False) or recurrent gated delta rule into o and final_state, the arguments
    in _signature.OP_ARG_NAMES order. With final_is_initial, final_state (rows
    final_state_indices) is also the initial state and is updated in place; initial_state must then
    be None."""
    dev = args[0].device  # q
    if dev.type == "cuda":
        def ws(n):
            return torch.empty((n,), dtype=torch.uint8, device=dev)
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            sig.binding_call(_C.forward, args, _detach, workspace=ws, stream=stream, num_threads=0)
    else:
        def ws(n):
            return torch.empty((n,), dtype=torch.uint8)
        sig.binding_call(_C.forward, args, _detach, workspace=ws, stream=0, num_threads=torch.get_num_threads())


def _forward_fake(*args):
    """The op only writes its mutated arguments (o, final_state) and returns nothing: no new tensor
    to describe."""
    return None


forward_ = torch.library.custom_op(_OP_NAME, _forward_impl, mutates_args=sig.MUTATED, schema=sig.op_schema())
forward_.register_fake(_forward_fake)


def forward_op(*args):
    """torch.ops.gdn.forward_ with the op's arguments in _signature.OP_ARG_NAMES order."""
    torch.ops.gdn.forward_(*args)
