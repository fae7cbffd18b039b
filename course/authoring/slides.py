"""Slide metadata for RISE (jupyterlab-rise), derived from each notebook's own structure.

`python -m course.authoring.slides notebooks/*.ipynb` writes it; `make notebooks` runs it, and a
test checks that every committed notebook carries exactly what these rules give, so a new cell
cannot leave a slide half-made. The rules follow the course's "one idea per section" shape:
- the title cell and every markdown cell that opens a section (`## `) start a **slide**;
- a markdown cell inside a section (no heading) starts a **subslide**, the next step of the idea;
- a code cell continues its slide (`-`): the idea, its code and its check are seen together;
- a solution cell is **skipped**: a slideshow never shows an answer (the student copy's skeleton,
  in its place, is a fragment; the answer stays one deliberate `lab --solutions` away);
- a code cell right after another code cell (an exercise's check, a second picture) is a
  **fragment**: the teacher reveals it after asking the class;
- but a code cell that would push its slide below a 1280x720 screen starts a **subslide** of its
  own instead: the prose first, then (Space) the code and its result. Heights are estimated from
  the cells (prose lines at 22 px, code and output lines at 17 px, pictures at their shown size,
  calibrated against the slideshow in Chromium: within 60 px for all 279 cells, 2026-11-25; a
  drawn panel at about the height it takes on a slide, PANEL_HEIGHT, not its one-line
  placeholder); tests/browser/test_slides_fit.py measures the real slides, and
  tests/browser/test_slides.py 03's panel slide once drawn.
The notebook's `rise` metadata turns on a scroll bar for a slide still taller than the screen.
"""

from __future__ import annotations

import base64
import io
import re
import sys
import textwrap

import nbformat

RISE = {"scroll": True, "width": "100%", "height": "100%", "transition": "none", "theme": "white"}


SCREEN = 660  # px a slide may fill: 720, less RISE's 20-px top margin and slack for the estimate
# a drawn widget's height on a slide (its output's text/plain is the "▶ … drawn here" line): a
# panel's controls, message and toolbar (~120 px) and its maps at ~300 px (they give up height to
# fit what the slide leaves them, down to 220 px in panels/js/build.js, where labels get cramped);
# the predict-then-run box and 18's training curve keep their own size
WIDGET_HEIGHTS = {"the predict-then-run box": 150, "the training curve": 340}
PANEL_HEIGHT = 440
PROSE_LINE, PROSE_CHARS, PARAGRAPH = 31, 100, 22  # rise.css: 22 px text, 1.4 line height
CODE_LINE, CODE_PAD, OUTPUT_PAD, PICTURE_PAD = 23, 22, 8, 60  # 17 px code and output


def _prose_height(source: str) -> float:
    height = 0.0
    for block in re.split(r"\n\s*\n", source.strip()):
        if block.startswith("#"):
            height += 70 if block.startswith("# ") else 62
            continue
        for item in re.split(r"\n(?=- |\d+\. )", block):  # list items wrap on their own
            height += max(1, len(textwrap.wrap(" ".join(item.split()), PROSE_CHARS))) * PROSE_LINE
        height += PARAGRAPH
    return height


def _picture_height(data: dict, metadata: dict) -> float:
    from PIL import Image  # matplotlib's own dependency

    kind = "image/png" if "image/png" in data else "image/jpeg"
    width, height = Image.open(io.BytesIO(base64.b64decode(data[kind]))).size
    shown = metadata.get(kind, {}).get("width", width)
    return height * shown / width + PICTURE_PAD


def estimated_height(cell) -> float:
    """About how many px of a 1280x720 slide a cell takes (see the module docstring)."""
    if cell.cell_type == "markdown":
        return _prose_height(cell.source)
    lines = cell.source.rstrip("\n").split("\n") if cell.source.strip() else []
    height = len(lines) * CODE_LINE + CODE_PAD * bool(lines)
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/png" in data or "image/jpeg" in data:
            height += _picture_height(data, out.get("metadata", {}))
            continue
        text = out.get("text", "") or "".join(data.get("text/plain", ""))
        if "application/vnd.jupyter.widget-view+json" in data:  # drawn once the cell runs
            what = str(text).removeprefix("'").removeprefix("▶ ").split(":")[0]
            height += WIDGET_HEIGHTS.get(what, PANEL_HEIGHT) + OUTPUT_PAD
            continue
        height += len(str(text).rstrip("\n").split("\n")) * CODE_LINE + OUTPUT_PAD
    return height


def slide_types(cells: list) -> list[str]:
    """The slide_type of each cell, by the rules above."""
    types, height = [], 0.0
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            opens = i == 0 or cell.source.lstrip().startswith("## ")
            kind = "slide" if opens else "subslide"
        elif "solution" in cell.metadata.get("tags", []):
            types.append("skip")  # takes no room on its slide
            continue
        elif i > 0 and cells[i - 1].cell_type == "code":
            kind = "fragment"
        else:
            kind = "-"
        cell_height = estimated_height(cell)
        if cell.cell_type == "code" and height + cell_height > SCREEN:
            kind = "subslide"  # below the screen: on a slide of its own
        height = cell_height if kind in ("slide", "subslide") else height + cell_height
        types.append(kind)
    return types


def with_slides(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Set every cell's slideshow metadata and the notebook's RISE settings, in place."""
    for cell, kind in zip(notebook.cells, slide_types(notebook.cells)):
        cell.metadata["slideshow"] = {"slide_type": kind}
    notebook.metadata["rise"] = dict(RISE)
    return notebook


if __name__ == "__main__":
    for path in sys.argv[1:]:
        notebook = nbformat.read(path, as_version=4)
        nbformat.write(with_slides(notebook), path)
        kinds = slide_types(notebook.cells)
        print(f"{path}: {kinds.count('slide')} slides, {kinds.count('subslide')} subslides")
