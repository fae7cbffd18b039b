"""The panel of `13_cross_attention.ipynb`: T_q × T_k maps for any h and source length."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from helpers.attention import (
    split_heads,
)
from helpers.checks import check_attention_rows
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.panels.base import (
    H_MAX,
    _around,
    _h_controls,
    _heads_or_why,
    _lines,
    _Panel,
    _shape_row,
    _table,
    _titles,
    plural,
)
from helpers.panels.view import AttentionView, Frame

TARGET = "le chat était assis"  # a decoder's words so far, translating the course's SENTENCE


class CrossAttentionExplorer(_Panel):
    """Queries from one sequence (a decoder's words so far), keys and values from
    another (the encoder's sentence). Sliders for h and for T_k, the number of source tokens;
    every map is T_q x T_k, and the output keeps one row per query whatever T_k is."""

    WHAT = "the cross-attention panel"

    def __init__(
        self,
        source: str = SENTENCE,
        target: str = TARGET,
        h: int = 4,
        d_model: int = 32,
        seed: int = 0,
    ):
        self.source, self.target = tokens(source), tokens(target)
        self.d_model, self.seed = d_model, seed
        controls = _h_controls(self, h)  # and the every-h switch, shown last
        self.t_k_slider = widgets.IntSlider(
            value=len(self.source), min=1, max=len(self.source), description="T_k (source)",
            style={"description_width": "7.4em"}, layout=widgets.Layout(width="420px"),
        )  # fmt: skip
        view = AttentionView(key_by=["t_k", "h"], d_model=d_model, height=380)
        super().__init__({**controls, "t_k": self.t_k_slider}, view)

    def _reachable(self, setting, radius):
        for t_k in _around(setting["t_k"], 1, len(self.source), 1, radius):
            for h in _around(setting["h"], 1, H_MAX, 1, H_MAX):
                yield {"t_k": t_k, "h": h}

    def _frame(self, t_k: int, h: int) -> Frame:
        d_model = self.d_model
        d_k = _heads_or_why(d_model, h)
        T_q, source = len(self.target), self.source[:t_k]
        x = embed(self.target, d_model, seed=self.seed + 1)  # (B, T_q, d_model): the decoder's
        context = embed(source, d_model, seed=self.seed)  # (B, T_k, d_model): the encoder's
        mha = seeded_attention(d_model, h, self.seed)
        with torch.no_grad():
            q = split_heads(mha.w_q(x), h)  # (B, h, T_q, d_k): from the target
            k = split_heads(mha.w_k(context), h)  # (B, h, T_k, d_k): from the source
            out, weights = mha(x, context=context)  # (B, T_q, d_model), (B, h, T_q, T_k)
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(x, (1, T_q, d_model), "x (target)", "B T_q d_model"),
            _shape_row(context, (1, t_k, d_model), "context (source)", "B T_k d_model"),
            _shape_row(q, (1, h, T_q, d_k), "q", "B h T_q d_k"),
            _shape_row(k, (1, h, t_k, d_k), "k, v", "B h T_k d_k"),
            _shape_row(weights, (1, h, T_q, t_k), "weights", "B h T_q T_k"),
            _shape_row(out, (1, T_q, d_model), "out", "B T_q d_model"),
        ]
        lines = [
            f"queries: the {T_q} target words; keys and values: {plural(t_k, 'source word')}",
            check_attention_rows(weights, f"each row, over the {plural(t_k, 'key')}", echo=False),
        ]
        block = self.view.add_maps(f"{t_k}/{h}", weights[0], self.target, source, _titles(h))
        side = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(lines)
        note = f"{plural(h, 'map')} of {T_q} queries × {plural(t_k, 'key')}"
        return Frame(block, side, note)
