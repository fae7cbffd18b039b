"""18's exercise, a head's induction score from its maps: every correct style gets ✓, each
catalogued mistake is named with its line, and what no mistake explains is said plainly."""

import re

import pytest
import torch

from helpers.checker.mistakes import INDUCTION_MISTAKES, SLIPS
from helpers.checker.stages import induction_stages
from helpers.diagnose import check_exercise
from helpers.induction import induction_scores
from tests.messages import marked, says


def _learner(style: str = "index", mistake: str | None = None):
    def my_induction_score(maps):
        B, h, T, _ = maps.shape
        n = T // 2
        if style == "diagonal":
            stripe = maps.diagonal(offset=1 - n, dim1=-2, dim2=-1)  # queries n - 1 .. 2n - 1
            if mistake != "induction_with_a_first_half_query":
                stripe = stripe[..., 1:]
            return stripe.mean(dim=(0, 2))
        if style == "loop":
            scores = torch.zeros(h)
            for head in range(h):
                total = 0.0
                for b in range(B):
                    for t in range(n, 2 * n):
                        total += maps[b, head, t, t - n + 1]
                scores[head] = total / (B * n)
            return scores
        t = torch.arange(n, 2 * n)
        keys = {"induction_on_the_twin": t - n}.get(mistake, t - n + 1)
        if mistake == "induction_on_the_previous_token":
            t = torch.arange(1, T)
            keys = t - 1
        stripe = maps[:, :, t, keys]  # (B, h, n)
        if mistake == "induction_summed":
            return stripe.sum(dim=(0, 2))
        return stripe.mean(dim=(0, 2))

    return my_induction_score


@pytest.mark.parametrize("style", ["index", "diagonal", "loop"])
def test_18_every_correct_style_is_accepted(style):
    result = check_exercise(_learner(style), "induction_score", echo=False)
    assert result.ok and result.message.startswith(
        "✓ Correct: equal to the reference within atol 1e-04, at two sizes (B = 2, h = 3, "
        "T = 10, n = 5; then B = 1, h = 2, T = 14, n = 7)."
    )
    # the loop's torch.zeros(h) is float32 whatever the maps: said beside the ✓, not against it
    assert ("given the same inputs in float64" in result.message) == (style == "loop")


@pytest.mark.parametrize("mistake", INDUCTION_MISTAKES)
def test_18_each_mistake_is_named_with_its_line(mistake):
    style = "diagonal" if mistake == "induction_with_a_first_half_query" else "index"
    result = check_exercise(_learner(style, mistake), "induction_score", echo=False)
    assert (result.ok, result.mistakes) == (False, (mistake,)), result.message
    what, hint = SLIPS[mistake]
    head, where, hint_line = _own_lines(result.message)
    assert head == f"✗ This looks like a known mistake ({mistake}): {what}."
    # the line that makes the positions read (issue 37), or that reduces them (summed)
    made_on = {
        "induction_on_the_twin": "keys = {",
        "induction_on_the_previous_token": "keys = t - 1",
        "induction_with_a_first_half_query": "maps.diagonal(offset=1 - n",
    }.get(mistake, "return")
    assert where.startswith("  Where: line ") and made_on in where, where
    # the lines that set a number the line reads (n = T // 2) may be added
    hint_line = re.sub(
        r" Then look at lines? [\d, and]+, which sets? values it reads\.", "", hint_line
    )
    assert hint_line == f"  Hint: {hint}"


def test_18_an_unknown_departure_points_at_the_line_without_naming_a_mistake():
    def three_back(maps):
        n = maps.size(-1) // 2
        t = torch.arange(n, 2 * n)
        return maps[:, :, t, t - n + 2].mean(dim=(0, 2))  # one key too late: no catalogued name

    result = check_exercise(three_back, "induction_score", echo=False)
    assert not result.ok and result.mistakes == (None,)  # a departure, unnamed
    assert result.message.startswith("✗ Your keys read (one position per query) differ from")
    assert "matches no known mistake" in result.message and "t - n + 2" in result.message


def test_18_one_number_for_all_heads_gets_the_shape_message():
    def over_heads(maps):
        n = maps.size(-1) // 2
        t = torch.arange(n, 2 * n)
        return maps[:, :, t, t - n + 1].mean()  # <-

    result = check_exercise(over_heads, "induction_score", echo=False)
    assert result.message.startswith("✗ Expected shape (3,), got ().")
    says(result.message, f"is made on line {marked(over_heads)}: `return maps[")


def test_18_the_reference_agrees_with_the_courses_score_where_both_apply():
    # helpers.induction leaves out the last query (its next token lies past the repeat); on maps
    # whose last row puts no weight on key n the two agree exactly
    maps = torch.zeros(2, 1, 10, 10)
    t = torch.arange(5, 9)
    maps[:, 0, t, t - 4] = 1.0
    maps[:, 0, 9, 0] = 1.0
    reference = induction_stages(maps)["out"]
    assert torch.allclose(reference * 5 / 4, induction_scores(maps, torch.tensor([5, 5])))


def test_18_transposed_maps_are_not_called_the_same_numbers_at_another_scale():
    # the transpose of a causal map has nothing below the diagonal: the stripe reads zeros, and
    # zeros are no scale of the reference (the checker once said "× 0: ... at another scale")
    def transposed(maps):
        maps = maps.transpose(-1, -2)
        n = maps.size(-1) // 2
        t = torch.arange(n, 2 * n)
        return maps[:, :, t, t - n + 1].mean(dim=(0, 2))

    result = check_exercise(transposed, "induction_score", echo=False)
    assert not result.ok and result.mistakes == (None,)
    assert "another scale" not in result.message and "× 0" not in result.message
    assert "largest difference" in result.message


def _own_lines(message: str) -> list[str]:
    """The headline, Where and Hint lines, without the notes under Where that name other lines
    the slip may be on (values read from lines the check could not compare)."""
    return [line for line in message.split("\n") if not line.startswith("    ")]
