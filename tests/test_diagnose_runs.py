"""Runs that raise, print, compute in float64, change their inputs in place or return no tensor,
and code that reads a size from outside it or is right only at the check's first sizes:
each becomes a message, never a traceback (helpers/checker/run.py, again.py, sizes.py)."""

import numpy as np
import pytest
import torch

from helpers.diagnose import check_exercise, diagnose
from tests import learner_code
from tests.diagnose_support import assert_says, learner, lines_in, marked_lines


def test_exceptions_and_wrong_shapes_become_messages():
    def crashes(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        q = x @ w_q.T
        return q @ w_k[:4]  # a shape error on this line

    result = diagnose(crashes, echo=False)
    assert not result.ok and result.message.startswith("✗ Your function raised RuntimeError")
    assert "`return q @ w_k[:4]  # a shape error on this line`" in result.message
    assert "Traceback" not in result.message

    def one_head_wide(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return x[..., :4]

    result = diagnose(one_head_wide, echo=False)
    assert "expected (B, T, d_model) = (2, 5, 12), got (2, 5, 4)" in result.message
    assert "That is one head's width" in result.message

    def mask_without_head_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        out = learner()(x, w_q, w_k, w_v, w_o, num_heads, None)
        if mask is not None:
            scores = torch.zeros(2, num_heads, 5, 5).masked_fill(~mask, 0.0)  # (B,T,T) vs (B,h,T,T)
            out = out + scores.sum()
        return out

    message = diagnose(mask_without_head_dim, echo=False).message
    assert "A mask of shape (B, T, T) has no head dim" in message
    assert "(B, h, T, T): what shape lets one mask line up with every head?" in message
    assert "(B, 1, T, T)" not in message  # the hint points at the idea, not at the answer
    fn = learner_code.masked_09_mask_without_head_dim  # the learner's own masked_fill
    message = diagnose(fn, echo=False).message
    assert f"(line {marked_lines(fn)[0]}: `" in message and "has no head dim" in message


def test_not_done_yet_is_polite():
    def stub(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        raise NotImplementedError("write multi-head attention here")

    result = diagnose(stub, echo=False)
    assert result.message.startswith("○ Not done yet") and not result.ok


def test_the_loop_exercise_says_how_nn_linear_stores_its_matrix():
    def transposed(x, w_q, w_k, w_v, w_o):
        q = x @ w_q[0]  # (d_k, d_model) used as (d_model, d_k)
        return q

    message = diagnose(transposed, echo=False, per_head=True).message
    assert message.startswith("✗ Your function raised RuntimeError: mat1 and mat2 shapes")
    assert "(line " in message and "must meet a weight's in_features, its second dim." in message


def test_nothing_the_learners_code_does_raises(capsys):
    def correct_and_printing(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        print("debugging", x.shape)  # a print stays a print
        return learner_code.view_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask)

    assert diagnose(correct_and_printing, echo=False).ok
    assert "debugging torch.Size([2, 5, 12])" in capsys.readouterr().out

    def in_double_precision(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        weights = [w.double() for w in (w_q, w_k, w_v, w_o)]
        return learner_code.no_scaling(x.double(), *weights, num_heads, mask)

    result = diagnose(in_double_precision, echo=False)
    assert result.mistakes == ("no_scaling",)

    def zero_fill_in_place(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
        scores = q @ k.transpose(-2, -1)
        scores.div_(2.0)
        if mask is not None:
            scores.masked_fill_(~mask.unsqueeze(1), 0.0)  # the 0-fill, in place
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
        return out @ w_o.T

    result = diagnose(zero_fill_in_place, echo=False)
    assert result.mistakes == ("mask_filled_with_zero",)
    assert "`scores.masked_fill_(~mask.unsqueeze(1), 0.0)  # the 0-fill, in place`" in (
        result.message
    )

    def all_nan(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return torch.full_like(x, float("nan"))

    def integers(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return torch.zeros(x.shape, dtype=torch.int64)

    def through_numpy(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return torch.from_numpy(np.tanh(x.numpy()))

    def changes_its_inputs(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        x.mul_(2)
        w_q.zero_()
        return x

    for fn in (all_nan, integers, through_numpy, changes_its_inputs):
        result = diagnose(fn, echo=False)
        assert not result.ok and result.message.startswith("✗ "), fn.__name__
        assert "Traceback" not in result.message

    def returns_text(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return "attention"

    assert diagnose(returns_text, echo=False).message == (
        "✗ Your function returned str; it should return out (B, T, d_model)."
    )

    def raises_in_a_helper(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        def heads(t):
            return t.view(2, 5, num_heads, 5)  # 12 features do not make 3 heads of 5

        return heads(x @ w_q.T)

    message = diagnose(raises_in_a_helper, echo=False).message
    assert message.startswith(
        "✗ Your function raised RuntimeError when called without a mask: shape '[2, 5, 3, 5]' is"
    )
    assert "`return t.view(2, 5, num_heads, 5)  # 12 features do not make 3 heads of 5`" in message


# --- issue 22: the checker never says a false thing (cold student attempts) -------------------


def test_05_a_notebook_h_is_named_with_the_sizes_the_check_uses():
    fn = learner_code.split_05_notebook_h
    result = check_exercise(fn, "split_heads", echo=False)
    assert result.mistakes == ("num_heads_4",), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert "t is cut into 4 heads, not into the num_heads the function is given" in result.message
    assert result.message.endswith(
        "Note: your function reads h (= 4) from outside it, not from its arguments; the check "
        "calls it with B = 2, T = 5, d_model = 12 and num_heads = 3 (so d_k = 4): take every "
        "size from the arguments."
    )
    assert "transpose" not in result.message and "q, k and v" not in result.message


def test_03_and_06_a_notebook_h_gets_the_sizes_not_a_bare_error():
    loop = diagnose(learner_code.loop_03_notebook_h, echo=False, per_head=True).message
    assert loop.startswith("✗ Your function raised IndexError: list index out of range (line ")
    assert loop.endswith(
        "Note: your function reads h (= 4) from outside it, not from its arguments; the check "
        "calls it with B = 2, T = 5, d_model = 12 and lists of 3 heads' matrices (so d_k = 4): "
        "take every size from the arguments."
    )
    fused = diagnose(learner_code.fused_06_notebook_h, echo=False, mask=False)
    assert fused.mistakes == ("num_heads_4",)
    assert "the check calls it with B = 2, T = 5, d_model = 12 and num_heads = 3" in fused.message

    def range_4(x, w_q, w_k, w_v, w_o):  # the same, with the number written in
        return torch.cat([x @ w_q[i].T for i in range(4)], dim=-1) @ w_o.T

    message = diagnose(range_4, echo=False, per_head=True).message
    assert message.endswith(
        "The check calls your function with B = 2, T = 5, d_model = 12 and lists of 3 heads' "
        "matrices (so d_k = 4)."
    )


def test_each_exercise_states_the_sizes_its_check_uses():
    from helpers.checker.exercises import _inputs
    from helpers.diagnose import CHECK_SIZES, EXERCISES, check_sizes

    assert set(CHECK_SIZES) == {*EXERCISES, "loop", "fused", "masked", "tiled_attention"}
    args = {name: make_args() for name, (make_args, _, _) in EXERCISES.items()}
    x = _inputs()["x"]
    for name in ("loop", "fused", "masked"):
        B, T, d_model = x.shape
        heads = _inputs()["num_heads"]
        assert CHECK_SIZES[name] == {"B": B, "T": T, "d_model": d_model, "num_heads": heads,
                                     "d_k": d_model // heads}  # fmt: skip
    for name in ("one_head", "head_scores"):
        B, T, d_model = args[name]["x"].shape
        d_k = args[name]["w_q"].shape[0]
        assert CHECK_SIZES[name] == {"B": B, "T": T, "d_model": d_model, "d_k": d_k}
    B, T, d_model = args["split_heads"]["t"].shape
    heads = args["split_heads"]["num_heads"]
    assert CHECK_SIZES["split_heads"] == {"B": B, "T": T, "d_model": d_model,
                                          "num_heads": heads, "d_k": d_model // heads}  # fmt: skip
    cross = args["cross_attention"]
    assert CHECK_SIZES["cross_attention"] == {
        "B": cross["x"].shape[0], "T_q": cross["x"].shape[1], "T_k": cross["context"].shape[1],
        "d_model": cross["x"].shape[2], "num_heads": cross["num_heads"],
        "d_k": cross["x"].shape[2] // cross["num_heads"],
    }  # fmt: skip
    assert check_sizes("one_head") == (
        "The check calls your function with B = 2, T = 5, d_model = 12 and d_k = 4."
    )
    assert check_sizes("masked") == (
        "The check calls your function with B = 2, T = 5, d_model = 12 and num_heads = 3 "
        "(so d_k = 4), without and with a padding mask (B, T, T)."
    )
    assert check_sizes("cross_attention") == (
        "The check calls your function with B = 2, T_q = 5, T_k = 7, d_model = 12 and "
        "num_heads = 3 (so d_k = 4)."
    )


# --- a new learner's report: messages that said false things (P1–P9, m1, m2, m5, m6) ---------


@pytest.mark.parametrize(
    ("fn", "check", "numbers"),
    [
        (learner_code.one_head_01_divided_by_2, "one_head", "2 (B, √d_k)"),
        (
            learner_code.split_05_hard_coded_sizes,
            "split_heads",
            "2 (B), 5 (T), 3 (num_heads), 4 (d_k)",
        ),
        (learner_code.fused_06_three_heads_and_2_written_in, "fused", "3 (num_heads), 2 (B, √d_k)"),
    ],  # fmt: skip
    ids=["01 / 2", "03 view(2, 5, 3, 4)", "05 view(B, T, 3, -1) / 2"],
)
def test_p9_code_right_only_at_the_stated_sizes_gets_no_tick(fn, check, numbers):
    if check == "fused":
        result = diagnose(fn, echo=False, mask=False)
    else:
        result = check_exercise(fn, check, echo=False)
    assert not result.ok, result.message
    assert_says(
        result.message,
        says=(
            "✗ Right at the check's first sizes (B = 2, T = 5, d_model = 12",
            "but not at a second set (B = 1, T = 3, d_model = 16",
            "right at the first sizes only: does it hard-code a size",
            f"equal a size of the first check: {numbers}.",
        ),
        never=("✓",),
    )


def test_p9_correct_code_in_every_style_is_ticked_at_two_sizes():
    for fn in learner_code.CORRECT:
        message = diagnose(fn, echo=False).message
        assert message.startswith("✓") and "at two sizes (B = 2, T = 5" in message, message
        assert "then B = 1, T = 3, d_model = 16, num_heads = 2, d_k = 8)" in message
    for name, fn in (("one_head", learner_code.one_head_01_weights_mT),):
        assert not check_exercise(fn, name, echo=False).ok


# --- issue 37: a checker that invents nothing -------------------------------------------------


def test_37_numbers_written_in_count_sizes_not_dims_or_factors():
    """'Numbers written in your code' lists the numbers that stand for a size: not transpose's
    dims, not the 2 of 2 * n."""

    def hard_n(maps):
        n = 5
        t = torch.arange(n, 2 * n)
        return maps[:, :, t, t - n + 1].transpose(0, 1).mean(dim=(1, 2))

    message = check_exercise(hard_n, "induction_score", echo=False).message
    assert "equal a size of the first check: 5 (n)." in message, message
