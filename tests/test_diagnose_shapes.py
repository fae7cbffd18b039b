"""Outputs of the wrong shape or type: a tuple or a list (never a ✓; a dict of stages returned
is still searched), None, NaN, float16, a numpy array, dims in another order or a step
missing, one head's width; each gets its own message (helpers/checker/shapes.py)."""

import math

import pytest
import torch

from helpers.diagnose import check_exercise, diagnose, reference_attention
from tests import learner_code
from tests.diagnose_support import assert_says, learner, marked_lines


def with_stages(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    out = learner()(x, w_q, w_k, w_v, w_o, num_heads, mask)
    return out, {}


def test_the_right_output_inside_a_tuple_or_a_list_is_no_tick():
    """Issue 22: (out, weights) and [out] got "✓ Correct"; the exercises return out alone."""

    def as_tuple(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
        return weights @ v, weights

    def as_list(x, w_q, w_k, w_v):
        return [as_tuple(x, w_q, w_k, w_v)[0]]

    for fn, what in ((as_tuple, "a tuple of 2 items"), (as_list, "a list of 1 item")):
        result = check_exercise(fn, "one_head", echo=False)
        assert not result.ok and "✓" not in result.message
        assert result.message == (
            f"✗ Your function returns {what}; the check expects the output alone, a tensor of "
            "shape (2, 5, 4). Its first item is right: return that alone."
        )
    for fn in (with_stages, lambda *a: [learner_code.view_transpose(*a)]):
        result = diagnose(fn, echo=False)
        assert not result.ok and "✓" not in result.message
        assert "Its first item is right: return that alone." in result.message

    def tuple_and_unscaled(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return weights @ v, weights

    wrong = check_exercise(tuple_and_unscaled, "one_head", echo=False)
    assert wrong.mistakes == ("no_scaling",)
    assert wrong.message.endswith(
        "Note: your function returns a tuple of 2 items; the check reads its first item as the "
        "output."
    )


def test_nan_and_half_precision_get_their_own_message_with_the_line():
    fn = learner_code.nan_from_a_square_root
    (line,) = marked_lines(fn)
    message = diagnose(fn, echo=False).message
    assert message.startswith("✗ Your output has NaN in 120 of its 120 numbers. The first NaN is "
                              f"made on line {line}: `weights = torch.sqrt(")  # fmt: skip
    fn = learner_code.softmax_in_half_precision
    (line,) = marked_lines(fn)
    assert diagnose(fn, echo=False).message == (
        f"✗ Your code computes in float16, from line {line}: "
        "`weights = scores.half().softmax(dim=-1).float()  # <-`: half precision keeps about 3 "
        "significant digits, too few to match the reference (float32) within 1e-04. Hint: keep "
        "every tensor in float32 on that line."
    )


def test_returning_nothing_asks_for_the_return():
    def no_return(x, w_q, w_k, w_v):
        x @ w_q.T  # noqa: B018 - the learner forgot the rest

    assert check_exercise(no_return, "one_head", echo=False).message == (
        "✗ Your function returned None: is its last line a `return`? It should return output "
        "(weights·v), of shape (2, 5, 4)."
    )


def test_returned_stages_are_still_searched():
    def exposes_stages(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        w_v = w_v.clone()
        w_v[4:8] *= 2  # a slip that touches head 1 only
        stages = {}
        out = reference_attention(x, w_q, w_k, w_v, w_o, num_heads, mask, intermediates=stages)
        return out, stages

    result = diagnose(exposes_stages, echo=False)
    assert result.mistakes == (None,) and result.findings[0].stage == "v"
    assert "(largest difference 2.39, only in head 1)" in result.message


# --- issue 22: the checker never says a false thing (cold student attempts) -------------------


def test_a_shape_in_another_order_names_a_transpose_only_when_the_numbers_are_the_same():
    def hard_coded_4(t, num_heads):
        B, T, d_model = t.shape
        return t.view(B, T, 4, 3).transpose(1, 2)  # 4 heads, written as a number

    message = check_exercise(hard_coded_4, "split_heads", echo=False).message
    assert "the order of the dims" not in message and "num_heads_4" in message

    def shifted_and_4(t, num_heads):
        B, T, d_model = t.shape
        return t.roll(1, dims=-1).view(B, T, 4, 3).transpose(1, 2)

    assert check_exercise(shifted_and_4, "split_heads", echo=False).message.startswith(
        "✗ Expected shape (2, 3, 5, 4), got (2, 4, 5, 3). The same sizes in another order and the "
        "same numbers, but no reordering of the dims puts them where the reference's are: a "
        "reshape or view may read them in another order. The check calls your function with "
        "B = 2, T = 5, d_model = 12 and "
        "num_heads = 3 (so d_k = 4). Following your output back, the first tensor on its way "
        "with a shape that no step of the reference has is made on line "
    )


# --- a new learner's report: messages that said false things (P1–P9, m1, m2, m5, m6) ---------


@pytest.mark.parametrize(
    ("fn", "check", "shape"),
    [
        (learner_code.one_head_01_numpy, "one_head", "(2, 5, 4)"),
        (learner_code.split_05_numpy, "split_heads", "(2, 3, 5, 4)"),
        (learner_code.head_scores_17_numpy, "head_scores", "(2, 5, 5)"),
    ],
    ids=["01", "03", "12"],
)
def test_m1_a_numpy_array_returned_is_said_to_be_one(fn, check, shape):
    message = check_exercise(fn, check, echo=False).message
    assert_says(
        message,
        says=("returned a numpy array (ndarray), not a torch tensor", shape, "a torch tensor back"),
        never=("Expected shape", "got ndarray", "from_numpy"),
    )


def test_m2_a_missing_transpose_is_not_a_transpose_that_swaps_the_wrong_dims():
    message = check_exercise(learner_code.split_05_no_transpose, "split_heads", echo=False).message
    assert_says(
        message,
        says=("dims 1 and 2 swapped", "never reorders its dims: that step is missing"),
        never=("your transpose",),
    )


# --- issue 37: a checker that invents nothing -------------------------------------------------


def test_37_03_per_head_w_o_slices_summed_without_w_o_speak_of_03():
    """03 has no mask, and a sum of per-head W^O slices is a right design: a head's width in the
    output is not "concatenate the heads"."""

    def my_attention(x, w_q, w_k, w_v, w_o):
        d_k = w_q[0].shape[0]
        total = 0
        for wq, wk, wv in zip(w_q, w_k, w_v):
            q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
            total = total + torch.softmax(q @ k.mT / math.sqrt(d_k), -1) @ v
        return total

    def summed(x, w_q, w_k, w_v, w_o):
        d_k = w_q[0].shape[0]
        total = 0
        for i, (wq, wk, wv) in enumerate(zip(w_q, w_k, w_v)):
            q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
            head = torch.softmax(q @ k.mT / math.sqrt(d_k), -1) @ v
            total = total + head @ w_o[:, i * d_k : (i + 1) * d_k].T
        return total

    assert diagnose(summed, echo=False, per_head=True).ok
    message = diagnose(my_attention, echo=False, per_head=True).message
    assert message.startswith(
        "✗ Wrong shape: expected (B, T, d_model) = (2, 5, 12), got (2, 5, 4)."
    )
    assert_says(message, says=("through W^O",), never=("mask", "concatenate"))
