"""helpers.checker.trace: every tensor the learner's code makes is recorded with its op and the
learner's own line, as it was at that moment; errors are kept, never raised."""

import inspect

import pytest
import torch

from helpers.attention import split_heads
from helpers.checker.trace import trace_call


def line_of(fn, text: str) -> int:
    source, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(source) if text in line)


def learner(x, w):
    q = x @ w.T
    heads = split_heads(q, 2)  # helpers' own ops are recorded on this line
    scores = heads @ heads.transpose(-2, -1)
    scores.masked_fill_(torch.ones(5, 5, dtype=torch.bool).triu(1), 0.0)
    return scores.softmax(-1)


def test_records_carry_op_line_and_the_value_at_that_moment():
    x, w = torch.randn(2, 5, 4), torch.randn(4, 4)
    trace = trace_call(learner, [x, w])
    assert trace.error is None and trace.result.shape == (2, 2, 5, 5)
    ops = [r.op for r in trace.records]
    assert ops == ["__get__", "matmul", "view", "transpose", "transpose", "matmul",
                   "masked_fill_", "softmax"]  # fmt: skip
    lines = {r.op: r.lineno for r in trace.records}
    assert lines["view"] == line_of(learner, "split_heads(q, 2)")
    assert lines["masked_fill_"] == line_of(learner, "masked_fill_")
    assert trace.records[3].code.startswith("heads = split_heads(q, 2)  # helpers' own ops")
    before, after = trace.records[5].tensor, trace.records[6].tensor  # the in-place op's effect
    assert before[0, 0, 0, 1] != 0 and after[0, 0, 0, 1] == 0
    assert trace.record_of(trace.result).op == "softmax"


def test_views_share_a_family_and_new_numbers_start_one():
    trace = trace_call(learner, [torch.randn(2, 5, 4), torch.randn(4, 4)])
    families = [r.family for r in trace.records]
    q, view, transpose, k_t = families[1:5]
    assert q == view == transpose == k_t  # the same numbers laid out another way
    assert len({families[1], families[5], families[6], families[7]}) == 4


def test_a_helper_of_the_learners_is_shown_with_its_call_and_errors_are_kept():
    def outer(x):
        def inner(t):
            return t * 2

        doubled = inner(x)
        return doubled.view(3, 7)  # 10 numbers do not make 3 x 7

    trace = trace_call(outer, [torch.randn(2, 5)])
    (record,) = trace.records
    assert record.lineno == line_of(outer, "return t * 2")
    assert record.caller == (line_of(outer, "doubled = inner(x)"), "doubled = inner(x)")
    assert record.where.endswith(f", called from line {record.caller[0]}: `doubled = inner(x)`")
    assert isinstance(trace.error, RuntimeError) and trace.result is None


def test_integer_index_tensors_are_recorded_with_their_dtype_and_scalars_are_not():
    """Issue 37: a slip in `t = torch.arange(...)` or `idx = ... % g` must be found on its own
    line, so integer tensors are recorded too (bool masks and scalars are not)."""

    def counts(x):
        keep = torch.ones(3, dtype=torch.bool)
        return torch.arange(5).view(1, 5), x.sum(), x.float() * 1.0, keep & keep

    trace = trace_call(counts, [torch.randn(3, 4)])
    assert [r.op for r in trace.records] == ["arange", "view", "float", "mul"]  # no sum, no &
    assert [r.dtype for r in trace.records] == [torch.int64] * 2 + [torch.float32] * 2
    assert trace.records[1].parents == (0,)


def test_a_warning_an_op_raises_is_shown_at_the_learners_line():
    def implicit_dim(x):
        return torch.nn.functional.softmax(x)  # no dim: torch warns, every time

    for _ in range(2):
        with pytest.warns(UserWarning, match="Implicit dimension choice") as caught:
            trace = trace_call(implicit_dim, [torch.randn(2, 3, 4)])
        assert trace.error is None and trace.result.shape == (2, 3, 4)
        (warning,) = [w for w in caught if "Implicit dimension" in str(w.message)]
        where = (__file__, line_of(implicit_dim, "return torch.nn"))
        assert (warning.filename, warning.lineno) == where


def test_the_op_that_raised_says_whether_a_watched_matrix_went_in_as_given():
    x, w = torch.randn(2, 5, 12), torch.randn(4, 12)

    def as_given(x, w):
        return x @ w

    def transposed_then_wrong(x, w):
        return x.transpose(1, 2) @ w.T

    def product_of_weights(x, w):
        return x @ (w @ w.T)

    cases = [(as_given, ("other", "weight")), (transposed_then_wrong, ("other", "other")),
             (product_of_weights, ("other", "weight product"))]  # fmt: skip
    for fn, kinds in cases:
        trace = trace_call(fn, [x, w], watch=[w])
        assert isinstance(trace.error, RuntimeError)
        assert trace.failed == ("matmul", kinds), fn.__name__
    assert trace_call(lambda x, w: x @ w.T, [x, w], watch=[w]).failed is None
