"""The panel of `01_self_attention.ipynb`:
one head's map: pick a query, see its scores, weights and output.
"""

from __future__ import annotations

import ipywidgets as widgets
import torch

from helpers.attention import (
    SelfAttention,
    attention_scores,
)
from helpers.checks import check_attention_rows, check_close
from helpers.examples import SENTENCE, embed, init_weights_, tokens
from helpers.figures.panel_svg import (
    query_breakdown_svg,
)
from helpers.panels.base import (
    _lines,
    _Panel,
    _shape_row,
    _table,
)
from helpers.panels.view import AttentionView, Frame


class QueryExplorer(_Panel):
    """Pick a query token (a button, or its row in the map); see its score row, its
    softmax row, and its output as the weighted sum of the value rows, for one head."""

    WHAT = "the query panel"

    def __init__(
        self,
        sentence: str = SENTENCE,
        d_model: int = 16,
        d_k: int = 8,
        seed: int = 0,
        gain: float = 1.0,
    ):
        self.words = tokens(sentence)
        self.x = embed(self.words, d_model, seed=seed)  # (B, T, d_model)
        self.head = init_weights_(SelfAttention(d_model, d_k), seed=seed, gain=gain)
        self.query = widgets.ToggleButtons(
            options=[(f"{i}: {w}", i) for i, w in enumerate(self.words)],
            value=min(2, len(self.words) - 1),
            description="query",
            style={"button_width": "auto"},
        )
        view = AttentionView(key_by=["query"], height=400)
        super().__init__({"query": self.query}, view)

    def _reachable(self, setting, radius):
        return ({"query": t} for t in range(len(self.words)))  # a handful: all of them

    def _frame(self, query: int) -> Frame:
        t, T, d_k = query, len(self.words), self.head.d_k
        with torch.no_grad():
            q, k, v = self.head.w_q(self.x)[0], self.head.w_k(self.x)[0], self.head.w_v(self.x)[0]
            out, weights = self.head(self.x)  # (B, T, d_k), (B, T, T)
            scores = attention_scores(q, k)  # (T, T)
            weighted = weights[0, t, :, None] * v  # (T, d_k): row j is weights[t, j] · v_j
        if not self.view.has_maps("one head"):
            self.view.add_maps("one head", weights, self.words, self.words, ["one head"])
        word = self.words[t]
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(q[t], (d_k,), f"q[{t}]", "d_k"),
            _shape_row(k, (T, d_k), "k", "T d_k"),
            _shape_row(scores[t], (T,), f"scores[{t}]", "T"),
            _shape_row(weights[0, t], (T,), f"weights[{t}]", "T"),
            _shape_row(v, (T, d_k), "v", "T d_k"),
            _shape_row(out[0, t], (d_k,), f"out[{t}]", "d_k"),
        ]
        checks = [
            check_attention_rows(weights[0, t], f"weights[{t}]", echo=False),
            check_close(weighted.sum(0), out[0, t], f"out[{t}] = Σ_j weights[{t}, j] · v_j",
                        echo=False),
        ]  # fmt: skip
        picture = query_breakdown_svg(scores[t], weights[0, t], weighted, out[0, t], self.words, t)
        side = _table(rows, f"query {t} ('{word}'), one head, d_k = {d_k}") + _lines(checks)
        return Frame("one head", side + picture, f"query {t}: '{word}'")
