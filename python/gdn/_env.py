"""Array-framework plumbing: which framework an array belongs to, how to allocate on its device,
which stream to run on. torch, numpy and cupy are supported; none of them is required at import
time except numpy."""

from __future__ import annotations

import contextlib

import numpy as np

try:  # torch is optional: the CPU tests run with numpy alone
    import torch as _torch
except ImportError:  # pragma: no cover - exercised in CI without torch
    _torch = None

_num_threads = 0


def set_num_threads(n: int) -> None:
    """Worker threads of the CPU backend for numpy calls (0 = all hardware threads). torch CPU
    tensors use torch.get_num_threads()."""
    global _num_threads
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"set_num_threads: n is {n!r}; expected an int >= 0")
    _num_threads = n


def get_num_threads() -> int:
    return _num_threads


def is_torch(x) -> bool:
    return _torch is not None and isinstance(x, _torch.Tensor)


def _is_cupy(x) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def framework(x, name: str = "q") -> str:
    if is_torch(x):
        return "torch"
    if isinstance(x, np.ndarray):
        return "numpy"
    if _is_cupy(x):
        return "cupy"
    raise TypeError(f"{name} is a {type(x).__module__}.{type(x).__name__}; expected a torch.Tensor, "
                    "numpy.ndarray or cupy.ndarray")


def same_framework(kind: str, name: str, x) -> None:
    if x is None:
        return
    k = framework(x, name)
    if k != kind:
        raise TypeError(f"{name} is a {k} array; expected a {kind} array like q")


class Env:
    """Allocation, stream and device scope for the arrays of one call (those of `x`'s framework)."""

    def __init__(self, x, name: str = "q"):
        self.kind = framework(x, name)
        self.x = x
        if self.kind == "torch":
            self.device = x.device
            self.cuda = x.device.type == "cuda"
        elif self.kind == "numpy":
            self.device = None
            self.cuda = False
        else:
            import cupy  # noqa: F401

            self.device = x.device
            self.cuda = True

    # -- allocation ------------------------------------------------------------------------------
    def empty(self, shape, dtype=None, like=None):
        """dtype: None (that of `like`), 'float32', 'int32' or a framework dtype."""
        if self.kind == "torch":
            t = _torch
            if dtype is None:
                dtype = like.dtype
            elif isinstance(dtype, str):
                dtype = getattr(t, dtype)
            return t.empty(tuple(shape), dtype=dtype, device=self.device)
        xp = self.xp
        if dtype is None:
            dtype = like.dtype
        if self.kind == "cupy":
            with self.x.device:
                return xp.empty(tuple(shape), dtype=dtype)
        return xp.empty(tuple(shape), dtype=dtype)

    def zeros(self, shape, dtype="float32"):
        if self.kind == "torch":
            return _torch.zeros(tuple(shape), dtype=getattr(_torch, dtype), device=self.device)
        if self.kind == "cupy":
            with self.x.device:
                return self.xp.zeros(tuple(shape), dtype=dtype)
        return np.zeros(tuple(shape), dtype=dtype)

    @property
    def xp(self):
        if self.kind == "numpy":
            return np
        if self.kind == "cupy":
            import cupy

            return cupy
        return None

    def workspace(self):
        if self.kind == "torch":
            dev = self.device
            return lambda n: _torch.empty((n,), dtype=_torch.uint8, device=dev)
        if self.kind == "cupy":
            dev = self.x.device
            xp = self.xp

            def alloc(n):
                with dev:
                    return xp.empty((n,), dtype=xp.uint8)

            return alloc
        return lambda n: np.empty((n,), dtype=np.uint8)

    # -- execution -------------------------------------------------------------------------------
    def stream(self) -> int:
        if self.kind == "torch":
            return _torch.cuda.current_stream(self.device).cuda_stream if self.cuda else 0
        if self.kind == "cupy":
            import cupy

            return cupy.cuda.get_current_stream().ptr
        return 0

    def num_threads(self) -> int:
        if self.kind == "torch" and not self.cuda:
            return _torch.get_num_threads()
        return _num_threads

    def scope(self):
        if self.kind == "torch" and self.cuda:
            return _torch.cuda.device(self.device)
        if self.kind == "cupy":
            return self.x.device
        return contextlib.nullcontext()

    def arr(self, x):
        """What the binding receives: torch tensors detached (DLPack refuses tensors that require
        grad), everything else as is."""
        if x is not None and self.kind == "torch":
            return x.detach()
        return x

    def array_map(self):
        """arr where it changes something (torch), else None: binding_call then passes the arrays as
        they are without a call per argument."""
        return self.arr if self.kind == "torch" else None

    # -- small math for the unfused gate paths ---------------------------------------------------
    def to_f32(self, x):
        if self.kind == "torch":
            return x.float()
        return x.astype(self.xp.float32, copy=False)

    def is_float_dtype(self, x) -> bool:
        if self.kind == "torch":
            return x.dtype.is_floating_point
        return x.dtype.kind == "f"  # numpy / cupy: float16, float32, float64 (issubdtype's floating, ~10x faster)

    def is_f32(self, x) -> bool:
        if self.kind == "torch":
            return x.dtype == _torch.float32
        return x.dtype == self.xp.float32

    def dtype_name(self, x) -> str:
        if self.kind == "torch":
            return str(x.dtype).replace("torch.", "")
        return str(x.dtype)

    def gate(self, a, A_log, dt_bias):
        """g = -exp(A_log) * softplus(a + dt_bias) in fp32 (softplus(x) = x for x > 20)."""
        a = self.to_f32(a)
        A_log = self.to_f32(A_log)
        x = a + (self.to_f32(dt_bias) if dt_bias is not None else 0.0)
        if self.kind == "torch":
            return -A_log.exp() * _torch.nn.functional.softplus(x)
        xp = self.xp
        sp = xp.where(x > 20.0, x, xp.log1p(xp.exp(xp.minimum(x, 20.0))))
        return (-xp.exp(A_log) * sp).astype(xp.float32)

    def sigmoid(self, b, scale=1.0):
        b = self.to_f32(b)
        if self.kind == "torch":
            s = b.sigmoid()
        else:
            xp = self.xp
            s = (1.0 / (1.0 + xp.exp(-b))).astype(xp.float32)
        return s * scale if scale != 1.0 else s

    def ones(self, shape):
        if self.kind == "torch":
            return _torch.ones(tuple(shape), dtype=_torch.float32, device=self.device)
        if self.kind == "cupy":
            with self.x.device:
                return self.xp.ones(tuple(shape), dtype="float32")
        return np.ones(tuple(shape), dtype=np.float32)

    def contiguous(self, x):
        if self.kind == "torch":
            return x.contiguous()
        return self.xp.ascontiguousarray(x)

    def to_index_dtype_of(self, x, ref):
        """A host index array converted to ref's dtype (host copies must match the device arrays)."""
        if x is None or x.dtype == ref.dtype:
            return x
        if is_torch(x):
            return x.to(ref.dtype)
        if isinstance(x, np.ndarray):
            target = ref.dtype if isinstance(ref, np.ndarray) else _np_dtype_of(ref)
            return x.astype(target)
        return x


def _np_dtype_of(ref):
    if is_torch(ref):
        return {"torch.int32": np.int32, "torch.int64": np.int64}.get(str(ref.dtype), np.int64)
    return np.dtype(str(ref.dtype))
