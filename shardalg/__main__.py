"""``python -m shardalg``: the same as the ``shardalg`` command."""

from .cli import run

run()
