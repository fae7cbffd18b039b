"""The panel of `17_w_qk_and_w_ov.ipynb`:
each head's maps rebuilt from W_QK, and the ranks of W_QK.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from helpers.checks import check_close
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.figures.palette import HEAD_COLOURS
from helpers.figures.panel_svg import (
    rank_bars_svg,
)
from helpers.layouts import head_circuits, head_ranks
from helpers.panels.base import (
    _every_h_near_this_d_model,
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


@lru_cache(maxsize=32)
def _one_wide_head_rank(d_model: int, seed: int) -> int:
    """The rank of W_QK for one head as wide as the model (h = 1, d_k = d_model)."""
    ranks_qk, _ = head_ranks(seeded_attention(d_model, 1, seed))
    return ranks_qk[0]


class CircuitsExplorer(_Panel):
    """Each head as two d_model x d_model matrices, W_QK = W_i^Q W_i^Kᵀ (where it
    looks) and W_OV = W_i^V W^O_i (what it writes). Sliders for h and d_model redraw the h maps
    rebuilt from W_QK alone, each matrix's rank (d_k) and the total over the heads (d_model)."""

    WHAT = "the W_QK and W_OV panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 32, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        view = AttentionView(key_by=["d_model", "h"], height=380)
        super().__init__(_h_controls(self, h, d_model, high=128), view)

    _reachable = _every_h_near_this_d_model

    def _frame(self, d_model: int, h: int) -> Frame:
        d_k = _heads_or_why(d_model, h)
        T = len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        mha = seeded_attention(d_model, h, self.seed)
        w_qk, w_ov = head_circuits(mha)  # (h, d_model, d_model) each
        with torch.no_grad():
            out, weights = mha(x)  # (B, T, d_model), (B, h, T, T)
            scores = x[0] @ w_qk @ x[0].T / math.sqrt(d_k)  # (h, T, T): x_a W_QK x_bᵀ / √d_k
            rebuilt = scores.softmax(-1)  # (h, T, T)
            writes = rebuilt @ x[0] @ w_ov  # (h, T, d_model): what each head writes
        ranks_qk, ranks_ov = head_ranks(mha)  # h each; in float64 (float32 drops one at 128)
        one = _one_wide_head_rank(d_model, self.seed)
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(w_qk[0], (d_model, d_model), "W_QK,i", "d_model d_model"),
            _shape_row(w_ov[0], (d_model, d_model), "W_OV,i", "d_model d_model"),
            _shape_row(scores, (h, T, T), "scores", "h T T"),
            _shape_row(writes, (h, T, d_model), "written", "h T d_model"),
        ]
        lines = [
            f"rank of each W_QK,i: {_same_or_list(ranks_qk)}; of each W_OV,i: "
            f"{_same_or_list(ranks_ov)} (d_k = {d_k})",
            f"total over the {plural(h, 'head')}: {sum(ranks_qk)} (h · d_k = {h * d_k}); "
            f"one head of width {d_model}: {one}",
            f"each holds {d_model**2:,} numbers made from 2·d_model·d_k = "
            f"{2 * d_model * d_k:,} weights",
            check_close(rebuilt, weights[0], "maps from softmax(x·W_QK·xᵀ/√d_k) = module's",
                        echo=False),
            check_close(writes.sum(0), out[0], "out = Σ_i weights_i · x · W_OV,i", echo=False),
        ]  # fmt: skip
        bars = rank_bars_svg(ranks_qk, d_model, list(HEAD_COLOURS))
        block = self.view.add_maps(f"{d_model}/{h}", rebuilt, self.words, self.words, _titles(h))
        side = bars + _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(lines)
        note = f"{plural(h, 'head')}, each W_QK,i of rank {_same_or_list(ranks_qk)}"
        return Frame(block, side, note)


def _same_or_list(values: list[int]) -> str:
    """'8' if every value is 8, else '8 8 7 8'."""
    return str(values[0]) if len(set(values)) == 1 else " ".join(map(str, values))
