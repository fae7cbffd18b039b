"""helpers.diagnose after the twelfth trial's judge's borderline messages (true, but pointing the
learner at the wrong thing): a mask that reaches some heads otherwise than others is not sent to
the mask's condition and fill; a shape in another order made by a stack's dim is not sent to a
transpose; a difference in every head says so, not only where it is largest. Each beside the
wrong object that must keep its message."""

import math

import torch

from helpers.diagnose import check_exercise, diagnose


def _heads(x, w, num_heads):
    b, t, d_model = x.shape
    return (x @ w.T).view(b, t, num_heads, d_model // num_heads).transpose(1, 2)


def _masked(mask_scores):
    """09's fused attention, its scores masked by mask_scores(scores, mask)."""

    def attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        b, t, d_model = x.shape
        q, k, v = (_heads(x, w, num_heads) for w in (w_q, w_k, w_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads)
        if mask is not None:
            scores = mask_scores(scores, mask)
        out = scores.softmax(dim=-1) @ v
        return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T

    return attention


def _head_0_only(scores, mask):
    scores = scores.clone()
    scores[:, 0] = scores[:, 0].masked_fill(~mask, float("-inf"))
    return scores


def _inverted(scores, mask):
    return scores.masked_fill(mask[:, None], float("-inf"))


def test_a_mask_given_to_some_heads_only_is_sent_to_how_the_mask_reaches_the_heads():
    message = diagnose(_masked(_head_0_only), echo=False).message
    assert "only in heads 1, 2" in message, message
    assert "look at how the mask reaches each head" in message, message
    assert "condition" not in message, message
    # the wrong object: a mask inverted in every head keeps its own message
    message = diagnose(_masked(_inverted), echo=False).message
    assert "how the mask reaches each head" not in message, message


def _per_query_head(stack_dim):
    def attention(q, k, v):
        h, g = q.shape[1], k.shape[1]
        outs = []
        for i in range(h):
            j = i // (h // g)
            scores = q[:, i] @ k[:, j].mT / math.sqrt(q.shape[-1])
            outs.append(scores.softmax(-1) @ v[:, j])
        return torch.stack(outs, dim=stack_dim)

    return attention


def test_a_stack_along_the_wrong_dim_is_not_sent_to_a_transpose_alone():
    message = check_exercise(_per_query_head(2), "shared_kv", echo=False).message
    assert "got (2, 5, 4, 3)" in message, message
    assert "the dim a stack or cat joins along" in message, message
    assert check_exercise(_per_query_head(1), "shared_kv", echo=False).ok
    # the wrong object, code with no step that orders dims, keeps "that step is missing": in
    # test_diagnose_shapes.py


def _scores_floored(x, w_q, w_k, w_v, w_o, num_heads):  # 06's exercise
    b, t, d_model = x.shape
    q, k, v = (_heads(x, w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) // math.sqrt(d_model // num_heads)
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def test_a_difference_in_every_head_says_every_head():
    message = diagnose(_scores_floored, mask=False, echo=False).message
    assert "in every head, most of all in head" in message, message
    # the wrong object: a mask given to head 0 only differs in some heads, and says which
    message = diagnose(_masked(_head_0_only), echo=False).message
    assert "every head" not in message.split("Hint")[0], message
