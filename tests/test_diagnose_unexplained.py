"""Slips no known mistake explains: named at the stage where the code departs and on the line
that makes them, with how the tensors differ (a scale, another order, some heads or
entries), and no false name or finding after them (helpers/checker/unexplained.py,
departures.py, scales.py)."""

import pytest
import torch
import torch.nn.functional as F

from helpers.diagnose import check_exercise, diagnose, reference_attention
from tests import learner_code
from tests.diagnose_support import assert_says, learner, lines_in, marked_lines


def test_an_unknown_slip_is_placed_at_its_stage_and_line_and_the_check_goes_on():
    def off_in_values(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return learner()(x, w_q, w_k, 2 * w_v, w_o, num_heads, mask)

    result = diagnose(off_in_values, echo=False)
    assert result.mistakes == (None,) and result.findings[0].stage == "v"
    assert result.message.startswith(
        "✗ Your values v = x·W^V differ from the reference's (largest difference 2.39, in every "
        "head, most of all in head 2), in a way that matches no known mistake.\n  Where: line "
    )

    def off_then_no_w_o(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
        weights = (q @ k.transpose(-2, -1) / 2).softmax(-1)
        weights = weights.roll(1, dims=-1)  # not a known mistake
        return (weights @ v).transpose(1, 2).reshape(B, T, d_model)  # and no W^O

    result = diagnose(off_then_no_w_o, echo=False, mask=False)
    assert result.mistakes == (None, "w_o_missing"), result.message
    assert result.findings[0].stage == "weights"
    assert "`weights = weights.roll(1, dims=-1)  # not a known mistake`" in result.message


def test_values_made_from_x_are_placed_on_the_line_that_makes_them():
    fn = learner_code.values_from_x  # v already cut into heads on the line that skips W^V
    (line,) = marked_lines(fn)
    result = diagnose(fn, echo=False)
    assert result.mistakes == (None,) and result.lines == (line,), result.message
    assert result.message.startswith(
        "✗ Your values v = x·W^V differ from the reference's (largest difference "
    )
    assert f"  Where: line {line}: `v = x.view(B, T, num_heads, d_k).transpose(1, 2)  # <-`" in (
        result.message
    )


def test_a_mask_set_in_place_on_one_head_says_which_heads_and_entries():
    fn = learner_code.mask_on_first_head_only  # scores[:, 0] = ...: an indexed assignment
    (line,) = marked_lines(fn)
    result = diagnose(fn, echo=False)
    masked = int((~diagnose_inputs_mask()).sum()) * 2  # two heads of three left unmasked
    assert result.message == (
        "✗ Right when called without a mask, but not when called with a mask. Your masked scores "
        f"differ from the reference's ({masked} entries kept that the reference masks, only in "
        "heads 1, 2), in a way that "
        "matches no known mistake.\n"
        f"  Where: line {line}: "
        '`scores[:, 0] = scores[:, 0].masked_fill(~mask, float("-inf"))  # <-`\n'
        "  Hint: look at how the mask reaches each head: the check's mask is the same for every "
        "head, but your code masks some heads differently from others (as a mask given to some "
        "heads only, or tiled over the heads in another order, would)."
    )


def diagnose_inputs_mask() -> torch.Tensor:
    """The mask diagnose() passes: (B, T, T), True = may attend."""
    seen = {}

    def spy(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        if mask is not None:  # the first mask: the check then runs at a second size
            seen.setdefault("mask", mask)
        return reference_attention(x, w_q, w_k, w_v, w_o, num_heads, mask)

    diagnose(spy, echo=False)
    return seen["mask"]


def test_a_wrong_divisor_is_a_scale_not_a_missing_one():
    fn = learner_code.divided_by_a_wrong_number  # q·kᵀ matches the unscaled scores, then / 2
    (line,) = marked_lines(fn)
    result = diagnose(fn, echo=False, mask=False)
    assert result.mistakes == (None,) and result.lines == (line,), result.message
    assert result.message.startswith(
        "✗ Your scores q·kᵀ/√d_k differ from the reference's (yours are the reference's × 0.25: "
        "the same numbers at another scale), in a way that matches no known mistake.\n"
    )


def test_a_small_difference_in_the_output_is_the_outputs_once():
    fn = learner_code.noise_on_the_output
    (line,) = marked_lines(fn)
    result = diagnose(fn, echo=False)
    assert result.mistakes == (None,) and result.lines == (line,), result.message
    assert result.message.startswith(
        "✗ Your output differs from the reference's (largest difference 0.001, at index "
    )


# --- issue 22: the checker never says a false thing (cold student attempts) -------------------


@pytest.mark.parametrize(
    ("fn", "says"),
    [
        (learner_code.head_scores_17_divided_by_d_k_squared, "yours are the reference's × 0.125"),
        (learner_code.head_scores_17_divided_by_3, "yours are the reference's × 0.667"),
        (learner_code.head_scores_17_w_q_twice, "Your W_QK differs from the reference's"),
    ],
    ids=["d_k**2", "3", "w_q.T @ w_q"],
)
def test_17_an_unknown_slip_points_at_its_line_not_at_a_q_it_never_makes(fn, says):
    result = check_exercise(fn, "head_scores", echo=False)
    assert result.mistakes == (None,), result.message
    assert says in result.message
    assert lines_in(result.message) == marked_lines(fn)
    for false in ("queries", "q = x·W^Q", "x @ w.T", "no_scaling", "scaled_by"):
        assert false not in result.message, result.message


def test_03_head_0s_matrices_for_every_head_are_blamed_where_the_slices_are_taken():
    fn = learner_code.loop_03_head_0_for_every_head
    result = diagnose(fn, echo=False, per_head=True)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert "heads 1 and 2's are never made: in their place your code makes head 0's again" in (
        result.message
    )
    assert "side by side" not in result.message and "torch.cat" not in result.message


def test_13_w_k_and_w_v_swapped_are_blamed_on_the_k_and_v_lines():
    fn = learner_code.cross_13_w_k_and_w_v_swapped
    result = check_exercise(fn, "cross_attention", echo=False)
    k_line, v_line = marked_lines(fn)
    assert lines_in(result.message) == [k_line], result.message
    assert result.mistakes == ("keys_values_swapped",), result.message  # one swap, one mistake
    assert f"look at this line and line {v_line}, where v is made" in result.message
    for false in ("scores", "keys_as_values", "multiply the keys", "x·W^K"):
        assert false not in result.message, result.message


def test_01_sigmoid_is_one_finding_that_does_not_contradict_itself():
    fn = learner_code.one_head_01_sigmoid
    result = check_exercise(fn, "one_head", echo=False)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert result.message.startswith("✗ Your weights differ from the reference's")
    for false in ("no_softmax", "raw scores", "the softmax of the scores", "softmax on this line"):
        assert false not in result.message, result.message


def test_01_w_at_v_plus_v_is_the_output_not_heads_put_side_by_side():
    fn = learner_code.one_head_01_plus_v
    result = check_exercise(fn, "one_head", echo=False)
    assert lines_in(result.message) == marked_lines(fn), result.message
    assert result.message.startswith("✗ Your output (weights·v) differs from the reference's")
    for false in ("side by side", "heads"):
        assert false not in result.message, result.message


def test_values_made_with_w_q_say_what_they_equal_without_the_layout_hint():
    def v_from_w_q(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        q, k = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k))
        v = (x @ w_q.T).view(B, T, num_heads, -1).transpose(1, 2)  # w_q, not w_v
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask.unsqueeze(1) if mask is not None else None
        )
        return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T

    message = diagnose(v_from_w_q, echo=False).message
    assert "yours equal the reference's queries q = x·W^Q" in message
    assert "`v = (x @ w_q.T)" in message and "in_features" not in message


# --- a new learner's report: messages that said false things (P1–P9, m1, m2, m5, m6) ---------


@pytest.mark.parametrize(
    ("fn", "check"),
    [
        (learner_code.fused_06_merge_order_one_line, "fused"),
        (learner_code.fused_06_merge_order_two_lines, "fused"),
        (learner_code.fused_06_merge_permute, "fused"),
        (learner_code.cross_13_merge_permute, "cross_attention"),
    ],
    ids=["05 one line", "05 two lines", "05 permute", "09 permute"],
)
def test_p1_heads_merged_in_the_wrong_order_are_the_merge_not_a_missing_w_o(fn, check):
    if check == "fused":
        result = diagnose(fn, echo=False, mask=False)
    else:
        result = check_exercise(fn, check, echo=False)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert_says(
        result.message,
        says=("Your heads put back side by side differ", "in another order"),
        never=("w_o_missing", "W^O is never applied", "w_o.T`\n"),
    )


def test_p2_cat_on_the_batch_dim_is_the_merge_not_the_heads():
    fn = learner_code.loop_03_cat_on_the_batch_then_view
    result = diagnose(fn, echo=False, per_head=True)
    assert lines_in(result.message) == marked_lines(fn), result.message
    assert_says(
        result.message,
        says=("Your heads put back side by side differ",),
        never=("heads' outputs", "queries cut into heads", "the q,k,v line", "line 4"),
    )


def test_p3_a_mask_the_check_did_not_ask_for_is_named_on_its_line_never_a_scale():
    fn = learner_code.masked_09_extra_causal_mask
    result = diagnose(fn, echo=False)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert_says(
        result.message,
        says=("masked that the reference keeps", "a mask the check did not ask for"),
        never=("× 2", "× 0.5", "another scale", "the scale on this line", "scaled"),
    )


@pytest.mark.parametrize(
    "fn",
    [learner_code.one_head_01_weights_mT, learner_code.one_head_01_weights_transposed_on_return],
    ids=["out = weights.mT @ v", "return weights.transpose(-2, -1) @ v"],
)
def test_p5_right_weights_used_transposed_is_the_output_on_its_line(fn):
    result = check_exercise(fn, "one_head", echo=False)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    weights_line = marked_lines(fn)[0] - 1
    assert_says(
        result.message,
        says=("Your output (weights·v) differs", f"the tensor made on line {weights_line}"),
        never=("Your weights", "cannot tell", "this line: what goes in", "softmax on this line"),
    )


def test_p6_a_notebook_d_k_is_a_divisor_not_a_claim_that_d_k_divides():
    fn = learner_code.loop_03_global_d_k
    result = diagnose(fn, echo=False, per_head=True)
    assert lines_in(result.message) == marked_lines(fn), result.message
    assert_says(
        result.message,
        says=(
            "The scores are divided by 4, where the reference divides them by √d_k = 2",
            "yours are the reference's × 0.5",
            "Note: your function reads d_k (= 16) from outside it",
        ),
        never=("scaled_by_d_k", "divided by d_k", "right power of d_k"),
    )


def test_p6_scores_transposed_on_the_return_line_are_not_a_reversed_w_qk():
    fn = learner_code.head_scores_17_scores_transposed
    result = check_exercise(fn, "head_scores", echo=False)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert_says(
        result.message,
        says=("yours are the reference's transposed", "transposes on this line"),
        never=("w_qk_reversed", "order in your W_QK", "W^K·W^Qᵀ"),
    )


@pytest.mark.parametrize(
    ("fn", "check", "also"),
    [
        (learner_code.fused_06_q_and_k_both_scaled, "fused", "also scales on line "),
        (learner_code.loop_03_q_and_k_scaled_in_the_projection, "loop", ""),
        (
            learner_code.head_scores_17_w_qk_scaled_and_scores_scaled,
            "head_scores",
            "also scales on line ",
        ),
    ],  # fmt: skip
    ids=["05 q and k", "02 q and k", "12 W_QK and scores"],
)
def test_p7_a_scale_applied_twice_is_placed_where_the_first_extra_scale_is(fn, check, also):
    if check == "fused":
        result = diagnose(fn, echo=False, mask=False)
    elif check == "loop":
        result = diagnose(fn, echo=False, per_head=True)
    else:
        result = check_exercise(fn, check, echo=False)
    assert result.mistakes == (None,), result.message
    assert lines_in(result.message) == marked_lines(fn)
    if also:
        assert f"{also}{marked_lines(fn)[0] + 1}" in result.message
    assert_says(
        result.message,
        says=("yours are the reference's × 0.5", "divides only the scores, by √d_k = 2, once"),
        never=("scaled_by_d_k", "divided by d_k", "right power of d_k"),
    )
