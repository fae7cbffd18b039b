"""Weights and the heads inside them: the block matrix cut into heads, PyTorch's stacked QKV
layout, which token each head's rows hold after a cut, and which features each head can reach."""

from __future__ import annotations

import textwrap

import matplotlib
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from helpers.figures.render import (
    FONT,
    HEAD_COLOURS,
    HEAD_LINES,
    HEAD_TEXT,
    SMALL,
    _matrix,
    _styled,
)


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
