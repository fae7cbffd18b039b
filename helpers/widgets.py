"""The interactive panels of the notebooks: controls wired to `attention`, `checks` and a view.

Each panel is a `widgets.VBox`: its controls on top, then an `AttentionView` that draws the maps
in the browser with the live table beside them. The kernel computes every setting the controls
can reach next (all h at this d_model and the neighbouring d_model, every query, every layer and
head) with `helpers.attention` and its checks, and sends them ahead; the controls are jslinked to
the view, so a move shows its new maps in the next frame. Every table entry is measured on the
tensors just computed, not written from a formula. A setting that cannot work becomes a frame
that says why (the browser greys the last good one), never a traceback.

Tests drive a panel by setting `.value` on its controls and reading `.table`, `.message` and
`.maps` (what the browser is sent for the current setting).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache

import ipywidgets as widgets
import torch

from helpers.attention import (
    KVCache,
    PerHeadMultiHeadAttention,
    SelfAttention,
    attention_scores,
    check_num_heads,
    count_parameters,
    kv_cache_bytes,
    split_heads,
    valid_head_counts,
)
from helpers.attention_view import AttentionView, Frame
from helpers.checks import check_attention_rows, check_close, check_shape
from helpers.examples import SENTENCE, embed, init_weights_, seeded_attention, tokens
from helpers.experiment import dot_product_variance, softmax_saturation
from helpers.layouts import expand_kv, head_circuits, head_ranks, share_kv
from helpers.palette import HEAD_COLOURS
from helpers.panel_svg import (
    kv_groups_svg,
    parameter_counts_svg,
    query_breakdown_svg,
    rank_bars_svg,
)

__all__ = [
    "QueryExplorer",
    "HeadsExplorer",
    "BlockMatrixExplorer",
    "OneVsManyExplorer",
    "ParameterExplorer",
    "RealHeadsExplorer",
    "CrossAttentionExplorer",
    "SharedKVExplorer",
    "ScalingExplorer",
    "CircuitsExplorer",
    "TARGET",
    "plural",
]

H_MAX = 16  # the h slider's range is 1 .. H_MAX
TARGET = "le chat était assis"  # a decoder's words so far, translating the course's SENTENCE


def plural(n: int, word: str) -> str:
    """'1 head', '4 heads', '2 softmaxes'."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith(("x", "s")) else f"{n} {word}s"


def _table(rows: list[tuple[str, ...]], caption: str) -> str:
    """An HTML table of strings; the first row is the header."""
    head, *body = rows
    esc = lambda s: html.escape(s, quote=False)  # noqa: E731
    th = "".join(f"<th>{esc(c)}</th>" for c in head)
    trs = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><caption>{esc(caption)}</caption><tr>{th}</tr>{trs}</table>"


def _lines(lines: list[str]) -> str:
    body = "<br>".join(html.escape(line, quote=False) for line in lines)
    return f'<div class="av-lines">{body}</div>'


def _shape_row(tensor: torch.Tensor, expected: tuple[int, ...], name: str, dims: str) -> tuple:
    """(name, shape, dims, ✓/✗) measured on the tensor itself."""
    try:
        check_shape(tensor, expected, name, dims=dims, echo=False)
        mark = "✓"
    except AssertionError:
        mark = f"✗ expected {tuple(expected)}"
    return (name, str(tuple(tensor.shape)), f"({', '.join(dims.split())})", mark)


def _titles(h: int) -> list[str]:
    return [f"head {i}" for i in range(h)]


def _h_slider(h: int) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=h, min=1, max=H_MAX, description="h (heads)", continuous_update=True,
        style={"description_width": "80px"},
    )  # fmt: skip


def _d_model_slider(d_model: int, high: int) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=d_model, min=8, max=high, step=8, description="d_model", continuous_update=True,
        style={"description_width": "80px"}, layout=widgets.Layout(width="420px"),
    )  # fmt: skip


def _heads_or_why(d_model: int, h: int) -> int:
    """d_k = d_model / h, or a ValueError in the panel's words: the slider's h, and only the
    head counts the slider can reach."""
    if d_model % h:
        works = ", ".join(str(n) for n in valid_head_counts(d_model) if n <= H_MAX)
        raise ValueError(
            f"d_model = {d_model} is not divisible by h = {h}: each head would get d_k = "
            f"{d_model}/{h} = {d_model / h:.2f} features. h that work here: {works}."
        )
    return check_num_heads(d_model, h)


def _around(value: int, low: int, high: int, step: int, radius: int) -> list[int]:
    """value, then its neighbours one step away, two steps away, ... within [low, high]."""
    out = [value]
    for r in range(1, radius + 1):
        out += [v for v in (value - r * step, value + r * step) if low <= v <= high]
    return out


def _every_h_near_this_d_model(panel, setting: dict[str, int], radius: int):
    """The settings of an (h, d_model) panel to have ready: every h, at this d_model and at the
    d_model `radius` slider steps either side, the nearest first."""
    s = panel.d_model_slider
    for d_model in _around(setting["d_model"], s.min, s.max, s.step, radius):
        for h in _around(setting["h"], 1, H_MAX, 1, H_MAX):
            yield {"d_model": d_model, "h": h}


_SELECTIONS = (widgets.ToggleButtons, widgets.SelectionSlider)  # labels shown, index synced


class _Panel(widgets.VBox):
    """Controls on top, an AttentionView below; `_frame(**setting)` computes one setting and
    `_reachable(setting, radius)` lists the settings to have ready (the current one first)."""

    WHAT = "the panel"  # named in the line shown before the notebook runs
    RADIUS = 2  # prefetch this many steps around the current setting; keep twice as many

    def __init__(
        self,
        controls: dict[str, widgets.ValueWidget],
        view: AttentionView,
        rows: list[widgets.Widget] | None = None,
    ):
        self.controls, self.view = controls, view
        for name, control in controls.items():
            selection = isinstance(control, _SELECTIONS)
            values = [v for _, v in getattr(control, "options", ())]
            if selection and values != list(range(len(values))):
                raise ValueError(
                    f"the {name} options need the values 0 .. n-1 (the browser keys frames by "
                    f"their index); got {values}"
                )
            setattr(view, name, control.value)
            # moves switch frames in the browser (a selection widget syncs its index, not value)
            synced = "index" if selection else "value"
            widgets.jslink((control, synced), (view, name))
            control.observe(self._moved, names="value")  # ... and the kernel prefetches around
        super().__init__([*(rows or [widgets.HBox(list(controls.values()))]), view])
        self.add_class("course-panel")  # its controls' text at 15 px (attention_view.css)
        self._moved()

    def __repr__(self) -> str:
        # what JupyterLab shows before the kernel runs, and what strict nbval compares
        return f"▶ Run ▸ Run All Cells in the notebook view starts {self.WHAT}"

    @property
    def setting(self) -> dict[str, int]:
        return {name: self.controls[name].value for name in self.view.key_by}

    @property
    def current(self) -> Frame:
        """The frame the browser shows for the controls' current values."""
        return self.view.frame(self.view.key(**self.setting))

    @property
    def table(self) -> str:
        return self.current.side

    @property
    def message(self) -> str:
        return self.view.notice or self.current.error or self.current.note

    @property
    def maps(self) -> torch.Tensor:
        return self.view.maps(self.view.key(**self.setting))

    def _moved(self, change=None) -> None:
        """A control moved: make sure the browser holds the new setting and its neighbours."""
        try:
            if self.view.published and not self.view.has(self.view.key(**self.setting)):
                self._ensure(self.setting)  # a jump past what was sent ahead: show it first
                self.view.publish()
            for setting in self._reachable(self.setting, self.RADIUS):
                self._ensure(setting)
            keep = {self.view.key(**s) for s in self._reachable(self.setting, 2 * self.RADIUS)}
            self.view.publish(keep)
            if self.view.notice.startswith("Unexpected"):  # it worked again: lift our notice
                self.view.notice = ""
        except Exception as err:  # noqa: BLE001 - in class, a silent stale picture is worse
            self.view.notice = f"Unexpected {type(err).__name__}: {err}"

    def _ensure(self, setting: dict[str, int]) -> None:
        """Compute one setting's frame unless the view holds it; errors become its message."""
        key = self.view.key(**setting)
        if self.view.has(key):
            return
        try:
            frame = self._frame(**setting)
        except ValueError as err:  # an impossible combination: say why
            frame = Frame(error=str(err))
        except Exception as err:  # noqa: BLE001
            frame = Frame(error=f"Unexpected {type(err).__name__}: {err}")
        self.view.add_frame(key, frame)

    def _reachable(self, setting: dict[str, int], radius: int) -> Iterator[dict[str, int]]:
        raise NotImplementedError

    def _frame(self, **setting: int) -> Frame:
        raise NotImplementedError


class QueryExplorer(_Panel):
    """Notebook 01: pick a query token (a button, or its row in the map); see its score row, its
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


class HeadsExplorer(_Panel):
    """Notebook 02: h heads, each with its own W_i^Q, W_i^K, W_i^V (d_model x d_k). Sliders for h
    and d_model redraw all h attention maps and the table of every shape."""

    WHAT = "the h and d_model panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 64, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        self.h_slider = _h_slider(h)
        self.d_model_slider = _d_model_slider(d_model, high=512)
        view = AttentionView(key_by=["d_model", "h"], height=420)
        super().__init__({"h": self.h_slider, "d_model": self.d_model_slider}, view)

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


class OneVsManyExplorer(_Panel):
    """Notebook 04: the same d_model x d_model W^Q, W^K, W^V used as one head (one softmax over
    all of d_model) and as h heads (h softmaxes). The h slider redraws the one map beside the h."""

    WHAT = "the one-head-vs-h-heads panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 48, seed: int = 0):
        self.words, self.seed, self.d_model = tokens(sentence), seed, d_model
        self.h_slider = _h_slider(h)
        super().__init__({"h": self.h_slider}, AttentionView(key_by=["h"], height=420))

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


@lru_cache(maxsize=128)
def _parameters_for_every_h(d_model: int, d_k: int) -> tuple[int, ...]:
    """count_parameters of PerHeadMultiHeadAttention(d_model, h, d_k) for h = 1 .. H_MAX."""
    with torch.device("meta"):  # shapes only: no weights are drawn
        return tuple(
            count_parameters(PerHeadMultiHeadAttention(d_model, n, d_k=d_k))
            for n in range(1, H_MAX + 1)
        )


class ParameterExplorer(_Panel):
    """Notebook 05: heads of any width d_k, with W^O mapping h·d_k back to d_model. Sliders for h
    and d_k; the maps of the h heads, and the parameter count against h for this d_k and for
    d_k = d_model / h."""

    WHAT = "the h and d_k panel"

    def __init__(self, h: int = 4, d_k: int = 16, d_model: int = 64, seed: int = 0):
        self.d_model, self.seed, self.words = d_model, seed, tokens(SENTENCE)
        self.h_slider = _h_slider(h)
        self.d_k_slider = widgets.IntSlider(
            value=d_k, min=1, max=d_model, description="d_k", style={"description_width": "80px"}
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


class RealHeadsExplorer(_Panel):
    """Notebook 07: the 12 heads of one layer of a real pretrained model (MiniLM) on your text, and
    one head enlarged. A text box for the sentence, sliders for layer and head."""

    WHAT = "the MiniLM panel"
    RADIUS = 0  # unused: every layer and head comes from one forward, so all are sent at once

    def __init__(
        self, model, text: str = "The cat sat on the mat because it was warm.", layer=0, head=0
    ):
        from helpers.pretrained import head_patterns

        self.model, self._patterns = model, head_patterns
        n_layers, h = len(model.layers), model.num_heads
        self.text = widgets.Text(
            value=text, description="text", continuous_update=False,
            layout=widgets.Layout(width="620px"), style={"description_width": "40px"},
        )  # fmt: skip
        self.layer_slider = widgets.IntSlider(
            value=layer, min=0, max=n_layers - 1, description="layer"
        )
        self.head_slider = widgets.IntSlider(value=head, min=0, max=h - 1, description="head")
        (self.encoded, self.scores), self.shown_text = self._encode(text), text
        view = AttentionView(key_by=["layer", "head"], focus_by="head", enlarge=True, height=430)
        controls = {"layer": self.layer_slider, "head": self.head_slider}
        rows = [self.text, widgets.HBox([self.layer_slider, self.head_slider])]
        super().__init__(controls, view, rows)
        self.text.observe(self._new_text, names="value")

    def _encode(self, text: str):
        encoded = self.model(text)  # TextError (a ValueError) for an empty or too long text
        return encoded, self._patterns(encoded)

    def _new_text(self, change=None) -> None:
        try:
            encoded = self._encode(self.text.value)
        except ValueError as err:  # keep the last sentence: layer and head go on working
            self.view.notice = f"{str(err).rstrip('.')}. The maps still show: '{self.shown_text}'"
            return
        except Exception as err:  # noqa: BLE001
            self.view.notice = f"Unexpected {type(err).__name__}: {err}"
            return
        (self.encoded, self.scores), self.shown_text = encoded, self.text.value
        self.view.clear()  # every frame belonged to the old text
        for setting in self._reachable(self.setting, self.RADIUS):
            self._ensure(setting)
        with self.view.hold_sync():  # the new maps, the cleared notice and query in one message
            self.view.notice, self.view.query = "", -1  # the old query may not exist here
            self.view.publish(full=True)

    def _reachable(self, setting, radius):
        n_layers, h = len(self.model.layers), self.model.num_heads
        return ({"layer": layer, "head": i} for layer in range(n_layers) for i in range(h))

    def _frame(self, layer: int, head: int) -> Frame:
        encoded, scores = self.encoded, self.scores
        words = encoded.tokens[0]
        T, h, n_layers = len(words), self.model.num_heads, len(self.model.layers)
        maps = encoded.attentions[layer, 0]  # (h, T, T)
        block = f"layer {layer}"
        if not self.view.has_maps(block):
            self.view.add_maps(block, maps, words, words, _titles(h))
        attention = self.model.layers[layer].attention
        d_model, d_k = attention.d_model, attention.d_k
        w_head = attention.w_q.weight[head * d_k : (head + 1) * d_k].T  # x·W layout
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(encoded.attentions, (n_layers, 1, h, T, T), "attentions", "L B h T T"),
            _shape_row(attention.w_q.weight.T, (d_model, d_model), "W^Q (x·W)", "d_model h·d_k"),
            _shape_row(w_head, (d_model, d_k), f"W_{head}^Q (x·W)", "d_model d_k"),
        ]
        lines = [check_attention_rows(maps, f"layer {layer} maps", echo=False)]
        lines += [
            f"head {head} → {name}: {float(s[layer, head]):.2f}" for name, s in scores.items()
        ]
        unknown = sum(w == "[UNK]" for w in words)
        note = f"{plural(T, 'token')}; layer {layer}, head {head}"
        if unknown:
            note += f" ({unknown} [UNK]: characters the model's vocabulary does not have)"
        side = _table(rows, f"{plural(T, 'token')}, layer {layer}, head {head}") + _lines(lines)
        return Frame(block, side, note)


class BlockMatrixExplorer(_Panel):
    """Notebook 03: the h per-head W_i^Q side by side are one d_model x d_model W^Q. The h slider
    moves the block boundaries over the same matrix; the table checks the block product and
    fused == per-head."""

    WHAT = "the block-matrix panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 32, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        self.h_slider = _h_slider(h)
        self.d_model_slider = _d_model_slider(d_model, high=128)
        view = AttentionView(key_by=["d_model", "h"], height=420, toolbar=False)
        super().__init__({"h": self.h_slider, "d_model": self.d_model_slider}, view)

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


class CrossAttentionExplorer(_Panel):
    """Notebook 09: queries from one sequence (a decoder's words so far), keys and values from
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
        self.h_slider = _h_slider(h)
        self.t_k_slider = widgets.IntSlider(
            value=len(self.source), min=1, max=len(self.source), description="T_k (source)",
            style={"description_width": "110px"}, layout=widgets.Layout(width="420px"),
        )  # fmt: skip
        view = AttentionView(key_by=["t_k", "h"], height=380)
        super().__init__({"h": self.h_slider, "t_k": self.t_k_slider}, view)

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


def _share(part: int, whole: int) -> str:
    """'1/8 of', or 'all of' when part == whole."""
    ratio = Fraction(part, whole)
    return "all of" if ratio == 1 else f"{ratio} of"


def _divisors_down(n: int) -> list[int]:
    return [g for g in range(n, 0, -1) if n % g == 0]


class SharedKVExplorer(_Panel):
    """Notebook 10: h query heads over h, ..., 2 or 1 K/V heads (MHA, GQA, MQA), made from the
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
            description="K/V heads", style={"button_width": "auto", "description_width": "80px"},
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


D_KS = (4, 8, 16, 32, 64, 128, 256)  # the √d_k panel's choices


class ScalingExplorer(_Panel):
    """Notebook 11: a d_k slider over 4 .. 256. The same queries and keys (entries of variance 1,
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
            description="d_k", continuous_update=True, style={"description_width": "80px"},
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
            ("over many rows", "÷ √d_k", "no scaling"),
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
        note = f"{shown}: largest weight {peak[0]:.2f} scaled, {peak[1]:.2f} unscaled"
        return Frame(block, side, note)


@lru_cache(maxsize=32)
def _one_wide_head_rank(d_model: int, seed: int) -> int:
    """The rank of W_QK for one head as wide as the model (h = 1, d_k = d_model)."""
    ranks_qk, _ = head_ranks(seeded_attention(d_model, 1, seed))
    return ranks_qk[0]


class CircuitsExplorer(_Panel):
    """Notebook 12: each head as two d_model x d_model matrices, W_QK = W_i^Q W_i^Kᵀ (where it
    looks) and W_OV = W_i^V W^O_i (what it writes). Sliders for h and d_model redraw the h maps
    rebuilt from W_QK alone, each matrix's rank (d_k) and the total over the heads (d_model)."""

    WHAT = "the W_QK and W_OV panel"

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 32, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        self.h_slider = _h_slider(h)
        self.d_model_slider = _d_model_slider(d_model, high=128)
        view = AttentionView(key_by=["d_model", "h"], height=380)
        super().__init__({"h": self.h_slider, "d_model": self.d_model_slider}, view)

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
            _shape_row(w_qk[0], (d_model, d_model), "W_QK^i", "d_model d_model"),
            _shape_row(w_ov[0], (d_model, d_model), "W_OV^i", "d_model d_model"),
            _shape_row(scores, (h, T, T), "scores", "h T T"),
            _shape_row(writes, (h, T, d_model), "written", "h T d_model"),
        ]
        lines = [
            f"rank of each W_QK^i: {_same_or_list(ranks_qk)}; of each W_OV^i: "
            f"{_same_or_list(ranks_ov)} (d_k = {d_k})",
            f"total over the {plural(h, 'head')}: {sum(ranks_qk)} (h · d_k = {h * d_k}); "
            f"one head of width {d_model}: {one}",
            f"each holds {d_model**2:,} numbers made from 2·d_model·d_k = "
            f"{2 * d_model * d_k:,} weights",
            check_close(rebuilt, weights[0], "maps from softmax(x·W_QK·xᵀ/√d_k) = module's",
                        echo=False),
            check_close(writes.sum(0), out[0], "out = Σ_i weights_i · x · W_OV^i", echo=False),
        ]  # fmt: skip
        bars = rank_bars_svg(ranks_qk, d_model, list(HEAD_COLOURS))
        block = self.view.add_maps(f"{d_model}/{h}", rebuilt, self.words, self.words, _titles(h))
        side = bars + _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(lines)
        note = f"{plural(h, 'head')}, each W_QK^i of rank {_same_or_list(ranks_qk)}"
        return Frame(block, side, note)


def _same_or_list(values: list[int]) -> str:
    """'8' if every value is 8, else '8 8 7 8'."""
    return str(values[0]) if len(set(values)) == 1 else " ".join(map(str, values))
