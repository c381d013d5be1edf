"""Optimizers as data: the bytes of state each keeps per parameter, with the source of each number.

    >>> optimizer_named("adam").state_bytes
    8

The parameters themselves are counted in their own dtype (bf16 when a tensor has none); the state here is
what the optimizer adds, sharded like the parameter it belongs to (FSDP / ZeRO-3). With bf16 parameters Adam's
fp32 moments make the book's ``2 + 8 = 10`` bytes per parameter. A number (``"12"``) is an optimizer of that
many bytes of state per parameter.

An optimizer keeps ``moments`` buffers per parameter (and ``adam-fp32`` its own fp32 master copy); their
bytes follow the precision recipe (:mod:`.precision`): :meth:`Optimizer.state_under` is ``moments`` times the
recipe's moment dtype plus the master copy (the recipe's, else the optimizer's own). ``state_bytes`` is that
figure under the book's recipe (fp32 moments). A number of bytes is the whole state, whatever the recipe.
:meth:`Optimizer.describe` says the same state in words from the same fields (its dtypes filled in from the
recipe, a master copy the recipe adds named), so what an output says is what it counts:

    >>> optimizer_named("adam").describe(RECIPES["bf16"])
    'Adam: first and second moments in bf16'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from shardalg.errors import UsageError
from shardalg.notation.syntax import DType

from .precision import DEFAULT_PRECISION, RECIPES, Precision

__all__ = ["Optimizer", "OPTIMIZERS", "optimizer_named", "DEFAULT_OPTIMIZER"]

_BOOK_CH5 = "How To Scale Your Model, ch. 5 (training), data parallelism"


@dataclass(frozen=True)
class Optimizer:
    """An optimizer: name, bytes of state per parameter (fp32 moments), what that state is (its dtypes written
    ``{moments}`` and ``{master}``, filled in by :meth:`describe`), and the source; ``moments`` buffers per
    parameter (None: a number of bytes given as is) and its own master copy."""

    name: str
    state_bytes: Fraction | int
    what: str
    source: str
    moments: int | None = None
    master: DType | None = None

    def state_under(self, precision: Precision) -> Fraction:
        """Bytes of state per parameter under ``precision``: its moments in the recipe's moment dtype and the
        master copy (the recipe's, else the optimizer's own); a number given as bytes is kept as is."""
        if self.moments is None:
            return Fraction(self.state_bytes)
        master = precision.master or self.master
        return self.moments * precision.moments.bytes + (master.bytes if master is not None else 0)

    @property
    def description(self) -> str:
        """What the state is under the book's recipe (fp32 moments)."""
        return self.describe()

    def describe(self, precision: Precision | None = None) -> str:
        """What the state is under ``precision`` (default: the book's recipe), as :meth:`state_under` counts it:
        the moments in the recipe's dtype and the master copy (the recipe's, else the optimizer's own)."""
        if self.moments is None:
            return self.what
        p = precision or RECIPES[DEFAULT_PRECISION]
        master = p.master or self.master
        text = self.what.format(
            moments=p.moments.value, master=master.value if master is not None else "none"
        )
        if master is not None and "{master}" not in self.what:
            text += f", and a master copy of the parameters in {master.value}"
        return text

    def in_brief(self, precision: Precision | None = None) -> str:
        """The state in a few words under ``precision``: ``fp32 moments``, ``bf16 moments and a master copy in
        fp32``."""
        if self.moments is None:
            return self.what
        p = precision or RECIPES[DEFAULT_PRECISION]
        master = p.master or self.master
        held = f"{p.moments.value} moment{'' if self.moments == 1 else 's'}" if self.moments else "no moments"
        return held + (f" and a master copy in {master.value}" if master is not None else "")

    def per_parameter(self, precision: Precision | None = None) -> str:
        """``12 bytes per parameter``: :meth:`state_under` ``precision`` (default: the book's recipe)."""
        b = Fraction(self.state_under(precision or RECIPES[DEFAULT_PRECISION]))
        return f"{b.numerator if b.denominator == 1 else float(b)} bytes per parameter"

    def to_json(self) -> dict[str, object]:
        b = Fraction(self.state_bytes)
        return {
            "name": self.name,
            "state_bytes_per_param": b.numerator if b.denominator == 1 else float(b),
            "description": self.description,
            "source": self.source,
        }


OPTIMIZERS: dict[str, Optimizer] = {
    o.name: o
    for o in (
        Optimizer(
            "adam",
            8,
            "Adam: first and second moments in {moments}",
            f"{_BOOK_CH5}, footnote: 'the params are in bfloat16 and optimizer state is in float32, this "
            "gives us 2 + 8 = 10 bytes per parameters'",
            moments=2,
        ),
        Optimizer(
            "adam-fp32",
            12,
            "Adam with a master copy of the parameters in {master} and moments in {moments}",
            "Rajbhandari et al. 2019 (ZeRO), section 3.1: mixed-precision Adam keeps fp32 parameters, "
            "momentum and variance, K = 12 bytes per parameter",
            moments=2,
            master=DType.FP32,
        ),
        Optimizer(
            "momentum",
            4,
            "SGD with momentum: one {moments} buffer per parameter",
            "PyTorch torch.optim.SGD: a momentum_buffer per parameter when momentum != 0 (fp32 here)",
            moments=1,
        ),
        Optimizer(
            "sgd",
            0,
            "plain SGD: no momentum buffer",
            "PyTorch torch.optim.SGD: no buffer when momentum = 0",
            moments=0,
        ),
        Optimizer("none", 0, "no optimizer state (inference, or gradients only)", "by definition"),
    )
}

DEFAULT_OPTIMIZER = "adam"
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def optimizer_named(spec: str | int | float | Optimizer | None) -> Optimizer:
    """A named optimizer, or a number of state bytes per parameter (``"12"``, ``12``)."""
    if isinstance(spec, Optimizer):
        return spec
    if spec is None:
        return OPTIMIZERS[DEFAULT_OPTIMIZER]
    if isinstance(spec, bool):
        raise UsageError(f"an optimizer is a name or bytes per parameter, not {spec!r}")
    if isinstance(spec, int | float):
        if spec < 0:
            raise UsageError(f"an optimizer keeps a non-negative number of bytes per parameter, not {spec}")
        return Optimizer(
            f"{spec:g} bytes", Fraction(spec).limit_denominator(1000), "as given", "given by the user"
        )
    text = spec.strip().lower() if isinstance(spec, str) else ""
    if text in OPTIMIZERS:
        return OPTIMIZERS[text]
    if _NUMBER.fullmatch(text):
        return optimizer_named(float(text) if "." in text else int(text))
    raise UsageError(
        f"unknown optimizer {spec!r}; known: {', '.join(OPTIMIZERS)}, or a number of bytes of state "
        "per parameter",
        fix="e.g. --optimizer adam or --optimizer 12",
    )
