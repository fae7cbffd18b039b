"""The exercises other than 03, 06 and 09, through check_exercise: 01's one head, 05's
split_heads, 13's cross-attention and 17's head scores, each against its reference, with its
mistakes named (helpers/checker/exercises.py)."""

import re

import pytest
import torch

from helpers.attention import FusedMultiHeadAttention
from helpers.diagnose import (
    CIRCUIT_MISTAKES,
    CONTEXT_MISTAKES,
    MISTAKES,
    check_exercise,
    reference_attention,
)
from tests.diagnose_support import cross_learner, scores_learner


def test_exercises():
    def one_head(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v

    def one_head_unscaled(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v

    assert check_exercise(one_head, "one_head", echo=False).ok
    assert check_exercise(one_head_unscaled, "one_head", echo=False).mistake == "no_scaling"

    def split(t, num_heads):
        B, T, d = t.shape
        return t.view(B, T, num_heads, d // num_heads).transpose(1, 2)

    def split_wrong(t, num_heads):
        B, T, d = t.shape
        return t.view(B, num_heads, T, d // num_heads)

    def split_interleaved(t, num_heads):
        B, T, d = t.shape
        return t.view(B, T, d // num_heads, num_heads).permute(0, 3, 1, 2)

    def split_swapped(t, num_heads):
        B, T, d = t.shape
        return t.view(B, T, num_heads, d // num_heads).transpose(1, 3)  # (B, d_k, h, T)

    def split_shifted(t, num_heads):
        return split(t.roll(1, dims=-1), num_heads)

    assert check_exercise(split, "split_heads", echo=False).ok
    wrong = check_exercise(split_wrong, "split_heads", echo=False)
    assert wrong.mistake == "heads_split_without_transpose"
    assert wrong.message.startswith(
        "✗ This looks like a known mistake (heads_split_without_transpose): t is cut into heads "
        "with a view"
    )  # 05's exercise cuts t: no q, k or v in its words (issue 37)
    assert "q, k" not in wrong.message and "look at how you cut t into heads" in wrong.message
    assert "`return t.view(B, num_heads, T, d // num_heads)`" in wrong.message
    interleaved = check_exercise(split_interleaved, "split_heads", echo=False)
    assert interleaved.mistake == "heads_split_interleaved"
    assert "which of h and d_k comes first in your cut (or, for a slice" in interleaved.message
    swapped = check_exercise(split_swapped, "split_heads", echo=False).message
    assert swapped == (
        "✗ Expected shape (2, 3, 5, 4), got (2, 4, 3, 5). The same numbers with the dims in "
        "another order: look at the steps that set the order of the dims (a transpose or "
        "permute, an einsum's output, or the dim a stack or cat joins along)."
    )
    shifted = check_exercise(split_shifted, "split_heads", echo=False)
    assert not shifted.ok and "largest difference 11, at index (0, 0, 0, 0)" in shifted.message


def test_the_cross_attention_reference_equals_the_module_with_a_context():
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(12, 3).double()
    x, context = torch.randn(2, 5, 12).double(), torch.randn(2, 7, 12).double()
    mask = torch.rand(2, 5, 7) > 0.3
    mask[..., 0] = True
    weights = [getattr(fused, n).weight.detach() for n in ("w_q", "w_k", "w_v", "w_o")]
    for m in (None, mask):
        expected = fused(x, m, context=context)[0].detach()
        got = reference_attention(x, *weights, 3, m, context=context)
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("mistake", [*CONTEXT_MISTAKES, "no_scaling"])
def test_the_cross_attention_exercise_names_the_mix_ups(mistake):
    assert check_exercise(cross_learner(), "cross_attention", echo=False).ok
    result = check_exercise(cross_learner(mistake), "cross_attention", echo=False)
    assert (result.ok, result.mistakes) == (False, (mistake,)), result.message
    what, hint = MISTAKES[mistake]
    head, where, hint_line = _own_lines(result.message)
    assert head == f"✗ This looks like a known mistake ({mistake}): {what}."
    # the lines that set a value the line reads (here the test's table of divisors) are added
    hint_line = re.sub(
        r" Then look at lines? [\d, and]+, which sets? values it reads\.", "", hint_line
    )
    assert where.startswith("  Where: line ") and hint_line == f"  Hint: {hint}"


def test_keys_and_values_from_two_sequences_get_a_shape_hint():
    def mixed(x, context, w_q, w_k, w_v, w_o, num_heads):
        B, T_q, d_model = x.shape
        d_k = d_model // num_heads

        def heads(t, w):
            return (t @ w.T).view(B, t.shape[1], num_heads, d_k).transpose(1, 2)

        q, k, v = heads(x, w_q), heads(context, w_k), heads(x, w_v)  # v from the wrong one
        out = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(-1) @ v
        return out.transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T

    result = check_exercise(mixed, "cross_attention", echo=False)
    assert result.message.startswith("✗ Your function raised RuntimeError: Expected size")
    assert "Hint: the two sides of a product do not line up" in result.message
    assert "(line " in result.message  # the learner's line, not torch's


def test_the_head_scores_reference_is_the_modules_scores_float64():
    from helpers.attention import attention_scores, split_heads
    from helpers.checker.exercises import _head_scores_reference

    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(12, 3).double()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    with torch.no_grad():
        scores = attention_scores(split_heads(fused.w_q(x), 3), split_heads(fused.w_k(x), 3))
        for i in range(3):
            rows = slice(4 * i, 4 * (i + 1))  # head i's rows of nn.Linear's (out, in) weight
            w_q, w_k = fused.w_q.weight[rows], fused.w_k.weight[rows]
            got = _head_scores_reference(x=x, w_q=w_q, w_k=w_k)
            torch.testing.assert_close(got, scores[:, i], atol=1e-10, rtol=0)


@pytest.mark.parametrize("style", ["matmul", "einsum"])
def test_the_head_scores_exercise_accepts_both_styles(style):
    result = check_exercise(scores_learner(style=style), "head_scores", echo=False)
    assert result.ok and result.message == (
        "✓ Correct: equal to the reference within atol 1e-04, at two sizes (B = 2, T = 5, "
        "d_model = 12, d_k = 4; then B = 1, T = 3, d_model = 16, d_k = 8)."
    )


@pytest.mark.parametrize("mistake", [*CIRCUIT_MISTAKES, "no_scaling", "scaled_by_d_model"])
def test_the_head_scores_exercise_names_each_mistake(mistake):
    result = check_exercise(scores_learner(mistake), "head_scores", echo=False)
    assert (result.ok, result.mistakes) == (False, (mistake,)), result.message
    what, hint = MISTAKES[mistake]
    if mistake == "no_scaling":  # worded for this exercise: there is no q·kᵀ in it
        hint = "look at the line that computes x·W_QK·xᵀ: the scores should be divided by something"
        hint += "."
    head, where, hint_line = _own_lines(result.message)
    assert head == f"✗ This looks like a known mistake ({mistake}): {what}."
    # the lines that set a value the line reads (here the test's table of divisors) are added
    hint_line = re.sub(
        r" Then look at lines? [\d, and]+, which sets? values it reads\.", "", hint_line
    )
    assert where.startswith("  Where: line ") and hint_line == f"  Hint: {hint}"


def test_the_head_scores_exercise_says_a_product_does_not_line_up():
    def transposed(x, w_q, w_k):
        w_qk = w_q @ w_k.T  # (d_k, d_k): nn.Linear's layout read as x·W
        return x @ w_qk @ x.transpose(-2, -1) / 2

    result = check_exercise(transposed, "head_scores", echo=False)
    assert result.message.startswith("✗ Your function raised RuntimeError:")
    assert "(line " in result.message and "w_qk @ x.transpose" in result.message
    assert "Hint: the two sides of a product do not line up" in result.message


@pytest.mark.parametrize(
    ("name", "fn", "mistakes"),
    [
        ("one_head", lambda x, w_q, w_k, w_v: (x @ w_q.T @ (x @ w_q.T).mT / 2).softmax(-1)
         @ (x @ w_v.T), ("keys_from_w_q",)),
        ("one_head", lambda x, w_q, w_k, w_v: (x @ w_q.T @ (x @ w_k.T).mT).softmax(-2)
         @ (x @ w_v.T), ("no_scaling", "softmax_over_queries")),
        ("head_scores", lambda x, w_q, w_k: x @ (w_q.T @ w_k) @ x.mT * 2,
         ("multiplied_by_sqrt_d_k",)),
        ("split_heads", lambda t, num_heads: t.view(2, 5, 4, 3).transpose(1, 3).transpose(2, 3),
         ("heads_split_interleaved",)),
    ],
)  # fmt: skip
def test_every_exercise_uses_the_traced_engine(name, fn, mistakes):
    result = check_exercise(fn, name, echo=False)
    assert result.mistakes == mistakes, result.message
    assert "Where: line " in result.message


def _own_lines(message: str) -> list[str]:
    """The headline, Where and Hint lines, without the notes under Where that name other lines
    the slip may be on (values read from lines the check could not compare)."""
    return [line for line in message.split("\n") if not line.startswith("    ")]
