"""What the tests share: the project root, hypothesis strategies for ASTs (:mod:`.strategies`), the lecture
notes' corpus and the KaTeX checker (:mod:`.notes_corpus`, ``katex_check.js``), the seed and fuzz inputs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
