"""``shardalg.lazy.cached``: computed once per instance, on frozen dataclasses too, documented on the class."""

from __future__ import annotations

from dataclasses import dataclass

from shardalg.lazy import cached
from shardalg.notation.parse import parse_tensor


@dataclass(frozen=True)
class Box:
    n: int

    @cached
    def doubled(self) -> list[int]:
        """Twice n, in a list (a new object on every call of the function)."""
        calls.append(self.n)
        return [2 * self.n]


calls: list[int] = []


def test_computed_once_per_instance_and_kept():
    a, b = Box(1), Box(2)
    first = a.doubled
    assert a.doubled is first and first == [2] and b.doubled == [4]
    assert calls == [1, 2]
    assert Box(1) == a  # the kept value takes no part in equality
    assert Box.doubled.__doc__.startswith("Twice n")


def test_a_tensor_keeps_its_dim_names():
    t = parse_tensor("A[I_X, J]")
    assert t.dim_names is t.dim_names and t.dim_names == ("I", "J")
