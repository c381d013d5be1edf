"""A chip from text: a preset name, a TOML file, or ``NAME=VALUE`` pairs (every command's ``--hw``).

    >>> chip_from_text("tpu-v5p").name
    'tpu-v5p'
    >>> chip = chip_from_text("base=tpu-v5p,hbm=96e9")
    >>> chip.hbm_capacity.value, chip.flops.value
    (96000000000.0, 459000000000000.0)

Keys are the cost model's symbols (``C``, ``W_hbm``, ``W_ici``, ``T_min``, ``alpha``, ``beta``, ``W_dcn``),
``hbm`` (HBM capacity in bytes) and measured efficiencies (``mfu``, ``eff_hbm``, ``eff_net``: fractions of peak
FLOP/s, HBM and network bandwidth, each with its source in a TOML table), ``node`` (devices per NVLink domain, a
whole number: 8 for an H100 node; a flat GPU mesh larger than it is placed into nodes, :mod:`.nodes`), plus ``name``, ``description``, ``model`` (``ici``, ``alpha-beta``,
``alpha-beta-rd``), ``wrap`` (``always``, ``never``, ``lengthN``, ``cubesN``) and ``base`` (a preset whose
numbers the others override). A TOML file has the same keys at the top level; there a number may also be a
table ``{value = 4.6e14, source = "..."}`` that says where it comes from, and ``wrap`` may be a table
``{lengths = [16]}`` or ``{multiple = 4}``. Without a source a number's source is the file or the command line.

Numbers are read by a strict pattern and ``float``; nothing here evaluates text. Every mistake is a
UsageError that names the key, the file and what would fix it.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from shardalg.errors import FileError, UsageError, closest

from .hardware import MODELS, Chip, Sourced, WrapRule, as_chip, names

__all__ = ["chip_from_text", "chip_from_toml", "chip_from_pairs", "as_chip_text", "NUMBER_KEYS", "CHIP_TEXT"]

# key (as the cost formulas name it) -> Chip field; field names are accepted as keys too.
NUMBER_KEYS: dict[str, str] = {
    "C": "flops",
    "W_hbm": "hbm_bandwidth",
    "hbm": "hbm_capacity",
    "W_ici": "ici_bandwidth",
    "T_min": "hop_latency",
    "alpha": "alpha",
    "beta": "link_bandwidth",
    "W_dcn": "dcn_bandwidth",
    "mfu": "mfu",  # measured efficiencies, fractions of peak in (0, 1]
    "eff_hbm": "hbm_efficiency",
    "eff_net": "network_efficiency",
    "node": "node",  # devices per NVLink domain (a GPU node: 8), a whole number
}
_REQUIRED = ("C", "W_hbm", "hbm", "W_ici", "T_min")
_TEXT_KEYS = ("name", "description", "model", "wrap", "base")
_BY_FIELD = {field: key for key, field in NUMBER_KEYS.items()}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_]*)=([^=,]+)")
_WRAP = re.compile(r"(always|never)|length([0-9]+)|cubes([0-9]+)")

CHIP_TEXT = (
    "a preset (shardalg hw list), a TOML file (FILE.toml), or NAME=VALUE pairs such as "
    "base=tpu-v5p,hbm=96e9 or C=4.6e14,W_hbm=2.8e12,hbm=96e9,W_ici=9e10,T_min=1e-6"
)


def _known_keys() -> str:
    return ", ".join([*NUMBER_KEYS, *_TEXT_KEYS])


def _key(raw: str, where: str) -> str:
    """The canonical key for ``raw`` (a symbol name or a Chip field name)."""
    if raw in NUMBER_KEYS or raw in _TEXT_KEYS:
        return raw
    if raw in _BY_FIELD:
        return _BY_FIELD[raw]
    raise UsageError(
        f"unknown chip key {raw!r} {where}; known: {_known_keys()}",
        fix="spell the key as the cost formulas do, e.g. C=4.6e14 or W_ici=9e10",
    )


def _number(key: str, value: Any, where: str) -> float:
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER.fullmatch(text):
            raise UsageError(
                f"chip key {key} {where} needs a positive number, not {value!r}",
                fix=f"write a plain number, e.g. {key}=4.6e14",
            )
        value = float(text)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:  # only a TOML integer gets here: text went through float() above
            raise FileError(
                f"chip key {key} {where} is too large for a number ({len(str(value))} digits)",
                fix=f"write a plain number, e.g. {key}=4.6e14",
            ) from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise UsageError(
            f"chip key {key} {where} needs a positive finite number, not {value!r}",
            fix=f"write a plain number, e.g. {key}=4.6e14",
        )
    return float(value)


def _wrap(value: Any, where: str) -> WrapRule:
    source = f"user chip {where}"
    if isinstance(value, str):
        m = _WRAP.fullmatch(value.strip())
        if m is None:
            raise UsageError(
                f"chip key wrap {where} is always, never, lengthN or cubesN, not {value!r}",
                fix="e.g. wrap=always (every axis a ring) or wrap=length16 (v5e's rule)",
            )
        if m[1]:
            return WrapRule(always=m[1] == "always", source=source)
        if m[2]:
            return WrapRule(lengths=(int(m[2]),), source=source)
        return WrapRule(multiple=int(m[3]), source=source)
    if isinstance(value, dict) and set(value) <= {"lengths", "multiple", "always", "source"}:
        lengths = value.get("lengths", [])
        multiple = value.get("multiple")
        if (
            not isinstance(lengths, list)
            or not all(isinstance(n, int) and n > 0 for n in lengths)
            or (multiple is not None and (not isinstance(multiple, int) or multiple < 1))
        ):
            raise UsageError(
                f"chip key wrap {where}: lengths is a list of positive integers, multiple one",
                fix="e.g. wrap = {lengths = [16]} or wrap = {multiple = 4}",
            )
        return WrapRule(
            tuple(lengths), multiple, bool(value.get("always", False)), str(value.get("source", source))
        )
    raise UsageError(
        f"chip key wrap {where} is a word (always, never, lengthN, cubesN) or a table",
        fix='e.g. wrap = "always" or wrap = {lengths = [16]}',
    )


def _build(entries: dict[str, Any], where: str, default_name: str) -> Chip:
    """A Chip from canonical keys; numbers as floats or (float, source) pairs."""
    base: Chip | None = None
    if "base" in entries:
        base_name = entries["base"]
        if not isinstance(base_name, str) or base_name.lower() not in names():
            raise UsageError(
                f"chip key base {where} names a preset, not {base_name!r}; known: {', '.join(names())}"
            )
        base = as_chip(base_name)
    missing = [k for k in _REQUIRED if k not in entries and base is None]
    if missing:
        raise UsageError(
            f"the chip {where} lacks {', '.join(missing)} (needed: {', '.join(_REQUIRED)})",
            fix="add them, or start from a preset and override: base=tpu-v5p,"
            + ",".join(f"{k}=..." for k in missing),
        )
    fields: dict[str, Any] = {}
    for key, field in NUMBER_KEYS.items():
        if key in entries:
            value, source = entries[key]
            if key == "node" and not value.is_integer():
                raise UsageError(
                    f"chip key node {where} is a whole number of devices per NVLink domain, not {value:g}",
                    fix="e.g. node=8 (an HGX/DGX node of 8 GPUs)",
                )
            fields[field] = Sourced(value, source)
    model = entries.get("model")
    if model is not None and model not in MODELS:
        raise UsageError(f"chip key model {where} is one of {', '.join(MODELS)}, not {model!r}")
    if model is None and base is None:
        model = "alpha-beta" if "alpha" in entries and "beta" in entries else "ici"
    if model is not None:
        fields["model"] = model
        if model != "ici" and (
            ("alpha" not in entries and (base is None or base.alpha is None))
            or ("beta" not in entries and (base is None or base.link_bandwidth is None))
        ):
            raise UsageError(
                f"the {model} model needs alpha and beta; the chip {where} lacks them",
                fix="add alpha=2e-6,beta=4.5e11 (seconds per message, bytes/s one way)",
            )
    if "wrap" in entries:
        fields["wrap"] = _wrap(entries["wrap"], where)
    name = entries.get("name") or (f"{base.name}*" if base is not None else default_name)
    description = entries.get("description") or (
        f"{base.description}, changed: {', '.join(k for k in NUMBER_KEYS if k in entries)} ({where})"
        if base is not None
        else f"a user chip ({where})"
    )
    if not isinstance(name, str) or not isinstance(description, str):
        raise UsageError(f"chip keys name and description {where} are text")
    if base is not None:
        return replace(base, name=name, description=description, **fields)
    return Chip(name, description, **fields)


def chip_from_pairs(text: str) -> Chip:
    """``base=tpu-v5p,hbm=96e9`` or ``C=4.6e14,W_hbm=2.8e12,hbm=96e9,W_ici=9e10,T_min=1e-6``."""
    where = "on the command line"
    entries: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        m = _PAIR.fullmatch(part)
        if m is None:
            raise UsageError(f"bad chip item {part!r}: write KEY=VALUE, e.g. C=4.6e14 ({CHIP_TEXT})")
        key = _key(m[1], where)
        if key in entries:
            raise UsageError(f"chip key {key} is given twice {where}")
        value = m[2].strip()
        entries[key] = (
            value if key in _TEXT_KEYS else (_number(key, value, where), "given on the command line")
        )
    return _build(entries, where, "custom")


def chip_from_toml(path: str | Path) -> Chip:
    """A chip from a TOML file (the keys of the module docstring at the top level)."""
    import tomllib

    file = Path(path)
    where = f"in {file}"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(
            f"cannot read the chip file {file}: {err.strerror or err}",
            fix="give the path of a TOML file, or a preset name (shardalg hw list)",
        ) from None
    except UnicodeDecodeError as err:
        raise FileError(
            f"the chip file {file} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})",
            fix="a chip file is a TOML text file saved as UTF-8",
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(
            f"the chip file {file} is not valid TOML: {err}",
            fix='write KEY = VALUE lines, e.g. C = 4.6e14 and name = "my-chip"',
        ) from None
    except RecursionError:
        raise FileError(
            f"the chip file {file} nests arrays or tables too deeply to read",
            fix="a chip file's keys hold numbers, text or one table: C = 4.6e14",
        ) from None
    except ValueError:  # an integer over Python's digit limit for int(str)
        raise FileError(
            f"the chip file {file} holds an integer too long to read (over Python's 4,300 digits)",
            fix="write numbers in floating point, e.g. hbm = 9.6e10",
        ) from None
    entries: dict[str, Any] = {}
    for raw, value in data.items():
        key = _key(raw, where)
        if key in entries:
            raise UsageError(f"chip key {key} is given twice {where}")
        if key in _TEXT_KEYS:
            if key != "wrap" and not isinstance(value, str):
                raise UsageError(f"chip key {key} {where} is text, not {value!r}", fix=f'write {key} = "..."')
            entries[key] = value
        elif isinstance(value, dict):
            if set(value) - {"value", "source"} or "value" not in value:
                raise UsageError(
                    f'chip key {key} {where} is a number or a table {{value = ..., source = "..."}}',
                    fix=f'e.g. {key} = {{value = 4.6e14, source = "vendor spec sheet"}}',
                )
            source = value.get("source", f"user chip file {file.name}")
            if not isinstance(source, str):
                raise UsageError(f"the source of chip key {key} {where} is text")
            entries[key] = (_number(key, value["value"], where), source)
        else:
            entries[key] = (_number(key, value, where), f"user chip file {file.name}")
    return _build(entries, where, file.stem)


def chip_from_text(text: str) -> Chip:
    """A preset name, the path of a TOML file, or NAME=VALUE pairs."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"a chip is {CHIP_TEXT}")
    text = text.strip()
    if text.lower() in names():
        return as_chip(text.lower())  # type: ignore[return-value]
    if "=" in text:
        return chip_from_pairs(text)
    if text.endswith(".toml") or Path(text).is_file():
        return chip_from_toml(text)
    near = closest(text, names())
    raise UsageError(
        f"unknown hardware {text!r}: a chip is {CHIP_TEXT}",
        fix=f"{f'did you mean {near}? ' if near else ''}the presets are {', '.join(names())}",
    )


def as_chip_text(hw: Chip | str | None) -> Chip | None:
    """Like :func:`shardalg.costs.hardware.as_chip`, but text may also be a file or NAME=VALUE pairs."""
    if hw is None or isinstance(hw, Chip):
        return hw
    return chip_from_text(hw)
