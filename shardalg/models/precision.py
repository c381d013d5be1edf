"""Precision recipes as data: the dtype of the parameters, their gradients, the optimizer's master copy and its
moments, each recipe with its source.

    >>> r = precision_named("deepspeed")
    >>> r.describe()
    'params fp16, grads fp16, master copy fp32, moments fp32'

A recipe says what a training step keeps per parameter; the optimizer (:mod:`.optimizers`) says how many
moments it keeps. Parameters that declare a dtype in the program keep it (``W: int8[D, F]``); the recipe's
parameter dtype is for those that declare none. ``params=None`` (the book's recipe) keeps each tensor's own
dtype, bf16 when it has none; ``grads=None`` is the parameter's dtype.

A recipe is a name (:data:`RECIPES`) or a name with changes, ``deepspeed,grads=fp32`` (keys ``params``,
``grads``, ``master``, ``moments``; ``master=none`` drops the master copy).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from shardalg.errors import UsageError
from shardalg.notation.syntax import DType, dtype_named

__all__ = ["Precision", "RECIPES", "precision_named", "DEFAULT_PRECISION"]

_BOOK = (
    "How To Scale Your Model, ch. 5 (training): 'the params are in bfloat16 and optimizer state is in "
    "float32, this gives us 2 + 8 = 10 bytes per parameters'; gradients in the parameters' dtype"
)
_ZERO = (
    "Rajbhandari et al. 2019 (ZeRO), section 3.1: mixed-precision Adam keeps fp16 parameters and gradients "
    "(2Ψ + 2Ψ bytes) and an fp32 copy of the parameters, momentum and variance (KΨ, K = 12): 16Ψ in all"
)
_BF16 = (
    "Zamirai et al. 2020, 'Revisiting BFloat16 Training': pure 16-bit training, every tensor of the "
    "optimizer in bf16 and no fp32 master copy"
)
_FP8 = (
    "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, section 3.3.3: FP8 weights for the GEMMs, 'BF16 ... to "
    "track the first and second moments in the AdamW optimizer', 'the master weights ... and gradients ... "
    "are still retained in FP32'"
)


@dataclass(frozen=True)
class Precision:
    """A precision recipe: the dtypes of parameters (None: each tensor's own), gradients (None: the
    parameter's), the master copy (None: no copy) and each optimizer moment; its description and source."""

    name: str
    params: DType | None
    grads: DType | None
    master: DType | None
    moments: DType
    source: str

    def param_dtype(self, declared: DType | None) -> DType | None:
        """The dtype a parameter is counted in: its declared one, else the recipe's (None: bf16, the
        default of :func:`shardalg.models.quantities.dtype_bytes`)."""
        return declared if declared is not None else self.params

    def grad_dtype(self, param: DType | None) -> DType | None:
        """A gradient's dtype, given its parameter's (as counted)."""
        return self.grads if self.grads is not None else param

    def master_bytes(self) -> Fraction:
        return self.master.bytes if self.master is not None else Fraction(0)

    def describe(self) -> str:
        def name(d: DType | None, own: str) -> str:
            return d.value if d is not None else own

        master = f"master copy {self.master.value}" if self.master is not None else "no master copy"
        return (
            f"params {name(self.params, 'as declared (bf16 default)')}, "
            f"grads {name(self.grads, 'as params')}, {master}, moments {self.moments.value}"
        )

    def to_json(self) -> dict[str, object]:
        def v(d: DType | None) -> str | None:
            return d.value if d is not None else None

        return {
            "name": self.name,
            "params": v(self.params),
            "grads": v(self.grads),
            "master": v(self.master),
            "moments": self.moments.value,
            "description": self.describe(),
            "source": self.source,
        }


RECIPES: dict[str, Precision] = {
    r.name: r
    for r in (
        Precision("book", None, None, None, DType.FP32, _BOOK),
        Precision("deepspeed", DType.FP16, DType.FP16, DType.FP32, DType.FP32, _ZERO),
        Precision("bf16", DType.BF16, DType.BF16, None, DType.BF16, _BF16),
        Precision("fp8", DType.FP8, DType.FP32, DType.FP32, DType.BF16, _FP8),
    )
}

DEFAULT_PRECISION = "book"
_KEYS = ("params", "grads", "master", "moments")


def precision_named(spec: str | Precision | None) -> Precision:
    """A recipe by name (:data:`RECIPES`), or a name with changes: ``deepspeed,grads=fp32``."""
    if isinstance(spec, Precision):
        return spec
    if spec is None:
        return RECIPES[DEFAULT_PRECISION]
    if not isinstance(spec, str):
        raise UsageError(f"a precision recipe is a name, not {spec!r}", fix="e.g. --precision deepspeed")
    head, *changes = [p.strip() for p in spec.split(",")]
    base = RECIPES.get(head.lower())
    if base is None:
        raise UsageError(
            f"unknown precision recipe {head!r}; known: {', '.join(RECIPES)}",
            fix="e.g. --precision deepspeed, or --precision book,grads=fp32",
        )
    if not changes:
        return base
    fields: dict[str, DType | None] = {}
    for item in changes:
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in _KEYS:
            raise UsageError(
                f"bad precision change {item!r}: write KEY=DTYPE with KEY one of {', '.join(_KEYS)}",
                fix="e.g. --precision deepspeed,grads=fp32",
            )
        if key in fields:
            raise UsageError(f"{key} is changed twice in {spec!r}")
        value = value.strip().lower()
        if value == "none" and key == "master":
            fields[key] = None
        elif value == "none":
            raise UsageError(f"only the master copy can be none, not the {key}")
        else:
            fields[key] = dtype_named(value)
    name = base.name + "," + ",".join(f"{k}={v.value if v else 'none'}" for k, v in fields.items())
    return replace(base, name=name, source=f"{base.name} ({base.source}), changed by the user", **fields)
