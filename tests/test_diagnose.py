"""helpers.diagnose: correct learner code in several styles is accepted; each catalogued mistake,
each slip outside the catalogue and pairs of them, written the way a learner would, are named with
the learner's line; errors and shapes become messages, never tracebacks.

The learner implementations here and in learner_code.py are written out by hand, independently of
the reference."""

import inspect
import math
import re
import warnings

import learner_code
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers.attention import FusedMultiHeadAttention
from helpers.diagnose import (
    CIRCUIT_MISTAKES,
    CONTEXT_MISTAKES,
    MISTAKES,
    SLIPS,
    check_exercise,
    diagnose,
    reference_attention,
)


def learner(mistake=None):
    """A learner's view/transpose implementation, with one mistake switched on."""

    def my_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        d_k = d_model // num_heads
        if mistake == "weights_transposed":
            q, k, v = x @ w_q, x @ w_k, x @ w_v
        else:
            q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        if mistake == "heads_split_without_transpose":
            q, k, v = (t.view(B, num_heads, T, d_k) for t in (q, k, v))
        elif mistake == "heads_split_interleaved":
            q, k, v = (t.view(B, T, d_k, num_heads).permute(0, 3, 1, 2) for t in (q, k, v))
        else:
            q, k, v = (t.view(B, T, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1)
        if mistake == "scaled_by_d_model":
            scores = scores / math.sqrt(d_model)
        elif mistake == "scaled_by_d_k":
            scores = scores / d_k
        elif mistake != "no_scaling":
            scores = scores / math.sqrt(d_k)
        if mask is not None and mistake not in ("mask_ignored", "mask_after_softmax"):
            m = mask.unsqueeze(1)
            scores = scores.masked_fill(m if mistake == "mask_inverted" else ~m, float("-inf"))
        if mistake == "no_softmax":
            weights = scores
        else:
            weights = torch.softmax(scores, dim=2 if mistake == "softmax_over_queries" else 3)
        if mask is not None and mistake == "mask_after_softmax":
            weights = weights * mask.unsqueeze(1)
        out = weights @ (k if mistake == "keys_as_values" else v)
        if mistake == "heads_merged_without_transpose":
            out = out.reshape(B, T, d_model)
        else:
            out = out.transpose(1, 2).reshape(B, T, d_model)
        if mistake == "w_o_missing":
            return out
        return out @ w_o.T

    return my_attention


def with_stages(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    out = learner()(x, w_q, w_k, w_v, w_o, num_heads, mask)
    return out, {}


def test_a_correct_implementation_is_accepted(capsys):
    result = diagnose(learner())
    assert result.ok and result.mistake is None
    assert capsys.readouterr().out.startswith(
        "✓ Your attention matches the reference within atol 1e-04"
    )


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


def test_the_catalogue_has_at_least_eight_mistakes():
    assert len(MISTAKES) >= 8


SWITCHED = sorted(set(MISTAKES) - {*CONTEXT_MISTAKES, *CIRCUIT_MISTAKES, "mask_filled_with_zero"})


@pytest.mark.parametrize("mistake", SWITCHED)
def test_every_catalogued_mistake_is_named_in_the_switched_learner(mistake):
    result = diagnose(learner(mistake), echo=False)
    assert not result.ok
    assert result.mistakes == (mistake,), result.message
    assert result.message.startswith(f"✗ This looks like a known mistake ({mistake})")
    assert "\n  Where: line " in result.message and "\n  Hint: " in result.message


def marked_lines(fn) -> list[int]:
    """The lines of fn marked `# <-` (or `# <-1`, `# <-2`), in the order of their numbers."""
    source, start = inspect.getsourcelines(fn)
    marks = {}
    for offset, line in enumerate(source):
        if "# <-" in line:
            marks[line.split("# <-")[1][:1].strip() or "1"] = start + offset
    return [marks[key] for key in sorted(marks)]


@pytest.mark.parametrize(
    "fn", learner_code.CORRECT, ids=[fn.__name__ for fn in learner_code.CORRECT]
)
def test_correct_code_in_five_styles_is_accepted_with_and_without_a_mask(fn):
    assert diagnose(fn, echo=False).ok
    assert diagnose(fn, echo=False, mask=False).ok


@pytest.mark.parametrize(
    ("fn", "names", "options"),
    learner_code.ONE_SLIP + learner_code.TWO_SLIPS,
    ids=[fn.__name__ for fn, _, _ in learner_code.ONE_SLIP + learner_code.TWO_SLIPS],
)
def test_each_slip_is_named_with_the_line_that_makes_it(fn, names, options):
    result = diagnose(fn, echo=False, **options)
    assert not result.ok
    assert result.mistakes == names, result.message
    assert list(result.lines) == marked_lines(fn), result.message
    assert result.mistake == names[0]
    for name, line in zip(names, result.lines):
        assert f"{name}: " in result.message or f"({name}): " in result.message
        assert f"Where: line {line}: `" in result.message


def test_the_cases_cover_the_catalogue_six_slips_and_four_pairs():
    named = {name for _, names, _ in learner_code.ONE_SLIP for name in names}
    assert set(MISTAKES) - {*CONTEXT_MISTAKES, *CIRCUIT_MISTAKES} <= named
    assert len(named & set(SLIPS)) >= 6
    assert len(learner_code.TWO_SLIPS) >= 4
    styles = {fn.__name__.split("_")[0] for fn, _, _ in learner_code.ONE_SLIP}
    assert "loop" in styles


def test_what_a_learner_reads_for_the_zero_filled_mask():
    fn = learner_code.mask_filled_with_zero
    (line,) = marked_lines(fn)
    assert diagnose(fn, echo=False).message == (
        "✗ This looks like a known mistake (mask_filled_with_zero): masked scores are set to 0 "
        "instead of −inf, so the softmax still gives the masked keys weight.\n"
        f"  Where: line {line}: `scores = scores.masked_fill(~mask.unsqueeze(1), 0)  # <-`\n"
        "  Hint: look at the value your masked_fill puts in: after the softmax, a masked key's "
        "weight must be exactly 0, and e⁰ = 1."
    )


def test_what_a_learner_reads_for_two_slips_outside_the_catalogue():
    fn = learner_code.keys_from_w_q
    (line,) = marked_lines(fn)
    assert diagnose(fn, echo=False).message == (
        "✗ This looks like a known mistake (keys_from_w_q): the keys are made with w_q, not "
        "w_k.\n"
        f"  Where: line {line}: "
        "`k = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)  # <-`\n"
        "  Hint: look at the line that makes k: which of the weights does it multiply?"
    )
    fn = learner_code.scaled_after_softmax
    (line,) = marked_lines(fn)
    assert diagnose(fn, echo=False).message == (
        "✗ This looks like a known mistake (scaled_after_softmax): the weights are divided by "
        "√d_k after the softmax, instead of the scores before it, so the rows sum to 1/√d_k.\n"
        f"  Where: line {line}: `weights = scores.softmax(dim=-1) / math.sqrt(d_k)  # <-`\n"
        "  Hint: look at where your division happens: before or after the softmax?"
    )


def test_what_a_learner_reads_for_a_pair_in_the_loop():
    fn = learner_code.loop_no_scaling_and_w_o_missing
    first, second = marked_lines(fn)
    assert diagnose(fn, echo=False, per_head=True).message == (
        "✗ This looks like 2 mistakes, in the order your code makes them:\n"
        "  1. no_scaling: the scores are not scaled.\n"
        f"     Where: line {first}: `scores = q @ k.transpose(1, 2)  # <-1`\n"
        "     Hint: look at the line that computes q·kᵀ: the scores should be divided by "
        "something.\n"
        "  2. w_o_missing: the output is the concatenation of the heads: W^O is never applied.\n"
        f"     Where: line {second}: `return torch.cat(heads, dim=-1)  # <-2`\n"
        "     Hint: look at your last line: one of the four matrices is not used."
    )


def test_a_helper_the_learner_wrote_is_shown_with_its_call():
    fn = learner_code.heads_split_interleaved
    (line,) = marked_lines(fn)
    message = diagnose(fn, echo=False).message
    assert f"Where: line {line}: `return t.view(B, T, d_k, num_heads).permute(0, 3, 1," in message
    assert f", called from line {line + 2}: `q, k, v = split(x @ w_q.T)," in message


def test_reference_equals_the_course_module():
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    mask = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    weights = [getattr(fused, n).weight.detach() for n in ("w_q", "w_k", "w_v", "w_o")]
    for m in (None, mask):
        torch.testing.assert_close(reference_attention(x, *weights, 3, m), fused(x, m)[0].detach())


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
        "✗ Your masked scores differ from the reference's "
        f"({masked} entries kept that the reference masks, only in heads 1, 2), in a way that "
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


def test_cutting_into_another_number_of_heads_is_named():
    fn = learner_code.four_heads_whatever_num_heads_says  # the test passes num_heads = 3
    (line,) = marked_lines(fn)
    result = diagnose(fn, echo=False, mask=False)
    assert result.mistakes == ("num_heads_4",) and result.lines == (line,), result.message
    assert "q, k and v are cut into 4 heads, not into the num_heads the function is given" in (
        result.message
    )


def test_the_loop_can_merge_its_heads_without_the_transpose():
    fn = learner_code.loop_stacked_then_reshaped
    result = diagnose(fn, echo=False, per_head=True)
    assert result.mistakes == ("heads_merged_without_transpose",), result.message
    assert list(result.lines) == marked_lines(fn)


def test_a_small_difference_in_the_output_is_the_outputs_once():
    fn = learner_code.noise_on_the_output
    (line,) = marked_lines(fn)
    result = diagnose(fn, echo=False)
    assert result.mistakes == (None,) and result.lines == (line,), result.message
    assert result.message.startswith(
        "✗ Your output differs from the reference's (largest difference 0.001, at index "
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


def test_not_done_yet_is_polite():
    def stub(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        raise NotImplementedError("write multi-head attention here")

    result = diagnose(stub, echo=False)
    assert result.message.startswith("○ Not done yet") and not result.ok


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


def per_head_loop(mistake=None):
    """The 02 exercise as a learner writes it: lists of per-head (d_k, d_model) weights, no mask."""

    def my_attention(x, w_q, w_k, w_v, w_o):
        outs = []
        for wq, wk, wv in zip(w_q, w_k, w_v):
            q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
            scores = q @ k.transpose(-2, -1)
            if mistake != "no_scaling":
                scores = scores / math.sqrt(q.shape[-1])
            weights = scores.softmax(dim=-2 if mistake == "softmax_over_queries" else -1)
            outs.append(weights @ (k if mistake == "keys_as_values" else v))
        merged = torch.cat(outs, dim=-1)
        return merged if mistake == "w_o_missing" else merged @ w_o.T

    return my_attention


@pytest.mark.parametrize(
    "mistake", [None, "no_scaling", "softmax_over_queries", "keys_as_values", "w_o_missing"]
)
def test_the_loop_exercise_takes_per_head_lists_and_no_mask(mistake):
    result = diagnose(per_head_loop(mistake), echo=False, per_head=True)
    assert result.ok == (mistake is None) and result.mistake == mistake, result.message
    if mistake is None:
        assert result.message == (
            "✓ Your attention matches the reference within atol 1e-04, on fixed inputs, at two "
            "sizes (B = 2, T = 5, d_model = 12, 3 heads, d_k = 4; then B = 1, T = 3, "
            "d_model = 16, 2 heads, d_k = 8)."
        )


def test_the_loop_exercise_says_how_nn_linear_stores_its_matrix():
    def transposed(x, w_q, w_k, w_v, w_o):
        q = x @ w_q[0]  # (d_k, d_model) used as (d_model, d_k)
        return q

    message = diagnose(transposed, echo=False, per_head=True).message
    assert message.startswith("✗ Your function raised RuntimeError: mat1 and mat2 shapes")
    assert "(line " in message and "must meet a weight's in_features, its second dim." in message


def test_without_a_mask_the_mask_mistakes_are_not_candidates():
    def without(mistake=None):  # the 05 exercise: no mask parameter at all
        return lambda x, w_q, w_k, w_v, w_o, num_heads: learner(mistake)(
            x, w_q, w_k, w_v, w_o, num_heads
        )

    assert diagnose(without(), echo=False, mask=False).ok
    assert diagnose(without("no_scaling"), echo=False, mask=False).mistake == "no_scaling"
    ignores = diagnose(without("mask_ignored"), echo=False, mask=False)
    assert ignores.ok  # without a mask, ignoring it is no mistake
    split = diagnose(without("heads_split_interleaved"), echo=False, mask=False)
    assert split.mistake == "heads_split_interleaved"


def cross_learner(mistake=None):
    """The 09 exercise as a learner writes it, with at most one slip."""

    def my_cross_attention(x, context, w_q, w_k, w_v, w_o, num_heads):
        B, T_q, d_model = x.shape
        d_k = d_model // num_heads
        queries = context if mistake == "queries_from_context" else x
        source = x if mistake == "keys_values_from_x" else context

        def heads(t, w):  # (B, T, d_model) -> (B, h, T, d_k)
            return (t @ w.T).view(B, t.shape[1], num_heads, d_k).transpose(1, 2)

        q, k, v = heads(queries, w_q), heads(source, w_k), heads(source, w_v)
        scores = q @ k.transpose(-2, -1) / (1.0 if mistake == "no_scaling" else d_k**0.5)
        out = scores.softmax(-1) @ v  # (B, h, T, d_k)
        return out.transpose(1, 2).reshape(B, q.shape[2], d_model) @ w_o.T

    return my_cross_attention


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


def scores_learner(mistake=None, style="matmul"):
    """One head's scores from W_QK, as a learner writes them, with at most one mistake."""

    def my_head_scores(x, w_q, w_k):
        d_k, d_model = w_q.shape
        if style == "einsum":
            w_qk = torch.einsum("kd,ke->de", w_q, w_k)  # (d_model, d_model)
            return torch.einsum("bsd,de,bte->bst", x, w_qk, x) / math.sqrt(d_k)
        w_qk = w_k.T @ w_q if mistake == "w_qk_reversed" else w_q.T @ w_k
        divisor = {"no_scaling": 1, "scaled_by_d_model": d_model**0.5, "scaled_by_d_k": d_k}
        scores = x @ w_qk @ x.transpose(-2, -1) / divisor.get(mistake, d_k**0.5)
        return scores.softmax(-1) if mistake == "softmax_applied" else scores

    return my_head_scores


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


def test_the_readme_example_is_what_diagnose_prints(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "docs" / "exercises.md").read_text()
    section = readme[readme.index("03's loop written with two slips") :]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    printed = section.split("```text\n", 1)[1].split("```", 1)[0]
    (tmp_path / "readme_loop.py").write_text("import torch\n\n\n" + code)
    monkeypatch.syspath_prepend(str(tmp_path))
    import readme_loop

    result = diagnose(readme_loop.my_attention, per_head=True)
    shifted = printed.replace("line 5:", "line 8:").replace("line 7:", "line 10:")
    assert capsys.readouterr().out == shifted  # 3 lines more: the import added above
    assert result.mistakes == ("no_scaling", "w_o_missing")
    counts = f"from {len(MISTAKES)} catalogued ones and {len(SLIPS)} further slips"
    assert counts in " ".join(readme.split())


# --- issue 22: the checker never says a false thing (cold student attempts) -------------------


def lines_in(message: str) -> list[int]:
    """The line numbers of every `Where: line N` in a message, in order."""
    return [int(part.split(":")[0]) for part in message.split("Where: line ")[1:]]


def test_06_q_k_v_without_T_and_w_o_right_get_only_that_finding():
    fn = learner_code.fused_06_projections_without_T
    result = diagnose(fn, echo=False, mask=False)
    assert result.mistakes == ("weights_transposed",), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert "w_q, w_k and w_v are used the wrong way round" in result.message
    for false in ("differ", "w_o_missing", "W^O is never applied", "side by side", "w_o:"):
        assert false not in result.message, result.message


def test_all_four_matrices_transposed_is_two_findings_each_on_its_line():
    fn = learner_code.all_four_transposed
    result = diagnose(fn, echo=False, mask=False)
    assert result.mistakes == ("weights_transposed", "w_o_transposed"), result.message
    assert lines_in(result.message) == marked_lines(fn)


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
    assert "head 1's is never made: in its place your code makes head 0's again" in result.message
    assert "side by side" not in result.message and "torch.cat" not in result.message


def test_13_w_k_and_w_v_swapped_are_blamed_on_the_k_and_v_lines():
    fn = learner_code.cross_13_w_k_and_w_v_swapped
    result = check_exercise(fn, "cross_attention", echo=False)
    assert lines_in(result.message) == marked_lines(fn), result.message
    assert result.mistakes == (None, "values_from_w_k")
    assert (
        "your keys k = context·W^K differ from the reference's (yours equal the reference's "
        "values v = context·W^V)" in result.message
    )
    for false in ("scores", "keys_as_values", "multiply the keys", "x·W^K"):
        assert false not in result.message, result.message


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


def test_the_layout_hint_only_when_a_weight_matrix_as_given_is_a_side_of_the_product():
    cat = diagnose(learner_code.loop_03_cat_on_dim_0, echo=False, per_head=True).message
    cross = check_exercise(learner_code.cross_13_values_from_x, "cross_attention", echo=False)
    for message, fn in ((cat, learner_code.loop_03_cat_on_dim_0),
                        (cross.message, learner_code.cross_13_values_from_x)):  # fmt: skip
        assert "Hint: the two sides of a product do not line up" in message
        assert f"(line {marked_lines(fn)[0]}: `" in message
        assert "out_features" not in message and "x @ w.T" not in message, message

    def raw(x, w_q, w_k, w_v, w_o):
        return x @ w_q[0]  # (d_k, d_model) used as (d_model, d_k)

    message = diagnose(raw, echo=False, per_head=True).message
    assert message.endswith(
        "The weight matrices are stored as (out_features, in_features), like nn.Linear's "
        "weight: the input's d_model features must meet a weight's in_features, its second dim."
    )
    product = check_exercise(
        learner_code.head_scores_17_layout_read_as_x_w, "head_scores", echo=False
    ).message
    assert product.endswith("while the x·W layout's W^Q is (in_features, out_features).")
    for text in (cat, cross.message, message, product):
        assert "The weights are" not in text and "the weights are" not in text


def test_a_warning_in_the_learners_code_is_shown_at_the_learners_line():
    fn = learner_code.one_head_01_softmax_without_dim
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax") as caught:
        result = check_exercise(fn, "one_head", echo=False)
    (warning,) = [w for w in caught if "Implicit dimension" in str(w.message)]
    assert (warning.filename, warning.lineno) == (learner_code.__file__, marked_lines(fn)[0])
    assert "helpers" not in warning.filename and "torch" not in warning.filename
    assert result.mistakes == ("softmax_over_batch",)  # F.softmax picks dim 0 for 3 dims


def test_each_exercise_states_the_sizes_its_check_uses():
    from helpers.checker.exercises import _inputs
    from helpers.diagnose import CHECK_SIZES, EXERCISES, check_sizes

    assert set(CHECK_SIZES) == {*EXERCISES, "loop", "fused", "masked"}
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


def assert_says(message: str, says: tuple = (), never: tuple = ()) -> None:
    for text in says:
        assert text in message, f"{text!r} missing from:\n{message}"
    for text in never:
        assert text not in message, f"{text!r} in:\n{message}"


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


def test_p4_a_masked_fill_whose_result_is_dropped_is_the_mask_with_no_effect():
    fn = learner_code.masked_09_masked_fill_result_dropped
    result = diagnose(fn, echo=False)
    assert result.mistakes == ("mask_ignored",), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert_says(
        result.message,
        says=("the mask has no effect", "masked_fill returns a new tensor", "throws the result"),
        never=("matches no known mistake", "softmax", "masked_fill_", "Assign it"),
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


def test_p5_a_hint_never_says_this_line_when_no_line_is_given():
    from helpers.checker.words import _message
    from helpers.diagnose import Finding

    message = _message([Finding(None, "weights", None)])
    assert "cannot tell which line" in message and "this line" not in message, message


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


def test_p8_split_with_num_heads_is_a_chunk_size_not_an_h_from_another_cell():
    fn = learner_code.split_05_split_takes_a_size
    result = check_exercise(fn, "split_heads", echo=False)
    assert result.mistakes == ("num_heads_4",), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert_says(
        result.message,
        says=(
            "Tensor.split(n, dim) cuts pieces of n features each, not n pieces",
            "d_k and num_heads are swapped",
        ),
        never=("another cell", "left over", "Note:", "not a number", "chunk("),
    )


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


def test_m5_a_mask_multiplied_in_gets_a_hint_for_any_way_of_masking():
    fn = learner_code.masked_09_multiplied_by_the_mask
    result = diagnose(fn, echo=False)
    assert result.mistakes == ("mask_filled_with_zero",), result.message
    assert lines_in(result.message) == marked_lines(fn)
    assert_says(
        result.message,
        says=("the value a masked score gets on this line",),
        never=("masked_fill",),
    )


def test_m6_09_names_the_residual_too():
    fn = learner_code.cross_13_residual
    result = check_exercise(fn, "cross_attention", echo=False)
    assert result.mistakes == ("residual_added",), result.message
    assert lines_in(result.message) == marked_lines(fn)


# --- hints point at the idea and the line, never at the code that fixes it ----------------------

# code a message must not hand over as the fix (the learner's own lines, quoted as
# "line N: `...`", are taken out first: they may hold any of these)
FIX_AS_CODE = [
    r"\.unsqueeze\(", r"\.transpose\(", r"\.view\(", r"\.reshape\(", r"\.permute\(",
    r"\.contiguous\(", r"masked_fill_?\(", r"\bmasked_fill_\b", r"\bdim\s*=", r"@\s*\w+\.m?T\b",
    r"\b[a-z_]\w*\.m?T\b", r"\btorch\.\w+\(", r"\bF\.\w+\(", r"\bchunk\(", r"\.split\(\s*d_k",
    r"\bfrom_numpy\b", r"\[:, None\]", r"\bsqrt\(", r"\*\*\s*0\.5",
]  # fmt: skip
_QUOTED_LINE = re.compile(r"line \d+: `[^`]*`")


def fix_as_code(message: str) -> list[str]:
    """The fix-as-code patterns the message holds outside the learner's quoted lines."""
    text = _QUOTED_LINE.sub("line N: <their code>", message)
    return [pattern for pattern in FIX_AS_CODE if re.search(pattern, text)]


def _checked(fn) -> str:
    """The message the course's check for fn's exercise prints (chosen by fn's parameters)."""
    params = list(inspect.signature(fn).parameters)
    if params[:2] == ["x", "context"]:
        return check_exercise(fn, "cross_attention", echo=False).message
    exercise = {("t", "num_heads"): "split_heads", ("x", "w_q", "w_k"): "head_scores",
                ("x", "w_q", "w_k", "w_v"): "one_head"}.get(tuple(params))  # fmt: skip
    if exercise:
        return check_exercise(fn, exercise, echo=False).message
    if params == ["x", "w_q", "w_k", "w_v", "w_o"]:
        return diagnose(fn, echo=False, per_head=True).message
    return diagnose(fn, echo=False, mask="mask" in params).message


WRONG_ATTEMPTS = {
    **{
        name: fn for name, fn in vars(learner_code).items()
        if inspect.isfunction(fn) and fn.__module__ == learner_code.__name__
        and fn not in learner_code.CORRECT
    },
    **{f"switched_{m}": learner(m) for m in SWITCHED},
    **{f"loop_{m}": per_head_loop(m) for m in ("no_scaling", "softmax_over_queries",
                                                "keys_as_values", "w_o_missing")},
    **{f"cross_{m}": cross_learner(m) for m in CONTEXT_MISTAKES},
    **{f"scores_{m}": scores_learner(m) for m in (*CIRCUIT_MISTAKES, "no_scaling")},
}  # fmt: skip


def test_fix_as_code_patterns_spare_the_learners_quoted_line_and_catch_the_answer():
    quoted = "  Where: line 7: `scores = scores.masked_fill(~mask.unsqueeze(1), 0)`"
    assert fix_as_code(quoted) == []
    for answer in ("mask.unsqueeze(1)", "a projection is x @ w.T", "softmax(dim=-1)",
                   "the x·W layout's W^Q is w_q.T", "torch.cat(heads, dim=-1)"):  # fmt: skip
        assert fix_as_code(answer), answer


@pytest.mark.parametrize("name", sorted(WRONG_ATTEMPTS))
def test_no_message_for_a_wrong_attempt_hands_over_the_fix_as_code(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # F.softmax without a dim warns at the learner's line
        message = _checked(WRONG_ATTEMPTS[name])
    assert not message.startswith("✓"), message
    assert fix_as_code(message) == [], message


def test_no_catalogued_hint_or_check_hint_hands_over_the_fix_as_code():
    from helpers.checker.words import _EXERCISE_HINTS, STAGE_HINTS
    from helpers.checks import check_attention_rows, check_shape
    from helpers.diagnose import EXERCISE_OUT

    texts = [t for pair in (*MISTAKES.values(), *SLIPS.values()) for t in pair]
    texts += [*STAGE_HINTS.values(), *(t for pair in EXERCISE_OUT.values() for t in pair)]
    texts += [t for hints in _EXERCISE_HINTS.values() for t in hints.values()]
    for got, expected in (((6, 8), (2, 6, 8)), ((2, 6, 2, 4), (2, 6, 8)), ((2, 8, 6), (2, 6, 8)),
                          ((2, 3, 16), (2, 6, 8)), ((2, 6, 16), (2, 6, 8))):  # fmt: skip
        with pytest.raises(AssertionError) as err:
            check_shape(torch.zeros(got), expected, "q")
        texts.append(str(err.value))
    for weights in (torch.randn(4, 4).softmax(dim=0), torch.rand(4, 4), torch.randn(4, 4)):
        with pytest.raises(AssertionError) as err:
            check_attention_rows(weights)
        texts.append(str(err.value))
    for text in texts:
        assert fix_as_code(text) == [], text


# --- issue 37: a checker that invents nothing -------------------------------------------------


def _check_37(fn):
    """Run the check a function's name asks for (fused_, masked_, loop_, shared_kv_, ...)."""
    name = fn.__name__
    if name.startswith("fused_"):
        return diagnose(fn, echo=False, mask=False)
    if name.startswith("masked_"):
        return diagnose(fn, echo=False)
    if name.startswith("loop_"):
        return diagnose(fn, echo=False, per_head=True)
    for prefix, exercise in (("shared_kv_", "shared_kv"), ("induction_", "induction_score"),
                             ("cross_", "cross_attention")):  # fmt: skip
        if name.startswith(prefix):
            return check_exercise(fn, exercise, echo=False)
    raise ValueError(name)


@pytest.mark.parametrize(
    ("fn", "named", "says"),
    [
        (
            learner_code.fused_only_k_cut_without_transpose,
            "heads_split_without_transpose",
            "k is cut into heads with a view to (B, h, T, d_k) directly",
        ),
        (
            learner_code.fused_only_q_cut_without_transpose,
            "heads_split_without_transpose",
            "q is cut into heads",
        ),
        (
            learner_code.masked_k_and_v_cut_without_transpose,
            "heads_split_without_transpose",
            "k and v are cut into heads",
        ),
        (
            learner_code.masked_only_q_cut_wrong,
            "heads_split_without_transpose",
            "(k and v are made right)",
        ),
        (
            learner_code.cross_k_cut_without_transpose,
            "heads_split_without_transpose",
            "look at how you cut k into heads",
        ),
        (learner_code.fused_only_v_interleaved, "heads_split_interleaved", "in v: each head"),
        (
            learner_code.fused_only_k_w_not_transposed,
            "weights_transposed",
            "w_k is used the wrong way round",
        ),
        (learner_code.shared_kv_only_k_tiled, "kv_tiled", "in k: query head i reads"),
        (learner_code.shared_kv_only_v_tiled, "kv_tiled", "one value block"),
        (learner_code.shared_kv_loop_i_mod_g, "kv_tiled", "K/V head i mod g"),
        (learner_code.shared_kv_index_mod_g, "kv_tiled", "K/V head i mod g"),
        (learner_code.induction_arange_twin, "induction_on_the_twin", "key t − n"),
        (learner_code.induction_arange_start, "induction_with_a_first_half_query", "n − 1"),
        (learner_code.induction_diagonal, "induction_on_the_twin", "key t − n"),
        (learner_code.induction_loop_twin, "induction_on_the_twin", "key t − n"),
        (learner_code.induction_diagonal_prev, "induction_on_the_previous_token", "t − 1"),
        (learner_code.induction_arange_prev, "induction_on_the_previous_token", "t − 1"),
        (learner_code.induction_keys_offset_2, None, "matches no known mistake"),
        (learner_code.loop_sum_w_o_rows, "w_o_transposed", "W^O is used the wrong way round"),
    ],  # fmt: skip
    ids=lambda value: value.__name__ if callable(value) else "",
)
def test_37_one_finding_on_the_line_that_makes_the_slip_and_nothing_invented(fn, named, says):
    """A slip in some of q, k and v is named for those alone, never as "cut into 1 heads" on the
    right q line (one head makes every cut equal the uncut tensor); no second finding blames a
    right line; `i % g` is kv_tiled; a slip in integer positions (arange, idx % g, a diagonal's
    offset) is found on the line that makes them, not on the mean after it."""
    result = _check_37(fn)
    assert result.mistakes == (named,), result.message
    assert lines_in(result.message) == marked_lines(fn), result.message
    assert_says(result.message, says=(says,), never=("1 heads", "num_heads_1", "q, k and v"))


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


def test_37_numbers_written_in_count_sizes_not_dims_or_factors():
    """'Numbers written in your code' lists the numbers that stand for a size: not transpose's
    dims, not the 2 of 2 * n."""

    def hard_n(maps):
        n = 5
        t = torch.arange(n, 2 * n)
        return maps[:, :, t, t - n + 1].transpose(0, 1).mean(dim=(1, 2))

    message = check_exercise(hard_n, "induction_score", echo=False).message
    assert "equal a size of the first check: 5 (n)." in message, message


def _own_lines(message: str) -> list[str]:
    """The headline, Where and Hint lines, without the notes under Where that name other lines
    the slip may be on (values read from lines the check could not compare)."""
    return [line for line in message.split("\n") if not line.startswith("    ")]
