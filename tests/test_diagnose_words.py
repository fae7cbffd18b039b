"""The wording of messages and hints: what a learner reads, word for word, for a few slips and
in the docs' example, and hints that point at the idea and the line, never at the code that
fixes it (helpers/checker/words.py)."""

import inspect
import re
import warnings

import pytest
import torch

from helpers.diagnose import (
    CIRCUIT_MISTAKES,
    CONTEXT_MISTAKES,
    MISTAKES,
    SLIPS,
    check_exercise,
    diagnose,
)
from tests import learner_code
from tests.diagnose_support import (
    SWITCHED,
    assert_says,
    cross_learner,
    learner,
    lines_in,
    marked_lines,
    per_head_loop,
    scores_learner,
)


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
        "     Hint: look at what happens to your heads' outputs once they are side by side: one "
        "of the four matrices is never used."
    )


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


# --- a new learner's report: messages that said false things (P1–P9, m1, m2, m5, m6) ---------


def test_p5_a_hint_never_says_this_line_when_no_line_is_given():
    from helpers.checker.words import _message
    from helpers.diagnose import Finding

    message = _message([Finding(None, "weights", None)])
    assert "cannot tell which line" in message and "this line" not in message, message


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
        if inspect.isfunction(fn) and fn.__module__.startswith(learner_code.__name__)
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
