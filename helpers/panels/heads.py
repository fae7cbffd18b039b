"""The panel of `03_per_head_projections.ipynb`:
h heads with their own matrices: every map and shape, for any h and d_model.
"""

from __future__ import annotations

import torch

from helpers.attention import (
    attention_scores,
    count_parameters,
)
from helpers.checks import check_attention_rows, check_close
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
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


class HeadsExplorer(_Panel):
    """H heads, each with its own W_i^Q, W_i^K, W_i^V (d_model x d_k). Sliders for h
    and d_model redraw all h attention maps and the table of every shape."""

    WHAT = "the h and d_model panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 64, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        view = AttentionView(key_by=["d_model", "h"], height=420)
        super().__init__(_h_controls(self, h, d_model, high=512), view)

    _reachable = _every_h_near_this_d_model

    def _frame(self, d_model: int, h: int) -> Frame:
        d_k = _heads_or_why(d_model, h)  # the frame then says which h would work
        T = len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        per_head = seeded_attention(d_model, h, self.seed, per_head=True)
        with torch.no_grad():
            # step by step, each head once; the module's own forward is then a check
            head_outs, maps = zip(*(hd(x) for hd in per_head.heads))  # h x (B, T, d_k), (B, T, T)
            concat = torch.cat(head_outs, dim=-1)  # (B, T, h * d_k)
            out = per_head.w_o(concat)  # (B, T, d_model)
            weights = torch.stack(maps, dim=1)  # (B, h, T, T)
            head = per_head.heads[0]
            q = head.w_q(x)  # (B, T, d_k)
            scores = attention_scores(q, head.w_k(x))  # (B, T, T)
            module_out, _ = per_head(x)
        rows = [("tensor", "shape", "dims", "check")]
        rows.append(_shape_row(x, (1, T, d_model), "x", "B T d_model"))
        for name in ("w_q", "w_k", "w_v"):
            ws = [getattr(hd, name).weight.T for hd in per_head.heads]  # every head's W_i
            # the row shows head 0, or the first head whose matrix has the wrong shape
            shown = next((w for w in ws if w.shape != (d_model, d_k)), ws[0])
            letter = name[-1].upper()
            rows.append(_shape_row(shown, (d_model, d_k), f"W_i^{letter} (x·W)", "d_model d_k"))
        rows += [
            _shape_row(q, (1, T, d_k), "q_i", "B T d_k"),
            _shape_row(scores, (1, T, T), "scores_i", "B T T"),
            _shape_row(head_outs[0], (1, T, d_k), "head_i", "B T d_k"),
            _shape_row(concat, (1, T, d_model), "concat", "B T h·d_k"),
            _shape_row(per_head.w_o.weight.T, (d_model, d_model), "W^O (x·W)", "h·d_k d_model"),
            _shape_row(weights, (1, h, T, T), "weights", "B h T T"),
            _shape_row(out, (1, T, d_model), "out", "B T d_model"),
        ]
        n_params = count_parameters(per_head)
        which = (
            "head 0" if h == 1 else f"i = 0 .. {h - 1}: each head has its own W_i (shown: head 0)"
        )
        lines = [
            which,
            f"matrices: 3h + 1 = {3 * h + 1}",
            f"parameters: 3·h·d_model·d_k + d_model² = {n_params:,}",
            check_attention_rows(weights, echo=False),
            check_close(out, module_out, "step by step = PerHeadMultiHeadAttention", echo=False),
        ]
        block = self.view.add_maps(f"{d_model}/{h}", weights[0], self.words, self.words, _titles(h))
        side = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(lines)
        note = (
            f"{plural(h, 'head')} of d_k = {d_model} / {h} = {d_k}: {plural(h, 'softmax')}, "
            f"{plural(h, 'attention map')}"
        )
        return Frame(block, side, note)
