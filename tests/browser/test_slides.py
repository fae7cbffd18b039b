"""Notebook 03 as a RISE slideshow (jupyterlab-rise) in Chromium at a projector's 1280x720: it
opens with one slide per section, Shift+Enter runs the code live on the slides and advances, the
text is large enough to read from the back of a room, and nothing is fetched from the web.

The widget panels do not load inside RISE's own page (its app lacks a module ipywidgets 8 needs:
jupyterlab-contrib/rise#119); the panel's cell then says where panels run, never a traceback.
Screenshots go to .screenshots/slides_*.png."""

import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.lab import ROOT, SCREENSHOTS, jupyter_lab
from tests.slides import slide_types

NOTEBOOK = "03_per_head_projections.ipynb"
PRESENT = "section.present"


@pytest.fixture(scope="module")
def slideshow(page):
    """RISE on a copy of 03 with its outputs cleared, so every output seen was made live; a new
    page of the session's Chromium (one Playwright per process) at a projector's 1280x720."""
    root = Path(tempfile.mkdtemp(prefix="course-slides-"))
    nb = nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, root / NOTEBOOK)
    shutil.copy(ROOT / "notebooks" / "rise.css", root / "rise.css")
    slides = page.context.browser.new_page(viewport={"width": 1280, "height": 720})
    with jupyter_lab(root_dir=root) as (base, token):
        page = slides
        outside = []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else 0)
        page.goto(f"{base}/rise/{NOTEBOOK}?token={token}")
        page.wait_for_selector(".reveal.ready", timeout=90_000)
        page.locator(f"{PRESENT} .jp-Cell").first.click()
        yield page, nb, outside
    slides.close()


def present_text(page) -> str:
    return page.locator(PRESENT).last.inner_text()  # the innermost slide on screen


def run_until(page, text: str, presses: int = 12) -> str:
    """Shift+Enter (run the cell, go on) until an output shows `text`; go back to its slide and
    return that slide's text. RISE moves on to the next slide once a slide's last cell has run."""
    output = page.locator(".reveal .jp-OutputArea-output").filter(has_text=text)
    for _ in range(presses):
        if output.count():
            break
        page.keyboard.press("Shift+Enter")
        try:
            output.first.wait_for(state="attached", timeout=2_000)
        except PlaywrightTimeout:
            continue  # not this cell: run the next one
    output.first.wait_for(state="attached", timeout=60_000)
    inside = page.locator(".jp-OutputArea-output").filter(has_text=text)  # relative to a slide
    slide = page.locator("section:not(.stack)").filter(has=inside).first
    for _ in range(3):  # back to the slide that holds it, to look at it
        if "present" in (slide.get_attribute("class") or ""):
            break
        page.keyboard.press("Shift+Space")
        page.wait_for_timeout(600)
    assert "present" in (slide.get_attribute("class") or ""), present_text(page)[:200]
    return slide.inner_text()


def test_one_slide_per_section_readable_and_offline(slideshow):
    page, nb, outside = slideshow
    slides = page.locator(".reveal .slides > section").count()
    assert slides == slide_types(nb.cells).count("slide") == 10
    page.screenshot(path=SCREENSHOTS / "slides_03_title.png")
    size = "(s) => parseFloat(getComputedStyle(document.querySelector(s)).fontSize)"
    assert page.evaluate(size, ".reveal .jp-RenderedMarkdown p") >= 20
    assert page.evaluate(size, ".reveal .jp-RenderedMarkdown h1") >= 32
    assert outside == []  # no web fonts, no CDN


def test_code_runs_live_on_the_slides_and_advances(slideshow):
    page, _, outside = slideshow
    slide = run_until(page, "✓ weights: (1, 4, 7, 7) = (B, h, T, T)")
    assert "Run each head on its own" in slide
    page.screenshot(path=SCREENSHOTS / "slides_03_heads.png")
    slide = run_until(page, "✓ 16,384 parameters = 4·d_model² = 4·64²")
    assert "Count the matrices and the parameters" in slide
    page.screenshot(path=SCREENSHOTS / "slides_03_parameters.png")
    assert outside == []


def test_a_panel_says_where_it_runs(slideshow):
    page, _, _ = slideshow
    slide = run_until(page, "a slideshow shows only this line")
    assert "Sliders: h and d_model" in slide and "Traceback" not in slide
    page.screenshot(path=SCREENSHOTS / "slides_03_panel.png")
