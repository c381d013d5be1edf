"""Efficiencies: the fraction of a chip's peak rates a step reaches, each with where it comes from.

    >>> e = Efficiencies.of(None, mfu=0.4)
    >>> e.compute.value, e.hbm.is_peak
    (Fraction(2, 5), True)

Three factors, beside each other: ``compute`` (MFU: ``C`` becomes ``MFU*C``), ``hbm`` (``W_hbm`` becomes
``e*W_hbm``) and ``network`` (the bandwidths ``W_ici``, ``W_dcn`` and ``beta``; latencies ``T_min`` and
``alpha`` are not scaled). Each is given (an argument, ``--mfu``), or measured and carried by the chip with its
source (:class:`~shardalg.costs.hardware.Chip`'s ``mfu``, ``hbm_efficiency``, ``network_efficiency``), or
else 1: the peak, which every output says in words. The value lives in the one
:class:`~shardalg.costs.costmodel.CostModel`; :meth:`Efficiencies.scaling` rewrites a formula,
:meth:`Efficiencies.effective` the chip's numbers a light term is evaluated at (the same answer, faster).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import sympy

from shardalg.algebra.symbols import quantity
from shardalg.errors import UsageError
from shardalg.lazy import hashed_once

__all__ = ["Efficiency", "Efficiencies", "KINDS", "PEAK", "PEAKS"]

# kind -> (what it is called, the symbols it scales, the chip field that may carry a measured one, flag)
KINDS: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "compute": ("MFU", ("C",), "mfu", "--mfu"),
    "hbm": ("HBM efficiency", ("W_hbm",), "hbm_efficiency", "--hbm-efficiency"),
    "network": ("network efficiency", ("W_ici", "W_dcn", "beta"), "network_efficiency", "--net-efficiency"),
}


def _fraction(value: object, what: str, flag: str) -> Fraction:
    try:
        if isinstance(value, bool):
            raise ValueError
        f = (
            Fraction(value)
            if isinstance(value, Fraction | int | str)
            else Fraction(value).limit_denominator(10**6)  # type: ignore[arg-type]
        )
    except (ValueError, TypeError, ZeroDivisionError):
        raise UsageError(
            f"the {what} is a number between 0 and 1, not {value!r}", fix=f"e.g. {flag} 0.4"
        ) from None
    if not 0 < f <= 1:
        rate = {"MFU": "peak FLOP/s", "HBM efficiency": "peak HBM bandwidth"}.get(
            what, "peak network bandwidth"
        )
        raise UsageError(f"the {what} is a fraction of {rate} in (0, 1], not {value}", fix=f"e.g. {flag} 0.4")
    return f


@hashed_once
@dataclass(frozen=True)
class Efficiency:
    """One factor: its value (a fraction of peak) and its source (``peak``, ``given``, or a chip's)."""

    value: Fraction = Fraction(1)
    source: str = "no measured figure given"

    @property
    def is_peak(self) -> bool:
        return self.value == 1

    def text(self) -> str:
        """``peak`` in words where it is 1, else the number: never a bare 1.00."""
        return "peak" if self.is_peak else f"{float(self.value):g}"

    def to_json(self) -> dict[str, object]:
        return {"value": float(self.value), "peak": self.is_peak, "source": self.source}


PEAK = Efficiency()
GIVEN = "given"


@hashed_once
@dataclass(frozen=True)
class Efficiencies:
    """The compute (MFU), HBM and network efficiencies of a cost model."""

    compute: Efficiency = PEAK
    hbm: Efficiency = PEAK
    network: Efficiency = PEAK

    @classmethod
    def of(
        cls, chip: object = None, mfu: object = None, hbm: object = None, network: object = None
    ) -> Efficiencies:
        """Each factor given (a number), else the chip's measured one with its source, else peak."""
        got: dict[str, Efficiency] = {}
        for kind, given in (("compute", mfu), ("hbm", hbm), ("network", network)):
            what, _, attr, flag = KINDS[kind]
            if given is not None:
                got[kind] = Efficiency(_fraction(given, what, flag), GIVEN)
                continue
            measured = getattr(chip, attr, None)
            if measured is not None:
                name = getattr(chip, "name", "the chip")
                got[kind] = Efficiency(
                    _fraction(measured.value, what, flag), f"measured, carried by {name}: {measured.source}"
                )
            else:
                got[kind] = PEAK
        if cls is Efficiencies and all([e is PEAK for e in got.values()]):
            return PEAKS  # nothing below peak: the one value that says so (hashed once, compared by identity)
        return cls(**got)

    def items(self) -> tuple[tuple[str, Efficiency], ...]:
        return (("compute", self.compute), ("hbm", self.hbm), ("network", self.network))

    def scaling(self) -> dict[sympy.Symbol, sympy.Expr]:
        """Symbol -> the symbol times its efficiency, for the factors below peak (a formula's rewrite)."""
        out: dict[sympy.Symbol, sympy.Expr] = {}
        for kind, e in self.items():
            if not e.is_peak:
                for name in KINDS[kind][1]:
                    out[quantity(name)] = sympy.Rational(e.value.numerator, e.value.denominator) * quantity(
                        name
                    )
        return out

    def effective(self, values: Mapping[sympy.Symbol, float]) -> dict[sympy.Symbol, float]:
        """The chip's numbers at these efficiencies (what an unscaled term is evaluated at)."""
        scale = {s: float(e.subs(s, 1)) for s, e in self.scaling().items()}
        return {s: v * scale.get(s, 1.0) for s, v in values.items()}

    def notes(self) -> list[tuple[str, str]]:
        """One note per factor the user did not give: ``peak`` in words where it is 1, else the chip's measured
        value and its source (a given factor is said in the header and the JSON, not as a default)."""
        out = []
        for kind, e in self.items():
            if e.source == GIVEN:
                continue
            what, symbols, _, flag = KINDS[kind]
            scales = ", ".join(symbols)
            if e.is_peak:
                out.append(
                    (kind, f"{what} peak (1: {scales} at the chip's peak; {e.source}, {flag} sets one)")
                )
            else:
                out.append((kind, f"{what} {e.text()}: {scales} scaled by it ({e.source})"))
        return out

    def to_json(self) -> dict[str, object]:
        return {kind: e.to_json() for kind, e in self.items()}

    def label(self) -> str:
        """``MFU peak, HBM peak, network peak`` or ``MFU 0.4, HBM 0.9, network peak``: the header's words."""
        return f"MFU {self.compute.text()}, HBM {self.hbm.text()}, network {self.network.text()}"


PEAKS = Efficiencies()  # every factor at peak: a cost model's default
