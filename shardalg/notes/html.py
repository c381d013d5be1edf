"""The notes as a static web page: ``index.html`` beside a copy of the project's own KaTeX (from npm, under
``katex/``), so the page renders its math with no network, as a course site would serve it.

Each math string of the :class:`~.document.Document` is an element holding its LaTeX (``data-tex``), rendered
by ``katex.render`` when the page loads (``throwOnError: false``: a string KaTeX cannot read shows as a
``.katex-error`` element, which the browser test counts); prose is escaped; figures are ``<img>`` elements
beside the page.

Imports: :mod:`.document` and :mod:`.mathtext`; the standard library.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from shardalg.errors import UsageError

from .document import Code, Display, Document, Figure, Math, Prose, Raw, Section, Table
from .mathtext import MathPart, split_math

__all__ = ["HTML_NAME", "document_html", "katex_dist", "write_site"]

HTML_NAME = "index.html"
_CHECKOUT = Path(__file__).resolve().parents[2]

_STYLE = """
body { max-width: 52rem; margin: 2rem auto; padding: 0 1rem; font: 16px/1.5 "Latin Modern Roman", Georgia, serif; }
nav ol { columns: 2; } table { border-collapse: collapse; margin: 1em auto; font-size: 90%; }
th, td { border-top: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
caption { caption-side: bottom; font-style: italic; } .display { overflow-x: auto; margin: 0.8em 0; }
img { max-width: 100%; display: block; margin: 1em auto; } code { font-size: 90%; }
"""

_RENDER = """
document.querySelectorAll("[data-tex]").forEach(function (el) {
  katex.render(el.dataset.tex, el, {displayMode: el.classList.contains("display"), throwOnError: false});
});
document.body.dataset.rendered = "yes";
"""


def katex_dist() -> Path:
    """The KaTeX build the project installs with npm (``npm ci`` in the checkout: ``package.json`` pins it)."""
    dist = _CHECKOUT / "node_modules" / "katex" / "dist"
    if not (dist / "katex.min.js").is_file():
        raise UsageError(
            f"the HTML notes need the project's KaTeX, which is not installed at {dist}: run `npm ci` in the "
            "checkout (package.json pins katex)"
        )
    return dist


def _math(latex: str, display: bool = False) -> str:
    tag = "div" if display else "span"
    cls = ' class="display"' if display else ""
    return f'<{tag}{cls} data-tex="{html.escape(latex, quote=True)}"></{tag}>'


def _text(text: str) -> str:
    """Running text: its notation and formulas as math (the same split the LaTeX and Markdown use)."""
    return "".join(_math(p.latex) if isinstance(p, MathPart) else html.escape(p) for p in split_math(text))


def _cell(cell: str | Math | Code) -> str:
    if isinstance(cell, Code):
        return f"<code>{html.escape(cell.text)}</code>"
    return _math(cell.latex) if isinstance(cell, Math) else _text(cell)


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _markdown_line(text: str) -> str:
    """A line of a block's Markdown: ``$...$`` math, ``**bold**``, images; the rest escaped."""
    out = []
    for i, part in enumerate(re.split(r"(?<!\\)\$", text)):
        if i % 2:
            out.append(_math(part))
        else:
            part = html.escape(part)
            part = _BOLD.sub(r"<strong>\1</strong>", part)
            part = _IMAGE.sub(lambda m: f'<img src="{m[2]}" alt="{m[1]}">', part)
            out.append(part)
    return "".join(out)


def _raw(block: Raw) -> str:
    """A block rendered elsewhere, from its Markdown: display math between ``$$``, list items, paragraphs."""
    out = []
    for i, piece in enumerate(block.markdown.split("$$")):
        if i % 2:
            out.append(_math(piece.strip(), display=True))
            continue
        items = []
        for para in (p.strip() for p in piece.split("\n\n")):
            lines = [ln for ln in para.splitlines() if ln.strip()]
            if lines and all(ln.startswith("- ") for ln in lines):
                items.append("<ul>" + "".join(f"<li>{_markdown_line(ln[2:])}</li>" for ln in lines) + "</ul>")
            elif lines:
                items.append(f"<p>{_markdown_line(' '.join(lines))}</p>")
        out += items
    return "\n".join(out)


def _figure(block: Figure, number: int) -> str:
    caption = f"Figure {number}: {block.caption}"
    return (
        f'<figure><img src="{html.escape(block.web)}" alt="Figure {number}">'
        f"<figcaption>{_text(caption)}</figcaption></figure>"
    )


def _block(block: Prose | Display | Table | Raw) -> str:
    if isinstance(block, Prose):
        return "<p>" + "".join(_cell(p) if not isinstance(p, str) else _text(p) for p in block.parts) + "</p>"
    if isinstance(block, Display):
        label = f"<p>{_text(block.label)}</p>" if block.label else ""
        return label + _math(block.latex, display=True)
    if isinstance(block, Table):
        head = "".join(f"<th>{_text(h)}</th>" for h in block.header)
        rows = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        caption = f"<caption>{_text(block.caption)}</caption>" if block.caption else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    return _raw(block)


def _section(sec: Section, level: int, number: str, figures: list[int]) -> str:
    out = [f'<h{min(level, 6)} id="s{number}">{number} {_text(sec.title)}</h{min(level, 6)}>']
    for b in sec.blocks:
        if isinstance(b, Figure):
            figures[0] += 1
            out.append(_figure(b, figures[0]))
        else:
            out.append(_block(b))
    out += [_section(s, level + 1, f"{number}.{i + 1}", figures) for i, s in enumerate(sec.subsections)]
    return "\n".join(out)


def document_html(doc: Document) -> str:
    """The whole page: title, contents, the sections, the problems (sections that could not be generated)."""
    numbered = [(str(i + 1), s) for i, s in enumerate(doc.sections)]
    numbered += [(chr(65 + i), s) for i, s in enumerate(doc.appendix)]  # the appendix is lettered
    contents = "".join(f'<li><a href="#s{n}">{n} {_text(s.title)}</a></li>' for n, s in numbered)
    figures = [0]
    body = "\n".join(_section(s, 2, n, figures) for n, s in numbered)
    problems = ""
    if doc.problems:
        problems = "<h2>Sections that could not be generated</h2><ul>"
        problems += "".join(f"<li>{html.escape(p)}</li>" for p in doc.problems) + "</ul>"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(doc.title)}</title>\n"
        '<link rel="stylesheet" href="katex/katex.min.css">\n<script src="katex/katex.min.js"></script>\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n<h1>{_text(doc.title)}</h1>\n"
        f"<p><em>{html.escape(doc.author)}</em></p>\n<nav><h2>Contents</h2><ul>{contents}</ul></nav>\n"
        f"{body}\n{problems}\n<script>{_RENDER}</script>\n</body>\n</html>\n"
    )


def write_site(doc: Document, out_dir: Path) -> list[Path]:
    """``out_dir/index.html`` and ``out_dir/katex/`` (the script, the style sheet and its fonts)."""
    dist = katex_dist()
    target = out_dir / "katex"
    target.mkdir(exist_ok=True)
    shutil.copy2(dist / "katex.min.js", target / "katex.min.js")
    shutil.copy2(dist / "katex.min.css", target / "katex.min.css")
    shutil.copytree(dist / "fonts", target / "fonts", dirs_exist_ok=True)
    page = out_dir / HTML_NAME
    page.write_text(document_html(doc), encoding="utf-8")
    return [page, target]
