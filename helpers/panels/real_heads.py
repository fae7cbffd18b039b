"""The panel of `12_real_model_heads.ipynb`: MiniLM's heads on the learner's own text."""

from __future__ import annotations

import ipywidgets as widgets

from helpers.checks import check_attention_rows
from helpers.panels.base import (
    _lines,
    _Panel,
    _shape_row,
    _table,
    _titles,
    plural,
)
from helpers.panels.view import AttentionView, Frame


class RealHeadsExplorer(_Panel):
    """The 12 heads of one layer of a real pretrained model (MiniLM) on your text, and
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
            layout=widgets.Layout(width="620px"), style={"description_width": "2.7em"},
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
