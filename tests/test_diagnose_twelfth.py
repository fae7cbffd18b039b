"""helpers.diagnose after the twelfth trial's judge (its four false messages): a loop that skips a
head is not told it makes another head "again"; a slip first seen in one call (a mask replaced by
a causal one) is not named a second time, as a second mistake on a right line, from another call
that goes on from it; a floor division (//) by √d_k is not "the scores are not scaled"; 18's
weights summed over the queries are compared with the reference's sum, not with one query's.
Each message is also shown to stay silent, or say what it said, on a function without that slip."""

import math

import torch

from helpers.diagnose import check_exercise, diagnose
from tests.messages import says


def _head(x, w_qi, w_ki, w_vi):
    q, k, v = x @ w_qi.T, x @ w_ki.T, x @ w_vi.T
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def loop_from_head_1(x, w_q, w_k, w_v, w_o):
    d_k = w_q[0].shape[0]
    out = torch.zeros(x.shape[0], x.shape[1], w_o.shape[0])
    for i in range(1, len(w_q)):  # head 0 skipped
        out += _head(x, w_q[i], w_k[i], w_v[i]) @ w_o[:, i * d_k : (i + 1) * d_k].T
    return out


def loop_with_head_0_twice(x, w_q, w_k, w_v, w_o):
    d_k = w_q[0].shape[0]
    out = torch.zeros(x.shape[0], x.shape[1], w_o.shape[0])
    for i in range(len(w_q)):  # head 0's matrices in every pass
        out += _head(x, w_q[0], w_k[0], w_v[0]) @ w_o[:, i * d_k : (i + 1) * d_k].T
    return out


def test_a_skipped_head_is_not_made_again_and_the_hint_names_the_range():
    message = diagnose(loop_from_head_1, per_head=True, echo=False).message
    says(message, "head 0's is never made: your code makes heads 1 and 2's only",
         "every head from 0 to 2 needs its own pass")  # fmt: skip
    assert "again" not in message
    # the wrong object: head 0's matrices in every pass do make a head again
    message = diagnose(loop_with_head_0_twice, per_head=True, echo=False).message
    assert "again" in message and "only" not in message, message


def masks_causally_always(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, t, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(b, t, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    mask = torch.ones(t, t, dtype=torch.bool).tril()  # the caller's mask replaced
    scores = scores.masked_fill(~mask, float("-inf"))
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def test_a_slip_seen_in_one_call_is_not_a_second_mistake_on_a_right_line():
    message = diagnose(masks_causally_always, echo=False).message
    says(message, "60 entries masked that the reference keeps", "this call passes no mask")
    assert "2 mistakes" not in message and "is right: look at what your code does" not in message


def scores_floor_divided(x, context, w_q, w_k, w_v, w_o, num_heads):
    b, t_q, d_model = x.shape
    t_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(b, t_q, num_heads, d_k).transpose(1, 2)
    k, v = ((context @ w.T).view(b, t_k, num_heads, d_k).transpose(1, 2) for w in (w_k, w_v))
    scores = q @ k.transpose(-2, -1) // math.sqrt(d_k)
    return (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t_q, d_model) @ w_o.T


def scores_not_scaled(x, context, w_q, w_k, w_v, w_o, num_heads):
    b, t_q, d_model = x.shape
    t_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(b, t_q, num_heads, d_k).transpose(1, 2)
    k, v = ((context @ w.T).view(b, t_k, num_heads, d_k).transpose(1, 2) for w in (w_k, w_v))
    scores = q @ k.transpose(-2, -1)
    return (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t_q, d_model) @ w_o.T


def test_a_floor_division_is_not_a_missing_scale():
    message = check_exercise(scores_floor_divided, "cross_attention", echo=False).message
    assert "no_scaling" not in message and "not scaled" not in message, message
    says(message, "Your scores q·kᵀ/√d_k differ from the reference's (largest difference 0.")
    gap = float(message.split("largest difference ")[1].split(",")[0])
    assert gap < 1  # a floor: every score within 1 of the right one
    # the wrong object: no division at all is no_scaling
    message = check_exercise(scores_not_scaled, "cross_attention", echo=False).message
    says(message, "no_scaling")


def induction_without_query_n(maps):
    t = maps.shape[-1]
    n = t // 2
    rows, cols = torch.arange(t)[:, None], torch.arange(t)[None, :]
    stripe = (cols == rows - n + 1) & (rows > n)  # query n left out
    return (maps * stripe).sum(dim=(-2, -1)).mean(dim=0) / n


def test_weights_summed_over_the_queries_are_compared_with_the_reference_s_sum():
    from helpers.checker.exercises import EXERCISES

    make_args, stages_of, _ = EXERCISES["induction_score"]
    maps = make_args()["maps"]
    n = maps.shape[-1] // 2
    left_out = maps[:, :, n, 1]  # the weights the slip leaves out of each head's sum
    message = check_exercise(induction_without_query_n, "induction_score", echo=False).message
    gap = float(message.split("largest difference ")[1].split(",")[0])
    assert gap == round(float(left_out.max()), 3), message
    says(message, "each summed over the queries")
