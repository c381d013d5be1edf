"""The ``shardalg`` command: a thin layer over the public API.

Each module of this package named in ``COMMAND_MODULES`` defines ``register(subparsers)``, which adds its
subcommands; a subcommand's handler takes the parsed arguments and returns the exit code. Exit codes:
0 success, 1 an illegal expression (or a check that failed), 2 a parse or usage error; messages go to stderr.

Imports: any layer; nothing imports this package but ``shardalg.__main__`` and the ``shardalg`` script.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from shardalg.errors import IllegalSharding, NoPlan, ShardalgError

# One module per group of subcommands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = ("notation", "planning", "teaching", "costs", "backward", "export", "models",
                                  "strategymap")

EXIT_OK, EXIT_ILLEGAL, EXIT_USAGE = 0, 1, 2


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
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


def run() -> None:
    raise SystemExit(main())
