"""The interactive panels of the notebooks: sliders wired to `attention`, `plots` and `checks`.

Each panel is a `widgets.VBox`: controls on top, a message line, then the picture (a
`widgets.Image` holding PNG bytes, which strict nbval accepts) beside a live table of shapes and
checks. Every table entry is measured on the tensors just computed, not written from a formula.
A slider combination that cannot work shows a message in the panel, never a traceback. Tests
drive a panel by setting `.value` on its controls and reading `.image.value`, `.table.value`
and `.message.value`.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import torch

from helpers import plots
from helpers.attention import (
    PerHeadMultiHeadAttention,
    SelfAttention,
    attention_scores,
    check_num_heads,
    count_parameters,
    split_heads,
    valid_head_counts,
)
from helpers.checks import check_attention_rows, check_close, check_shape
from helpers.examples import SENTENCE, embed, init_weights_, seeded_attention, tokens

__all__ = [
    "QueryExplorer",
    "HeadsExplorer",
    "BlockMatrixExplorer",
    "OneVsManyExplorer",
    "ParameterExplorer",
    "RealHeadsExplorer",
]

TABLE_STYLE = "font-family: monospace; font-size: 14px; border-collapse: collapse;"


def _table(rows: list[tuple[str, ...]], caption: str) -> str:
    """An HTML table of strings; the first row is the header."""
    head, *body = rows
    cell = "padding: 2px 10px; text-align: left; white-space: nowrap;"
    th = "".join(f'<th style="{cell}">{html.escape(c, quote=False)}</th>' for c in head)
    trs = "".join(
        "<tr>"
        + "".join(f'<td style="{cell}">{html.escape(c, quote=False)}</td>' for c in row)
        + "</tr>"
        for row in body
    )
    return (
        f'<table style="{TABLE_STYLE}"><caption style="text-align:left; font-weight:bold;">'
        f"{html.escape(caption, quote=False)}</caption><tr>{th}</tr>{trs}</table>"
    )


def _lines(lines: list[str]) -> str:
    body = "<br>".join(html.escape(line, quote=False) for line in lines)
    return f'<div style="{TABLE_STYLE} margin-top: 8px;">{body}</div>'


def _ok(text: str) -> str:
    return f'<div style="color: #1a7f37; font-size: 15px;">{html.escape(text, quote=False)}</div>'


def _error(text: str) -> str:
    return (
        '<div style="color: #b42318; font-size: 15px; font-weight: bold; '
        f'border: 2px solid #b42318; padding: 6px;">✗ {html.escape(text, quote=False)}</div>'
    )


def _png_width(png: bytes) -> str:
    """A PNG's own pixel width (bytes 16-19 of its header), as a fixed layout width: the picture
    then shows sharp and unscaled."""
    return f"{int.from_bytes(png[16:20], 'big')}px"


def _shape_row(tensor: torch.Tensor, expected: tuple[int, ...], name: str, dims: str) -> tuple:
    """(name, shape, dims, ✓/✗) measured on the tensor itself."""
    try:
        check_shape(tensor, expected, name, dims=dims, echo=False)
        mark = "✓"
    except AssertionError:
        mark = f"✗ expected {tuple(expected)}"
    return (name, str(tuple(tensor.shape)), f"({', '.join(dims.split())})", mark)


class _Panel(widgets.VBox):
    """Message line, picture and table below the controls; `_render` does the work."""

    def __init__(self, controls: list[widgets.Widget], beside: widgets.Widget | None = None):
        self.message = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.table = widgets.HTML(layout=widgets.Layout(margin="0 0 0 12px"))
        for control in controls:
            control.observe(self.update, names="value")
        # the table sits beside the picture, or below it when the screen is too narrow
        side = widgets.VBox([beside, self.table]) if beside is not None else self.table
        below = widgets.HBox([self.image, side], layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__([widgets.HBox(controls), self.message, below])
        self.update()

    def update(self, change=None) -> None:
        """Redraw for the current control values; a failure becomes the message, not a traceback."""
        try:
            png, table, note = self._render()
        except ValueError as err:  # an impossible combination: say why
            stale = (
                " The picture still shows the last setting that worked." if self.image.value else ""
            )
            self.message.value = _error(f"{err}{stale}")
            return
        except Exception as err:  # noqa: BLE001 - in class, a silent stale picture is worse
            self.message.value = _error(f"Unexpected {type(err).__name__}: {err}")
            return
        self.image.layout.width = _png_width(png)
        self.image.value, self.table.value, self.message.value = png, table, _ok(note)

    def _render(self) -> tuple[bytes, str, str]:
        raise NotImplementedError


def _h_slider(h: int) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=h, min=1, max=16, description="h (heads)", continuous_update=True,
        style={"description_width": "80px"},
    )  # fmt: skip


def _d_model_slider(d_model: int, high: int) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=d_model, min=8, max=high, step=8, description="d_model", continuous_update=True,
        style={"description_width": "80px"}, layout=widgets.Layout(width="420px"),
    )  # fmt: skip


class QueryExplorer(_Panel):
    """Notebook 01: pick a query token; see its score row, its softmax row, and its output as the
    weighted sum of the value rows, for one head `SelfAttention(d_model, d_k)`."""

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
        super().__init__([self.query])

    def _render(self) -> tuple[bytes, str, str]:
        t, T = self.query.value, len(self.words)
        with torch.no_grad():
            q, k, v = self.head.w_q(self.x)[0], self.head.w_k(self.x)[0], self.head.w_v(self.x)[0]
            out, weights = self.head(self.x)  # (B, T, d_k), (B, T, T)
            scores = attention_scores(q, k)  # (T, T)
        d_k, word = self.head.d_k, self.words[t]
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
            check_close(weights[0, t] @ v, out[0, t], f"out[{t}] = weights[{t}] @ v", echo=False),
        ]
        fig = plots.query_breakdown(scores[t], weights[0, t], v, out[0, t], self.words, t)
        table = _table(rows, f"query {t} ('{word}'), one head, d_k = {d_k}") + _lines(checks)
        return plots.to_png(fig), table, f"query {t}: '{word}'"


class HeadsExplorer(_Panel):
    """Notebook 02: h heads, each with its own W_i^Q, W_i^K, W_i^V (d_model x d_k). Sliders for h
    and d_model redraw all h attention maps and the table of every shape."""

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 64, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        self.h_slider = _h_slider(h)
        self.d_model_slider = _d_model_slider(d_model, high=512)
        self._modules_seen: dict[tuple[int, int], PerHeadMultiHeadAttention] = {}
        super().__init__([self.h_slider, self.d_model_slider])

    def _per_head(self, d_model: int, h: int) -> PerHeadMultiHeadAttention:
        """This panel's own modules, kept per (d_model, h): building one at d_model = 512 is a
        third of a redraw, and a class moves the slider back and forth."""
        key = (d_model, h)
        if key not in self._modules_seen:
            self._modules_seen[key] = seeded_attention(d_model, h, self.seed, per_head=True)
        return self._modules_seen[key]

    def _render(self) -> tuple[bytes, str, str]:
        h, d_model = self.h_slider.value, self.d_model_slider.value
        d_k = check_num_heads(d_model, h)  # ValueError -> the message says which h would work
        T = len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        per_head = self._per_head(d_model, h)
        with torch.no_grad():
            # step by step, each head once; the module's own forward is then a check
            head_outs, maps = zip(*(hd(x) for hd in per_head.heads))  # h x (B, T, d_k), (B, T, T)
            concat = torch.cat(head_outs, dim=-1)  # (B, T, h * d_k)
            out, weights = (
                per_head.w_o(concat),
                torch.stack(maps, dim=1),
            )  # (B, T, d_model), (B, h, T, T)
            head = per_head.heads[0]
            q, k = head.w_q(x), head.w_k(x)  # (B, T, d_k)
            scores = attention_scores(q, k)  # (B, T, T)
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
        counts = [
            f"i = 0 .. {h - 1}: each head has its own W_i (shown: head 0)",
            f"matrices: 3h + 1 = {3 * h + 1}",
            f"parameters: 3·h·d_model·d_k + d_model² = {n_params:,}",
            check_attention_rows(weights, echo=False),
            check_close(out, module_out, "step by step = PerHeadMultiHeadAttention", echo=False),
        ]
        title = f"{h} heads: {h} softmaxes, {h} attention maps"
        png = plots.heads_mosaic_png(weights[0], self.words, title)
        table = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(counts)
        return png, table, f"h = {h} heads of d_k = {d_model} / {h} = {d_k}"


class BlockMatrixExplorer(_Panel):
    """Notebook 03: the h per-head W_i^Q side by side are one d_model x d_model W^Q. The h slider
    redraws the block boundaries; the table checks the block product and fused == per-head."""

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 32, seed: int = 0):
        self.words, self.seed = tokens(sentence), seed
        self.h_slider = _h_slider(h)
        self.d_model_slider = _d_model_slider(d_model, high=128)
        super().__init__([self.h_slider, self.d_model_slider])

    def _render(self) -> tuple[bytes, str, str]:
        h, d_model = self.h_slider.value, self.d_model_slider.value
        d_k = check_num_heads(d_model, h)
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
            check_close(weights_fused, weights, f"all {h} maps: fused = per-head", echo=False),
            f"parameters: per-head {count_parameters(per_head):,}, "
            f"fused {count_parameters(fused):,}",
        ]
        fig = plots.block_matrix(w_q, h)
        table = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(checks)
        return plots.to_png(fig), table, f"W^Q cut into h = {h} blocks of d_k = {d_k} columns"


class OneVsManyExplorer(_Panel):
    """Notebook 04: the same d_model x d_model W^Q, W^K, W^V used as one head (one softmax over
    all of d_model) and as h heads (h softmaxes). The h slider redraws the one map beside the h."""

    def __init__(self, sentence: str = SENTENCE, h: int = 4, d_model: int = 48, seed: int = 0):
        self.words, self.seed, self.d_model = tokens(sentence), seed, d_model
        self.h_slider = _h_slider(h)
        super().__init__([self.h_slider])

    def _render(self) -> tuple[bytes, str, str]:
        h, d_model = self.h_slider.value, self.d_model
        d_k = check_num_heads(d_model, h)
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
                scores_one,
                scores_heads.sum(1) / h**0.5,
                "one score = Σ_i head-i score / √h",
                echo=False,
            ),
            f"1 softmax vs {h}: max |out_one − out_{h}| = {gap:.3g}",
            f"parameters: {count_parameters(one):,} both",
        ]
        maps = torch.cat([weights_one[0], weights_many[0]])  # (1 + h, T, T)
        titles = ["ONE head"] + [f"head {i}" for i in range(h)]
        title = f"the same matrices as 1 head and as {h} heads"
        png = plots.heads_mosaic_png(maps, self.words, title, titles=titles, cols=min(h + 1, 5))
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(
                scores_one, (1, len(self.words), len(self.words)), "scores, 1 head", "B T T"
            ),
            _shape_row(
                scores_heads, (1, h, len(self.words), len(self.words)), "scores, h", "B h T T"
            ),
        ]
        table = _table(rows, f"h = {h}, d_model = {d_model}, d_k = {d_k}") + _lines(lines)
        return png, table, f"{h} heads of d_k = {d_k} vs one head of d_model = {d_model}"


class ParameterExplorer(_Panel):
    """Notebook 05: heads of any width d_k, with W^O mapping h·d_k back to d_model. Sliders for h
    and d_k; the plot shows the parameter count against h for this d_k and for d_k = d_model / h."""

    def __init__(self, h: int = 4, d_k: int = 16, d_model: int = 64, seed: int = 0):
        self.d_model, self.seed, self.words = d_model, seed, tokens(SENTENCE)
        self.h_slider = _h_slider(h)
        self.d_k_slider = widgets.IntSlider(
            value=d_k, min=1, max=d_model, description="d_k", style={"description_width": "80px"}
        )
        super().__init__([self.h_slider, self.d_k_slider])

    def _render(self) -> tuple[bytes, str, str]:
        h, d_k, d_model = self.h_slider.value, self.d_k_slider.value, self.d_model
        T = len(self.words)
        x = embed(self.words, d_model, seed=self.seed)  # (B, T, d_model)
        mha = PerHeadMultiHeadAttention(d_model, h, d_k=d_k)
        with torch.no_grad():
            concat = torch.cat([head(x)[0] for head in mha.heads], dim=-1)  # (B, T, h * d_k)
            out = mha.w_o(concat)  # (B, T, d_model): W^O takes h·d_k features back to d_model
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
        ]
        hs = list(range(1, 17))
        fixed = [count_parameters(PerHeadMultiHeadAttention(d_model, n, d_k=d_k)) for n in hs]
        tied_hs = [n for n in valid_head_counts(d_model) if n <= 16]
        series = {
            f"d_k = {d_k} for every h": (hs, fixed),
            "d_k = d_model / h": (tied_hs, [4 * d_model**2] * len(tied_hs)),
        }
        fig = plots.parameter_counts(series, f"parameters at d_model = {d_model}", highlight=h)
        table = _table(rows, f"h = {h}, d_k = {d_k}, d_model = {d_model}") + _lines(lines)
        return plots.to_png(fig), table, f"{h} heads of d_k = {d_k}: {n_params:,} parameters"


class RealHeadsExplorer(_Panel):
    """Notebook 07: the 12 heads of one layer of a real pretrained model (MiniLM) on your text, and
    one head enlarged. A text box for the sentence, sliders for layer and head."""

    def __init__(
        self, model, text: str = "The cat sat on the mat because it was warm.", layer=0, head=0
    ):
        from helpers.pretrained import head_patterns

        self.model, self._patterns = model, head_patterns
        n_layers, h = len(model.layers), model.num_heads
        self.text = widgets.Text(
            value=text, description="text", continuous_update=False,
            layout=widgets.Layout(width="520px"), style={"description_width": "40px"},
        )  # fmt: skip
        self.layer_slider = widgets.IntSlider(
            value=layer, min=0, max=n_layers - 1, description="layer"
        )
        self.head_slider = widgets.IntSlider(value=head, min=0, max=h - 1, description="head")
        self.head_image = widgets.Image(format="png")
        self._cache: tuple[str, object] | None = None
        super().__init__([self.text, self.layer_slider, self.head_slider], beside=self.head_image)

    def _encoded(self):
        if self._cache is None or self._cache[0] != self.text.value:
            self._cache = (self.text.value, self.model(self.text.value))  # TextError -> message
        return self._cache[1]

    def _render(self) -> tuple[bytes, str, str]:
        encoded = self._encoded()
        layer, head = self.layer_slider.value, self.head_slider.value
        words = encoded.tokens[0]
        T, h = len(words), self.model.num_heads
        maps = encoded.attentions[layer, 0]  # (h, T, T)
        # a title without the layer number: all layers then share one cached frame per text
        png = plots.heads_mosaic_png(maps, words, f"the {h} heads of this layer", cols=4)
        enlarged = plots.attention_map(maps[head], words, f"layer {layer}, head {head}", T <= 12)
        self.head_image.value = plots.to_png(enlarged, dpi=56)
        self.head_image.layout.width = _png_width(self.head_image.value)
        attention = self.model.layers[layer].attention
        d_model, d_k = attention.d_model, attention.d_k
        w_head = attention.w_q.weight[head * d_k : (head + 1) * d_k].T  # x·W layout
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(encoded.attentions, (6, 1, h, T, T), "attentions", "L B h T T"),
            _shape_row(attention.w_q.weight.T, (d_model, d_model), "W^Q (x·W)", "d_model h·d_k"),
            _shape_row(w_head, (d_model, d_k), f"W_{head}^Q (x·W)", "d_model d_k"),
        ]
        scores = self._patterns(encoded)
        lines = [check_attention_rows(maps, f"layer {layer} maps", echo=False)]
        lines += [
            f"head {head} → {name}: {float(s[layer, head]):.2f}" for name, s in scores.items()
        ]
        unknown = sum(w == "[UNK]" for w in words)
        note = f"{T} tokens; layer {layer}, head {head}"
        if unknown:
            note += f" ({unknown} [UNK]: characters the model's vocabulary does not have)"
        return png, _table(rows, f"{T} tokens, layer {layer}, head {head}") + _lines(lines), note
