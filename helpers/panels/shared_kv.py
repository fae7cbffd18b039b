"""The panel of `15_shared_kv.ipynb`:
query heads over fewer K/V heads: maps, parameters, the cache.
"""

from __future__ import annotations

from fractions import Fraction

import ipywidgets as widgets
import torch

from helpers.attention import (
    KVCache,
    check_num_heads,
    count_parameters,
    kv_cache_bytes,
)
from helpers.checks import check_attention_rows, check_close
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.figures.palette import HEAD_COLOURS
from helpers.figures.panel_svg import (
    kv_groups_svg,
)
from helpers.layouts import expand_kv, share_kv
from helpers.panels.base import (
    _lines,
    _Panel,
    _shape_row,
    _table,
    plural,
)
from helpers.panels.view import AttentionView, Frame


def _share(part: int, whole: int) -> str:
    """'1/8 of', or 'all of' when part == whole."""
    ratio = Fraction(part, whole)
    return "all of" if ratio == 1 else f"{ratio} of"


def _divisors_down(n: int) -> list[int]:
    return [g for g in range(n, 0, -1) if n % g == 0]


class SharedKVExplorer(_Panel):
    """H query heads over h, ..., 2 or 1 K/V heads (MHA, GQA, MQA), made from the
    same plain attention by averaging each group's K and V blocks (`layouts.share_kv`). Buttons
    redraw which heads share K and V, the h causal maps (one colour per group), the parameters
    and the KV cache, measured on a cache filled token by token."""

    WHAT = "the shared K/V panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 8, d_model: int = 64, seed: int = 0):
        self.words, self.h, self.d_model, self.seed = tokens(sentence), h, d_model, seed
        check_num_heads(d_model, h)
        self.choices = _divisors_down(h)  # num_kv_heads: h (MHA) ... 1 (MQA)
        kind = lambda g: "MHA" if g == h else "MQA" if g == 1 else "GQA"  # noqa: E731
        self.kv_buttons = widgets.ToggleButtons(
            options=[(f"{g} · {kind(g)}", i) for i, g in enumerate(self.choices)], value=0,
            description="K/V heads", style={"button_width": "auto", "description_width": "5.4em"},
        )  # fmt: skip
        view = AttentionView(key_by=["kv"], height=380)
        super().__init__({"kv": self.kv_buttons}, view)

    def _reachable(self, setting, radius):
        return ({"kv": i} for i in range(len(self.choices)))  # a handful: all of them

    def _frame(self, kv: int) -> Frame:
        h, d_model, g = self.h, self.d_model, self.choices[kv]
        d_k, group, T = d_model // h, h // g, len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        mha = seeded_attention(d_model, h, self.seed)
        gqa = share_kv(mha, g)  # each group's K and V blocks averaged into one
        causal = torch.ones(T, T, dtype=torch.bool).tril()  # a decoder's mask
        cache = KVCache()
        with torch.no_grad():
            out, weights = gqa(x, causal)  # (B, T, d_model), (B, h, T, T)
            plain_out, plain_weights = expand_kv(gqa)(x, causal)
            steps = [gqa(x[:, t : t + 1], cache=cache)[0] for t in range(T)]  # one token a step
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(gqa.w_q.weight.T, (d_model, d_model), "W^Q (x·W)", "d_model h·d_k"),
            _shape_row(gqa.w_k.weight.T, (d_model, g * d_k), "W^K, W^V (x·W)", "d_model g·d_k"),
            _shape_row(cache.k, (1, g, T, d_k), "cached k, v", "B g T d_k"),
            _shape_row(weights, (1, h, T, T), "weights", "B h T T"),
        ]
        mha_bytes = kv_cache_bytes(T, num_kv_heads=h, d_k=d_k)  # float32, one layer
        lines = [
            f"{h} query heads, {plural(g, 'K/V head')}: {group} query "
            f"{'head' if group == 1 else 'heads'} per K/V head",
            f"parameters: {count_parameters(gqa):,} (MHA: {count_parameters(mha):,})",
            f"KV cache after {T} tokens: {cache.nbytes:,} bytes = 2·{g}·{d_k}·{T}·4 "
            f"({_share(cache.nbytes, mha_bytes)} MHA's {mha_bytes:,})",
            check_close(out, plain_out, "out = expand_kv's (MHA, K/V blocks repeated)", echo=False),
            check_close(weights, plain_weights, "all maps = expand_kv's", echo=False),
            check_close(torch.cat(steps, dim=1), out, "token by token with the cache = all at once",
                        echo=False),
            check_attention_rows(weights, echo=False),
        ]  # fmt: skip
        colours = [HEAD_COLOURS[i // group % len(HEAD_COLOURS)] for i in range(h)]
        titles = [f"Q{i} · K/V {i // group}" for i in range(h)]  # as in the grouping picture
        block = self.view.add_maps(f"g={g}", weights[0], self.words, self.words, titles, colours)
        groups = kv_groups_svg(h, g, list(HEAD_COLOURS))
        side = groups + _table(rows, f"h = {h}, g = {g}, d_model = {d_model}, d_k = {d_k}")
        note = f"{h} query heads share {plural(g, 'K/V head')}: one colour per K/V head"
        return Frame(block, side + _lines(lines), note)
