"""The collectives of a compiled (SPMD-partitioned) HLO module, read from its text.

:func:`collectives` finds every ``all-gather``, ``reduce-scatter``, ``all-reduce``, ``all-to-all`` and
``collective-permute`` (their ``-start`` forms too; a combined collective over a tuple is one
:class:`HloCollective` per operand), with its replica groups (explicit ``{{0,1},{2,3}}`` or the iota form
``[2,4]<=[4,2]T(1,0)``), operand and result shapes (per device), the array dim it gathers or scatters, and the
metadata that ties it to the JAX program: ``op_name`` (``jit(f)/transpose(jvp(f))/dot_general``) and the source
line of its stack frame.

Pure text: no jax. Imports nothing of shardalg but its errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardalg.errors import UsageError

__all__ = ["HloCollective", "collectives", "iota_groups", "parse_groups"]

KINDS: dict[str, str] = {  # HLO opcode -> the notation's collective
    "all-gather": "AllGather",
    "reduce-scatter": "ReduceScatter",
    "all-reduce": "AllReduce",
    "all-to-all": "AllToAll",
    "collective-permute": "Permute",
}

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([\w\-]+)\((.*?)\)(.*)$")
_ARRAY = re.compile(r"([a-z]+\d*)\[([\d,]*)\]")
_FRAME = re.compile(r"^\s*(\d+)\s*\{file_location_id=(\d+)")
_LOCATION = re.compile(r"^\s*(\d+)\s*\{file_name_id=(\d+).*?\bline=(\d+)")
_FILE = re.compile(r'^\s*(\d+)\s*"(.*)"\s*$')


@dataclass(frozen=True)
class HloCollective:
    """One collective of the partitioned module. Shapes are per device (``dtype``, dims); ``dim`` is the
    array dim an all-gather gathers, a reduce-scatter scatters or an all-to-all splits (None for the others);
    ``groups`` the device ids of each replica group (for a permute: the source-target pairs); ``op_name`` and
    ``line``/``file`` the JAX operation it was inserted for."""

    name: str
    kind: str
    groups: tuple[tuple[int, ...], ...]
    operand: tuple[int, ...]
    result: tuple[int, ...]
    dtype: str
    dim: int | None
    op_name: str
    file: str
    line: int | None
    concat_dim: int | None = None

    @property
    def backward(self) -> bool:
        """Whether JAX inserted it for a transposed (backward) operation."""
        return "transpose(" in self.op_name

    @property
    def primitive(self) -> str:
        return self.op_name.rsplit("/", 1)[-1]


def iota_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """``[G,S]<=[d0,d1,...]T(p0,p1,...)``: arange over the dims, transposed, cut in G groups of S."""
    m = re.fullmatch(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text.strip())
    if m is None:
        raise UsageError(f"unreadable iota replica groups {text!r}")
    n_groups, size = int(m[1]), int(m[2])
    dims = [int(x) for x in m[3].split(",")]
    perm = [int(x) for x in m[4].split(",")] if m[4] else list(range(len(dims)))
    total = 1
    for d in dims:
        total *= d
    strides = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    tdims = [dims[p] for p in perm]
    flat: list[int] = []
    for i in range(total):
        idx, rest = [], i
        for d in reversed(tdims):
            idx.append(rest % d)
            rest //= d
        idx.reverse()
        flat.append(sum(idx[k] * strides[perm[k]] for k in range(len(perm))))
    return tuple(tuple(flat[g * size : (g + 1) * size]) for g in range(n_groups))


def mesh_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """XLA's mesh form ``mesh['axis_0'=2,'axis_1'=4] {'axis_1'}``: the devices ``0..N-1`` row-major on the
    named axes, one group per position of the unlisted axes, walking the listed ones (in the order listed)."""
    m = re.fullmatch(r"mesh\[(.*?)\]\s*\{(.*?)\}", text.strip())
    if m is None:
        raise UsageError(f"unreadable replica groups {text!r}")
    names, sizes = [], []
    for part in m[1].split(","):
        name, _, size = part.partition("=")
        names.append(name.strip().strip("'\""))
        sizes.append(int(size))
    listed = [x.strip().strip("'\"") for x in m[2].split(",") if x.strip()]
    if any(x not in names for x in listed):
        raise UsageError(
            f"replica groups over axes {listed} XLA's mesh {names} lacks (sub-axes are not read yet)"
        )
    strides = [1] * len(sizes)
    for k in range(len(sizes) - 2, -1, -1):
        strides[k] = strides[k + 1] * sizes[k + 1]
    rest = [k for k in range(len(names)) if names[k] not in listed]
    walk = [names.index(x) for x in listed]

    def points(axes: list[int]) -> list[int]:
        out = [0]
        for k in axes:
            out = [base + i * strides[k] for base in out for i in range(sizes[k])]
        return out

    return tuple(tuple(base + off for off in points(walk)) for base in points(rest))


def parse_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """Explicit ``{{0,1},{2,3}}`` (or ``{}``), the iota form, or the mesh form."""
    text = text.strip()
    if text.startswith("mesh"):
        return mesh_groups(text)
    if text.startswith("["):
        return iota_groups(text)
    inner = re.findall(r"\{([\d,\s]*)\}", text[1:-1] if text.startswith("{") else text)
    return tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in inner)


def _attr(rest: str, key: str) -> str | None:
    """The value of ``key=`` in an instruction's attributes: a braced value, an iota list, or a word."""
    m = re.search(rf"\b{key}=", rest)
    if m is None:
        return None
    i = m.end()
    if rest.startswith("mesh[", i):  # mesh['a'=2,'b'=4] {'b'}
        close = rest.index("}", i)
        return rest[i : close + 1]
    if rest[i] in "{[":
        depth, j = 0, i
        while j < len(rest):
            c = rest[j]
            depth += c in "{[("
            depth -= c in "}])"
            j += 1
            if depth == 0:
                if rest[i] == "[" and rest[j : j + 2] == "<=":  # iota: [G,S]<=[..]T(..)
                    k = re.match(r"<=\[[\d,]+\](?:T\([\d,]+\))?", rest[j:])
                    j += k.end() if k else 0
                break
        return rest[i:j]
    m2 = re.match(r'"([^"]*)"|([^,\s}]+)', rest[i:])
    return (m2[1] if m2[1] is not None else m2[2]) if m2 else None


def _arrays(text: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(m[1], tuple(int(x) for x in m[2].split(",") if x)) for m in _ARRAY.finditer(text)]


def _frames(text: str) -> dict[int, tuple[str, int]]:
    """stack_frame_id -> (file, line), from the module's FileNames / FileLocations / StackFrames tables."""
    files: dict[int, str] = {}
    locations: dict[int, tuple[int, int]] = {}
    frames: dict[int, tuple[str, int]] = {}
    section = ""
    for line in text.splitlines():
        if line.strip() in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line.strip()
            continue
        if section == "FileNames" and (m := _FILE.match(line)):
            files[int(m[1])] = m[2]
        elif section == "FileLocations" and (m := _LOCATION.match(line)):
            locations[int(m[1])] = (int(m[2]), int(m[3]))
        elif section == "StackFrames" and (m := _FRAME.match(line)):
            fid, line_no = locations.get(int(m[2]), (0, 0))
            frames[int(m[1])] = (files.get(fid, ""), line_no)
    return frames


def collectives(text: str) -> list[HloCollective]:
    """Every collective of the module text, in the order the text lists them (the schedule's order)."""
    frames = _frames(text)
    shapes: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    found: list[HloCollective] = []
    for line in text.splitlines():
        m = _INSTR.match(line)
        if m is None:
            continue
        name, shape_text, opcode, operands, rest = m[1], m[2], m[3], m[4], m[5]
        shapes[name] = _arrays(shape_text)
        base = opcode.removesuffix("-start")
        if base not in KINDS or opcode.endswith("-done"):
            continue
        key = "source_target_pairs" if base == "collective-permute" else "replica_groups"
        groups_text = _attr(rest, key)
        groups = parse_groups(groups_text) if groups_text else ()
        dims_text = _attr(rest, "dimensions")
        dim = int(dims_text.strip("{}").split(",")[0]) if dims_text and dims_text.strip("{}") else None
        op_name = _attr(rest, "op_name") or ""
        frame = _attr(rest, "stack_frame_id")
        file, line_no = frames.get(int(frame), ("", None)) if frame and frame.isdigit() else ("", None)
        names = [o.strip().lstrip("%").split(" ")[-1].lstrip("%") for o in operands.split(",") if o.strip()]
        ins = [shapes.get(n, [("", ())])[0] for n in names]
        outs = shapes[name]
        if opcode.endswith("-start") and len(outs) > len(ins):  # async start: (operands..., results...)
            outs = outs[len(ins) :]
        if base == "all-to-all" and dim is None and len(ins) > 1:
            # the tuple form: one operand per destination device, one collective; its shape is the chunks
            # stacked on a leading dim
            dtype, chunk = ins[0]
            ins = [(dtype, (len(ins), *chunk))]
            outs = [(outs[0][0], (len(outs), *outs[0][1]))]
        for k, (dtype, operand) in enumerate(ins):
            result = outs[k][1] if k < len(outs) else ()
            found.append(
                HloCollective(
                    name if len(ins) == 1 else f"{name}#{k}",
                    KINDS[base],
                    groups,
                    operand,
                    result,
                    dtype or (outs[k][0] if k < len(outs) else ""),
                    dim,
                    op_name,
                    file,
                    line_no,
                )
            )
    return found
