"""Numbers as curves and bars: parameter counts, training losses, 18's copying losses, timings,
and 02's softmax saturation."""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure

from helpers.figures.render import FONT, HEAD_LINES, SMALL, _styled


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
