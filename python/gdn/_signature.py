"""The forward's argument list, written once: each argument's name and kind, in the order of the
binding's parameters (python/src/ops.h). From this table come the torch op schema of
``gdn::forward_`` and its mutated arguments (_torch_ops.py), the fake implementation, and the
positional calls into the binding (_forward.py, _torch_ops.py). The binding exports its own table of
names and None-ness (``_C.forward_args``), from which it builds its nb::args; ``check_binding``
asserts at import that the two agree, so that a parameter added on one side only fails at once."""

from __future__ import annotations

from typing import NamedTuple

# Kinds. "Tensor" kinds are arrays (torch tensors in the op); "host" ones are host copies of device
# index arrays; "exec" kinds are the binding's execution arguments, which the torch op does not take
# (it supplies them itself at run time: workspace allocator, stream, threads).
TENSOR = "tensor"  # read
TENSOR_MUT = "tensor_mut"  # written in place
OPT_TENSOR = "opt_tensor"  # read, may be None
OPT_TENSOR_MUT = "opt_tensor_mut"  # written in place, may be None
OPT_HOST_TENSOR = "opt_host_tensor"  # a host copy of a device index array, may be None
FLOAT = "float"
INT = "int"
BOOL = "bool"
EXEC_WORKSPACE = "exec_workspace"  # an array or an allocator nbytes -> array, or None
EXEC_INT = "exec_int"  # the stream handle, the number of CPU threads

_ARRAY_KINDS = (TENSOR, TENSOR_MUT, OPT_TENSOR, OPT_TENSOR_MUT, OPT_HOST_TENSOR)
_NONE_KINDS = (OPT_TENSOR, OPT_TENSOR_MUT, OPT_HOST_TENSOR, EXEC_WORKSPACE)
_EXEC_KINDS = (EXEC_WORKSPACE, EXEC_INT)


class Arg(NamedTuple):
    name: str
    kind: str


FORWARD_ARGS = (
    Arg("q", TENSOR),  # [B, T, H, K] or [T, H, K]
    Arg("k", TENSOR),  # like q
    Arg("v", TENSOR),  # [.., HV, V]
    Arg("g", TENSOR),  # [.., HV]
    Arg("beta", TENSOR),  # [.., HV]
    Arg("o", TENSOR_MUT),  # like v
    Arg("A_log", OPT_TENSOR),  # [HV] fp32 (fused gate)
    Arg("dt_bias", OPT_TENSOR),  # [HV] fp32 (fused gate)
    Arg("initial_state", OPT_TENSOR),  # [N or slots, HV, K, V] fp32 (or [.., V, K])
    Arg("initial_state_indices", OPT_TENSOR),  # [N] int32/int64 rows of a pool
    Arg("initial_state_indices_cpu", OPT_HOST_TENSOR),
    Arg("final_state", OPT_TENSOR_MUT),  # like initial_state
    Arg("final_state_indices", OPT_TENSOR),
    Arg("final_state_indices_cpu", OPT_HOST_TENSOR),
    Arg("final_is_initial", BOOL),  # final_state is also the initial state, updated in place
    Arg("initial_state_present", OPT_TENSOR),  # [N] bool/uint8: False = start from zeros (still written)
    Arg("null_slot", INT),  # a pool row that means "no state" (padding), or -1
    Arg("token_states", OPT_TENSOR_MUT),  # decode: per-token states, [slots, HV, K, V] or [S, T_max, HV, K, V] fp32
    Arg("token_state_indices", OPT_TENSOR),  # [N, T_max] rows per token, or [N] groups of a [S, T_max, ..] buffer
    Arg("token_state_indices_cpu", OPT_HOST_TENSOR),
    Arg("num_accepted_tokens", OPT_TENSOR),  # [N]: start from the token row num_accepted_tokens - 1
    Arg("num_accepted_tokens_cpu", OPT_HOST_TENSOR),
    Arg("retrieve_parent_token", OPT_TENSOR),  # [N, T_max]: EAGLE trees, each token's parent (-1: the previous one)
    Arg("retrieve_parent_token_cpu", OPT_HOST_TENSOR),
    Arg("checkpoints", OPT_TENSOR_MUT),  # prefill: states at chunk boundaries, [slots, HV, K, V] or [N, M, HV, K, V]
    Arg("checkpoint_indices", OPT_TENSOR),  # [N, M]: the row of boundary j (after (j + 1) * every chunks)
    Arg("checkpoint_indices_cpu", OPT_HOST_TENSOR),
    Arg("checkpoint_every_chunks", INT),  # a boundary every 64 * this many tokens (>= 1 with checkpoints)
    Arg("cu_seqlens", OPT_TENSOR),  # [N + 1]
    Arg("cu_seqlens_cpu", OPT_HOST_TENSOR),
    Arg("scale", FLOAT),
    Arg("use_qk_l2norm", BOOL),
    Arg("state_v_first", BOOL),
    Arg("fused_gate", BOOL),
    Arg("recurrent", BOOL),  # the recurrence (decode) instead of the chunked form
    Arg("workspace", EXEC_WORKSPACE),
    Arg("stream", EXEC_INT),
    Arg("num_threads", EXEC_INT),
)

# The arguments of the torch op (the binding's without the execution ones), their names in order.
OP_ARGS = tuple(a for a in FORWARD_ARGS if a.kind not in _EXEC_KINDS)
OP_ARG_NAMES = tuple(a.name for a in OP_ARGS)
EXEC_NAMES = tuple(a.name for a in FORWARD_ARGS if a.kind in _EXEC_KINDS)
MUTATED = tuple(a.name for a in FORWARD_ARGS if a.kind in (TENSOR_MUT, OPT_TENSOR_MUT))
assert FORWARD_ARGS[len(OP_ARGS):] == tuple(a for a in FORWARD_ARGS if a.kind in _EXEC_KINDS), \
    "the execution arguments close the table (binding_call appends them)"


def op_schema(args=OP_ARGS) -> str:
    """The torch.library schema of an op taking `args` and returning nothing, e.g.
    ``(Tensor q, Tensor(a!) o, Tensor? A_log, Tensor(b!)? final_state, float scale, bool recurrent) -> ()``.
    Each mutated tensor gets its own alias set."""
    parts = []
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    for a in args:
        if a.kind == TENSOR:
            t = "Tensor"
        elif a.kind == TENSOR_MUT:
            t = f"Tensor({next(alias)}!)"
        elif a.kind in (OPT_TENSOR, OPT_HOST_TENSOR):
            t = "Tensor?"
        elif a.kind == OPT_TENSOR_MUT:
            t = f"Tensor({next(alias)}!)?"
        elif a.kind == FLOAT:
            t = "float"
        elif a.kind == INT:
            t = "int"
        elif a.kind == BOOL:
            t = "bool"
        else:
            raise ValueError(f"argument {a.name} of kind {a.kind} has no place in an op schema")
        parts.append(f"{t} {a.name}")
    return "(" + ", ".join(parts) + ") -> ()"


_OP_NAME_SET = frozenset(OP_ARG_NAMES)
_EXEC_NAME_SET = frozenset(EXEC_NAMES)
# The positions of the array arguments among the op's (those `array` maps in binding_call).
_ARRAY_POSITIONS = tuple(i for i, a in enumerate(OP_ARGS) if a.kind in _ARRAY_KINDS)


def pack_op_args(**values) -> tuple:
    """The op's arguments by name -> the positional tuple in the table's order (every one must be
    given, no other)."""
    if values.keys() != _OP_NAME_SET:  # (one set comparison: this runs on every call)
        missing = [n for n in OP_ARG_NAMES if n not in values]
        extra = sorted(set(values) - _OP_NAME_SET)
        raise TypeError(f"gdn forward arguments: missing {missing}, unexpected {extra}")
    # (a comprehension, not operator.itemgetter: torch.compile's Dynamo traces this, and it cannot
    # trace an itemgetter's call)
    return tuple([values[n] for n in OP_ARG_NAMES])


def binding_call(forward, op_args, array, **exec_args):
    """Calls the binding `forward` (gdn._C.forward) positionally, in the table's order, with the op's
    arguments (a tuple in OP_ARG_NAMES order) and the execution ones by name (workspace, stream,
    num_threads); `array` maps each array argument to what the binding receives (e.g. a detached
    tensor), or is None (the arrays as they are)."""
    if exec_args.keys() != _EXEC_NAME_SET:
        raise TypeError(f"gdn forward: execution arguments {sorted(exec_args)}; expected {sorted(EXEC_NAMES)}")
    args = list(op_args)
    if array is not None:
        for i in _ARRAY_POSITIONS:
            x = args[i]
            if x is not None:
                args[i] = array(x)
    args.extend(exec_args[n] for n in EXEC_NAMES)  # (the table ends with them)
    return forward(*args)


def check_binding(binding_args, table=FORWARD_ARGS, what="forward") -> None:
    """The binding's table, ((name, accepts_none), ...), must be this table's names and None-ness."""
    expect = tuple((a.name, a.kind in _NONE_KINDS) for a in table)
    got = tuple((str(n), bool(none)) for n, none in binding_args)
    if got != expect:
        diff = [(i, e, g) for i, (e, g) in enumerate(zip(expect, got)) if e != g]
        raise ImportError(f"gdn: the binding's {what} arguments disagree with gdn/_signature.py "
                          f"(a stale build?): {len(got)} vs {len(expect)} arguments, first differences "
                          f"(position, expected, binding): {diff[:3]}")
