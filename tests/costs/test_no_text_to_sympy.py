"""The API entry points that take sympy values refuse text instead of handing it to sympy's parser
(``sympify`` evaluates Python): each gets a UsageError, and the code that would evaluate is never called."""

import builtins

import pytest
import sympy

from shardalg.algebra.symbols import as_expr, axis_size
from shardalg.costs.derive import optimum
from shardalg.costs.sweep import lambdify, sweep
from shardalg.errors import UsageError

HOSTILE = ["__import__('os').system('true')", "X*Y", "1"]


@pytest.fixture(autouse=True)
def no_evaluation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("text reached an evaluator")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    monkeypatch.setattr(sympy, "sympify", refuse)


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("call", [as_expr, lambdify, lambda t: sweep(t), lambda t: optimum(t, over="X")])
def test_text_is_refused(call, text):
    with pytest.raises(UsageError, match="expected a number or a sympy expression"):
        call(text)


def test_numbers_and_expressions_pass():
    x = axis_size("X")
    assert as_expr(3) == sympy.Integer(3) and as_expr(0.5) == sympy.Float(0.5) and as_expr(x) is x
    with pytest.raises(UsageError):
        as_expr(True)
