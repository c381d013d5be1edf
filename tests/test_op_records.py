"""Every builtin operation is one record, and each layer that runs operations has a method for each one it
supports: the table below is what each layer refuses (the DTensor exporter has no form for a Shift or a Send,
nor, as the torch.distributed exporter, for the blocks of attention and a MoE routing; the torch.distributed
exporter none for a Send, whose receivers without a sender hold zeros; the JAX exporter none for a MoE
routing)."""

from __future__ import annotations

import pytest

from shardalg.algebra.ops import RECORDS, RULES
from shardalg.algebra.registry import Layer
from shardalg.costs.hierarchy import NODE_FORMULAS
from shardalg.costs.stepcost import UNIT_COSTS
from shardalg.export import jax, torch_dtensor, torch_export
from shardalg.notation.op import ROUTES
from shardalg.notation.syntax import Op
from shardalg.numeric.movement import DENSE, MOVES
from shardalg.numeric.operators import TRANSPOSE_OF

FUNCTIONS = [op for op in Op if op.function]  # elementwise, reductions, softmax and norms
COLLECTIVES = [op for op in Op if op is not Op.EINSUM and not op.function]
BUILTINS = [op for op in Op if not op.function]
MOVING = [Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_REDUCE, Op.ALL_TO_ALL, Op.PERMUTE]

# layer -> the builtin operations it has a method for
COVERAGE: list[tuple[Layer, list[Op]]] = [
    (MOVES, list(Op)),
    (DENSE, [Op.SHIFT, Op.SEND, Op.EINSUM, *FUNCTIONS]),
    (TRANSPOSE_OF, COLLECTIVES),
    (UNIT_COSTS, list(Op)),
    (NODE_FORMULAS, MOVING),
    # the functions too (jnp and the statistics over the axes), but a MoE routing (dispatch, combine): no form yet
    (jax.EMITTERS, [op for op in Op if op not in ROUTES]),
    (  # the functions too, but the blocks of attention (torch.distributed calls, the statistics all-reduced)
        torch_export.EMITTERS,
        [op for op in BUILTINS if op is not Op.SEND]
        + [op for op in FUNCTIONS if op not in (Op.ATTEND, Op.ATTEND_D, *ROUTES)],
    ),
    (  # the functions as torch.distributed's, on the local blocks wrapped with the plan's placements
        torch_dtensor.EMITTERS,
        [op for op in BUILTINS if op not in (Op.SHIFT, Op.SEND)]
        + [op for op in FUNCTIONS if op not in (Op.ATTEND, Op.ATTEND_D, *ROUTES)],
    ),
]


def test_every_operation_is_one_record_in_the_order_defined() -> None:
    assert list(RECORDS) == list(Op)
    assert list(RULES) == COLLECTIVES  # the planner's moves: every one-operand record
    assert all(r.op is op for op, r in RECORDS.items())


@pytest.mark.parametrize("op", COLLECTIVES, ids=lambda op: op.value)
def test_a_collectives_printed_signature_names_it(op: Op) -> None:
    assert RULES[op].signature.startswith(f"{op.value}_")


@pytest.mark.parametrize(("layer", "ops"), COVERAGE, ids=lambda x: x.name if isinstance(x, Layer) else "")
def test_each_layer_has_a_method_for_exactly_the_ops_it_runs(layer: Layer, ops: list[Op]) -> None:
    assert sorted(layer, key=list(Op).index) == ops


def test_only_the_shift_the_send_the_einsum_and_the_functions_change_global_values() -> None:
    assert [op for op, r in RECORDS.items() if not r.identity_on_values] == [
        Op.SHIFT,
        Op.SEND,
        Op.EINSUM,
        *FUNCTIONS,
    ]
    assert [op for op, r in RECORDS.items() if not r.communicates] == [Op.SLICE, Op.EINSUM, *FUNCTIONS]


@pytest.mark.parametrize("op", FUNCTIONS, ids=lambda op: op.value)
def test_a_functions_record_is_not_a_move_and_says_its_rule(op: Op) -> None:
    rec = RECORDS[op]
    assert op not in RULES and not rec.move
    # one or two operands; a block of attention Q, K, V and the state so far (3 or 4); its backward Q, K, V,
    # O and dO (5)
    assert [n for n in range(7) if rec.takes(n)] == ([3, 4] if op is Op.ATTEND else [rec.operands])
    assert rec.operands in ((3,) if op is Op.ATTEND else (5,) if op is Op.ATTEND_D else (1, 2))
    assert rec.transpose.note  # how its backward is derived
