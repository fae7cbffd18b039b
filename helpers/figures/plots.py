"""Figures from plain tensors and labels. Knows nothing of modules or widgets.

Every function returns a `matplotlib.figure.Figure` built without pyplot, so a widget callback
never leaves a figure behind for the notebook to show; `to_png` turns one into PNG bytes for a
`widgets.Image`. Attention weights always use one colour map on a fixed 0..1 scale.
"""

from __future__ import annotations

import functools
import io
import math
import textwrap

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from helpers.figures import palette

__all__ = [
    "ATTENTION_CMAP",
    "colormap_table",
    "to_png",
    "show",
    "attention_map",
    "heads_mosaic",
    "block_matrix",
    "loss_curves",
    "qkv_layouts",
    "masks_and_maps",
    "timings",
    "parameter_counts",
    "saturation",
    "head_cut",
    "head_reach",
]

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


@_styled
def attention_map(
    weights: torch.Tensor, words: list[str], title: str, annotate: bool = True
) -> Figure:
    """One T x T attention map: rows are queries, columns keys, words on both axes."""
    w = _matrix(weights, 2, "attention_map takes one (T, T) map")
    T = w.shape[0]
    width, height = 2.6 + 0.55 * T, 1.6 + 0.5 * T
    fig = Figure(figsize=(width, height))  # fixed margins (in inches): fast enough for a slider
    fig.subplots_adjust(
        left=1.1 / width, right=1 - 0.3 / width, bottom=1.2 / height, top=1 - 0.4 / height
    )
    ax = fig.add_subplot()
    image = ax.imshow(w.numpy(), cmap=_cmap(), vmin=0.0, vmax=1.0)
    ax.set_xticks(range(T), words, rotation=45, ha="right", fontsize=FONT)
    ax.set_yticks(range(T), words, fontsize=FONT)
    ax.set_xlabel("key (attended to)", fontsize=FONT)
    ax.set_ylabel("query (attending)", fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1)
    if annotate and T <= 12:
        table = colormap_table()
        for i in range(T):
            for j in range(T):
                value = float(w[i, j])
                cell = table[max(0, min(255, round(value * 255)))]  # as the panels choose
                colour = max(("#000000", "#ffffff"), key=lambda ink: palette.contrast(ink, cell))
                ax.text(
                    j, i, f"{value:.2f}", ha="center", va="center", fontsize=SMALL, color=colour
                )
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    return fig


@_styled
def heads_mosaic(
    weights: torch.Tensor,
    words: list[str],
    title: str,
    cols: int | None = None,
    titles: list[str] | None = None,
    keys: list[str] | None = None,
    marks: torch.Tensor | None = None,
) -> Figure:
    """All h maps (h, T_q, T_k) as tiles of one image in one axes (fast to redraw), tile i titled
    `titles[i]` (default: head i). `words` label the queries, `keys` the keys (default: the same
    words, as in self-attention; cross-attention's maps are rectangular). `marks`, a boolean
    (h, T_q, T_k), puts a × on those cells (e.g. the weights dropout set to 0)."""
    w = _matrix(weights, 3, "heads_mosaic takes (h, T_q, T_k) maps")
    h, T_q, T_k = w.shape
    keys = words if keys is None else keys
    if marks is not None and tuple(marks.shape) != tuple(w.shape):
        raise ValueError(
            f"heads_mosaic takes marks of the maps' shape {tuple(w.shape)}; got "
            f"{tuple(marks.shape)}. Pass one boolean per weight, e.g. weights == 0."
        )
    cols = cols or min(h, 4)
    rows = math.ceil(h / cols)
    # inches per token: the figure fits the notebook's view (DISPLAY_WIDTH x DISPLAY_HEIGHT at
    # 84 dpi or more, where SMALL text is 14 px); labels too close together are thinned, never
    # shrunk (every `step`-th token labelled)
    height_left = 6.0 - 1.4 - 0.25 * rows

    def sized(gap: int) -> tuple[torch.Tensor, float]:
        canvas = _tile(w, cols, gap)
        return canvas, min(0.42, 7.6 / canvas.shape[1], height_left / canvas.shape[0])

    canvas, cell = sized(1)
    gap = math.ceil(0.3 / cell)  # the gap between rows of tiles holds a tile's title
    canvas, cell = sized(gap)
    fig = Figure(
        figsize=(2.2 + cell * canvas.shape[1], 1.4 + cell * canvas.shape[0] + 0.25 * rows),
        layout="constrained",
    )
    ax = fig.add_subplot()
    image = ax.imshow(canvas.numpy(), cmap=_cmap(), vmin=0.0, vmax=1.0)
    step = max(1, math.ceil(0.17 / cell))  # a SMALL label needs about 0.17 inch
    ax.set_xticks(
        [c * (T_k + gap) + j for c in range(min(cols, h)) for j in range(0, T_k, step)],
        keys[::step] * min(cols, h),
        rotation=90,
        fontsize=SMALL,
    )
    ax.set_yticks(
        [r * (T_q + gap) + j for r in range(rows) for j in range(0, T_q, step)],
        words[::step] * rows,
        fontsize=SMALL,
    )
    for i in range(h):
        r, c = divmod(i, cols)
        x_mid = c * (T_k + gap) + (T_k - 1) / 2
        label = titles[i] if titles else f"head {i}"
        ax.text(x_mid, r * (T_q + gap) - 0.6, label, ha="center", va="bottom", fontsize=FONT)
        if marks is not None:
            for a, b in marks[i].nonzero().tolist():
                ax.text(c * (T_k + gap) + b, r * (T_q + gap) + a, "×", ha="center",
                        va="center", color="white", fontsize=SMALL + 2)  # fmt: skip
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("key (attended to)", fontsize=FONT)
    ax.set_ylabel("query (attending)", fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1, pad=24)
    fig.colorbar(image, ax=ax, shrink=0.9, label="attention weight")
    return fig


def _tile(w: torch.Tensor, cols: int, gap: int) -> torch.Tensor:
    """(h, T_q, T_k) maps -> one (rows·(T_q+gap)−gap, cols·(T_k+gap)−gap) canvas, NaN between."""
    h, T_q, T_k = w.shape
    rows = math.ceil(h / cols)
    canvas = torch.full((rows * (T_q + gap) - gap, cols * (T_k + gap) - gap), float("nan"))
    for i in range(h):
        r, c = divmod(i, cols)
        canvas[r * (T_q + gap) : r * (T_q + gap) + T_q, c * (T_k + gap) : c * (T_k + gap) + T_k] = (
            w[i]
        )
    return canvas


@_styled
def block_matrix(weight: torch.Tensor, h: int, name: str = "W^Q", cut: str = "columns") -> Figure:
    """A d_model x d_model projection in the paper's layout (x @ W: rows = input features,
    columns = output features), each head's block tinted in its own colour: d_k columns for
    W^Q, W^K, W^V (cut="columns": head i's output), d_k rows for W^O (cut="rows": the features
    of the concatenation that head i wrote)."""
    if cut not in ("columns", "rows"):
        raise ValueError(f'block_matrix cuts "columns" or "rows"; got cut={cut!r}.')
    w = _matrix(weight, 2, "block_matrix takes one (d_model, d_model) matrix")
    d_in, d_out = w.shape
    by_rows = cut == "rows"
    d_k = (d_in if by_rows else d_out) // h
    fig = Figure(figsize=(7.2, 6.0))  # fixed margins: constrained layout is slow on a slider
    top = 0.86 if by_rows else 0.84  # columns: room for the W_i^Q labels above
    fig.subplots_adjust(left=0.16 if by_rows else 0.1, right=0.97, bottom=0.09, top=top)
    ax = fig.add_subplot()
    limit = float(w.abs().max()) or 1.0
    ax.imshow(w.numpy(), cmap="gray", vmin=-limit, vmax=limit, interpolation="nearest")
    symbol, _, role = name.partition("^")
    for i in range(h):
        colour = HEAD_COLOURS[i % len(HEAD_COLOURS)]
        start = i * d_k - 0.5
        label = f"${symbol}_{{{i}}}^{{{role}}}$"  # as the text writes it: W_i^Q
        if by_rows:
            ax.add_patch(Rectangle((-0.5, start), d_out, d_k, facecolor=colour, alpha=0.4, lw=0))
            ax.axhline(start, color="black", lw=1.5)
            ax.text(-1.0, start + d_k / 2, f"head {i}", ha="right", va="center", fontsize=FONT,
                    color=HEAD_TEXT[i % len(HEAD_TEXT)])  # fmt: skip
        else:
            ax.add_patch(Rectangle((start, -0.5), d_k, d_in, facecolor=colour, alpha=0.4, lw=0))
            ax.axvline(start, color="black", lw=1.5)
            ax.text(
                start + d_k / 2,
                -1.0,
                label,
                ha="center",
                va="bottom",
                fontsize=FONT + 6,
                color=HEAD_TEXT[i % len(HEAD_TEXT)],
            )  # fmt: skip (scripts: 0.7 of it)
    if by_rows:
        ax.axhline(d_in - 0.5, color="black", lw=1.5)
        ax.set_yticks([])
        ax.set_xlabel(f"output feature (d_model = {d_out})", fontsize=FONT)
        ax.set_ylabel(f"concat feature (h × d_k = {h} × {d_k})", fontsize=FONT, labelpad=58)
        what = f"{h} blocks of {d_k} rows: block i meets head i's output"
    else:
        ax.axvline(d_out - 0.5, color="black", lw=1.5)
        ax.set_xlabel(f"output feature (d_model = {d_out} = h × d_k = {h} × {d_k})", fontsize=FONT)
        ax.set_ylabel(f"input feature (d_model = {d_in})", fontsize=FONT)
        what = f"{h} blocks of {d_k} columns, one per head"
    ax.set_title(f"{name} as x·W ({d_in} × {d_out}): {what}", fontsize=FONT + 1,
                 pad=12 if by_rows else 40)  # fmt: skip
    return fig


@_styled
def parameter_counts(
    series: dict[str, tuple[list[int], list[int]]],
    title: str,
    highlight: int | None = None,
    log_x: bool = False,
) -> Figure:
    """Parameters against the number of heads h: one line per label, each (head counts, counts).
    `highlight` marks the current h."""
    fig = Figure(figsize=(7, 3.6))  # fixed margins: this is redrawn by a slider
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.15, top=0.9)
    ax = fig.add_subplot()
    top = 0
    for i, ((label, (hs, counts)), colour) in enumerate(zip(series.items(), HEAD_LINES)):
        style = "-" if i == 0 else "o--"
        ax.plot(hs, counts, style, color=colour, lw=5 if i == 0 else 2, ms=8, label=label)
        top = max(top, *counts)
    if highlight is not None:
        ax.axvline(highlight, color="0.3", ls=":", lw=1.5)
        ax.text(
            highlight, top * 0.04, f"h = {highlight}", ha="center", va="bottom", fontsize=SMALL,
            bbox={"facecolor": "white", "edgecolor": "0.3", "boxstyle": "round"},
        )  # fmt: skip
    if log_x:
        ax.set_xscale("log", base=2)
    ticks = sorted({h for hs, _ in series.values() for h in hs})
    ax.set_xticks(ticks, [str(h) for h in ticks], fontsize=SMALL)
    ax.set_ylim(0, top * 1.3)
    ax.set_xlabel("number of heads h", fontsize=FONT)
    ax.set_ylabel("parameters", fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1)
    ax.legend(fontsize=SMALL, loc="center left")  # below the lines at 4·d_model², clear of them
    ax.grid(alpha=0.3)
    return fig


@_styled
def loss_curves(curves: dict[str, list[float]], title: str) -> Figure:
    """Training loss against step, one line per label."""
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for (label, losses), colour in zip(curves.items(), HEAD_LINES):
        ax.plot(range(1, len(losses) + 1), losses, color=colour, lw=2, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("training step", fontsize=FONT)
    ax.set_ylabel("loss (cross-entropy, log scale)", fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1)
    ax.legend(fontsize=FONT)
    ax.grid(alpha=0.3, which="both")
    return fig


@_styled
def copy_curves(first: list[float], repeat: list[float], chance: float, steps: int) -> Figure:
    """The copying task's two losses against the training step, each the mean of the last 50
    steps, on axes fixed to `steps` steps and 0 .. chance + 0.5, so a curve drawn while training
    grows into the same frame. A dashed line marks chance, ln vocab."""
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for label, losses, colour in [
        ("first copy: cannot be predicted", first, HEAD_LINES[0]),
        ("the repeat: can be copied", repeat, HEAD_LINES[1]),
    ]:
        if losses:
            t = torch.tensor(losses)
            smooth = torch.stack([t[max(0, i - 49) : i + 1].mean() for i in range(len(t))])
            ax.plot(range(1, len(t) + 1), smooth.tolist(), color=colour, lw=2.5, label=label)
    ax.axhline(chance, color="0.3", ls="--", lw=1.2)
    ax.text(steps * 0.99, chance - 0.05, f"chance: ln vocab = {chance:.2f}", ha="right",
            va="top", fontsize=SMALL, color="0.25")  # fmt: skip
    ax.set_xlim(0, steps)
    ax.set_ylim(0, chance + 0.5)
    ax.set_xlabel("training step", fontsize=FONT)
    ax.set_ylabel("loss (mean of 50 steps)", fontsize=FONT)
    ax.tick_params(labelsize=SMALL)
    if first or repeat:  # an empty frame (before training) has nothing to name
        ax.legend(fontsize=FONT, loc="center right")
    ax.grid(alpha=0.3)
    return fig


@_styled
def qkv_layouts(qkv_weight: torch.Tensor, h: int, head: int = 0) -> Figure:
    """Three layouts of the same numbers, in nn.Linear's (out, in) layout and at one scale: a
    GPT-style (3 d_model, d_model) qkv weight, its W^Q rows, one head's W_i^Q. Colours = heads."""
    w = _matrix(qkv_weight, 2, "qkv_layouts takes the (3 d_model, d_model) weight")
    d_model = w.shape[1]
    d_k = d_model // h
    limit = float(w.abs().max()) or 1.0
    fig = Figure(figsize=(10, 6.0))
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.08, top=0.86, wspace=0.45)
    axes = fig.subplots(1, 3, width_ratios=[1, 1, 1], height_ratios=[1])
    pieces = [
        (w, "GPT-style qkv.weight\n(3·d_model, d_model)"),
        (w[:d_model], "W^Q = rows 0 .. d_model\n(d_model, d_model)"),
        (
            w[head * d_k : (head + 1) * d_k],
            f"head {head}: W_{head}^Q\n(d_k, d_model) = ({d_k}, {d_model})",
        ),
    ]
    for ax, (matrix, title) in zip(axes, pieces):
        ax.imshow(matrix.numpy(), cmap="gray", vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set_title(title, fontsize=FONT)
        ax.set_xlabel("input feature (d_model)", fontsize=SMALL)
        ax.set_ylim(3 * d_model - 0.5, -0.5)  # one scale for all three: sizes compare by eye
    axes[0].set_ylabel("output feature", fontsize=FONT)
    for part, name in enumerate(("Q", "K", "V")):  # bands of the qkv weight, split into heads
        for i in range(h):
            top = part * d_model + i * d_k - 0.5
            colour = HEAD_COLOURS[i % len(HEAD_COLOURS)]
            axes[0].add_patch(
                Rectangle((-0.5, top), d_model, d_k, facecolor=colour, alpha=0.35, lw=0)
            )
        axes[0].axhline(part * d_model - 0.5, color="black", lw=2)
        axes[0].text(d_model + 1, (part + 0.5) * d_model, name, va="center", fontsize=FONT + 2)
    for i in range(h):
        colour = HEAD_COLOURS[i % len(HEAD_COLOURS)]
        axes[1].add_patch(
            Rectangle((-0.5, i * d_k - 0.5), d_model, d_k, facecolor=colour, alpha=0.35, lw=0)
        )
        axes[1].axhline(i * d_k - 0.5, color="black", lw=1)
    colour = HEAD_COLOURS[head % len(HEAD_COLOURS)]
    axes[2].add_patch(Rectangle((-0.5, -0.5), d_model, d_k, facecolor=colour, alpha=0.35, lw=0))
    fig.suptitle(
        "The same numbers in three layouts (nn.Linear's (out, in): rows are output features)",
        fontsize=FONT + 1,
    )
    return fig


@_styled
def masks_and_maps(
    masks: dict[str, torch.Tensor],
    maps: dict[str, torch.Tensor],
    words: list[str] | dict[str, list[str]],
) -> Figure:
    """Top row: boolean masks (T, T), white = may attend. Bottom row: the map each one gives.
    `words` labels every column, or is {mask name: labels} when the masks need different ones
    (a padding mask's last positions are "<pad>", a causal mask's are words)."""
    n = len(masks)
    labels = words if isinstance(words, dict) else dict.fromkeys(masks, words)
    T = len(next(iter(labels.values())))
    fig = Figure(figsize=(2.9 * n + 1.2, 6.0), layout="constrained")  # fits the view at 84 dpi
    axes = fig.subplots(2, n, squeeze=False)
    for col, (name, mask) in enumerate(masks.items()):
        top, bottom = axes[0, col], axes[1, col]
        top.imshow(_matrix(mask, 2, "mask").numpy(), cmap="gray", vmin=0, vmax=1)
        top.set_title(f"mask: {name}\n(white = may attend)", fontsize=FONT)
        image = bottom.imshow(_matrix(maps[name], 2, "map").numpy(), cmap=_cmap(), vmin=0, vmax=1)
        bottom.set_title(f"attention with {name}", fontsize=FONT)
        for ax in (top, bottom):
            ax.set_xticks(range(T), labels[name], rotation=90, fontsize=SMALL)
            ax.set_yticks(range(T), labels[name], fontsize=SMALL)
        bottom.set_xlabel("key (attended to)", fontsize=SMALL)
    axes[0, 0].set_ylabel("query", fontsize=FONT)
    axes[1, 0].set_ylabel("query", fontsize=FONT)
    fig.colorbar(image, ax=axes[1, :].tolist(), shrink=0.8, label="attention weight")
    return fig


@_styled
def timings(
    head_counts: list[int],
    series: dict[str, list[float]],
    title: str,
    spread: dict[str, list[tuple[float, float]]] | None = None,
    xlabel: str = "number of heads h (d_k = d_model / h)",
    ylabel: str = "forward time (ms, median)",
) -> Figure:
    """Milliseconds against the number of heads h (or another power-of-two count: `xlabel`), one
    line per way of computing. `spread`, if given, is {label: [(low, high) per h]}, drawn as a
    band around the line (e.g. the quartiles), so the reader sees which differences are larger
    than the noise."""
    fig = Figure(figsize=(7, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for (label, ms), colour in zip(series.items(), HEAD_LINES):
        ax.plot(head_counts, ms, "o-", color=colour, lw=2, ms=7, label=label)
        if spread and label in spread:
            low, high = zip(*spread[label])
            ax.fill_between(head_counts, low, high, color=colour, alpha=0.25, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_xticks(head_counts, [str(h) for h in head_counts], fontsize=SMALL)
    ax.set_ylim(0, max(max(ms) for ms in series.values()) * 1.15)
    ax.set_xlabel(xlabel, fontsize=FONT)
    ax.set_ylabel(ylabel, fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1)
    ax.legend(fontsize=SMALL)
    ax.grid(alpha=0.3)
    return fig


@_styled
def saturation(d_ks: list[int], series: dict[str, dict[str, list[float]]], T: int) -> Figure:
    """One panel per measure against d_k (log axis), one line per label in `series`:
    {label: {measure: [one value per d_k], ...}}, the measures of `experiment.Saturation`, drawn
    in the order given. Dotted lines mark a uniform row and a one-hot one where they are known.
    A "query_grad_median" measure is drawn dashed in the "query_grad" panel (solid: the mean)."""
    known = {
        "max_weight": ("largest weight in a row", [(1 / T, f"uniform: 1/{T}"), (1.0, "one-hot")]),
        "entropy": ("row entropy (nats)", [(math.log(T), f"uniform: ln {T}"), (0, "one-hot")]),
        "grad_norm": ("gradient norm into the scores", [(0, "one-hot")]),
        "query_grad": ("gradient norm into q", []),
        "query_grad_both": ("gradient norm into q:\nmean (solid), median (dashed)", []),
        "others_share": (f"share of the scores' gradient for\nthe {T - 2} keys below the top two",
                         [((T - 2) / T, "uniform"), (0, "one-hot")]),
    }  # fmt: skip
    fields = [f for f in next(iter(series.values())) if f != "query_grad_median"]
    median = "query_grad_median" in next(iter(series.values()))
    cols = min(len(fields), 2)  # two panels a row: each wide enough for SMALL text at 84 dpi
    rows = math.ceil(len(fields) / cols)
    fig = Figure(figsize=(4.2 * cols, 0.6 + 2.7 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).flatten()
    for ax in axes[len(fields) :]:
        ax.remove()  # an odd number of measures: the last row has one panel
    axes = axes[: len(fields)]
    for ax, field in zip(axes, fields):
        both = field == "query_grad" and median
        label, marks = known["query_grad_both" if both else field]
        for (name, values), colour in zip(series.items(), HEAD_LINES):
            ax.plot(d_ks, values[field], "o-", color=colour, lw=2, ms=6, label=name)
            if both:
                ax.plot(d_ks, values["query_grad_median"], "s--", color=colour, lw=2, ms=5)
        for y, text in marks:
            ax.axhline(y, color="#555", lw=1, ls=":")
            ax.text(d_ks[0], y, f" {text}", va="bottom", fontsize=SMALL, color="#555")
        ax.set_xscale("log", base=2)
        ax.set_xticks(d_ks, [str(d) for d in d_ks], fontsize=SMALL)
        ax.set_xlabel("d_k", fontsize=FONT)
        ax.set_title(label, fontsize=FONT)
        ax.grid(alpha=0.3)
        top = max(max(v[field]) for v in series.values())
        bounded = {"max_weight": (0, 1.12), "others_share": (0, 1.05)}  # shares: 0 .. 1
        bounded["entropy"] = (-0.1, max(top, math.log(T)) * 1.15)
        ax.set_ylim(*bounded.get(field, (0, top * 1.3)))
    axes[0].legend(fontsize=SMALL, loc="center right")
    fig.suptitle(f"softmax rows over {T} keys, q and k entries of variance 1", fontsize=FONT + 1)
    return fig


def _token_colours(T: int) -> list[str]:
    """Pale, distinct fills for T tokens (not head colours: here colour means *which token*)."""
    table = matplotlib.colormaps["Pastel1"].colors + matplotlib.colormaps["Pastel2"].colors
    return [matplotlib.colors.to_hex(table[t % len(table)]) for t in range(T)]


def _token_grid(ax, grid: torch.Tensor, x0: float, y0: float, colours: list[str]) -> None:
    """Cells of `grid` (rows, cols) of token indices, each filled with its token's colour and
    numbered, with the top-left corner at (x0, y0) in data units."""
    rows, cols = grid.shape
    for r in range(rows):
        for c in range(cols):
            t = int(grid[r, c])
            ax.add_patch(Rectangle((x0 + c, y0 + r), 1, 1, facecolor=colours[t],
                                   edgecolor="white", lw=1))  # fmt: skip
            ax.text(x0 + c + 0.5, y0 + r + 0.5, str(t), ha="center", va="center", fontsize=SMALL)


@_styled
def head_cut(source: torch.Tensor, cuts: dict[str, torch.Tensor], words: list[str]) -> Figure:
    """Where each number of q goes when it is cut into heads. `source` (T, d_model) holds, in each
    cell, the token it came from; each of `cuts` (h, T, d_k) holds the same token numbers after a
    way of cutting, drawn side by side below it. Cells are filled and numbered by token, and
    each row is labelled with the token the code believes it holds."""
    src = _matrix(source, 2, "head_cut takes source (T, d_model) token numbers")
    grids = {name: _matrix(g, 3, "head_cut takes cuts of (h, T, d_k)") for name, g in cuts.items()}
    T, d_model = src.shape
    h, _, d_k = next(iter(grids.values())).shape
    colours = _token_colours(T)
    gap, label = 1, 4.5  # cells between heads, and for the row labels
    width = max(h * d_k + (h - 1) * gap, d_model)
    total_w = len(grids) * (label + width) + 0.5
    widest = min(0.32, 10 / total_w)  # inches per cell: the figure fits the view's width
    chars = max(20, int(width * widest * 72 / (0.6 * FONT)))  # a title's line fits its panel
    # (title lines, grid (n, rows, cols), left, whether its n pieces are heads); bands of rows
    panels = [(textwrap.wrap("q = x · W^Q: row t holds token t's d_model features; head i owns "
                             "d_k columns", 2 * chars), src[None], 0, False)]  # fmt: skip
    panels += [
        (textwrap.wrap(name, chars), g, i * (label + width), True)
        for i, (name, g) in enumerate(grids.items())
    ]
    cell = widest
    for _ in range(3):  # and its height, where a line of text takes more cells as cells shrink
        line = 0.24 / cell  # cells per line of FONT text

        def heading(lines: list[str], line: float = line) -> float:  # a title and head labels
            return 0.4 + (len(lines) + 1.2) * line

        top_band = heading(panels[0][0]) + T + 1
        total_h = top_band + max(heading(p[0]) for p in panels[1:]) + T + 0.5
        cell = min(widest, 6.0 / total_h)
    fig = Figure(figsize=(cell * total_w, cell * total_h))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, total_w)
    ax.set_ylim(total_h, 0)
    ax.set_axis_off()
    for lines, grid, left, per_head in panels:
        top = top_band if per_head else 0
        x_start, y0 = left + label, top + heading(lines)
        ax.text(x_start, top + 0.4, "\n".join(lines), fontsize=FONT, va="top")
        if not per_head:  # which columns of q each head owns: features i·d_k .. (i+1)·d_k
            for i in range(d_model // d_k):
                x0 = x_start + i * d_k
                ax.plot([x0 + 0.15, x0 + d_k - 0.15], [y0 - 0.15] * 2,
                        color=HEAD_LINES[i % len(HEAD_LINES)], lw=2)  # fmt: skip
                ax.text(x0 + d_k / 2, y0 - 0.3, f"head {i}", ha="center", fontsize=SMALL,
                        color=HEAD_TEXT[i % len(HEAD_TEXT)], va="bottom")  # fmt: skip
        for i in range(len(grid)):
            x0 = x_start + i * (d_k + gap)
            _token_grid(ax, grid[i], x0, y0, colours)
            if per_head:
                ax.text(x0 + d_k / 2, y0 - 0.2, f"head {i}", ha="center", fontsize=SMALL,
                        color=HEAD_TEXT[i % len(HEAD_TEXT)], va="bottom")  # fmt: skip
        for t in range(T):  # the row labels the code believes: "token t"
            name = f"{t}: {words[t]}" if t < len(words) else str(t)
            ax.text(x_start - 0.3, y0 + t + 0.5, name, ha="right", va="center", fontsize=SMALL)
    return fig


@_styled
def head_reach(changes: dict[str, torch.Tensor], d_k: int) -> Figure:
    """Which output features each head can change: one panel per label, each (h, d_model) of
    how much output feature j moves (mean |change| over the tokens) when head i's output is set
    to zero (0 = not at all)."""
    grids = {
        name: _matrix(c, 2, "head_reach takes (h, d_model) changes") for name, c in changes.items()
    }
    h, d_model = next(iter(grids.values())).shape
    fig = Figure(figsize=(10, 1.3 + 0.32 * h * len(grids)), layout="constrained")
    axes = fig.subplots(len(grids), 1, squeeze=False)[:, 0]
    for ax, (name, grid) in zip(axes, grids.items()):
        image = ax.imshow(grid.numpy(), cmap="Greys", vmin=0, aspect="auto",
                          interpolation="nearest")  # fmt: skip
        for i in range(1, d_model // d_k):
            ax.axvline(i * d_k - 0.5, color=HEAD_LINES[0], lw=1, ls=":")
        ax.set_yticks(range(h), [f"head {i}" for i in range(h)], fontsize=SMALL)
        for i, tick in enumerate(ax.get_yticklabels()):
            tick.set_color(HEAD_TEXT[i % len(HEAD_TEXT)])
        ax.set_title(name, fontsize=FONT)
        ax.set_xlabel(f"output feature (d_model = {d_model}); dotted: every d_k = {d_k}",
                      fontsize=SMALL)  # fmt: skip
        fig.colorbar(image, ax=ax, label="mean |change|", shrink=0.9)
    return fig
