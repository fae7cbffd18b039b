"""The panel of `02_why_scale.ipynb`:
softmax rows with and without the division by √d_k, against d_k.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import torch

from helpers.checks import check_attention_rows
from helpers.experiment import dot_product_variance, softmax_saturation
from helpers.panels.base import (
    _lines,
    _Panel,
    _table,
)
from helpers.panels.view import AttentionView, Frame

D_KS = (4, 8, 16, 32, 64, 128, 256)  # the √d_k panel's choices


class ScalingExplorer(_Panel):
    """A d_k slider over 4 .. 256. The same queries and keys (entries of variance 1,
    their first d_k features) give two sets of softmax rows side by side: scores divided by √d_k,
    and not. The table measures, over many rows, what the slider does to each."""

    WHAT = "the √d_k panel"

    def __init__(self, d_k: int = 64, T_q: int = 6, T_k: int = 16, seed: int = 0):
        if d_k not in D_KS:
            raise ValueError(f"d_k must be one of {D_KS}; got {d_k}.")
        gen = torch.Generator().manual_seed(seed)
        self.q = torch.randn(T_q, D_KS[-1], generator=gen, dtype=torch.float64)  # (T_q, 256)
        self.k = torch.randn(T_k, D_KS[-1], generator=gen, dtype=torch.float64)  # (T_k, 256)
        self.query_labels = [f"q{i}" for i in range(T_q)]
        self.key_labels = [f"k{j}" for j in range(T_k)]
        self.d_k_slider = widgets.SelectionSlider(
            options=[(str(d), i) for i, d in enumerate(D_KS)], value=D_KS.index(d_k),
            description="d_k", continuous_update=True, style={"description_width": "5.4em"},
            layout=widgets.Layout(width="420px"),
        )  # fmt: skip
        view = AttentionView(key_by=["choice"], height=300)
        super().__init__({"choice": self.d_k_slider}, view)

    def _reachable(self, setting, radius):
        return ({"choice": i} for i in range(len(D_KS)))  # a handful: all of them

    def _frame(self, choice: int) -> Frame:
        d_k, T_k = D_KS[choice], len(self.key_labels)
        scores = self.q[:, :d_k] @ self.k[:, :d_k].T  # (T_q, T_k): the first d_k features
        weights = torch.stack([(scores / math.sqrt(d_k)).softmax(-1), scores.softmax(-1)])
        titles = ["scores ÷ √d_k", "no scaling"]
        block = self.view.add_maps(
            f"d_k={d_k}", weights, self.query_labels, self.key_labels, titles
        )
        variance = dot_product_variance(d_k)  # over 20,000 pairs
        stats = [softmax_saturation(d_k, scaled=s, T=T_k) for s in (True, False)]
        rows = [
            ("over 2,000 rows", "÷ √d_k", "no scaling"),
            ("variance of the scores", f"{variance / d_k:.2f}", f"{variance:.1f}"),
            ("largest weight", *(f"{s.max_weight:.2f}" for s in stats)),
            ("entropy (nats)", *(f"{s.entropy:.2f}" for s in stats)),
            ("gradient into the scores", *(f"{s.grad_norm:.3f}" for s in stats)),
            (f"… its share for the {T_k - 2} keys below the top 2",
             *(f"{100 * s.others_share:.0f} %" for s in stats)),
            ("gradient into q (mean over rows)", *(f"{s.query_grad:.3f}" for s in stats)),
        ]  # fmt: skip
        off = abs(variance / d_k - 1)
        mark = "✓" if off < 0.05 else "✗"
        lines = [
            f"{mark} var(q·k) = {variance:.1f}: d_k = {d_k} within {100 * off:.1f} %",
            f"a row over {T_k} keys: uniform has largest weight 1/{T_k} = {1 / T_k:.3f}, "
            f"entropy ln {T_k} = {math.log(T_k):.2f}",
            check_attention_rows(weights, "each row, both ways", echo=False),
        ]
        caption = f"d_k = {d_k}, {T_k} keys, q and k entries of variance 1"
        side = _table(rows, caption) + _lines(lines)
        peak = weights.amax(-1).mean(-1)  # the rows shown: their mean largest weight
        shown = f"d_k = {d_k}, the {len(self.query_labels)} rows shown"
        note = (
            f"{shown}: largest weight {peak[0]:.2f} scaled, {peak[1]:.2f} unscaled"
            " (the table's: over 2,000 rows)"
        )
        return Frame(block, side, note)
