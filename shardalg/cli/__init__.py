"""The ``shardalg`` command: a thin layer over the public API.

Each module of this package named in ``COMMAND_MODULES`` defines ``register(subparsers)``, which adds its
subcommands; a subcommand's handler takes the parsed arguments and returns the exit code. Exit codes:
0 success, 1 an illegal expression (or a check that failed), 2 a parse or usage error (a limit of
:mod:`shardalg.limits` included), 3 an internal error (a bug: any exception that is not shardalg's own, reported
in one line, never as a traceback), 141 the reader of the output went away (``| head``: the shell's SIGPIPE
code, said by nothing); messages go to stderr. Every subcommand that reads notation also takes
``--max-<limit> N`` for each limit a user may lift.

Imports: any layer; nothing imports this package but ``shardalg.__main__`` and the ``shardalg`` script.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from shardalg import limits
from shardalg.errors import IllegalSharding, NoPlan, ShardalgError, UsageError

# One module per group of subcommands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = ("notation", "planning", "teaching", "costs", "backward", "export", "models")

EXIT_OK, EXIT_ILLEGAL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_PIPE = 141  # 128 + SIGPIPE, as the shell reports a command whose reader closed the pipe

# Subcommands that read no notation and so take no --max-<limit> options.
_NO_LIMITS = frozenset({"hw", "proofs", "notes"})


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 through our own message format."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"shardalg: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shardalg", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    for name, command in sub.choices.items():
        if name not in _NO_LIMITS:
            _limit_options(command)
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a limit is a positive integer, not {text!r}")
    return int(text)


def _limit_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("limits", "refused up front when exceeded (shardalg.limits); lift them here")
    for limit in limits.LIMITS.values():
        if limit.liftable:
            group.add_argument(f"--max-{limit.name}", type=_positive, metavar="N", dest=f"max_{limit.name}",
                               help=f"{limit.unit} for {limit.bounds} (default {limit.value:,})")  # fmt: skip


def _lifted(args: argparse.Namespace) -> dict[str, int]:
    return {name: v for name in limits.LIMITS if (v := getattr(args, f"max_{name}", None)) is not None}


def read_source(arg: str) -> str:
    """EXPR as given, or standard input when it is ``-``, decoded strictly in the input's encoding: bytes
    that are not text are a UsageError naming the first bad byte."""
    if arg != "-":
        return arg
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return sys.stdin.read()
    data = buffer.read()
    encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise UsageError(
            f"standard input is not {encoding} text: byte 0x{data[err.start]:02x} at offset {err.start} "
            f"({err.reason})",
            fix=f"write the notation in {encoding}",
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with limits.lifted(**_lifted(args)):
            return int(args.handler(args))
    except IllegalSharding as err:
        print(str(err), file=sys.stderr)
        return EXIT_ILLEGAL
    except NoPlan as err:
        print(str(err), file=sys.stderr)
        return EXIT_ILLEGAL
    except ShardalgError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (| head): not a bug, nothing more to say
        _quiet_stdout()
        return EXIT_PIPE
    except Exception as err:  # noqa: BLE001 - the last guard: a bug gets one line and exit 3, never a traceback
        said = str(err)
        said = said if len(said) <= 300 else said[:300] + "..."
        print(f"internal error: {type(err).__name__}{': ' + said if said else ''} (please report)", file=sys.stderr)
        return EXIT_INTERNAL


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run() -> None:
    code = main()
    try:
        sys.stdout.flush()  # buffered output meets the closed pipe here, after main
    except BrokenPipeError:
        _quiet_stdout()
        code = EXIT_PIPE
    raise SystemExit(code)
