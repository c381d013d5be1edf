"""The parser's errors (lark's, from the generated :mod:`.lalr`) as :class:`~shardalg.errors.ParseError`: a
span with a caret, what was expected in words, a label for common mistakes (keyed on the parser state and
token kind, as lark's ``match_examples``), and a "did you mean" for an operation written in another case or
spelling, or in JAX's or PyTorch's words (``psum_X(...)``, ``all_gather``, ``Shard(0)``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from shardalg import limits
from shardalg.cache import Kind, memoized
from shardalg.errors import ParseError, ShardalgError, Span, closest

from .build import transformer
from .grammar import START, lalr_parser
from .lalr import Token, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from .op import Op

# How expected terminals read in a message; None hides one (its plain spelling is listed already).
_DESCRIBE: dict[str, str | None] = {
    "NAME": "a name",
    "INT": "a number",
    "PRIME": "a prime (')",
    "OP_WORD": "a collective (AllGather, ReduceScatter, ...)",
    "DTYPE_WORD": "a dtype (bf16, fp32, ...)",
    "FN_WORD": "a function (gelu, sum_D, softmax_S, ...)",
    "DECIMAL": "a decimal",
    "_PLUS": None,  # the elementwise operators: not listed after every tensor (the product stands for them)
    "_MINUS": None,
    "_ODOT": None,
    "_MESH": "'mesh'",
    "_WHERE": "'where'",
    "ROLE_WORD": "a role (params, embeddings, saved, kvcache)",
    "_TOKENS": "'tokens'",
    "_LAYERS": "'layers'",
    "_FONT": None,
    "_ARROW": "'->'",
    "_DOT": "'·'",
    "_STACKREL": None,
    "_SEP": "a new line or ';'",
    "$END": "the end of the input",
}

# Common mistakes: an error whose parser state and offending token kind match those of one of these
# inputs gets the label (lark's match_examples, keyed exactly on the token kind). A label in _STATEMENTS_ONLY
# is learnt for a program or a statement only: where one tensor is read, `AllGather` lexes as a tensor's name, so
# its examples fail in the state every name followed by a stray word does (`A b[I]`), which is no collective.
_MISTAKES: dict[str, list[str]] = {
    "write a product with '·', '*' or '@', or put the two expressions on separate lines": [
        "A[I] B[I]",
        "A[I] (B[I])",
        "A[I] -> B[I] C[I]",
        "A[I] [J]",
        "A[I] -> B[I] (C[I])",
        "A[I] AllGather_X(B[I])",
    ],
    "a collective needs its mesh axes as a subscript, e.g. AllGather_X(A[I_X, J])": [
        "AllGather(A[I])",
        "AllGather A[I]",
        "AllGather[I]",
        "AllGather: A[I]",
    ],
    "unreduced and invariant axes are written {U_X} or {I_X}": ["A[I]{X}", "A[I]{X, Y}"],
    "a tensor needs at least one dim inside [...]": ["A[]", "[]"],
    "dims are separated by ','": ["A[I J]", "A[I_X J]", "A[I_{X} J]", "A[I 1]", "A[I_X 1]"],
}


_STATEMENTS_ONLY = frozenset({"a collective needs its mesh axes as a subscript, e.g. AllGather_X(A[I_X, J])"})

# The notation's operations, as the grammar's OP_WORD spells them.
OPERATIONS = tuple(op.value for op in Op if not op.computes)  # the collectives, as written

# Other libraries' words for them (in lower case): (the operation, whose word it is).
FOREIGN_OPERATIONS: dict[str, tuple[str, str]] = {
    "psum": ("AllReduce", "JAX's lax.psum"),
    "pmean": ("AllReduce", "JAX's lax.pmean (an AllReduce, then a division)"),
    "psum_scatter": ("ReduceScatter", "JAX's lax.psum_scatter"),
    "all_gather": ("AllGather", "JAX's lax.all_gather and PyTorch's all_gather"),
    "all_gather_into_tensor": ("AllGather", "PyTorch's all_gather_into_tensor"),
    "all_reduce": ("AllReduce", "PyTorch's all_reduce"),
    "reduce_scatter": ("ReduceScatter", "PyTorch's reduce_scatter"),
    "reduce_scatter_tensor": ("ReduceScatter", "PyTorch's reduce_scatter_tensor"),
    "all_to_all": ("AllToAll", "JAX's lax.all_to_all and PyTorch's all_to_all"),
    "all_to_all_single": ("AllToAll", "PyTorch's all_to_all_single"),
    "ppermute": (
        "Shift or Permute",
        "JAX's lax.ppermute; Shift_{X,+1}(A[I_X, J]) moves each block one step "
        "along X, Permute moves blocks between the axes of a mesh",
    ),
    "dynamic_slice": ("Slice", "JAX's lax.dynamic_slice"),
}

# PyTorch DTensor placements, which the notation writes on the tensor itself.
PLACEMENTS: dict[str, str] = {
    "shard": "Shard(d) is PyTorch's DTensor placement; the notation writes the mesh axis on the dim it shards: "
    "A[I_X, J] shards I (dim 0) over X",
    "replicate": "Replicate() is PyTorch's DTensor placement; the notation leaves a replicated dim bare: A[I, J] "
    "is whole on every device",
    "partial": "Partial() is PyTorch's DTensor placement; the notation writes partial sums as unreduced axes: "
    "C[I, K]{U_X} still needs a sum over X",
}

# A word used as a function: NAME, an optional subscript (_X or _{X,K}), then '('.
_CALL = re.compile(r"(?<![A-Za-z0-9_\\])([A-Za-z][A-Za-z0-9_]*?)(_(?:\{[^{}\n]*\}|[A-Za-z0-9]+))?[ \t]*\(")


def _operation_hint(text: str, pos: int) -> str | None:
    """What the word called as a function around ``pos`` (the error's place) should be, if it names an
    operation in another case, spelling or library, or is a PyTorch placement; None otherwise."""
    for call in _CALL.finditer(text):
        if call.start() > pos:
            return None
        if pos >= call.end():
            continue
        head, sub = call.group(1), call.group(2) or ""
        # the subscript read as part of the word too: all_reduce( is a head 'all' and a subscript '_reduce'
        readings = [(head + sub, ""), (head, sub)] if sub else [(head, "")]
        for word, rest in readings:
            if word.lower() in PLACEMENTS:
                return PLACEMENTS[word.lower()]
            if word.lower() in FOREIGN_OPERATIONS:
                op, whose = FOREIGN_OPERATIONS[word.lower()]
                write = "" if " " in op else f"; write {op}{rest or '_X'}(...)"
                return f"did you mean {op}? {word} is {whose}{write}"
        for word, rest in reversed(readings):
            op = closest(word.replace("_", ""), OPERATIONS, cutoff=0.75)
            if op is not None and op != word:
                return (
                    f"did you mean {op}? write {op}{rest or '_X'}(...); the operations are "
                    f"{', '.join(OPERATIONS)}, spelled so"
                )
        return None
    return None


@memoized(Kind.TABLE)
def _mistake_index(start: str) -> dict[tuple[int, str], str]:
    """(parser state, token kind) -> label, from the failures of the _MISTAKES examples."""
    index: dict[tuple[int, str], str] = {}
    for label, examples in _MISTAKES.items():
        if label in _STATEMENTS_ONLY and start == START["tensor"]:
            continue
        for example in examples:
            try:
                lalr_parser().parse(example, start=start)
            except UnexpectedToken as err:
                index.setdefault((_state_key(err.state), err.token.type), label)
    return index


def _state_key(state: Any) -> int:
    """The LALR state number, whether lark reports the number or a parser state object."""
    return state if isinstance(state, int) else int(getattr(state, "position", -1))


def _describe(names: Iterable[str]) -> str:
    parser = lalr_parser()
    words: list[str] = []
    for name in sorted(names, key=lambda n: (n == "$END", n)):
        if name in _DESCRIBE:
            word = _DESCRIBE[name]
        else:
            try:
                value = parser.get_terminal(name).pattern.value
            except KeyError:
                value = name
            word = None if value.startswith("\\") and len(value) > 1 else f"'{value}'"
        if word is not None and word not in words:
            words.append(word)
    if not words:
        return "something else"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _previous_word(text: str, pos: int) -> str | None:
    """The word or symbol just before ``pos`` (skipping blanks), for 'after ...' in messages."""
    end = pos
    while end > 0 and text[end - 1] in " \t":
        end -= 1
    if end == 0:
        return None
    start = end  # scanned backwards, so the error path stays linear in the text
    while start > 0 and text[start - 1].isascii() and text[start - 1].isalnum():
        start -= 1
    if start < end:
        return text[start - 1 : end] if start > 0 and text[start - 1] == "\\" else text[start:end]
    if text[end - 2 : end] == "->":
        return "->"
    return None if text[end - 1].isspace() else text[end - 1]


def _token_text(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the input"
    if tok.type == "_SEP":
        return "the end of the line" if str(tok) == "\n" else f"'{tok}'"
    return f"'{tok}'"


def _character_fix(char: str) -> str | None:
    """What to write for a character the notation does not read that looks like one it does: a Unicode
    space or an invisible character (pasted from a web page: a plain space or nothing), a letter or digit
    in another form (fullwidth ``Ａ``, bold ``𝐀``: its ASCII form). None for anything else (``Ω``)."""
    if char.isascii():
        return None
    name = unicodedata.name(char, "an unnamed character")
    code = f"U+{ord(char):04X} {name}"
    if char.isspace() or unicodedata.category(char) in ("Zs", "Cf"):
        return f"{code} is not a plain space: write a space, or nothing"
    plain = unicodedata.normalize("NFKC", char)
    if plain.isascii() and plain.isalnum():
        return f"write {plain!r}: {code} is not ASCII (names are ASCII letters and digits)"
    return None


def parse_error(err: UnexpectedInput, text: str, start: str) -> ParseError:
    label: str | None = None
    if isinstance(err, UnexpectedToken):
        label = _mistake_index(start).get((_state_key(err.state), err.token.type))
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
        cmd = re.match(r"\\[A-Za-z]+", text[pos:])
        if cmd:
            message = f"unknown LaTeX command {cmd.group(0)}"
            span = Span(pos, pos + cmd.end())
        else:
            message = f"unexpected character {text[pos]!r}; expected {_describe(err.allowed or ())}"
            span = Span(pos, pos + 1)
            fix = _character_fix(text[pos])
            if fix is not None:
                return ParseError(message, span=span, source=text, fix=fix)
    elif isinstance(err, UnexpectedToken):
        tok = err.token
        pos = tok.start_pos if tok.type != "$END" else len(text)
        pos = pos if pos is not None else len(text)
        after = _previous_word(text, pos)
        where = f" after '{after}'" if after else ""
        message = f"expected {_describe(err.accepts or err.expected)}{where}, found {_token_text(tok)}"
        span = Span(pos, max(pos, tok.end_pos or pos) if tok.type != "$END" else pos)
    elif isinstance(err, UnexpectedEOF):
        message = f"unexpected end of the input; expected {_describe(err.expected)}"
        span = Span(len(text), len(text))
    else:  # pragma: no cover - lark has no other UnexpectedInput kinds
        message, span = str(err).splitlines()[0], Span(0, 0)
    if label:
        message = f"{message} ({label})"
    return ParseError(message, span=span, source=text, fix=_operation_hint(text, span.start))


def parsed(text: str, start: str) -> Any:
    """``text`` read from the start rule ``start`` and built into nodes (:mod:`.build`); every failure a
    ParseError (a LimitExceeded for nesting too deep to read), with ``text`` as its source."""
    try:
        tree = lalr_parser().parse(text, start=start)
        return transformer().transform(tree)
    except UnexpectedInput as err:
        raise parse_error(err, text, start) from None
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, ShardalgError):
            raise inner.with_source(text) from None
        raise ParseError(f"not in the notation: {inner}", span=Span(0, len(text)), source=text) from None
    except RecursionError:
        raise limits.refuse(
            "depth",
            "the input nests too deeply to read (parentheses, products or collectives)",
            span=Span(0, len(text)),
        ).with_source(text) from None
