"""What each name of a program holds as the program runs: the one rule by which a read is legal.

A collective is the identity on the global value (DESIGN §4) and writes a new buffer: the layout it read is
still held. So after ``Slice_{X,F}(dH[B, F]) -> dH[B, F_X]`` both ``dH[B, F]`` and ``dH[B, F_X]`` may be read,
as a derived backward does when a cotangent serves two gradients in two layouts. But a collective that sums
partials (``AllReduce``, ``ReduceScatter``) leaves only what it made: reading the partial sums after they were
summed is the mistake the checks exist to catch (partials used twice), so only layouts with the same partial
sums as the collective's output stay held. A statement that computes a name (a product, a function, a sum)
gives it a new value in its one layout, and the layouts of the old value are gone: a read of one would read
the value before the update.

``check_program``, the backward's reading of a forward program (:func:`.forward.analyze`) and ``verify``'s
reading of a hand-written backward keep one :class:`Held` each.
"""

from __future__ import annotations

from collections.abc import Callable

from shardalg.notation.plan import Step
from shardalg.notation.syntax import Tensor

__all__ = ["Held", "same_layout"]


def same_layout(a: Tensor, b: Tensor) -> bool:
    """Whether two uses of a value place it alike: the same dims, sharded, unreduced and invariant alike."""
    return a.dim_names == b.dim_names and a.layout() == b.layout()


class Held:
    """Each name's value, in every layout it is held in, the latest last."""

    def __init__(self) -> None:
        self._held: dict[str, list[Tensor]] = {}

    def copy(self) -> Held:
        """Another :class:`Held` holding the same layouts, run on apart from this one."""
        other = Held()
        other._held = {name: list(ts) for name, ts in self._held.items()}
        return other

    def __contains__(self, name: object) -> bool:
        return name in self._held

    def computed(self, name: str, t: Tensor) -> None:
        """``name`` gets a new value, held as ``t`` only (a statement computed it, or the program reads it first)."""
        self._held[name] = [t]

    def moved(self, name: str, source: str, t: Tensor) -> None:
        """A collective made ``t`` (named ``name``) from ``source``'s value: held beside ``source``'s layouts
        with the same partial sums when it keeps the name, else ``name``'s new value."""
        if name == source and name in self._held:
            kept = (
                h for h in self._held[name] if set(h.unreduced) == set(t.unreduced) and not same_layout(h, t)
            )
            self._held[name] = [*kept, t]
        else:
            self.computed(name, t)

    def ran(self, step: Step) -> None:
        """A plan's step run: an einsum or a function computes its output's name anew; a collective moves its
        input's value into its output's layout."""
        name = step.output.name or ""
        if step.op.computes:
            self.computed(name, step.output)
        else:
            self.moved(name, step.inputs[0].name or "", step.output)

    def layouts(self, name: str) -> tuple[Tensor, ...]:
        """Every layout ``name``'s value is held in, the latest last (none when the program never gave it one)."""
        return tuple(self._held.get(name, ()))

    def latest(self, name: str) -> Tensor:
        """The layout ``name`` was last given (a KeyError when the program never gave it one)."""
        return self._held[name][-1]

    def find(
        self, name: str, t: Tensor, same: Callable[[Tensor, Tensor], bool] = same_layout
    ) -> Tensor | None:
        """The held layout of ``name`` that ``t`` reads (by ``same``), the latest such; None when none is held."""
        return next((h for h in reversed(self._held.get(name, ())) if same(h, t)), None)
