"""The panel of `04_block_matrix.ipynb`:
the per-head blocks inside one d_model × d_model W^Q, for any h.
"""

from __future__ import annotations

import torch

from helpers.attention import (
    count_parameters,
)
from helpers.checks import check_close
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.panels.base import (
    _every_h_near_this_d_model,
    _h_controls,
    _heads_or_why,
    _lines,
    _Panel,
    _shape_row,
    _table,
)
from helpers.panels.view import AttentionView, Frame


class BlockMatrixExplorer(_Panel):
    """The h per-head W_i^Q side by side are one d_model x d_model W^Q. The h slider
    moves the block boundaries over the same matrix; the table checks the block product and
    fused == per-head."""

    WHAT = "the block-matrix panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 32, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        view = AttentionView(key_by=["d_model", "h"], height=420, toolbar=False)
        super().__init__(_h_controls(self, h, d_model, high=128), view)

    _reachable = _every_h_near_this_d_model

    def _frame(self, d_model: int, h: int) -> Frame:
        d_k = _heads_or_why(d_model, h)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        fused = seeded_attention(d_model, h, self.seed)
        per_head = seeded_attention(d_model, h, self.seed, per_head=True)
        with torch.no_grad():
            w_q = fused.w_q.weight.T  # (d_model, d_model), the paper's layout: x @ W^Q
            blocks = [hd.w_q.weight.T for hd in per_head.heads]  # h x (d_model, d_k)
            side_by_side = torch.cat([x @ w for w in blocks], dim=-1)  # (B, T, d_model)
            out, weights = per_head(x)
            out_fused, weights_fused = fused(x)
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(blocks[0], (d_model, d_k), "W_i^Q (x·W)", "d_model d_k"),
            _shape_row(w_q, (d_model, d_model), "W^Q (x·W)", "d_model h·d_k"),
            _shape_row(x @ w_q, (1, len(self.words), d_model), "x·W^Q", "B T h·d_k"),
        ]
        checks = [
            check_close(torch.cat(blocks, dim=-1), w_q, "[W_0 … W_h-1] = W^Q", echo=False),
            check_close(x @ w_q, side_by_side, "x·W^Q = [x·W_0 … x·W_h-1]", echo=False),
            check_close(out_fused, out, "out: fused = per-head", echo=False),
            check_close(
                weights_fused,
                weights,
                f"{'the map' if h == 1 else f'all {h} maps'}: fused = per-head",
                echo=False,
            ),  # fmt: skip
            f"parameters: per-head {count_parameters(per_head):,}, "
            f"fused {count_parameters(fused):,}",
        ]
        block = f"W^Q {d_model}"  # the matrix depends on d_model only: h only cuts it
        if not self.view.has_maps(block):
            self.view.add_matrix(
                block, w_q, f"input feature (d_model = {d_model})",
                f"output feature (d_model = {d_model} = h × d_k), x·W layout",
            )  # fmt: skip
        side = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(checks)
        note = f"W^Q cut into h = {h} {'block' if h == 1 else 'blocks'} of d_k = {d_k} columns"
        return Frame(block, side, note, bands=h, name="W^Q")
