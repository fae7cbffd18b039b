"""The panel of `11_why_multi_head.ipynb`:
one wide head's map beside h heads' maps, from the same matrices.
"""

from __future__ import annotations

import torch

from helpers.attention import (
    attention_scores,
    count_parameters,
    split_heads,
)
from helpers.checks import check_close
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.figures.palette import HEAD_COLOURS
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


class OneVsManyExplorer(_Panel):
    """The same d_model x d_model W^Q, W^K, W^V used as one head (one softmax over
    all of d_model) and as h heads (h softmaxes). The h slider redraws the one map beside the h."""

    WHAT = "the one-head-vs-h-heads panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 48, seed: int = 0):
        self.words, self.seed, self.d_model = tokens(sentence), seed, d_model
        view = AttentionView(key_by=["h"], d_model=d_model, height=420)  # h stops where it divides
        super().__init__(_h_controls(self, h), view)

    def _reachable(self, setting, radius):
        return ({"h": h} for h in _around(setting["h"], 1, H_MAX, 1, H_MAX))

    def _frame(self, h: int) -> Frame:
        d_model = self.d_model
        d_k = _heads_or_why(d_model, h)
        T = len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        one = seeded_attention(d_model, 1, self.seed)
        many = seeded_attention(d_model, h, self.seed)  # the same matrices, cut into h heads
        with torch.no_grad():
            q, k = many.w_q(x), many.w_k(x)  # (B, T, d_model): identical for both
            scores_one = attention_scores(q, k)  # (B, T, T), scaled by √d_model
            scores_heads = attention_scores(split_heads(q, h), split_heads(k, h))  # (B, h, T, T)
            out_one, weights_one = one(x)
            out_many, weights_many = many(x)
        gap = float((out_one - out_many).abs().max())
        lines = [
            check_close(one.w_q.weight, many.w_q.weight, "the same W^Q", echo=False),
            check_close(one.w_q(x), q, "so the same q (and k, v)", echo=False),
            check_close(
                scores_one, scores_heads.sum(1) / h**0.5, "one score = Σ_i head-i score / √h",
                echo=False,
            ),
            f"1 softmax vs {h}: max |out_one − out_{h}| = {gap:.3g}",
            f"parameters: {count_parameters(one):,} both",
        ]  # fmt: skip
        maps = torch.cat([weights_one[0], weights_many[0]])  # (1 + h, T, T)
        titles = ["ONE head"] + _titles(h)
        colours = ["#1f2328", *(HEAD_COLOURS[i % len(HEAD_COLOURS)] for i in range(h))]
        block = self.view.add_maps(f"1+{h}", maps, self.words, self.words, titles, colours)
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(scores_one, (1, T, T), "scores, ONE head", "B T T"),
            _shape_row(scores_heads, (1, h, T, T), f"scores, h = {h}", "B h T T"),
        ]
        side = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(lines)
        note = f"ONE head of d_model = {d_model} (first map) and {plural(h, 'head')} of d_k = {d_k}"
        return Frame(block, side, note)
