"""The shardalg command: a thin layer over the public API.

Each module of this package named in ``COMMAND_MODULES`` defines ``register(subparsers)``, which adds its
subcommands; a subcommand's handler takes the parsed arguments and returns the exit code. Exit codes:
0 success, 1 an illegal expression (or a check that failed), 2 a parse, usage or file error (a limit of
:mod:`shardalg.limits` included), 3 an internal error (a bug: any exception that is not shardalg's own, reported
in one line, never as a traceback), 141 the reader of the output went away (``| head``: the shell's SIGPIPE
code, said by nothing). Messages go to stderr as ``error: <message> [rule]``, with the caret and the fix below
when they are known; a note (a size or mesh given in place of the program's) as ``shardalg: note: <line>``. Every subcommand that reads notation also takes ``--max-<limit> N`` for each limit a user
may lift.

Imports: any layer; nothing imports this package but ``shardalg.__main__`` and the ``shardalg`` script. A
handler imports the layers it drives inside itself (the one package allowed to:
:data:`shardalg.deferred.DEFERRING_PACKAGES`), so that ``--help``, which builds every module's parsers, and
each command's start load only what runs.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from typing import Any

from shardalg import __version__, limits
from shardalg.errors import IllegalSharding, IncompleteWarning, NoPlan, NoteWarning, ShardalgError
from shardalg.progress import listening

from .common import HelpFormatter, examples, file_error, reset_stdin
from .hwmesh import slice_words
from .progressline import for_stderr

# One module per group of subcommands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "notation",
    "planning",
    "teaching",
    "costs",
    "backward",
    "export",
    "audit",
    "models",
    "presets",
    "serving",
    "search",
    "strategymap",
)
# Which module registers each command (tests/cli/test_cli_habits.py checks it against the modules): a run of one
# command imports and builds only its module's parsers (all of them cost a cold start ~30 ms); --help, a
# top-level option and an unknown word build them all.
COMMANDS: dict[str, str] = {
    "parse": "notation",
    "check": "notation",
    "shape": "notation",
    "plan": "planning",
    "simulate": "planning",
    "proofs": "teaching",
    "notes": "teaching",
    "plot": "teaching",
    "latex": "teaching",
    "cost": "costs",
    "compare": "costs",
    "optimum": "costs",
    "bound": "costs",
    "hw": "costs",
    "backward": "backward",
    "verify": "backward",
    "export": "export",
    "show": "export",
    "audit": "audit",
    "memory": "models",
    "fit": "models",
    "step": "models",
    "model": "presets",
    "serve": "serving",
    "search": "search",
    "strategy-map": "strategymap",
}

EXIT_OK, EXIT_ILLEGAL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
RUN_OLDEST_THRESHOLD = 1000  # the script's threshold for the collector's oldest generation (see ``run``)
EXIT_PIPE = 141  # 128 + SIGPIPE, as the shell reports a command whose reader closed the pipe

# Subcommands that read no notation and so take no --max-<limit> options.
_NO_LIMITS = frozenset({"hw", "proofs", "notes"})
SHELLS = ("bash", "zsh")

DESCRIPTION = """\
Parse, check, plan, prove, price and draw sharded matrix programs written in the notation of "How To Scale
Your Model", for example:

  A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]
  AllGather_X(A[I_X, J]) -> A[I, J]
  C[I, K]{U_X}

EXPR and PROGRAM may be notation, - to read standard input, a file or a model preset. Exit codes: 0 success, 1 an illegal expression or a failed check,
2 a parse, usage or file error (a limit included), 3 an internal error (please report it). Every command has --help with an example."""

EPILOG = examples(
    'shardalg check "A[I_X, J] · B[J, K_X] -> C[I, K]" --mesh X=4,Y=2',
    'shardalg plan "A[I, J_X] · B[J_X, K] -> C[I, K]" --mesh X=4 --all',
    'shardalg show "ReduceScatter_{X,K}(C[I, K]{U_X})" --mesh X=4',
    "shardalg --print-completion bash > ~/.local/share/bash-completion/completions/shardalg",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 in our own message format, and help keeps examples as written."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"error: {message} [usage]", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


class _PrintCompletion(argparse.Action):
    """``--print-completion bash|zsh``: the completion script, generated from this parser by shtab."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[no-untyped-def]
        try:
            import shtab
        except ImportError:
            print(
                "error: shell completion needs shtab: pip install 'shardalg[completion]' [usage]",
                file=sys.stderr,
            )
            raise SystemExit(EXIT_USAGE) from None
        print(shtab.complete(parser, shell=values), end="")
        raise SystemExit(EXIT_OK)


def leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable subcommand, as (its words, e.g. ``hw show``; its parser), in --help order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = list(leaf_parsers(sub))
                yield from ((f"{name} {words}".strip(), p) for words, p in inner) if inner else [(name, sub)]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given a word of ``COMMANDS``, only the parsers of the module that registers
    it (what one run of that command needs)."""
    parser = _Parser(prog="shardalg", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument(
        "--version", action="version", version=f"shardalg {__version__}", help="print the version and exit"
    )
    parser.add_argument(
        "--print-completion",
        choices=SHELLS,
        action=_PrintCompletion,
        help="print a completion script for bash or zsh and exit (needs shardalg[completion])",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    for _, leaf in leaf_parsers(parser):
        leaf.add_argument(
            "-q",
            "--quiet",
            action="store_true",
            help="no progress line on stderr (there is none anyway when stderr is not a terminal)",
        )
    for name, command in sub.choices.items():
        if name not in _NO_LIMITS:
            _limit_options(command)
    return parser


def _warn(message: Any, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning as one line on stderr (an incomplete answer is never silent); a note as a note."""
    kind = "note" if issubclass(category, NoteWarning) else "warning"
    print(f"shardalg: {kind}: {message}", file=sys.stderr)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a limit is a positive integer, not {text!r}")
    return int(text)


def _limit_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("limits", "refused up front when exceeded (shardalg.limits); lift them here")
    for limit in limits.LIMITS.values():
        if limit.liftable:
            group.add_argument(
                f"--max-{limit.name}",
                type=_positive,
                metavar="N",
                dest=f"max_{limit.name}",
                help=f"{limit.unit} for {limit.bounds} (default {limit.value:,})",
            )


def _lifted(args: argparse.Namespace) -> dict[str, int]:
    return {name: v for name in limits.LIMITS if (v := getattr(args, f"max_{name}", None)) is not None}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always", IncompleteWarning)
        warnings.simplefilter("default", NoteWarning)  # each line once, however many steps of a call say it
        warnings.showwarning = _warn
        return _handle(args)


def _handle(args: argparse.Namespace) -> int:
    reset_stdin()
    try:
        line = for_stderr(args.quiet)
        # --quiet silences; a terminal gets the progress line; otherwise a listener installed by the caller
        # (a test, a notebook) keeps listening
        with limits.lifted(**_lifted(args)), _mesh_given_as(args):
            with listening(None) if args.quiet else listening(line) if line is not None else nullcontext():
                return int(args.handler(args))
    except (IllegalSharding, NoPlan) as err:
        print(str(err), file=sys.stderr)
        return EXIT_ILLEGAL
    except ShardalgError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (| head): not a bug, nothing more to say
        _quiet_stdout()
        return EXIT_PIPE
    except OSError as err:
        print(str(file_error(err)), file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - the last guard: a bug gets one line and exit 3, never a traceback
        said = str(err)
        said = said if len(said) <= 300 else said[:300] + "..."
        print(
            f"internal error: {type(err).__name__}{': ' + said if said else ''} (please report)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _mesh_given_as(args: argparse.Namespace) -> Any:
    """With ``--slice``, the slice gives the mesh: a note on what it replaces of a program's mesh line names
    ``--slice`` (:func:`shardalg.algebra.context.mesh_given_as`), not a ``--mesh`` the user never typed."""
    words = slice_words(args)
    if words is None:
        return nullcontext()
    from shardalg.algebra.context import mesh_given_as

    return mesh_given_as(words)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run() -> None:
    """The ``shardalg`` script: as ``main``, and quiet when the reader of stdout goes away (``| head``: killed
    by SIGPIPE where there is one, else exit 141 with nothing said)."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # One command is a short process. Its start-up makes ~60,000 long-lived objects (sympy's import most of
    # them), and CPython's full collections walk them again and again as the heap grows, freeing nothing, then
    # once more at exit. So the oldest generation is collected only after 1,000 collections of the middle one
    # (CPython's default is 10: about 7 million allocations, not 70,000); young garbage is collected as usual,
    # and a long command still gets full collections. The heap is frozen before exit. Measured on a
    # training-mode search of the README's MLP on 2x2x2 (13.7 s, 17.2 s with the defaults): 146 MB peak either
    # way (157 MB with the collector off). The library (``main``, the API) leaves the collector alone.
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, RUN_OLDEST_THRESHOLD)
    try:
        code = main()
        sys.stdout.flush()  # buffered output meets the closed pipe here, after main
    except KeyboardInterrupt:
        print("error: interrupted [interrupt]", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        _quiet_stdout()
        code = EXIT_PIPE
    gc.freeze()  # the exit's own collection would walk every object again
    raise SystemExit(code)


__all__ = ["main", "run", "build_parser", "leaf_parsers"]
