"""helpers.diagnose after the ninth trial's judge (its four "missed" and some of its "borderline"
messages): an output of the wrong shape read as a step of the reference or as an input's shape;
a NaN traced to the +∞ a line filled in; a constant factor at the second sizes; the hint that
names the line setting a number the blamed line reads; and a hint that does not send the learner
to a product on a line that only joins. Each learner function has one slip, the line the message
must name marked `# <-`; each message is also shown to stay silent on a function that has not
that slip."""

import math
import re

import torch

from helpers.diagnose import check_exercise, diagnose
from tests.messages import marked, says


def one_head_returns_the_weights(x, w_q, w_k, w_v):
    q, k = x @ w_q.T, x @ w_k.T
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # <-
    return weights


def one_head_averages_x(x, w_q, w_k, w_v):
    q, k = x @ w_q.T, x @ w_k.T
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ x  # <-


def one_head_returns_a_new_shape(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return torch.cat([weights @ v, weights], dim=-1)


def test_an_output_of_the_wrong_shape_that_is_a_step_of_the_reference_is_named():
    result = check_exercise(one_head_returns_the_weights, "one_head", echo=False)
    line = marked(one_head_returns_the_weights)
    says(result.message, "Expected shape (2, 5, 4), got (2, 5, 5)", "holds the reference's "
         "weights (the softmax of the scores)", f"made on line {line}")  # fmt: skip


def test_an_output_with_an_input_s_shape_is_said_to_have_it():
    result = check_exercise(one_head_averages_x, "one_head", echo=False)
    says(result.message, "got (2, 5, 12)", "Its shape is that of the input `x`",
         f"made on line {marked(one_head_averages_x)}")  # fmt: skip
    assert "holds the reference's" not in result.message


def test_a_wrong_shape_that_is_no_step_and_no_input_gets_neither_reading():
    """The wrong object: a shape of its own (the heads' outputs and the weights side by side)."""
    result = check_exercise(one_head_returns_a_new_shape, "one_head", echo=False)
    says(result.message, "got (2, 5, 9)")
    assert "holds the reference's" not in result.message
    assert "that of the input" not in result.message


def masked_filled_with_plus_infinity(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("inf"))  # <-
    heads = scores.softmax(dim=-1) @ v
    return heads.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def masked_filled_with_minus_infinity(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    heads = scores.softmax(dim=-1) @ v
    return heads.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_nan_from_a_plus_infinity_fill_names_the_line_that_put_it_in():
    result = diagnose(masked_filled_with_plus_infinity, echo=False)
    line = marked(masked_filled_with_plus_infinity)
    says(result.message, "NaN", f"Its input, made on line {line}", "holds +∞ in",
         "fill its score with −∞")  # fmt: skip
    assert diagnose(masked_filled_with_minus_infinity, echo=False).ok


def head_scores_with_an_integer_root(x, w_q, w_k):
    d_k = w_q.shape[0]
    return x @ w_q.T @ w_k @ x.transpose(-2, -1) / math.isqrt(d_k)  # right when d_k is 4


def head_scores_with_a_hard_coded_offset(x, w_q, w_k):
    scores = x @ w_q.T @ w_k @ x.transpose(-2, -1) / math.sqrt(w_q.shape[0])
    return scores + (x.shape[1] - 5)  # right when T is 5: a shift, not a factor


def test_a_constant_factor_at_the_second_sizes_is_said_and_a_shift_is_not():
    result = check_exercise(head_scores_with_an_integer_root, "head_scores", echo=False)
    says(result.message, "not at a second set", "the reference's times 1.41 in every entry")
    result = check_exercise(head_scores_with_a_hard_coded_offset, "head_scores", echo=False)
    says(result.message, "not at a second set")
    assert "in every entry" not in result.message


def loop_with_d_k_from_the_list_length(x, w_q, w_k, w_v, w_o):
    d_k = len(w_q)  # <- the number of heads, not d_k
    heads = []
    for w_qi, w_ki, w_vi in zip(w_q, w_k, w_v):
        q, k, v = x @ w_qi.T, x @ w_ki.T, x @ w_vi.T
        heads.append(torch.softmax(q @ k.mT / d_k**0.5, dim=-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def test_the_hint_names_the_line_that_sets_the_number_a_blamed_line_reads():
    result = diagnose(loop_with_d_k_from_the_list_length, per_head=True, echo=False)
    hint = next(line for line in result.message.splitlines() if "Hint:" in line)
    line = marked(loop_with_d_k_from_the_list_length)  # (with the loop's, which sets w_qi)
    assert re.search(rf"Then look at lines? ([\d, ]+ and )?{line}\b[^:]*, which sets? values", hint)


def shared_kv_strided_groups(q, k, v):
    g, d_k = k.shape[1], q.shape[-1]
    outs = []
    for j in range(g):
        qj = q[:, j::g]  # <- strided: query heads j, j + g, …, not a block
        s = qj @ k[:, j : j + 1].transpose(-2, -1) / math.sqrt(d_k)
        outs.append(s.softmax(dim=-1) @ v[:, j : j + 1])
    return torch.cat(outs, dim=1)


def test_a_line_that_only_joins_is_not_said_to_multiply():
    result = check_exercise(shared_kv_strided_groups, "shared_kv", echo=False)
    assert not result.ok
    says(result.message, "this line multiplies nothing, it only lays out or joins")
    assert "look at what the weights multiply on this line" not in result.message
