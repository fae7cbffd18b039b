"""The panel of `19_online_softmax.ipynb`: one query's row through the online softmax, a block of
keys at a time. Pick the block size and how many blocks have been read; see the running maximum,
the rescale, the running sum and the output so far, and the weights each step's running values
stand for (the map: one row per step, each the softmax of the keys read so far).
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import torch

from helpers.attention import split_heads
from helpers.checks import check_close
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.figures.panel_svg import online_row_svg
from helpers.panels.base import _lines, _Panel, _table
from helpers.panels.view import AttentionView, Frame
from helpers.tiles import online_softmax_steps


class OnlineSoftmaxExplorer(_Panel):
    """One query row of one head, its keys read `block` at a time: after `step` blocks, the
    running maximum m, the rescale e^(m_old − m_new), the running sum and acc / total, beside the
    plain softmax of the whole row. Every number is computed by helpers.tiles.online_softmax_steps
    and checked against the plain softmax of the keys read so far."""

    WHAT = "the online softmax panel"

    def __init__(
        self,
        sentence: str = SENTENCE,
        d_model: int = 32,
        h: int = 4,
        head: int = 1,
        query: int = 3,
        block: int = 2,
        step: int = 1,
    ):
        self.words = tokens(sentence)
        T = len(self.words)
        if not 0 <= query < T or not 0 <= head < h:
            raise ValueError(f"query must be 0 … {T - 1} and head 0 … {h - 1}")
        x = embed(self.words, d_model, seed=0)
        mha = seeded_attention(d_model, h)
        with torch.no_grad():
            q, k, v = (split_heads(w(x), h)[0, head] for w in (mha.w_q, mha.w_k, mha.w_v))
        self.head, self.query, self.d_k = head, query, q.size(-1)
        self.scores = q[query] @ k.T / math.sqrt(self.d_k)  # (T,)
        self.values = v  # (T, d_k)
        self.block_slider = widgets.IntSlider(
            value=block, min=1, max=T, description="block (keys)", continuous_update=True,
            style={"description_width": "6.4em"},
        )  # fmt: skip
        self.step_slider = widgets.IntSlider(
            value=step, min=1, max=T, description="blocks read", continuous_update=True,
            style={"description_width": "6.4em"},
        )  # fmt: skip
        view = AttentionView(key_by=["block", "step"], height=200, toolbar=False)
        super().__init__({"block": self.block_slider, "step": self.step_slider}, view)

    def _reachable(self, setting, radius):
        T = len(self.words)  # 7 × 7 small frames: all of them
        yield setting
        yield from ({"block": b, "step": s} for b in range(1, T + 1) for s in range(1, T + 1))

    def _map(self, block: int, steps) -> str:
        """The weights the steps so far stand for: row j, after j + 1 blocks, is exp(s − m) /
        total over the keys read so far (0 for the rest): the softmax of those keys alone."""
        name = f"block={block}|read={len(steps)}"
        if not self.view.has_maps(name):
            T = len(self.words)
            rows = torch.zeros(len(steps), T)
            for j, s in enumerate(steps):
                read = slice(0, s.keys[1])
                rows[j, read] = torch.exp(self.scores[read] - s.m) / s.total
            labels = [_keys(s.keys) for s in steps]  # the step after these keys
            self.view.add_maps(name, rows.unsqueeze(0), labels, self.words,
                               [f"query '{self.words[self.query]}', head {self.head}"])  # fmt: skip
        return name

    def _frame(self, block: int, step: int) -> Frame:
        steps = online_softmax_steps(self.scores, self.values, block)
        shown = min(step, len(steps))
        now = steps[shown - 1]
        read = now.keys[1]
        rows = [("keys", "its max", "m", "rescale", "total")]
        for s in steps[:shown]:
            rows.append((_keys(s.keys), f"{float(s.scores.max()):+.2f}", f"{s.m:+.2f}",
                         f"{s.rescale:.3f}", f"{s.total:.3f}"))  # fmt: skip
        so_far = torch.softmax(self.scores[:read], -1) @ self.values[:read]
        checks = [check_close(now.out, so_far, "acc / total = softmax · v over the keys read",
                              echo=False)]  # fmt: skip
        whole = torch.softmax(self.scores, -1) @ self.values
        if read == len(self.words):
            checks.append(check_close(now.out, whole, "all read: = softmax(scores) · v",
                                      echo=False))  # fmt: skip
        caption = (f"query {self.query} ('{self.words[self.query]}'), head {self.head}, blocks of "
                   f"{block}: after {shown} of {len(steps)}")  # fmt: skip
        picture = online_row_svg(self.scores, read, now.keys, now.m, now.out, whole, self.words)
        note = ""
        if step > len(steps):
            note = (f"blocks of {block} cover the {len(self.words)} keys in {len(steps)}: "
                    f"this shows the last")  # fmt: skip
        side = _table(rows, caption) + _lines(checks) + picture
        return Frame(self._map(block, steps[:shown]), side, note or f"after {_keys(now.keys)}")


def _keys(keys: tuple[int, int]) -> str:
    start, stop = keys
    return f"key {start}" if stop - start == 1 else f"keys {start}–{stop - 1}"
