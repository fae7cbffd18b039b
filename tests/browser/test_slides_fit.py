"""Every slide of every notebook, as the RISE slideshow shows it with the committed outputs, fits a
projector's 1280x720: nothing of a slide (its fragments included, shown or still to come) lies
below or right of the screen. The walk presses Space as a teacher does, through every state, and
writes each slide's height to .screenshots/slide_heights.txt. Every formula on a slide is typeset
(no $ sign is left in the rendered text).

STILL_TALL lists, per notebook, slides allowed to be taller than the screen (how many, and how
tall the tallest): none is left; an entry would be for a single code cell taller than the screen,
which splitting slides cannot help. The test fails if a notebook gains one or one grows."""

import nbformat
import pytest

from course.student import student_copy
from tests.browser.lab import ROOT, SCREENSHOTS, leave

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
WITH_EXERCISES = [name for name in NOTEBOOKS if student_copy(
    nbformat.read(ROOT / "notebooks" / name, as_version=4))[1]]  # fmt: skip
WIDTH, HEIGHT = 1280, 720
# notebook -> (slides still taller than the screen, the tallest in px), measured 2026-11-25
STILL_TALL: dict[str, tuple[int, int]] = {}  # none left (12's and 14's last ones shortened)

# The innermost slide on screen: its index among all sections, and how far down and right its
# content reaches (every laid-out element, a fragment not yet shown included: it keeps its place).
MEASURE = """() => {
  const all = [...document.querySelectorAll('.reveal .slides section')];
  const present = [...document.querySelectorAll('.reveal section.present')].pop();
  if (!present) return null;
  let bottom = 0, right = 0;
  for (const e of present.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(e).display === 'none') continue;
    bottom = Math.max(bottom, r.bottom);
    right = Math.max(right, r.right);
  }
  // a formula MathJax did not typeset would show its $ signs
  const markdown = [...present.querySelectorAll('.jp-RenderedMarkdown')];
  const raw = markdown.some((e) => e.innerText.includes('$'));
  const heading = present.querySelector('h1, h2, h3');
  const title = (heading ? heading.innerText : present.innerText).trim().slice(0, 70);
  return { index: all.indexOf(present), bottom, right, title, raw };
}"""


@pytest.fixture(scope="module")
def slides(committed_lab, page):
    """A page of the session's Chromium at a projector's size, on a JupyterLab that serves the
    committed notebooks, and the student copy in student/."""
    projector = page.context.browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    yield projector, committed_lab
    projector.close()
    heights = SCREENSHOTS / "slide_heights.txt"
    heights.write_text("".join(f"{line}\n" for line in sorted(_measured)))


_measured: list[str] = []


def walk(page) -> list[dict]:
    """Press Space from the first slide to the last; each slide's measure, once."""
    seen: dict[int, dict] = {}
    repeats = 0
    while repeats < 3:  # at the last state Space changes nothing
        state = page.evaluate(MEASURE)
        if state["index"] in seen:
            repeats += 1
        else:
            seen[state["index"]], repeats = state, 0
        page.keyboard.press("Space")
        page.wait_for_timeout(120)
    return list(seen.values())


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_slide_fits_a_1280x720_projector(slides, notebook):
    measure(slides, notebook, nbformat.read(ROOT / "notebooks" / notebook, as_version=4))


@pytest.mark.parametrize("notebook", WITH_EXERCISES)
def test_the_student_copy_s_exercise_slides_fit_too(slides, notebook):
    """The copy `make lab` serves: each exercise's skeleton on a slide of its own, with its
    check (its outputs cleared, every other slide is the committed one without outputs)."""
    copy, stubs = student_copy(nbformat.read(ROOT / "notebooks" / notebook, as_version=4))
    assert stubs >= 1
    measure(slides, f"student/{notebook}", copy)


def measure(slides, path: str, notebook) -> None:
    """Walk the slideshow of the notebook served at `path`; assert every slide fits."""
    page, (base, token) = slides
    leave(page, base, token)
    page.goto(f"{base}/rise/{path}?token={token}")
    page.wait_for_selector(".reveal.ready", timeout=90_000)
    page.wait_for_timeout(500)  # fonts and images laid out
    states = walk(page)
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in notebook.cells]
    assert len(states) == kinds.count("slide") + kinds.count("subslide")  # every one was seen
    for s in states:
        title = " ".join(s["title"].split())
        _measured.append(f"{path}\t{s['index']:3d}\t{s['bottom']:6.0f}\t{title}")
    tall = [(s["title"], round(s["bottom"])) for s in states if s["bottom"] > HEIGHT + 1]
    wide = [(s["title"], round(s["right"])) for s in states if s["right"] > WIDTH + 1]
    assert not wide, f"slides wider than {WIDTH} px: {wide}"
    assert [s["title"] for s in states if s["raw"]] == []  # every formula typeset
    count, tallest = STILL_TALL.get(path, (0, HEIGHT))
    message = f"{len(tall)} of {len(states)} slides taller than {HEIGHT} px: {tall}"
    assert len(tall) <= count, f"{message} (known: {count})"
    assert max((t[1] for t in tall), default=0) <= tallest + 8, f"{message} (known: {tallest})"
