"""``shardalg.lazy.cached``: computed once per instance, on frozen dataclasses too, documented on the class;
``hashed_once``: a frozen dataclass's own hash, made once, never pickled."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass, replace
from fractions import Fraction

import pytest

from shardalg.lazy import cached, hashed_once
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


@hashed_once
@dataclass(frozen=True)
class Pair:
    a: int
    b: Fraction


def test_hashed_once_keeps_the_dataclass_hash_and_equality():
    p, q = Pair(1, Fraction(1, 3)), Pair(1, Fraction(1, 3))
    assert hash(p) == hash((1, Fraction(1, 3))) == hash(q)  # the hash dataclass makes: its fields'
    assert p.__dict__["_hash"] == hash(p) and p == q and p != Pair(2, Fraction(1, 3))
    assert {p: "x"}[q] == "x"


def test_hashed_once_is_pickled_and_copied_without_its_hash():
    p = Pair(3, Fraction(2, 7))
    hash(p)
    back = pickle.loads(pickle.dumps(p))
    assert "_hash" not in back.__dict__ and back == p and hash(back) == hash(p)
    assert "_hash" not in copy.copy(p).__dict__ and "_hash" not in replace(p, a=4).__dict__


def test_hashed_once_refuses_an_unhashable_class():
    with pytest.raises(TypeError, match="not hashable"):
        hashed_once(dataclass(eq=True)(type("Loose", (), {"__annotations__": {"a": int}})))
