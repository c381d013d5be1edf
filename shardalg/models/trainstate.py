"""What a training step keeps and where, as one value: the optimizer, whether gradients are counted, the
precision recipe, the ZeRO stage, offload to host memory, microbatches, the host link's bandwidth and the
head's logits.

    >>> TrainState(precision="deepspeed", zero=3).recipe.master
    DType.FP32

Each field keeps what the user gave (None when they gave nothing), so a report rebuilt from it states the same
defaults; the properties are the values it stands for (:mod:`.optimizers`, :mod:`.precision`, :mod:`.zero`,
:mod:`.offload`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from shardalg.errors import UsageError

from .head import Logits, logits_named
from .offload import Offload, offload_named
from .optimizers import Optimizer, optimizer_named
from .precision import Precision, precision_named
from .zero import Zero, zero_named

__all__ = ["TrainState", "GRADS"]

GRADS: tuple[str, ...] = ("param", "none")


@dataclass(frozen=True)
class TrainState:
    """The choices of a training step's state, as given (None: the default, stated in every output)."""

    optimizer: Any = None
    grads: str = "param"
    precision: Any = None
    zero: Any = None
    offload: Any = None
    microbatches: int | None = None
    host_link: float | None = None
    logits: Any = None

    def __post_init__(self) -> None:
        if self.grads not in GRADS:
            raise UsageError(f"grads is one of {', '.join(GRADS)}, not {self.grads!r}")
        n = self.microbatches
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise UsageError(f"--microbatches takes a positive whole number, not {n!r}", fix="e.g. 8")
        # validate the rest now, so an error names the option before any planning
        self.opt, self.recipe, self.stage, self.place, self.head  # noqa: B018

    @cached_property
    def opt(self) -> Optimizer:
        return optimizer_named(self.optimizer)

    @cached_property
    def recipe(self) -> Precision:
        return precision_named(self.precision)

    @cached_property
    def stage(self) -> Zero:
        return zero_named(self.zero)

    @cached_property
    def place(self) -> Offload:
        return offload_named(self.offload)

    @cached_property
    def head(self) -> Logits:
        return logits_named(self.logits)

    @property
    def micro(self) -> int:
        return self.microbatches or 1

    def training_only(self) -> list[tuple[str, object]]:
        """The choices that only a training step reads, as (option, value given)."""
        return [
            ("optimizer", self.optimizer),
            ("precision", self.precision),
            ("zero", self.zero),
            ("microbatches", self.microbatches),
            ("logits", self.logits),
        ]

    def default_notes(self) -> list[tuple[str, str]]:
        """The training defaults the user did not choose, each as (key, what was assumed)."""
        notes: list[tuple[str, str]] = []
        o, r = self.opt, self.recipe
        if self.optimizer is None:
            notes.append(("optimizer", f"{o.name} (default: {o.describe(r)}, {o.per_parameter(r)})"))
        if self.precision is None:
            notes.append(("precision", f"{r.name} (default: the book's recipe)"))
        if o.moments is None and (r.master is not None or self.precision is not None):
            notes.append(
                (
                    "optimizer state",
                    f"{o.name} as given: the recipe's master copy and moments are not applied",
                )
            )
        if self.zero is None:
            notes.append(("zero", "0 (default: as the program writes the parameters)"))
        return notes

    def step_json(self) -> dict[str, Any]:
        """What a training step's JSON says of the state: the ZeRO stage and the microbatches."""
        return {"zero": self.stage.to_json(), "microbatches": self.micro}

    def to_json(self) -> dict[str, Any]:
        return {
            "precision": self.recipe.to_json(),
            "zero": self.stage.to_json(),
            "offload": list(self.place.parts),
            "microbatches": self.micro,
            "logits": {"policy": self.head.policy, "chunks": self.head.chunks},
        }
