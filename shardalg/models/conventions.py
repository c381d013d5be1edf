"""The conventions behind a memory or step figure, said in every output: the dtypes counted, what the
activations include and leave out, what the FLOPs include. Each is (key, text); the text output prints them as
``convention: key: text`` and the JSON as ``conventions: [{key, value}]``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["memory_conventions", "step_conventions", "UNSHOWN"]

# What the notation does not show: its steps enter a program as inputs (shardalg.models.program).
UNSHOWN = "the steps the notation does not show (norms, softmax, activation functions, residual adds)"


def _dtypes(report: Any) -> str:
    r, o = report.precision, report.optimizer
    if report.analysis.mode != "train":
        return "parameters and KV cache in their declared dtypes (bf16 default)"
    if o.moments is None:
        state = f"{o.state_bytes} bytes per parameter as given"
    else:
        master = r.master or o.master
        state = (
            f"{o.moments} moment{'s' if o.moments != 1 else ''} in {r.moments.value} + "
            + (f"master copy {master.value}" if master else "no master copy")
            + f" = {o.state_under(r)} bytes per parameter"
        )
    grads = "; gradients not counted (--grads none)" if report.grads == "none" else ""
    return f"{r.name}: {r.describe()}; optimizer state {state}{grads}"


def memory_conventions(report: Any) -> list[tuple[str, str]]:
    """The conventions of a :class:`shardalg.models.memory.MemoryReport`."""
    out = [
        ("dtypes", _dtypes(report)),
        (
            "params",
            "from the program's tensors ('params' times the layers, plus 'embeddings'); bytes per device, "
            "GB = 10^9 bytes, GiB = 2^30 bytes",
        ),
    ]
    if report.analysis.mode == "train":
        written = (
            "; counted: what the written functions' backward reads (a nonlinear function's operands, a "
            "softmax's result P unless the attention is fused, each norm's and a fused softmax's per-row "
            "statistics in fp32)"
            if _functions(report)
            else ""
        )
        out.append(
            (
                "activations",
                "what the backward reads, kept under the remat policy, for one microbatch"
                + written
                + "; not counted: the inner state of the steps the notation does not show ("
                + (
                    "dropout masks"
                    if written
                    else "norm and softmax statistics, attention probabilities, dropout masks"
                )
                + ")"
                + (
                    ", nor what the backward makes again under the remat policy (held while the rerun part's "
                    "backward runs: counted in the transient)"
                    if report.analysis.recomputed
                    else ""
                ),
            )
        )
        if report.zero.stage:
            out.append(("zero", "a sharded part is its elements over the data axes' sizes (no padding)"))
    out.append(
        (
            "transient",
            "the weights one layer gathers or fetches, held once; a parameter no product reads (an "
            "embedding table, a norm's gain) is not gathered"
            + (
                "; with them, the activations the backward makes again for one layer under the remat policy "
                "(rerun rows), held while that layer's backward runs"
                if report.analysis.mode == "train" and report.analysis.recomputed
                else ""
            ),
        )
    )
    return out


def step_conventions(report: Any) -> list[tuple[str, str]]:
    """The conventions of a :class:`shardalg.models.step.StepReport`."""
    train = report.analysis.mode == "train"
    flops = "the einsums of the forward" + (
        ", the derived backward (two gradient einsums per forward product) and the recomputed forward"
        if train
        else ""
    )
    # a program that writes its functions has them counted (the ``functions`` line); only what it leaves out is not
    unshown = "the steps the program does not write" if _functions(report) else UNSHOWN
    out = [
        (
            "flops",
            f"{flops}; not counted: {unshown}, the attention core unless written, the optimizer update",
        ),
        ("dtypes", "each tensor in its declared dtype (bf16 default), gradients communicated in it"),
        (
            "plans",
            "each statement's plan the fewest bytes communicated (the planner's first), not the fewest seconds "
            "on the chip: shardalg plan --hw ranks a statement's plans by seconds and may pick another",
        ),
    ]
    if _functions(report):
        out.append(
            (
                "functions",
                "the written functions (norms, softmax, elementwise) priced as HBM-bound steps, each its own "
                "kernel that reads its operands and writes its result (a fused kernel, a residual add with the "
                "norm after it, moves fewer bytes: not modelled), their FLOPs counted apart as vector FLOPs"
                + (
                    "; their backward derived (each derivative f'(X, dY), or the rename back, as shardalg "
                    "backward writes it), priced the same way"
                    if train
                    else ""
                )
                + (
                    "; a MoE routing's backward counted as its AllToAlls transposed (the same bytes back)"
                    if train and report.analysis.routing_transposes
                    else ""
                ),
            )
        )
    return out


def _functions(report: Any) -> bool:
    """Whether the program writes a function (a norm, softmax, an elementwise op)."""
    return any(s.kind == "function" for s in report.analysis.model.statements)
