"""The elementwise functions, one record each: ``gelu``, ``silu``, ``exp``, ``relu``, ``scale_c`` of one operand,
and ``+``, ``-``, ``⊙`` of two (broadcast over the named dims one of them lacks). Their rule is
:class:`~.function.FunctionRecord`'s: the result has the operands' common layout; partial sums (``{U_X}``)
only where the function is linear (``+``, ``-``, ``scale``) or linear in that operand (``⊙`` with one partial
factor)."""

from __future__ import annotations

import math

from shardalg.notation.syntax import Op

from .function import Dense, np, records

__all__ = [
    "GELU",
    "SILU",
    "EXP",
    "RELU",
    "SCALE",
    "ADD",
    "SUBTRACT",
    "MULTIPLY",
    "RECORDS",
    "gelu",
    "GELU_C",
    "GELU_K",
]

GELU_C = math.sqrt(2.0 / math.pi)  # gelu's tanh form: 0.5·x·(1 + tanh(GELU_C·(x + GELU_K·x³)))
GELU_K = 0.044715


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU in its tanh form, as ``jax.nn.gelu`` computes it by default."""
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + GELU_K * x**3)))


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


_SAME = "same layout: the cotangent's, multiplied by the derivative at the saved operand"

# One row per function: (op, its signature and rule, its dense meaning, its facts). Unary ones are not linear
# unless the row says so; binary ones take two operands that meet in one layout.
_ROWS: tuple[tuple[Op, str, Dense, dict[str, object]], ...] = (
    (
        Op.GELU,
        "gelu: [..]  -> [..]        elementwise, any layout; refuses {U_X} (not linear)",
        lambda xs, axis, c: gelu(xs[0]),
        {"vector_flops": 8, "transpose_note": _SAME},
    ),
    (
        Op.SILU,
        "silu: [..]  -> [..]        elementwise x·sigmoid(x), any layout; refuses {U_X} (not linear)",
        lambda xs, axis, c: _silu(xs[0]),
        {"vector_flops": 4, "transpose_note": _SAME},
    ),
    (
        Op.EXP,
        "exp: [..]  -> [..]         elementwise, any layout; refuses {U_X} (not linear)",
        lambda xs, axis, c: np.exp(xs[0]),
        {"vector_flops": 1, "transpose_note": _SAME},
    ),
    (
        Op.RELU,
        "relu: [..]  -> [..]        elementwise max(x, 0), any layout; refuses {U_X} (not linear)",
        lambda xs, axis, c: np.maximum(xs[0], 0.0),
        {"vector_flops": 1, "transpose_note": _SAME},
    ),
    (
        Op.SCALE,
        "scale_c: [..]{U_A} -> [..]{U_A}   elementwise c·x, linear: partial sums stay partial",
        lambda xs, axis, c: float(c) * xs[0],
        {"linear": True, "vector_flops": 1, "transpose_note": "scale_c of the cotangent, same layout"},
    ),
    (
        Op.ADD,
        "+: [..]{U_A} + [..]{U_A} -> [..]{U_A}   operands in one layout (broadcast over missing dims); linear",
        lambda xs, axis, c: xs[0] + xs[1],
        {
            "arity": 2,
            "linear": True,
            "vector_flops": 1,
            "transpose_note": "the cotangent to each operand, summed over the dims it was broadcast along",
        },
    ),
    (
        Op.SUBTRACT,
        "-: [..]{U_A} - [..]{U_A} -> [..]{U_A}   operands in one layout (broadcast over missing dims); linear",
        lambda xs, axis, c: xs[0] - xs[1],
        {
            "arity": 2,
            "linear": True,
            "vector_flops": 1,
            "transpose_note": "the cotangent to the left, its negation to the right, summed over broadcast dims",
        },
    ),
    (
        Op.MULTIPLY,
        "⊙: [..]{U_A} ⊙ [..] -> [..]{U_A}   operands in one layout; linear in each: one partial factor at most",
        lambda xs, axis, c: xs[0] * xs[1],
        {
            "arity": 2,
            "bilinear": True,
            "vector_flops": 1,
            "transpose_note": "the cotangent times the other operand, to each, summed over broadcast dims",
        },
    ),
)

RECORDS = records(_ROWS)
GELU, SILU, EXP, RELU, SCALE, ADD, SUBTRACT, MULTIPLY = RECORDS
