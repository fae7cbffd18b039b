"""Notebook 03 as a RISE slideshow (jupyterlab-rise) in Chromium at a projector's 1280x720: it
opens with one slide per section, Shift+Enter runs the code live on the slides and advances, the
text is large enough to read from the back of a room, nothing is fetched from the web, and the
panel draws on its slide, fits it (the maps give up height), and repaints when its slider moves.

The panels load in RISE's page thanks to the course's extension in rise-widgets/ (RISE's app lacks
a module ipywidgets 8 needs: jupyterlab-contrib/rise#119; rise-widgets/README.md).
Screenshots go to .screenshots/slides_*.png."""

import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from course.authoring.slides import slide_types
from tests.browser.lab import ROOT, SCREENSHOTS, jupyter_lab, wait_for_change

NOTEBOOK = "03_per_head_projections.ipynb"
PRESENT = "section.present"
# no cell of the slideshow is running (a running cell's prompt is [*])
RAN = """() => ![...document.querySelectorAll('.reveal .jp-InputPrompt')]
  .some(p => p.textContent.includes('*'))"""


@pytest.fixture(scope="module")
def slideshow(page):
    """RISE on a copy of 03 with its outputs cleared, so every output seen was made live; a new
    page of the session's Chromium (one Playwright per process) at a projector's 1280x720.
    Yields the page, the notebook, the requests to elsewhere and the console's errors."""
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
        outside, errors = [], []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else 0)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else 0)
        page.goto(f"{base}/rise/{NOTEBOOK}?token={token}")
        page.wait_for_selector(".reveal.ready", timeout=90_000)
        page.locator(f"{PRESENT} .jp-Cell").first.click()
        yield page, nb, outside, errors
    slides.close()
    shutil.rmtree(root, ignore_errors=True)


def present_text(page) -> str:
    return page.locator(PRESENT).last.inner_text()  # the innermost slide on screen


def run_until(page, text: str = "", presses: int = 12, has: str = "") -> str:
    """Shift+Enter (run the cell, go on) until an output shows `text` (or holds an element `has`);
    go back to its slide and return that slide's text. RISE moves on to the next slide once a
    slide's last cell has run."""
    inside = page.locator(has) if has else None  # an output holding it, whatever its text
    output = page.locator(".reveal .jp-OutputArea-output").filter(has_text=text, has=inside)
    for _ in range(presses):
        if output.count():
            break
        page.keyboard.press("Shift+Enter")
        page.wait_for_function(RAN, timeout=60_000)  # a panel shows only once its cell has run
        try:
            output.first.wait_for(state="attached", timeout=2_000)
        except PlaywrightTimeout:
            continue  # not this cell: run the next one
    output.first.wait_for(state="attached", timeout=60_000)
    inside = page.locator(".jp-OutputArea-output").filter(has_text=text, has=inside)  # in a slide
    return show(page, inside).inner_text()


def show(page, what):
    """Go back to the slide that holds `what` (at most 3 slides), to look at it; return it."""
    slide = page.locator("section:not(.stack)").filter(has=what).first
    for _ in range(3):
        if "present" in (slide.get_attribute("class") or ""):
            break
        page.keyboard.press("Shift+Space")
        page.wait_for_timeout(600)
    assert "present" in (slide.get_attribute("class") or ""), present_text(page)[:200]
    return slide


def test_one_slide_per_section_readable_and_offline(slideshow):
    page, nb, outside, _ = slideshow
    slides = page.locator(".reveal .slides > section").count()
    assert slides == slide_types(nb.cells).count("slide") == 10
    page.screenshot(path=SCREENSHOTS / "slides_03_title.png")
    size = "(s) => parseFloat(getComputedStyle(document.querySelector(s)).fontSize)"
    assert page.evaluate(size, ".reveal .jp-RenderedMarkdown p") >= 20
    assert page.evaluate(size, ".reveal .jp-RenderedMarkdown h1") >= 32
    assert outside == []  # no web fonts, no CDN


def test_code_runs_live_on_the_slides_and_advances(slideshow):
    page, _, outside, _ = slideshow
    slide = run_until(page, "✓ weights: (1, 4, 7, 7) = (B, h, T, T)")
    assert "Run each head on its own" in slide
    page.screenshot(path=SCREENSHOTS / "slides_03_heads.png")
    slide = run_until(page, "✓ 16,384 parameters = 4·d_model² = 4·64²")
    assert "Count the matrices and the parameters" in slide
    page.screenshot(path=SCREENSHOTS / "slides_03_parameters.png")
    assert outside == []


# the canvas's pixels: how many are painted, and a checksum that changes when the picture does
PIXELS = """el => {
  const c = el.querySelector('.av-canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let painted = 0, sum = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3]) painted += 1;
    sum = (sum * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2] + 17 * d[i + 3]) % 1000000007;
  }
  return { share: painted / (c.width * c.height), sum };
}"""


# how far down a slide's laid-out content reaches on screen
BOTTOM = """s => Math.max(0, ...[...s.querySelectorAll('*')].map(e => e.getBoundingClientRect())
  .filter(r => r.height > 0).map(r => r.bottom))"""


def test_a_panel_draws_on_its_slide_and_a_key_press_repaints_it(slideshow):
    page, _, _, errors = slideshow
    text = run_until(page, has=".attention-view")
    assert "HeadsExplorer(" in text and "Traceback" not in text  # its code, on a subslide
    widgets_failed = [e for e in errors if "jupyterlab-manager" in e or "No provider" in e]
    assert widgets_failed == [], "the widget manager did not load: is rise-widgets installed?"
    slide = show(page, page.locator(".attention-view"))
    panel = slide.locator(".course-panel").first
    view = panel.locator(".attention-view")
    drawn = lambda: view.get_attribute("data-state") == "ok" and view.evaluate(PIXELS)  # noqa: E731
    before = wait_for_change(drawn, False, timeout=30)
    assert view.get_attribute("data-key") == "d_model=64|h=4" and "✗" not in text
    assert before["share"] > 0.1, before  # the 4 maps, their words and titles
    # the whole slide, its code and the panel, fits the projector: the maps give up height
    bottom = slide.evaluate(BOTTOM)
    assert bottom <= 720, f"the panel's slide reaches {bottom:.0f} px"
    assert 220 <= view.locator(".av-canvas").evaluate("c => c.clientHeight") <= 420
    page.screenshot(path=SCREENSHOTS / "slides_03_panel.png")

    # the h slider from the keyboard, as in the notebook: End takes it to h = 16 (64 / 16 = 4)
    handle = panel.locator(".widget-slider").first.locator(".noUi-handle")
    handle.focus()
    page.keyboard.press("End")
    wait_for_change(lambda: view.get_attribute("data-key"), "d_model=64|h=4")
    assert view.get_attribute("data-key") == "d_model=64|h=16"
    assert float(handle.get_attribute("aria-valuenow")) == 16
    after = wait_for_change(lambda: drawn() or before, before, timeout=30)  # the new picture
    assert after["sum"] != before["sum"] and after["share"] > 0.1, after
    page.screenshot(path=SCREENSHOTS / "slides_03_panel_h16.png")
    # an arrow key moves the slider too, and neither key turned the slide (RISE's own use of them)
    page.keyboard.press("ArrowLeft")
    wait_for_change(lambda: view.get_attribute("data-key"), "d_model=64|h=16")
    assert float(handle.get_attribute("aria-valuenow")) < 16
    assert "present" in (slide.get_attribute("class") or ""), present_text(page)[:200]
