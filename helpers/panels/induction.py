"""The panel of `18_induction_heads.ipynb`: a trained two-layer causal model's heads, on a
repeated sequence of random tokens and on a repeated sentence."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from helpers.checks import check_attention_rows
from helpers.examples import SENTENCE
from helpers.induction import AttentionOnly, induction_scores, previous_token_scores, repeat_words
from helpers.panels.base import WHERE, _lines, _Panel, _shape_row, _table, _titles, plural
from helpers.panels.view import AttentionView, Frame

SEQUENCES = ("random tokens, repeated", "a sentence, repeated")


def _random_repeat(n: int, vocab: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """n random token ids, then the same n again: (1, 2n) and a label per token."""
    first = torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed))
    tokens = torch.cat([first, first])[None]
    return tokens, [f"#{i}" for i in tokens[0].tolist()]


class InductionExplorer(_Panel):
    """Each head of a trained `AttentionOnly` model on a sequence whose first half repeats:
    buttons for the sequence, sliders for layer and head (the head drawn large), and beside the
    maps each head's previous-token and induction scores on the sequence shown."""

    WHAT = "the induction panel"
    RADIUS = 0  # unused: both sequences, every layer and head come from two forwards

    def __init__(self, model: AttentionOnly, sentence: str = SENTENCE, n: int = 10, seed: int = 3):
        self.model = model
        sentence_tokens, sentence_words = repeat_words(sentence, model.vocab)
        random_tokens, random_words = _random_repeat(n, model.vocab, seed)
        longest, positions = max(2 * n, sentence_tokens.size(1)), model.position.num_embeddings
        if longest > positions:
            raise ValueError(
                f"the repeated sequence needs {longest} positions and the model has {positions}: "
                f"use n and a sentence of at most {positions // 2} tokens"
            )
        self.sequences = [(random_tokens, random_words), (sentence_tokens, sentence_words)]
        self.choice = widgets.ToggleButtons(
            options=[(name, i) for i, name in enumerate(SEQUENCES)],
            description="sequence",
            style={"button_width": "auto"},  # the whole label: "random tokens, repeated"
        )
        layers, h = len(model.layers), model.num_heads
        self.layer_slider = widgets.IntSlider(value=0, min=0, max=layers - 1, description="layer")
        self.head_slider = widgets.IntSlider(value=0, min=0, max=h - 1, description="head")
        self._maps: dict[int, list[torch.Tensor]] = {}
        view = AttentionView(key_by=["choice", "layer", "head"], focus_by="head", enlarge=True)
        controls = {"choice": self.choice, "layer": self.layer_slider, "head": self.head_slider}
        rows = [self.choice, widgets.HBox([self.layer_slider, self.head_slider])]
        super().__init__(controls, view, rows)

    def _reachable(self, setting, radius):
        layers, h = len(self.model.layers), self.model.num_heads
        for choice in range(len(self.sequences)):
            for layer in range(layers):
                for head in range(h):
                    yield {"choice": choice, "layer": layer, "head": head}

    def _layer_maps(self, choice: int) -> list[torch.Tensor]:
        """Each layer's maps (1, h, T, T) on sequence `choice`, computed once."""
        if choice not in self._maps:
            with torch.no_grad():
                _, self._maps[choice] = self.model(self.sequences[choice][0])
        return self._maps[choice]

    def _frame(self, choice: int, layer: int, head: int) -> Frame:
        tokens, words = self.sequences[choice]
        maps = self._layer_maps(choice)[layer]  # (1, h, T, T)
        T, h, n = tokens.size(1), self.model.num_heads, tokens.size(1) // 2
        block = f"{choice}/{layer}"
        if not self.view.has_maps(block):
            self.view.add_maps(block, maps[0], words, words, _titles(h))
        previous = previous_token_scores(maps)  # (h,)
        induction = induction_scores(maps, torch.tensor([n]))  # (h,)
        rows = [
            ("tensor", "shape", "dims", "check"),
            _shape_row(tokens, (1, T), "tokens", "B T"),
            _shape_row(maps, (1, h, T, T), f"layer {layer} maps", "B h T T"),
        ]
        lines = [check_attention_rows(maps, f"layer {layer} maps", echo=False)]
        lines += [
            f"head {head}, on the previous token: {float(previous[head]):.2f}",
            f"head {head}, on the token after its first-half twin: {float(induction[head]):.2f}",
        ]
        note = f"{plural(T, 'token')}: {n}, then the same {n} again; layer {layer}, head {head}"
        side = _table(rows, f"layer {layer}, head {head}") + _lines(lines)
        return Frame(block, side, note)


class TrainingView(widgets.VBox):
    """A progress line and the loss curve, redrawn every `every` steps while `train_copying`
    runs (pass `update` as its `on_step`): a class watches the repeat's loss fall."""

    def __init__(self, steps: int, every: int = 100):
        import time

        self.steps, self.every, self.start = steps, every, time.perf_counter()
        self.line = widgets.HTML(f"step 0 of {steps}")
        from helpers.figures.plots import copy_curves, shown_width

        width = shown_width(copy_curves([], [], 1.0, steps))  # the curve's size, not stretched
        self.picture = widgets.Image(format="png", layout=widgets.Layout(width=f"{width}px"))
        super().__init__([self.line, self.picture])
        self.add_class("course-panel")
        self.add_class("course-training")  # a picture, not a panel: browser tests skip it

    def __repr__(self) -> str:
        return f"▶ the training curve{WHERE}"

    def update(self, step: int, run) -> None:
        import time

        from helpers.figures.plots import copy_curves, to_png

        done = step + 1
        if done % self.every and done != self.steps:
            return
        recent = lambda losses: sum(losses[-50:]) / len(losses[-50:])  # noqa: E731
        self.line.value = (
            f"step {done} of {self.steps} · training loss (mean of the last 50 batches) on the "
            f"repeat {recent(run.repeat):.2f}, on the first copy {recent(run.first):.2f} · "
            f"{time.perf_counter() - self.start:.0f} s"
        )
        self.picture.value = to_png(copy_curves(run.first, run.repeat, run.chance, self.steps))
