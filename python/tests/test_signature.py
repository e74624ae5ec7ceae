"""The forward's argument list is written once (gdn/_signature.py): the binding's table agrees with
it, and the torch op's schema, the fake and the calls come from it."""

from __future__ import annotations

import pytest

from gdn import _C
from gdn import _signature as sig


def test_binding_agrees_with_the_table():
    sig.check_binding(_C.forward_args)
    assert [n for n, _ in _C.forward_args] == [a.name for a in sig.FORWARD_ARGS]


def test_a_disagreeing_binding_is_refused():
    args = list(_C.forward_args)
    swapped = [args[1], args[0]] + args[2:]
    with pytest.raises(ImportError, match="disagree"):
        sig.check_binding(swapped)
    with pytest.raises(ImportError, match="disagree"):
        sig.check_binding(args[:-1])
    flipped = [(n, not none) if n == "A_log" else (n, none) for n, none in args]
    with pytest.raises(ImportError, match="disagree"):
        sig.check_binding(flipped)


def test_stage_table_names_the_stage_parameters():
    names = [n for n, _ in _C.stage_args]
    assert names[:2] == ["which", "T"] and names[-3:] == ["workspace", "stream", "num_threads"]
    assert len(names) == len(set(names))


def test_schema_from_the_table():
    schema = sig.op_schema()
    assert schema.startswith("(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor(a!) o, Tensor? A_log")
    assert "Tensor(b!)? final_state" in schema and schema.endswith("bool recurrent) -> ()")
    assert "workspace" not in schema and "stream" not in schema
    assert "Tensor(c!)? token_states" in schema and "Tensor(d!)? checkpoints" in schema
    assert sig.MUTATED == ("o", "final_state", "token_states", "checkpoints")


def test_pack_op_args_needs_every_name():
    values = {n: i for i, n in enumerate(sig.OP_ARG_NAMES)}
    assert sig.pack_op_args(**values) == tuple(range(len(sig.OP_ARG_NAMES)))
    with pytest.raises(TypeError, match="missing"):
        sig.pack_op_args(**{n: 0 for n in sig.OP_ARG_NAMES[1:]})
    with pytest.raises(TypeError, match="unexpected"):
        sig.pack_op_args(**values, bogus=1)


def test_torch_op_schema_is_the_tables():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.library, "custom_op"):
        pytest.skip("torch without torch.library.custom_op")
    schema = torch.ops.gdn.forward_.default._schema
    assert tuple(a.name for a in schema.arguments) == sig.OP_ARG_NAMES
    written = tuple(a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write)
    assert written == sig.MUTATED
    assert len(schema.returns) == 0
