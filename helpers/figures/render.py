"""How every figure looks and reaches the page: one style sized for a projector at 1280×720, the
attention colour map on a fixed 0..1 scale, `render`/`to_png` (bytes for a widget), and `show`
(the notebook's picture, sized to fit, with its alt text).
"""

from __future__ import annotations

import functools
import io
import math

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure

from helpers.figures import palette

ATTENTION_CMAP = "viridis"


HEAD_COLOURS = palette.HEAD_COLOURS  # one palette for figures and panels: fills


HEAD_TEXT = palette.HEAD_TEXT  # the same, darkened to 4.5:1 on white where needed: text


HEAD_LINES = palette.HEAD_LINES  # ... and to 3:1: lines and markers


# One style for every figure, set here: what the back row of a room sees on a projector at
# 1280x720, in JupyterLab's notebook view. `show` sizes each picture to fit that view and records
# the smallest text it drew, in screen pixels (tests/test_figures.py reads it from every committed
# notebook and wants at least MIN_TEXT_PX, as large as the panels' text).
# px: an output image gets 848 at 1280x720 with the file browser open (measured in Chromium)
DISPLAY_WIDTH = 840


DISPLAY_HEIGHT = 520  # px: the notebook shows 599 px of height at 720 (measured), less a margin


MAX_DPI = 120  # a small figure grows to at most this many pixels per inch


MIN_TEXT_PX = 14


FONT = 13  # pt: titles, axis labels, legends


SMALL = 12  # pt: tick labels and numbers inside cells, the smallest text a figure uses


STYLE = {
    "font.size": SMALL,
    "axes.titlesize": FONT + 1,
    "axes.labelsize": FONT,
    "xtick.labelsize": SMALL,
    "ytick.labelsize": SMALL,
    "legend.fontsize": SMALL,
    "figure.titlesize": FONT + 1,
}


def _styled(function):
    """Build the figure in the course's style (STYLE), every tick label at SMALL."""

    @functools.wraps(function)
    def styled(*args, **kwargs) -> Figure:
        with matplotlib.rc_context(STYLE):
            fig = function(*args, **kwargs)
            for ax in fig.axes:
                ax.tick_params(labelsize=SMALL)
        return fig

    return styled


def _cmap():
    cmap = matplotlib.colormaps[ATTENTION_CMAP].copy()
    cmap = cmap.with_extremes(bad="white")  # the gaps between tiles of a mosaic
    return cmap


def colormap_table(name: str = ATTENTION_CMAP) -> list[str]:
    """The attention colour map as 256 '#rrggbb' strings: weight w is entry round(255 w). The
    panels drawn in the browser use it, so they match these figures."""
    colours = matplotlib.colormaps[name](np.linspace(0, 1, 256), bytes=True)
    return [f"#{r:02x}{g:02x}{b:02x}" for r, g, b, _ in colours]


def display_dpi(fig: Figure) -> float:
    """Pixels per inch that make the figure as large as the notebook's view allows (at most
    DISPLAY_WIDTH x DISPLAY_HEIGHT), but no more than MAX_DPI."""
    width, height = fig.get_size_inches()
    return min(MAX_DPI, DISPLAY_WIDTH / width, DISPLAY_HEIGHT / height)


def shown_width(fig: Figure) -> int:
    """The width in pixels at which `show` displays the figure (its PNG's own width)."""
    return round(fig.get_figwidth() * display_dpi(fig))


def render(fig: Figure, dpi: float | None = None, fmt: str = "png") -> tuple[bytes, float]:
    """The figure as PNG (or JPEG) bytes at `dpi` (default: `display_dpi`), and the height in
    pixels of the smallest text drawn on it (inf if none): every string the renderer drew, with
    its size in points, turned into pixels at that dpi."""
    from matplotlib.backends.backend_agg import RendererAgg

    dpi = dpi or display_dpi(fig)
    sizes = []
    draw_text = RendererAgg.draw_text

    def measured(self, gc, x, y, s, prop, *args, **kwargs):
        if s.strip():
            ismath = kwargs.get("ismath", args[1] if len(args) > 1 else False)
            scripts = ismath and ("^" in s or "_" in s)  # mathtext draws them at 0.7 of the size
            sizes.append(prop.get_size_in_points() * (0.7 if scripts else 1.0))
        return draw_text(self, gc, x, y, s, prop, *args, **kwargs)

    buffer = io.BytesIO()
    RendererAgg.draw_text = measured
    try:
        extra = {"pil_kwargs": {"quality": 85}} if fmt == "jpeg" else {}
        fig.savefig(buffer, format=fmt, dpi=dpi, **extra)
    finally:
        RendererAgg.draw_text = draw_text
    return buffer.getvalue(), min(sizes, default=math.inf) * dpi / 72


def to_png(fig: Figure, dpi: float | None = None) -> bytes:
    """Render a figure to PNG bytes (for `widgets.Image`), by default at `display_dpi`."""
    return render(fig, dpi)[0]


def _alt(fig: Figure) -> str:
    """A text alternative for a screen reader: the figure's titles; a figure without any is
    described by its headings drawn as text, its legend and its axes."""
    titles = [fig._suptitle.get_text()] if fig._suptitle else []
    titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
    if not titles:
        for ax in fig.axes:
            titles += [t.get_text() for t in ax.texts if len(t.get_text()) > 12][:4]
            legend = ax.get_legend()
            if legend is not None:
                titles.append("lines: " + ", ".join(t.get_text() for t in legend.get_texts()))
            axes = [ax.get_xlabel(), ax.get_ylabel()]
            if all(axes):
                titles.append(f"{axes[1]} against {axes[0]}")
    return "; ".join(" ".join(t.replace("$", "").split()) for t in titles if t.strip()) or "figure"


def show(fig: Figure, jpeg: bool = False) -> None:
    """Display a figure in a notebook (no pyplot involved, so nothing else is shown), sized by
    `display_dpi`, with its titles as alt text and, in the output's metadata, the smallest text
    in screen pixels (`course.text_px`) and the width it is shown at.

    jpeg=True suits pictures of raw weights: they are noise, which PNG cannot compress (a
    384 x 384 matrix takes ~500 KB as PNG, ~100 KB as JPEG), and the notebook is stored in git.
    """
    from IPython.display import Image, display

    fmt = "jpeg" if jpeg else "png"
    data, text_px = render(fig, fmt=fmt)
    width = shown_width(fig)
    course = {"text_px": round(text_px, 1), "width": width}
    display(Image(data, format=fmt, width=width, alt=_alt(fig), metadata={"course": course}))


def _matrix(t: torch.Tensor, rank: int, what: str) -> torch.Tensor:
    t = torch.as_tensor(t).detach().cpu().float()
    if t.dim() != rank:
        raise ValueError(f"{what}: expected {rank} dims; got shape {tuple(t.shape)}.")
    return t
