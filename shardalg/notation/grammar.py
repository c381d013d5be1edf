"""The grammar file (``grammar/shardalg.lark``, shipped in the wheel as ``shardalg/grammar``) and the LALR
parser built from it once per process, with lark's cache on disk where a private cache directory exists.
lark is imported only when its parser is asked for (the fast path reads its own tables: :mod:`.fastparse`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from shardalg.cache import Kind, memoized

if TYPE_CHECKING:
    from lark import Lark

START = {"program": "start", "tensor": "tensor_start", "statement": "statement_start"}  # kind -> start rule


def grammar_path() -> Path:
    """Where the grammar file is: inside the installed package, else in the source checkout, else where
    ``importlib.resources`` finds it (imported only then: it costs a cold start several ms)."""
    here = Path(__file__).resolve().parents
    for candidate in (here[1] / "grammar" / "shardalg.lark", here[2] / "grammar" / "shardalg.lark"):
        if candidate.is_file():  # an installed wheel, then a source checkout
            return candidate
    try:
        from importlib.resources import files

        found = files("shardalg.grammar").joinpath("shardalg.lark")
        if found.is_file():
            return Path(str(found))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    return here[2] / "grammar" / "shardalg.lark"


def grammar_text() -> str:
    return grammar_path().read_text(encoding="utf-8")


@memoized(Kind.TABLE)
def cache_dir() -> Path | None:
    """The per-user cache directory (made private), or None when none can be made."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shardalg"
    try:
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.access(base, os.W_OK):
            return None
    except (OSError, RuntimeError):  # RuntimeError: no home directory to expand
        return None
    return base


def _cache_file(grammar: str) -> str | bool:
    """A per-user cache file for the built parser, named by the grammar's and lark's versions, or False
    when no private cache directory can be made (then the parser is built each process, ~0.1 s)."""
    import hashlib

    import lark

    base = cache_dir()
    if base is None:
        return False
    digest = hashlib.sha256(f"{lark.__version__}\n{grammar}".encode()).hexdigest()[:16]
    return str(base / f"grammar-{digest}.lark-cache")


def build_parser(*, cache: str | bool = False) -> Lark:
    """A new LALR parser for the grammar. Uncached it keeps lark's grammar objects (what
    ``hypothesis.extra.lark.from_lark`` reads); a parser loaded from the disk cache does not."""
    from lark import Lark

    return Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        start=list(START.values()),
        propagate_positions=True,
        maybe_placeholders=True,
        cache=cache,
    )


@memoized(Kind.TABLE)
def lalr_parser() -> Lark:
    """The one LALR parser of the process, built on first use (and cached on disk per user)."""
    return build_parser(cache=_cache_file(grammar_text()))
