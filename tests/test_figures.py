"""What the back row sees: every figure a notebook shows has its smallest text at least
MIN_TEXT_PX (14 px) on screen at 1280x720 in JupyterLab's notebook view, as large as the panels'
text. `plots.show` records that size in each output's metadata; this reads it from the committed
notebooks, and checks that the measure itself can fail."""

import json
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure

from helpers.figures import plots

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _pictures(path: Path):
    """(cell index, output) of every image a notebook's committed outputs show."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for i, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            if {"image/png", "image/jpeg"} & set(output.get("data", {})):
                yield i, output


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_a_notebook_shows_has_text_readable_from_the_back(path):
    for i, output in _pictures(path):
        mime = next(m for m in ("image/png", "image/jpeg") if m in output["data"])
        course = output.get("metadata", {}).get(mime, {}).get("course")
        assert course, f"{path.name} cell {i}: an image not shown through plots.show"
        assert course["text_px"] >= plots.MIN_TEXT_PX, (path.name, i, course)
        assert course["width"] <= plots.DISPLAY_WIDTH, (path.name, i, course)
        alt = output["metadata"][mime].get("alt", "")
        assert len(alt) > 12 and alt != "figure", (path.name, i, alt)  # says what it shows


def test_the_measure_sees_small_text_and_a_figure_too_wide_for_the_view():
    fig = Figure(figsize=(4, 3))
    fig.add_subplot().set_title("tiny", fontsize=6)
    _, px = plots.render(fig, dpi=90)
    assert px == pytest.approx(6 * 90 / 72)  # 7.5 px: the check above would fail on it
    wide = Figure(figsize=(20, 3))
    assert plots.display_dpi(wide) == pytest.approx(plots.DISPLAY_WIDTH / 20)  # shrunk to fit
    tall = Figure(figsize=(4, 13))
    assert plots.display_dpi(tall) == pytest.approx(plots.DISPLAY_HEIGHT / 13)
    assert plots.display_dpi(Figure(figsize=(2, 2))) == plots.MAX_DPI  # grown, within a limit


def test_the_course_style_draws_every_text_at_least_small():
    # an attention map with a colour bar: ticks, labels, the numbers in its cells, the bar's
    weights = torch.softmax(torch.randn(6, 6, generator=torch.Generator().manual_seed(0)), -1)
    fig = plots.attention_map(weights, list("abcdef"), "one head")
    _, px = plots.render(fig, dpi=72)  # at 72 dpi a point is a pixel
    assert px == pytest.approx(plots.SMALL)


def test_the_training_curve_widget_is_shown_at_the_size_it_was_drawn():
    from helpers.panels import TrainingView

    view = TrainingView(steps=10)
    view.update(9, type("Run", (), {"first": [3.5] * 10, "repeat": [3.0] * 10, "chance": 3.47}))
    fig = plots.copy_curves([3.5] * 10, [3.0] * 10, 3.47, 10)
    width = int.from_bytes(view.picture.value[16:20], "big")  # the PNG's own width
    assert view.picture.layout.width == f"{width}px" == f"{plots.shown_width(fig)}px"
