"""Every committed notebook carries the slide metadata that course/authoring/slides.py derives from
its cells (so `make notebooks` keeps slides in step with new cells), and the rules give what a
class needs."""

from pathlib import Path

import nbformat
import pytest

from course.authoring.slides import RISE, SCREEN, estimated_height, slide_types

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_carry_their_slides(path):
    nb = nbformat.read(path, as_version=4)
    kinds = [cell.metadata.get("slideshow", {}).get("slide_type") for cell in nb.cells]
    assert kinds == slide_types(nb.cells)
    assert nb.metadata["rise"] == RISE
    assert kinds[0] == "slide"


def test_sections_open_slides_and_a_solution_is_never_on_a_slide():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    solution = code("def f(): ...")
    solution.metadata["tags"] = ["solution"]
    cells = [md("# 01 · title"), code("setup"), md("## A section"), code("x"), code("plot"),
             md("Look for this."), code("y"), md("## Task"), solution, code("check")]  # fmt: skip
    assert slide_types(cells) == [
        "slide", "-", "slide", "-", "fragment", "subslide", "-", "slide", "skip", "fragment"
    ]  # fmt: skip


def test_the_slides_fetch_nothing_from_the_web():
    # reveal's "simple" theme and others load Google fonts; "white" uses fonts on the machine
    assert RISE["theme"] == "white"
    css = (ROOT / "notebooks" / "rise.css").read_text()
    assert "@import" not in css and "http" not in css


def test_a_code_cell_that_would_run_off_the_screen_gets_a_slide_of_its_own():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    prose = md("## A long section\n\n" + " ".join(["word"] * 100))  # 5 lines of 100 chars
    short, tall = code("x = 1"), code("\n".join(f"x{i} = {i}" for i in range(20)))
    assert estimated_height(short) == 23 + 22  # one 17-px line of code and its padding
    assert estimated_height(prose) + estimated_height(short) <= SCREEN
    assert estimated_height(prose) + estimated_height(tall) > SCREEN
    assert slide_types([prose, short]) == ["slide", "-"]  # fits: seen together
    assert slide_types([prose, tall]) == ["slide", "subslide"]  # would not: the next slide
    assert slide_types([md("## Short"), tall, tall]) == ["slide", "-", "subslide"]


def test_the_guides_count_of_slides_is_the_notebooks():
    """The teaching guide and docs/teaching.md say how many slides fit 1280x720: the count of the
    notebooks' slides and subslides, kept true as notebooks are added."""
    count = sum(kind in ("slide", "subslide")
                for path in NOTEBOOKS
                for kind in (c.metadata.get("slideshow", {}).get("slide_type")
                             for c in nbformat.read(path, as_version=4).cells))  # fmt: skip
    guide = (ROOT / "docs" / "teaching-guide.md").read_text(encoding="utf-8")
    teaching = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    assert f"All {count} slides fit 1280×720" in guide
    assert f"test_slides_fit.py`, {count} slides)" in teaching
