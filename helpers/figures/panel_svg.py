"""Small figures for a panel's side column, written as SVG text from plain tensors.

A panel sends one per setting ahead of time, so they must cost well under a millisecond to
make; SVG stays sharp at any zoom and on a projector. Knows nothing of modules or widgets.
Text is 14 px or larger, like everything else in a panel.
"""

from __future__ import annotations

import html

import matplotlib
import torch

from helpers.figures.palette import LINE_CONTRAST, on_white

__all__ = [
    "query_breakdown_svg",
    "online_row_svg",
    "parameter_counts_svg",
    "kv_groups_svg",
    "rank_bars_svg",
]

FONT = 14
ROW = 22  # px per token row


def _hex(rgba) -> str:
    r, g, b = (round(255 * c) for c in rgba[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _ink(colour: str) -> str:
    """Black or white text, whichever reads better on the fill '#rrggbb'."""
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#1f2328" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "#ffffff"


def _text(x: float, y: float, s: str, anchor: str = "start", extra: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{FONT}" text-anchor="{anchor}" '
        f'dominant-baseline="middle"{extra}>{html.escape(s, quote=False)}</text>'
    )


def query_breakdown_svg(
    scores: torch.Tensor,
    weights: torch.Tensor,
    weighted_values: torch.Tensor,
    out: torch.Tensor,
    words: list[str],
    query: int,
    cmap: str = "viridis",
) -> str:
    """One query's path through attention, as three columns beside its words:
    1. its scores (T,) as bars around 0; 2. its weights (T,) as bars on 0..1;
    3. weighted_values (T, d_k) = weight_j · v_j per row, and their sum `out` (d_k,) below.
    Every number drawn is one the kernel computed; nothing is recomputed here."""
    T, d_k = weighted_values.shape
    label_w, bar_w, cell = 96, 118, max(6, min(16, 160 // d_k))
    x_scores, x_weights = label_w + 8, label_w + 8 + bar_w + 26
    x_values = x_weights + bar_w + 26
    top = 2.2 * ROW
    width = x_values + cell * d_k + 8
    height = top + (T + 1.6) * ROW + 4
    limit = float(scores.abs().max()) or 1.0
    v_limit = float(torch.cat([weighted_values.flatten(), out]).abs().max()) or 1.0
    colours, diverging = matplotlib.colormaps[cmap], matplotlib.colormaps["RdBu_r"]
    parts = [
        _text(x_scores, 0.5 * ROW, "1. scores", extra=' font-weight="bold"'),
        _text(x_scores, 1.4 * ROW, "q·k / √d_k"),
        _text(x_weights, 0.5 * ROW, "2. softmax", extra=' font-weight="bold"'),
        _text(x_weights, 1.4 * ROW, f"sum = {float(weights.sum()):.2f}"),
        _text(x_values, 0.5 * ROW, "3. weight × v", extra=' font-weight="bold"'),
        _text(x_values, 1.4 * ROW, f"({d_k} features)"),
    ]
    zero = x_scores + bar_w / 2
    parts.append(
        f'<line x1="{zero}" x2="{zero}" y1="{top - 4}" y2="{top + T * ROW}" stroke="#333"/>'
    )
    for j, word in enumerate(words):
        y = top + j * ROW
        bold = ' font-weight="bold"' if j == query else ""
        parts.append(_text(label_w, y + ROW / 2, word[:12], "end", bold))
        s, w = float(scores[j]), float(weights[j])
        length = abs(s) / limit * (bar_w / 2 - 4)
        left = zero if s >= 0 else zero - length
        parts.append(
            f'<rect x="{left:.1f}" y="{y + 4}" width="{length:.1f}" height="{ROW - 8}" '
            f'fill="#6e7781"><title>{s:.3f}</title></rect>'
        )
        parts.append(
            f'<rect x="{x_weights}" y="{y + 4}" width="{w * (bar_w - 40):.1f}" '
            f'height="{ROW - 8}" fill="{_hex(colours(w))}"><title>{w:.3f}</title></rect>'
        )
        parts.append(_text(x_weights + w * (bar_w - 40) + 4, y + ROW / 2, f"{w:.2f}"))
        for f in range(d_k):
            value = float(weighted_values[j, f])
            fill = _hex(diverging(0.5 + value / (2 * v_limit)))
            parts.append(
                f'<rect x="{x_values + f * cell}" y="{y + 2}" width="{cell}" height="{ROW - 4}" '
                f'fill="{fill}"/>'
            )
    y = top + (T + 0.4) * ROW
    parts.append(_text(x_values - 6, y + ROW / 2, "out = Σ rows", "end", ' font-weight="bold"'))
    for f in range(d_k):
        fill = _hex(diverging(0.5 + float(out[f]) / (2 * v_limit)))
        parts.append(
            f'<rect x="{x_values + f * cell}" y="{y + 2}" width="{cell}" height="{ROW - 4}" '
            f'fill="{fill}" stroke="#000" stroke-width="0.6"/>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">{"".join(parts)}</svg>'
    )


def online_row_svg(
    scores: torch.Tensor,
    read: int,
    block: tuple[int, int],
    m: float,
    out: torch.Tensor,
    whole: torch.Tensor,
    words: list[str],
) -> str:
    """One query's row part way through the online softmax: its scores (T,) as bars around 0,
    the keys read so far dark, the block just read in blue, the rest pale, with the running
    maximum m as a dashed line; exp(s − m) / total for the keys read (their softmax so far); and
    the output so far (d_v,) above the whole row's softmax · v. Every number drawn is given."""
    T, d_v = scores.size(0), out.size(0)
    ROW = 17  # px per token row: tighter than the other panels', to fit a projector's height
    label_w, bar_w, cell = 60, 150, max(8, min(18, 160 // d_v))
    x_scores, x_weights = label_w + 8, label_w + 8 + bar_w + 26
    top = 2.0 * ROW + 4
    width = x_weights + bar_w + 8
    height = top + (T + 3.0) * ROW + 2
    limit = max(float(scores.abs().max()), abs(m)) or 1.0
    zero = x_scores + bar_w / 2
    x_of = lambda value: zero + value / limit * (bar_w / 2 - 4)  # noqa: E731
    weights = torch.exp(scores[:read] - m)
    weights = weights / weights.sum()
    colours = matplotlib.colormaps["viridis"]
    parts = [
        _text(x_scores, 0.5 * ROW, "1. scores", extra=' font-weight="bold"'),
        _text(x_scores, 1.35 * ROW + 2, f"m = {m:+.3f} (dashed)"),
        _text(x_weights, 0.5 * ROW, "2. exp(s − m) / total", extra=' font-weight="bold"'),
        _text(x_weights, 1.35 * ROW + 2, f"over the {read} keys read"),
        f'<line x1="{zero}" x2="{zero}" y1="{top - 4}" y2="{top + T * ROW}" stroke="#333"/>',
    ]
    for j, word in enumerate(words):
        y = top + j * ROW
        s = float(scores[j])
        if block[0] <= j < block[1]:
            fill, stroke = "#0969da", ""  # the block just read
        elif j < read:
            fill, stroke = "#57606a", ""
        else:
            fill, stroke = "#ffffff", ' stroke="#8c959f"'  # not read yet
        left, length = min(zero, x_of(s)), abs(x_of(s) - zero)
        parts.append(_text(label_w, y + ROW / 2, word[:8], "end"))
        parts.append(
            f'<rect x="{left:.1f}" y="{y + 4}" width="{length:.1f}" height="{ROW - 8}" '
            f'fill="{fill}"{stroke}><title>{s:+.3f}</title></rect>'
        )
        if j < read:
            w = float(weights[j])
            parts.append(
                f'<rect x="{x_weights}" y="{y + 4}" width="{w * (bar_w - 40):.1f}" '
                f'height="{ROW - 8}" fill="{_hex(colours(w))}"><title>{w:.3f}</title></rect>'
            )
            parts.append(_text(x_weights + w * (bar_w - 40) + 4, y + ROW / 2, f"{w:.2f}"))
    x_m = x_of(m)
    parts.append(
        f'<line x1="{x_m:.1f}" x2="{x_m:.1f}" y1="{top - 4}" y2="{top + T * ROW}" '
        'stroke="#cf222e" stroke-width="2" stroke-dasharray="4 3"/>'
    )
    v_limit = float(torch.cat([out, whole]).abs().max()) or 1.0
    diverging = matplotlib.colormaps["RdBu_r"]
    for i, (name, vector) in enumerate((("out so far", out), ("softmax · v", whole))):
        y = top + (T + 0.3 + 1.1 * i) * ROW
        parts.append(_text(x_scores + 84, y + ROW / 2, name, "end", ' font-weight="bold"'))
        for f in range(d_v):
            value = float(vector[f])
            parts.append(
                f'<rect x="{x_scores + 92 + f * cell}" y="{y + 2}" width="{cell}" '
                f'height="{ROW - 4}" fill="{_hex(diverging(0.5 + value / (2 * v_limit)))}" '
                f'stroke="#000" stroke-width="0.6"><title>{value:+.3f}</title></rect>'
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">{"".join(parts)}</svg>'
    )


def parameter_counts_svg(
    series: dict[str, tuple[list[int], list[int]]],
    colours: list[str],
    highlight: int | None = None,
    width: int = 440,
    height: int = 210,
) -> str:
    """Parameters against h: one line (with dots) per label, each (head counts, counts);
    a dashed line at the current h. The y axis starts at 0."""
    left, right, top, bottom = 70, 12, 10 + 22 * len(series), 40
    hs = sorted({h for xs, _ in series.values() for h in xs})
    top_value = max(max(counts) for _, counts in series.values()) * 1.1 or 1
    x_of = lambda h: left + (h - hs[0]) / max(hs[-1] - hs[0], 1) * (width - left - right)  # noqa: E731
    y_of = lambda v: height - bottom - v / top_value * (height - top - bottom)  # noqa: E731
    parts = [
        f'<line x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}" '
        'stroke="#333"/>',
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}" stroke="#333"/>',
        _text((left + width - right) / 2, height - 10, "number of heads h", "middle"),
        _text(left - 6, y_of(0), "0", "end"),
        _text(left - 6, y_of(top_value / 1.1), f"{top_value / 1.1:,.0f}", "end"),
    ]
    for h in (hs[0], hs[-1], *([highlight] if highlight else [])):
        parts.append(_text(x_of(h), height - bottom + 12, str(h), "middle"))
    if highlight is not None:
        x = x_of(highlight)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{height - bottom}" stroke="#555" '
            'stroke-dasharray="4 3"/>'
        )
    for i, ((label, (xs, counts)), colour) in enumerate(zip(series.items(), colours)):
        colour = on_white(colour, LINE_CONTRAST)  # a line on white: 3:1 at least
        points = " ".join(f"{x_of(h):.1f},{y_of(c):.1f}" for h, c in zip(xs, counts))
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2.5"/>'
        )
        for h, c in zip(xs, counts):
            r = 5 if h == highlight else 3
            parts.append(f'<circle cx="{x_of(h):.1f}" cy="{y_of(c):.1f}" r="{r}" fill="{colour}"/>')
        y = 8 + 22 * i
        parts.append(f'<rect x="{left + 4}" y="{y}" width="14" height="14" fill="{colour}"/>')
        parts.append(_text(left + 24, y + 7, label))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(parts)}</svg>'
    )


def kv_groups_svg(num_heads: int, num_kv_heads: int, colours: list[str], width: int = 440) -> str:
    """Which query heads share which K/V head: h query boxes on top, g K/V boxes below, a line
    from each query head to the K/V head of its group; group j in colours[j], darkened where
    needed to stand 3:1 on white."""
    colours = [on_white(c, LINE_CONTRAST) for c in colours]
    group = num_heads // num_kv_heads
    left, right, box_h = 108, 8, 26  # room for 'query heads' at 14 px
    step = (width - left - right) / num_heads
    y_q, y_kv = 8, 8 + box_h + 44
    parts = [
        _text(left - 8, y_q + box_h / 2, "query heads", "end"),
        _text(left - 8, y_kv + box_h / 2, "K/V heads", "end"),
    ]
    for j in range(num_kv_heads):
        x0 = left + j * group * step + 2
        w = group * step - 4
        parts.append(
            f'<rect x="{x0:.1f}" y="{y_kv}" width="{w:.1f}" height="{box_h}" rx="4" '
            f'fill="{colours[j % len(colours)]}"/>'
        )
        ink = f' fill="{_ink(colours[j % len(colours)])}"'
        parts.append(_text(x0 + w / 2, y_kv + box_h / 2, f"KV{j}", "middle", ink))
    for i in range(num_heads):
        j = i // group
        x0, colour = left + i * step + 2, colours[j % len(colours)]
        parts.append(
            f'<line x1="{x0 + step / 2 - 2:.1f}" y1="{y_q + box_h}" '
            f'x2="{left + (j + 0.5) * group * step:.1f}" y2="{y_kv}" stroke="{colour}" '
            'stroke-width="2"/>'
        )
        parts.append(
            f'<rect x="{x0:.1f}" y="{y_q}" width="{step - 4:.1f}" height="{box_h}" rx="4" '
            f'fill="{colour}"/>'
        )
        ink = f' fill="{_ink(colour)}"'
        parts.append(_text(x0 + step / 2 - 2, y_q + box_h / 2, f"Q{i}", "middle", ink))
    height = y_kv + box_h + 6
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(parts)}</svg>'
    )


def rank_bars_svg(ranks: list[int], d_model: int, colours: list[str], width: int = 440) -> str:
    """Two bars on one scale of d_model: the h heads' ranks side by side (head i in colours[i],
    its rank written inside when it fits), and one head as wide as the model (rank d_model)."""
    left, right, bar, gap = 108, 8, 26, 14
    unit = (width - left - right) / d_model  # px per unit of rank
    y_heads, y_one = 30, 30 + bar + gap
    parts = [
        _text(left, 11, "rank of each head's W_QK (bar width)"),
        _text(left - 8, y_heads + bar / 2, f"{len(ranks)} head{'s' * (len(ranks) != 1)}", "end"),
        _text(left - 8, y_one + bar / 2, "one head", "end"),
    ]
    x = left
    for i, r in enumerate(ranks):
        colour = colours[i % len(colours)]
        w = r * unit
        parts.append(
            f'<rect x="{x:.1f}" y="{y_heads}" width="{max(w - 1, 0.5):.1f}" height="{bar}" '
            f'fill="{colour}"/>'
        )
        if w >= 9 * len(str(r)) + 4:  # the number fits inside its segment
            ink = f' fill="{_ink(colour)}"'
            parts.append(_text(x + w / 2, y_heads + bar / 2, str(r), "middle", ink))
        x += w
    parts.append(
        f'<rect x="{left}" y="{y_one}" width="{d_model * unit:.1f}" height="{bar}" fill="#8c8c8c"/>'
    )
    parts.append(_text(left + d_model * unit / 2, y_one + bar / 2, str(d_model), "middle",
                       ' fill="#ffffff"'))  # fmt: skip
    y_axis = y_one + bar + 16
    parts.append(_text(left, y_axis, "0"))
    parts.append(_text(width - right, y_axis, f"rank {d_model} = d_model", "end"))
    height = y_axis + 12
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(parts)}</svg>'
    )
