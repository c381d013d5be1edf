"""The notes speak of the mathematics, not of the program's parts: no module names in captions, no "built with
the engine" (issue 29; the PDF's whole text is checked in test_notes_pdf.py)."""

from __future__ import annotations

from tests.shared.notes_corpus import notes_document


def test_no_module_names_in_the_notes():
    text = notes_document().latex()
    assert "shape module" not in text and "built with the engine" not in text
    assert "engine" not in text.lower() and "executor" not in text.lower()
    assert "The local shape divides each sharded dim by the sizes of the axes that shard it" in text
