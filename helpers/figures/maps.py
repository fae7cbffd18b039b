"""Attention maps: one head's, a mosaic of h heads, masks beside the maps they give."""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure

from helpers.figures import palette
from helpers.figures.render import (
    FONT,
    SMALL,
    _cmap,
    _matrix,
    _styled,
    colormap_table,
)


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
