"""The catalogue of known mistakes and the further slips, named: each switched on in a learner
and each written out in learner_code, alone or in pairs, with the line that makes it; right
code in every style gets the ✓ (helpers/checker/mistakes.py, explain.py)."""

import pytest
import torch

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
from tests import learner_code
from tests.diagnose_support import (
    SWITCHED,
    assert_says,
    learner,
    lines_in,
    marked_lines,
    per_head_loop,
)


def test_a_correct_implementation_is_accepted(capsys):
    result = diagnose(learner())
    assert result.ok and result.mistake is None
    assert capsys.readouterr().out.startswith(
        "✓ Your attention matches the reference within atol 1e-04"
    )


def test_the_catalogue_has_at_least_eight_mistakes():
    assert len(MISTAKES) >= 8


@pytest.mark.parametrize("mistake", SWITCHED)
def test_every_catalogued_mistake_is_named_in_the_switched_learner(mistake):
    result = diagnose(learner(mistake), echo=False)
    assert not result.ok
    assert result.mistakes == (mistake,), result.message
    assert result.message.startswith(f"✗ This looks like a known mistake ({mistake})")
    assert "\n  Where: line " in result.message and "\n  Hint: " in result.message


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


def test_reference_equals_the_course_module():
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    mask = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    weights = [getattr(fused, n).weight.detach() for n in ("w_q", "w_k", "w_v", "w_o")]
    for m in (None, mask):
        torch.testing.assert_close(reference_attention(x, *weights, 3, m), fused(x, m)[0].detach())


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


# --- issue 22: the checker never says a false thing (cold student attempts) -------------------


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


# --- a new learner's report: messages that said false things (P1–P9, m1, m2, m5, m6) ---------


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
