"""helpers.panels.predict: a typed prediction is read by the answer's kind and judged right only
when it is right; the messages never give the answer away; the site's loader reads it the same
way (its cases in tests/browser/test_site.py)."""

import pytest
import torch

from helpers.panels.predict import Predict, judge, number_text

SHAPE = (1, 4, 7, 7)


@pytest.mark.parametrize(
    "typed", ["(1, 4, 7, 7)", "1 4 7 7", "1x4x7x7", "[1,4,7,7]", " (1, 4, 7, 7) "]
)
def test_a_shape_is_right_in_any_brackets_and_separators(typed):
    assert judge("shape", SHAPE, typed) == (True, "✓ Right: (1, 4, 7, 7).")


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("(1, 7, 7)", "✗ Not (1, 7, 7): the answer has 4 dims, not 3. one map per head"),
        ("(1, 4, 7, 8)", "✗ Not (1, 4, 7, 8). one map per head"),
        ("(7, 7, 4, 1)", "✗ Not (7, 7, 4, 1). one map per head"),
    ],
)
def test_a_wrong_shape_is_told_what_it_was_and_the_hint_never_the_answer(typed, says):
    ok, message = judge("shape", SHAPE, typed, hint="one map per head")
    assert ok is False and message == says and "(1, 4, 7, 7)" not in message


@pytest.mark.parametrize("typed", ["(B, h, T, T)", "", "four", "(1, 4, 7.5, 7)"])
def test_what_is_not_a_shape_is_asked_again_not_judged(typed):
    ok, message = judge("shape", SHAPE, typed)
    assert ok is None and message == "Type the shape as whole numbers, like (2, 3)."


def test_a_number_within_its_tolerance_is_right_and_text_is_asked_again():
    assert judge("number", 1.0, "1") == (True, "✓ Right: 1.")
    assert judge("number", 1.0, "0.995")[0] is True  # within 1 %
    assert judge("number", 1.0, "0.9", hint="a softmax row")[1] == "✗ Not 0.9. a softmax row"
    assert judge("number", 0.25, "1/4") == (None, "Type a number, like 0.5.")
    assert [number_text(v) for v in (1.0, 0.25, 12345.0, 0.000123456)] == [
        "1",
        "0.25",
        "12340",
        "0.0001235",
    ]


def test_the_widget_judges_what_is_typed_and_shows_the_answer_only_when_asked():
    weights = torch.zeros(SHAPE)
    widget = Predict("What shape is `weights`?", weights.shape, hint="one map per head.")
    assert "<code>weights</code>" in widget.prompt.value
    widget.box.value = "(1, 7, 7)"  # Enter
    assert widget.message.startswith("✗ Not (1, 7, 7)") and "(1, 4, 7, 7)" not in widget.message
    assert widget.check("1, 4, 7, 7") is True and widget.message == "✓ Right: (1, 4, 7, 7)."
    widget.reveal.click()
    assert widget.message == "The answer: (1, 4, 7, 7)."
    state = widget.static_state()
    assert state["answer"] == list(SHAPE) and state["answer_kind"] == "shape"
    assert repr(widget).startswith("▶ the predict-then-run box: drawn here once this cell runs")


def test_a_choice_is_a_button_each_and_its_answer_must_be_an_option():
    widget = Predict(
        "Which layer?", "layer 2", options=["layer 1", "layer 2"], hint="It needs layer 1."
    )
    widget.choice.value = "layer 1"
    assert widget.message == "✗ Not layer 1. It needs layer 1."
    widget.choice.value = "layer 2"
    assert widget.message == "✓ Right: layer 2."
    with pytest.raises(ValueError, match="not among the options"):
        Predict("Which?", "layer 3", options=["layer 1", "layer 2"])
    with pytest.raises(TypeError, match="a shape"):
        Predict("What?", "a string")
    assert Predict("Sum?", torch.tensor(1.0)).kind == "number"
