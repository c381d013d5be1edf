"""Run every lemma and say which hold: ``python -m proofs.run [NAME ...]``. Exit 0 when all hold."""

from __future__ import annotations

import sys

from shardalg.numeric.proofs import run_all


def main(argv: list[str]) -> int:
    lemmas = run_all(argv or None)
    for lemma in lemmas:
        print(lemma.text())
    held = sum(lemma.holds for lemma in lemmas)
    print(f"{held} of {len(lemmas)} lemmas hold")
    return 0 if held == len(lemmas) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
