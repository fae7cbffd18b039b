"""helpers.diagnose after an eighth trial's judge: a value kept between calls by `global` named
when the second sizes fail; a vector output (one score per head) whose shape goes wrong traced to
the line that makes it, though the check records only matrices; and a slip found in what a bare
`return blocks` returns placed on the line that made blocks. Each learner function is written by
hand with one slip, the line the message must name marked `# <-`."""

import math

import torch

from helpers.diagnose import check_exercise
from tests.messages import marked, says

_scale = None


def one_head_scale_kept_in_a_global(x, w_q, w_k, w_v):
    global _scale
    _scale = _scale or math.sqrt(w_q.shape[0])  # <-
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    return torch.softmax(q @ k.transpose(-2, -1) / _scale, dim=-1) @ v


def one_head_scale_recomputed(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(w_q.shape[0]), dim=-1) @ v


def make_counted_one_head():
    calls = 0

    def one_head(x, w_q, w_k, w_v):  # keeps a count between calls, harmless
        nonlocal calls
        calls += 1
        return one_head_scale_recomputed(x, w_q, w_k, w_v)

    return one_head


def test_a_value_kept_by_global_is_named_with_its_line_when_the_second_sizes_fail():
    global _scale
    _scale = None
    result = check_exercise(one_head_scale_kept_in_a_global, "one_head", echo=False)
    assert not result.ok
    line = marked(one_head_scale_kept_in_a_global)
    says(result.message, "not at a second set", f"the name _scale, kept outside the function and "
         f"set on line {line}")  # fmt: skip


def test_a_right_function_keeps_its_tick_whatever_it_keeps():
    """The wrong objects: the same code recomputing its scale, and one that counts its calls in
    a `nonlocal`, are right: ✓, and nothing said of what they keep."""
    for fn in (one_head_scale_recomputed, make_counted_one_head()):
        result = check_exercise(fn, "one_head", echo=False)
        assert result.ok, result.message
        assert "kept outside" not in result.message


def induction_mean_over_the_wrong_dims(maps):
    n = maps.size(-1) // 2
    t = torch.arange(n, 2 * n)
    stripe = maps[:, :, t, t - n + 1]
    return stripe.mean(dim=(0, 1))  # <-


def induction_mean_kept_then_returned(maps):
    n = maps.size(-1) // 2
    t = torch.arange(n, 2 * n)
    scores = maps[:, :, t, t - n + 1].mean(dim=(1, 2))  # <-
    return scores


def test_a_vector_output_of_a_wrong_shape_is_traced_to_the_line_that_makes_it():
    for fn in (induction_mean_over_the_wrong_dims, induction_mean_kept_then_returned):
        result = check_exercise(fn, "induction_score", echo=False)
        assert not result.ok
        says(result.message, "Expected shape (3,)", f"is made on line {marked(fn)}")


def test_a_vector_output_of_the_right_shape_gets_no_shape_trace():
    """The wrong object: the right mean, over (0, 2), is right: no shape message at all."""

    def right(maps):
        n = maps.size(-1) // 2
        t = torch.arange(n, 2 * n)
        stripe = maps[:, :, t, t - n + 1]
        return stripe.mean(dim=(0, 2))

    result = check_exercise(right, "induction_score", echo=False)
    assert result.ok, result.message
    assert "Following your output back" not in result.message


def split_interleaved_then_returned(t, num_heads):
    B, T, d_model = t.shape
    d_k = d_model // num_heads
    blocks = t.view(B, T, d_k, num_heads).permute(0, 3, 1, 2)  # <-
    return blocks


def test_a_slip_in_what_a_bare_return_returns_is_placed_where_it_is_made():
    result = check_exercise(split_interleaved_then_returned, "split_heads", echo=False)
    assert not result.ok
    line = marked(split_interleaved_then_returned)
    says(result.message, "heads_split_interleaved", f"Where: line {line}:")
    assert f"line {line + 1}: `return blocks`" not in result.message


def cross_attention_w_v_in_w_os_place(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k, v = ((context @ w.T).view(B, T_k, num_heads, d_k).transpose(1, 2) for w in (w_k, w_v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    merged = (weights @ v).transpose(1, 2).reshape(B, T_q, d_model)  # right
    return merged @ w_v.T  # <-


def cross_attention_without_w_o(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k, v = ((context @ w.T).view(B, T_k, num_heads, d_k).transpose(1, 2) for w in (w_k, w_v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    merged = (weights @ v).transpose(1, 2).reshape(B, T_q, d_model)
    return merged


def test_another_matrix_in_w_os_place_is_not_called_a_missing_w_o():
    """The eighth trial's one false message: W^O called missing and the right heads side by side
    called different. Now the last step alone, with the line of what it reads; the wrong object,
    W^O really left out, keeps its name."""
    fn = cross_attention_w_v_in_w_os_place
    result = check_exercise(fn, "cross_attention", echo=False)
    assert not result.ok
    says(result.message, f"Where: line {marked(fn)}:",
         f"made from, on line {marked(fn, '# right')}:", "equal the reference's")  # fmt: skip
    assert "w_o_missing" not in result.message
    assert "put back side by side differ" not in result.message
    result = check_exercise(cross_attention_without_w_o, "cross_attention", echo=False)
    says(result.message, "w_o_missing")
