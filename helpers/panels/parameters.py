"""The panel of `04_block_matrix.ipynb`:
heads of any width d_k, and the parameter count against h.
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as widgets
import torch

from helpers.attention import (
    PerHeadMultiHeadAttention,
    count_parameters,
    valid_head_counts,
)
from helpers.checks import check_attention_rows
from helpers.examples import SENTENCE, embed, init_weights_, tokens
from helpers.figures.palette import HEAD_COLOURS
from helpers.figures.panel_svg import (
    parameter_counts_svg,
)
from helpers.panels.base import (
    H_MAX,
    _around,
    _h_slider,
    _lines,
    _Panel,
    _shape_row,
    _table,
    _titles,
    plural,
)
from helpers.panels.view import AttentionView, Frame


@lru_cache(maxsize=128)
def _parameters_for_every_h(d_model: int, d_k: int) -> tuple[int, ...]:
    """count_parameters of PerHeadMultiHeadAttention(d_model, h, d_k) for h = 1 .. H_MAX."""
    with torch.device("meta"):  # shapes only: no weights are drawn
        return tuple(
            count_parameters(PerHeadMultiHeadAttention(d_model, n, d_k=d_k))
            for n in range(1, H_MAX + 1)
        )


class ParameterExplorer(_Panel):
    """Heads of any width d_k, with W^O mapping h·d_k back to d_model. Sliders for h
    and d_k; the maps of the h heads, and the parameter count against h for this d_k and for
    d_k = d_model / h."""

    WHAT = "the h and d_k panel"

    def __init__(self, h: int = 4, d_k: int = 16, d_model: int = 64, seed: int = 0):
        self.d_model, self.seed, self.words = d_model, seed, tokens(SENTENCE)
        self.h_slider = _h_slider(h)
        self.d_k_slider = widgets.IntSlider(
            value=d_k, min=1, max=d_model, description="d_k", style={"description_width": "5.4em"}
        )
        view = AttentionView(key_by=["d_k", "h"], height=400)
        super().__init__({"h": self.h_slider, "d_k": self.d_k_slider}, view)

    def _reachable(self, setting, radius):
        for d_k in _around(setting["d_k"], 1, self.d_model, 1, radius):
            for h in _around(setting["h"], 1, H_MAX, 1, H_MAX):
                yield {"d_k": d_k, "h": h}

    def _frame(self, d_k: int, h: int) -> Frame:
        d_model, T = self.d_model, len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        mha = init_weights_(PerHeadMultiHeadAttention(d_model, h, d_k=d_k), seed=self.seed)
        with torch.no_grad():
            head_outs, maps = zip(*(head(x) for head in mha.heads))  # h x (B, T, d_k), (B, T, T)
            concat = torch.cat(head_outs, dim=-1)  # (B, T, h * d_k)
            out = mha.w_o(concat)  # (B, T, d_model): W^O takes h·d_k features back to d_model
            weights = torch.stack(maps, dim=1)  # (B, h, T, T)
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(mha.heads[0].w_q.weight.T, (d_model, d_k), "W_i^Q (x·W)", "d_model d_k"),
            _shape_row(concat, (1, T, h * d_k), "concat", "B T h·d_k"),
            _shape_row(mha.w_o.weight.T, (h * d_k, d_model), "W^O (x·W)", "h·d_k d_model"),
            _shape_row(out, (1, T, d_model), "out", "B T d_model"),
        ]
        n_params = count_parameters(mha)
        tied = "= d_model" if h * d_k == d_model else f"≠ d_model = {d_model}"
        lines = [
            f"h·d_k = {h}·{d_k} = {h * d_k} {tied}",
            f"parameters: 4·h·d_k·d_model = {n_params:,}",
            f"with d_k = d_model / h it is always 4·d_model² = {4 * d_model**2:,}",
            check_attention_rows(weights, echo=False),
        ]
        hs = list(range(1, H_MAX + 1))
        tied_hs = [n for n in valid_head_counts(d_model) if n <= H_MAX]
        series = {
            f"d_k = {d_k} for every h": (hs, list(_parameters_for_every_h(d_model, d_k))),
            "d_k = d_model / h": (tied_hs, [4 * d_model**2] * len(tied_hs)),
        }
        plot = parameter_counts_svg(series, list(HEAD_COLOURS[:2]), highlight=h)
        block = self.view.add_maps(f"{d_k}/{h}", weights[0], self.words, self.words, _titles(h))
        side = _table(rows, f"h = {h}, d_k = {d_k}, d_model = {d_model}") + _lines(lines) + plot
        return Frame(block, side, f"{plural(h, 'head')} of d_k = {d_k}: {n_params:,} parameters")
