"""Where a slip is placed: a line in a helper the learner wrote is shown with the line that
calls it, a PyTorch warning at the learner's line, and a slip in only some of q, k and v or in
integer positions on the line that makes it, nothing invented after (locate.py, sources.py)."""

import pytest

from helpers.diagnose import check_exercise, diagnose
from tests import learner_code
from tests.diagnose_support import assert_says, lines_in, marked_lines


def test_a_helper_the_learner_wrote_is_shown_with_its_call():
    fn = learner_code.heads_split_interleaved
    (line,) = marked_lines(fn)
    message = diagnose(fn, echo=False).message
    assert f"Where: line {line}: `return t.view(B, T, d_k, num_heads).permute(0, 3, 1," in message
    assert f", called from line {line + 2}: `q, k, v = split(x @ w_q.T)," in message


# --- issue 22: the checker never says a false thing (cold student attempts) -------------------


def test_a_warning_in_the_learners_code_is_shown_at_the_learners_line():
    fn = learner_code.one_head_01_softmax_without_dim
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax") as caught:
        result = check_exercise(fn, "one_head", echo=False)
    (warning,) = [w for w in caught if "Implicit dimension" in str(w.message)]
    assert (warning.filename, warning.lineno) == (learner_code.__file__, marked_lines(fn)[0])
    assert "helpers" not in warning.filename and "torch" not in warning.filename
    assert result.mistakes == ("softmax_over_batch",)  # F.softmax picks dim 0 for 3 dims


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
