"""Slide metadata for RISE (jupyterlab-rise), derived from each notebook's own structure.

`python -m tests.slides notebooks/*.ipynb` writes it; `make notebooks` runs it, and a test checks
that every committed notebook carries exactly what these rules give, so a new cell cannot leave a
slide half-made. The rules follow the course's "one idea per section" shape:
- the title cell and every markdown cell that opens a section (`## `) start a **slide**;
- a markdown cell inside a section (no heading) starts a **subslide**, the next step of the idea;
- a code cell continues its slide (`-`): the idea, its code and its check are seen together;
- a solution cell, and a code cell right after another code cell (an exercise's check, a second
  picture), is a **fragment**: the teacher reveals it after asking the class.
The notebook's `rise` metadata turns on a scroll bar for the tall slides (panels, long outputs).
"""

from __future__ import annotations

import sys

import nbformat

RISE = {"scroll": True, "width": "100%", "height": "100%", "transition": "none", "theme": "white"}


def slide_types(cells: list) -> list[str]:
    """The slide_type of each cell, by the rules above."""
    types = []
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            opens = i == 0 or cell.source.lstrip().startswith("## ")
            types.append("slide" if opens else "subslide")
        elif "solution" in cell.metadata.get("tags", []) or (
            i > 0 and cells[i - 1].cell_type == "code"
        ):
            types.append("fragment")
        else:
            types.append("-")
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
