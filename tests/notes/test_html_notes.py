"""``shardalg notes --format html`` opened in a real browser: Debian's headless Chromium, driven by Selenium
through chromedriver. Every math element renders in the project's own KaTeX (no ``.katex-error`` on the page),
the figures load, and a screenshot is saved in the test's temporary folder. Skips, saying why, when Chromium,
chromedriver, Selenium (the ``docs`` extra) or the project's KaTeX (``npm ci``) is missing."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shardalg.notes.document import Display, Document, Prose, Section

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
KATEX = ROOT / "node_modules" / "katex" / "dist" / "katex.min.js"

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium missing (apt-get install chromium chromium-driver)"
    ),
    pytest.mark.skipif(CHROMEDRIVER is None, reason="chromedriver missing (apt-get install chromium-driver)"),
    pytest.mark.skipif(
        importlib.util.find_spec("selenium") is None, reason="selenium missing: pip install -e '.[docs]'"
    ),
    pytest.mark.skipif(not KATEX.is_file(), reason="the project's KaTeX is missing: npm ci"),
]

# The flags this machine's headless Chromium needs (run as root, no network beyond loopback).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,2000",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def _open(browser, page: Path) -> dict[str, int]:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.as_uri())
    WebDriverWait(browser, 120).until(lambda d: d.execute_script("return document.body.dataset.rendered"))
    return browser.execute_script(
        """return {
          math: document.querySelectorAll("[data-tex]").length,
          rendered: document.querySelectorAll("[data-tex] .katex").length,
          errors: document.querySelectorAll(".katex-error").length,
          images: document.images.length,
          loaded: Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length,
        };"""
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("notes-site")
    done = subprocess.run(
        [sys.executable, "-m", "shardalg", "notes", "--format", "html", "--out", str(out), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "index.html").is_file() and (out / "katex" / "katex.min.js").is_file()
    return out


def test_the_notes_render_in_chromium_with_no_katex_error(browser, site, tmp_path):
    seen = _open(browser, site / "index.html")
    assert seen["errors"] == 0, seen
    assert seen["math"] > 200 and seen["rendered"] == seen["math"], seen
    assert seen["images"] >= 1 and seen["loaded"] == seen["images"], seen
    shot = tmp_path / "notes.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_a_formula_katex_cannot_read_is_counted(browser, site, tmp_path):
    """The check above can fail: a page with one broken formula shows one KaTeX error."""
    from shardalg.notes.html import document_html

    doc = Document("t", "a", [Section("s", (Prose.of("fine"), Display(r"\frac{1")))])
    page = tmp_path / "index.html"
    page.write_text(document_html(doc), encoding="utf-8")
    shutil.copytree(site / "katex", tmp_path / "katex")
    seen = _open(browser, page)
    assert seen["errors"] == 1 and seen["math"] == 1, seen
