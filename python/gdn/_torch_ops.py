"""PyTorch custom ops (torch.library): gdn::forward_ mutates its preallocated outputs (o and the
final state, which may be a state pool updated in place), has a fake (meta) implementation so that
torch.compile traces it without graph breaks, runs on the current CUDA stream, allocates its
workspace from PyTorch's caching allocator, and never synchronizes with the host (CUDA graphs can
capture it; pass cu_seqlens_cpu / state_indices_cpu for host-side validation of device indices)."""

from __future__ import annotations

from typing import Optional

import torch

from . import _C

Tensor = torch.Tensor


def _run(q, k, v, g, beta, o, A_log, dt_bias, initial_state, initial_state_indices, initial_state_indices_cpu,
         final_state, final_state_indices, final_state_indices_cpu, final_is_initial, cu_seqlens, cu_seqlens_cpu,
         scale, use_qk_l2norm, state_v_first, fused_gate, recurrent):
    dev = q.device
    d = (lambda t: None if t is None else t.detach())
    if dev.type == "cuda":
        def ws(n):
            return torch.empty((n,), dtype=torch.uint8, device=dev)
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            _C.forward(d(q), d(k), d(v), d(g), d(beta), d(o), d(A_log), d(dt_bias), d(initial_state),
                       d(initial_state_indices), d(initial_state_indices_cpu), d(final_state), d(final_state_indices),
                       d(final_state_indices_cpu), final_is_initial, d(cu_seqlens), d(cu_seqlens_cpu), scale,
                       use_qk_l2norm, state_v_first, fused_gate, recurrent, ws, stream, 0)
    else:
        def ws(n):
            return torch.empty((n,), dtype=torch.uint8)
        _C.forward(d(q), d(k), d(v), d(g), d(beta), d(o), d(A_log), d(dt_bias), d(initial_state),
                   d(initial_state_indices), d(initial_state_indices_cpu), d(final_state), d(final_state_indices),
                   d(final_state_indices_cpu), final_is_initial, d(cu_seqlens), d(cu_seqlens_cpu), scale,
                   use_qk_l2norm, state_v_first, fused_gate, recurrent, ws, 0, torch.get_num_threads())


@torch.library.custom_op("gdn::forward_", mutates_args=("o", "final_state"))
def forward_(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, o: Tensor, A_log: Optional[Tensor],
             dt_bias: Optional[Tensor], initial_state: Optional[Tensor], initial_state_indices: Optional[Tensor],
             initial_state_indices_cpu: Optional[Tensor], final_state: Optional[Tensor],
             final_state_indices: Optional[Tensor], final_state_indices_cpu: Optional[Tensor],
             final_is_initial: bool, cu_seqlens: Optional[Tensor], cu_seqlens_cpu: Optional[Tensor], scale: float,
             use_qk_l2norm: bool, state_v_first: bool, fused_gate: bool, recurrent: bool) -> None:
    """Chunked (recurrent=False) or recurrent gated delta rule into o and final_state.
    With final_is_initial, final_state (rows final_state_indices) is also the initial state and is
    updated in place; initial_state must then be None."""
    _run(q, k, v, g, beta, o, A_log, dt_bias, initial_state, initial_state_indices, initial_state_indices_cpu,
         final_state, final_state_indices, final_state_indices_cpu, final_is_initial, cu_seqlens, cu_seqlens_cpu,
         scale, use_qk_l2norm, state_v_first, fused_gate, recurrent)


@forward_.register_fake
def _forward_fake(q, k, v, g, beta, o, A_log, dt_bias, initial_state, initial_state_indices,
                  initial_state_indices_cpu, final_state, final_state_indices, final_state_indices_cpu,
                  final_is_initial, cu_seqlens, cu_seqlens_cpu, scale, use_qk_l2norm, state_v_first, fused_gate,
                  recurrent):
    return None


def forward_op(*args):
    torch.ops.gdn.forward_(*args)
