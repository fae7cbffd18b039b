"""Predict, then run: a question the class answers on its laptops before the cell that shows it.

`Predict(question, answer)` shows the question, a box to type in and a "check" button; `answer`
comes from the notebook's own objects (computed, never typed in by hand), so it is what the next
cell prints. A typed answer is read by the answer's kind:

- a shape (a tuple or `torch.Size`): the whole numbers typed, in any brackets or separators,
  "(1, 4, 7, 7)", "1 4 7 7", "1x4x7x7";
- a number: a plain decimal ("1", "0.25", "1e-3"), right within `tolerance` × max(1, |answer|);
- one of `options` (given as strings, the answer among them): a button each.

A wrong guess is told what it was and the hint, never the answer; "show the answer" shows it.
The static site reads a typed answer the same way in its loader (site_assets/loader.js), from
`static_state()`; tests/test_predict.py holds both to the same cases.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import ipywidgets as widgets
import torch

from helpers.panels.base import WHERE

NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")  # the loader's NUMBER too
# what may stand between a shape's numbers: brackets, commas, spaces, x or ×
SHAPE_TEXT = re.compile(r"^[\s\d(),\[\]x×*]*$")


def shape_text(shape: Sequence[int]) -> str:
    """(1, 4, 7, 7), or (7,) for one dim, as Python prints a tuple."""
    return str(tuple(int(n) for n in shape))


def number_text(value: float) -> str:
    """4 significant digits, written as the site's loader writes them (12340, 0.25, 1): the two
    agree from 1e-4 up, which covers what the course asks."""
    rounded = float(f"{value:.4g}")
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


def judge(
    kind: str, answer, text: str, hint: str = "", tolerance: float = 0.01
) -> tuple[bool | None, str]:
    """(True, ✓ message) for a right answer, (False, ✗ message) for a wrong one, (None, what to
    type) for text that cannot be read as the answer's kind."""
    text = text.strip()
    hint = f" {hint}" if hint else ""
    if kind == "shape":
        numbers = re.findall(r"\d+", text)
        if not numbers or not SHAPE_TEXT.match(text):
            return None, "Type the shape as whole numbers, like (2, 3)."
        guess = tuple(int(n) for n in numbers)
        if guess == tuple(answer):
            return True, f"✓ Right: {shape_text(answer)}."
        if len(guess) != len(answer):
            dims = f"the answer has {len(answer)} dims, not {len(guess)}"
            return False, f"✗ Not {shape_text(guess)}: {dims}.{hint}"
        return False, f"✗ Not {shape_text(guess)}.{hint}"
    if kind == "number":
        if not NUMBER.match(text):
            return None, "Type a number, like 0.5."
        guess = float(text)
        if abs(guess - answer) <= tolerance * max(1.0, abs(answer)):
            return True, f"✓ Right: {number_text(answer)}."
        return False, f"✗ Not {number_text(guess)}.{hint}"
    if kind == "choice":
        if text == answer:
            return True, f"✓ Right: {answer}."
        return False, f"✗ Not {text}.{hint}"
    raise ValueError(f"no kind of answer {kind!r}: shape, number or choice")


def _kind_of(answer, options) -> tuple[str, object]:
    if options is not None:
        options = [str(o) for o in options]
        if str(answer) not in options:
            raise ValueError(f"the answer {answer!r} is not among the options {options}")
        return "choice", str(answer)
    if isinstance(answer, torch.Tensor) and answer.dim() == 0:
        answer = answer.item()
    if isinstance(answer, tuple | list | torch.Size) and all(
        isinstance(n, int) and not isinstance(n, bool) for n in answer
    ):
        return "shape", tuple(answer)
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        return "number", float(answer)
    raise TypeError(
        "Predict takes a shape (a tuple of ints), a number or an option; got "
        f"{type(answer).__name__}"
    )


def _markup(text: str) -> str:
    """The question as HTML: `code` in backticks set as code, the rest escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


class Predict(widgets.VBox):
    """A question with a typed (or clicked) answer, checked against `answer` when the student
    presses check (or Enter); see the module doc."""

    def __init__(
        self,
        question: str,
        answer,
        *,
        hint: str = "",
        options: Sequence[str] | None = None,
        tolerance: float = 0.01,
    ):
        self.kind, self.answer = _kind_of(answer, options)
        self.question, self.hint, self.tolerance = question, hint, tolerance
        self.options = [str(o) for o in options] if options is not None else None
        self.prompt = widgets.HTML(f"<b>Predict, then run.</b> {_markup(question)}")
        self.feedback = widgets.HTML("")
        self.reveal = widgets.Button(description="show the answer", layout={"width": "auto"})
        self.reveal.on_click(lambda _: self._say(f"The answer: {self.answer_text}."))
        if self.kind == "choice":
            self.choice = widgets.ToggleButtons(options=self.options, value=None)
            self.choice.observe(lambda change: self.check(change.new or ""), names="value")
            row = [self.choice, self.reveal]
        else:
            whole = isinstance(answer, int) and not isinstance(answer, bool)
            example = "(2, 3)" if self.kind == "shape" else "12" if whole else "0.5"
            self.box = widgets.Text(placeholder=f"your prediction, like {example}",
                                    continuous_update=False, layout={"width": "260px"})  # fmt: skip
            self.box.observe(lambda change: self.check(change.new), names="value")  # on Enter
            button = widgets.Button(description="check", layout={"width": "auto"})
            button.on_click(lambda _: self.check(self.box.value))
            row = [self.box, button, self.reveal]
        super().__init__([self.prompt, widgets.HBox(row), self.feedback])
        self.add_class("course-panel")  # the panels' text size (view.css)
        self.add_class("course-predict")

    @property
    def answer_text(self) -> str:
        if self.kind == "shape":
            return shape_text(self.answer)
        return number_text(self.answer) if self.kind == "number" else str(self.answer)

    def check(self, text: str) -> bool | None:
        """Judge `text`, show the message; True, False, or None when it cannot be read."""
        if not text.strip():
            self._say("")
            return None
        ok, message = judge(self.kind, self.answer, text, self.hint, self.tolerance)
        self._say(message)
        return ok

    @property
    def message(self) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", self.feedback.value))

    def _say(self, message: str) -> None:
        self.feedback.value = f"<span>{html.escape(message)}</span>" if message else ""

    def static_state(self) -> dict:
        """What the static site needs to ask and judge the same question (loader.js)."""
        answer = list(self.answer) if self.kind == "shape" else self.answer
        return {"kind": "predict", "question": self.prompt.value, "answer_kind": self.kind,
                "answer": answer, "answer_text": self.answer_text, "hint": self.hint,
                "tolerance": self.tolerance, "options": self.options}  # fmt: skip

    def __repr__(self) -> str:
        # what JupyterLab shows before the cell runs (strict nbval compares it), as for a panel
        return f"▶ the predict-then-run box{WHERE}"
