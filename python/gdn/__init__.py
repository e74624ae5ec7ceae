"""gdn: Gated DeltaNet kernels (the chunked gated delta rule of Qwen3-Next) on CPU and CUDA.

    import gdn
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                       use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens)

Arrays may be torch tensors, numpy arrays (CPU backend) or cupy arrays; they are passed zero-copy
through DLPack. With torch, the functions call the custom op ``torch.ops.gdn.forward_`` (traceable by
torch.compile, capturable in CUDA graphs, run on the current stream).
"""

from . import _C
from ._api import (
    chunk_gated_delta_rule,
    chunk_gdn,
    decode_,
    fused_recurrent_gated_delta_rule,
    fused_recurrent_gdn,
    prefill_,
)
from ._env import _torch, get_num_threads, set_num_threads
from . import stages

if _torch is not None and hasattr(_torch, "library") and hasattr(_torch.library, "custom_op"):
    from . import _torch_ops  # noqa: F401  (registers torch.ops.gdn.*)

__version__ = "0.1.0"
CHUNK_SIZE = _C.chunk_size
built_with_cuda = _C.built_with_cuda


def cuda_available() -> bool:
    """True when gdn was built with its CUDA backend and a CUDA device is visible."""
    return bool(_C.cuda_available())


__all__ = [
    "chunk_gated_delta_rule",
    "chunk_gdn",
    "fused_recurrent_gated_delta_rule",
    "fused_recurrent_gdn",
    "prefill_",
    "decode_",
    "stages",
    "cuda_available",
    "built_with_cuda",
    "set_num_threads",
    "get_num_threads",
    "CHUNK_SIZE",
]
