"""helpers.diagnose after the fourteenth trial's judge: x divided by √d_k before it is used twice is
one scale named where it is made, not two differences in x·W_QK; keys and values made with each
other's weights are one mistake; q and k made with each other's weights are named where they are
made; NaN in the call without a mask says it is that call. Each beside the wrong object that must
keep its message."""

import math

import torch

from helpers.diagnose import check_exercise, diagnose
from tests.diagnose_support import lines_in, marked_lines


def x_scaled_then_used_twice(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k
    x = x / d_k**0.5  # <-
    return x @ w_qk @ x.transpose(-2, -1)


def scores_scaled_twice(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k
    xw = x @ w_qk / d_k**0.5  # <-
    return xw @ x.transpose(-2, -1) / d_k**0.5


def test_x_scaled_before_it_is_used_twice_is_one_scale_named_where_it_is_made():
    result = check_exercise(x_scaled_then_used_twice, "head_scores", echo=False)
    (line,) = marked_lines(x_scaled_then_used_twice)
    assert result.mistakes == (None,), result.message
    assert "mistakes" not in result.message
    assert "yours are the reference's × 0.5" in result.message, result.message
    assert f"look at the scale on line {line}, which this line goes on from" in result.message
    assert "order of its factors" not in result.message
    # the wrong object: a scale made on the line before the one shown is named as well
    message = check_exercise(scores_scaled_twice, "head_scores", echo=False).message
    (line,) = marked_lines(scores_scaled_twice)
    assert f"Your code scales on line {line} too." in message, message
    assert "which this line goes on from" not in message


def cross_k_v_swapped_in_one_line(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k, v = ((context @ w.T).view(B, T_k, num_heads, d_k).transpose(1, 2) for w in (w_v, w_k))  # <-
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def cross_values_from_w_k(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)  # <-
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def test_keys_and_values_made_with_each_others_weights_are_one_mistake():
    result = check_exercise(cross_k_v_swapped_in_one_line, "cross_attention", echo=False)
    assert result.mistakes == ("keys_values_swapped",), result.message
    assert "2 mistakes" not in result.message
    assert lines_in(result.message) == marked_lines(cross_k_v_swapped_in_one_line)
    # the wrong object: only the values made with w_k is that mistake alone
    result = check_exercise(cross_values_from_w_k, "cross_attention", echo=False)
    assert result.mistakes == ("values_from_w_k",), result.message
    assert "swapped" not in result.message


def fused_q_k_made_with_each_others_weights(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)  # <-
    k = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def fused_scores_k_times_q(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    weights = (k @ q.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)  # <-
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_q_and_k_made_with_each_others_weights_are_named_where_they_are_made():
    result = diagnose(fused_q_k_made_with_each_others_weights, mask=False, echo=False)
    assert result.mistakes == ("queries_keys_swapped",), result.message
    assert lines_in(result.message) == marked_lines(fused_q_k_made_with_each_others_weights)
    assert "your q equals the reference's keys and your k its queries" in result.message
    # the wrong object: k·qᵀ written on the scores line is named on that line
    result = diagnose(fused_scores_k_times_q, mask=False, echo=False)
    assert result.mistakes == ("queries_keys_swapped",), result.message
    assert lines_in(result.message) == marked_lines(fused_scores_k_times_q)
    assert "your q equals" not in result.message


def _masked(default_blocks_every_key):
    def my_masked_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        d_k = d_model // num_heads
        q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
        scores = q @ k.transpose(-2, -1) / d_k**0.5
        if mask is None:
            mask = torch.full((B, T, T), not default_blocks_every_key)
        elif not default_blocks_every_key:  # a given mask blocks every key instead
            mask = torch.zeros_like(mask)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T

    return my_masked_attention


def test_nan_in_the_call_without_a_mask_says_it_is_that_call():
    message = diagnose(_masked(True), echo=False).message
    assert message.startswith("✗ Your output when called without a mask (mask=None) has NaN")
    assert "this call passes no mask, so no key should be masked" in message, message
    assert "the check's mask" not in message
    # the wrong object: NaN only in the call with the check's mask says that mask leaves every
    # query a key
    message = diagnose(_masked(False), echo=False).message
    assert "without a mask (mask=None)" not in message, message
    assert "the check's mask leaves every query at least one key" in message, message
