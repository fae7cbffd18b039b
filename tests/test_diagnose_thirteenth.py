"""helpers.diagnose after the thirteenth trial's judge: scores made and floored on one line are
not "right" (the line's first product was); every head a loop never makes is named; a num_heads
argument set again inside the function is named as where the heads' number comes from; values
made from the keys in a tuple assignment (`k, v = ...`) are placed there. Each beside the wrong
object that must keep its message."""

import math

from helpers.diagnose import check_exercise, diagnose
from tests.diagnose_support import marked_lines


def scores_floored(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k
    scores = x @ w_qk @ x.transpose(-2, -1) // math.sqrt(d_k)  # <-
    return scores


def scores_floored_after(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k
    scores = x @ w_qk @ x.transpose(-2, -1) / math.sqrt(d_k)  # <-
    return scores.floor()


def test_a_tensor_made_wrong_on_the_line_that_made_a_right_one_is_not_called_right():
    message = check_exercise(scores_floored, "head_scores", echo=False).message
    assert "is right" not in message and "largest difference 0.999" in message, message
    # the wrong object: right scores, changed on the return line, are still called right
    (line,) = marked_lines(scores_floored_after)
    message = check_exercise(scores_floored_after, "head_scores", echo=False).message
    assert f"the tensor made on line {line}" in message and "is right" in message, message


def _loop(key_head):
    def my_attention(x, w_q, w_k, w_v, w_o):
        import torch

        d_k = w_q[0].shape[0]
        heads = []
        for i in range(len(w_q)):
            q, k, v = x @ w_q[i].T, x @ w_k[key_head(i)].T, x @ w_v[i].T
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
            heads.append(weights @ v)
        return torch.cat(heads, dim=-1) @ w_o.T

    return my_attention


def test_every_head_a_loop_never_makes_is_named():
    message = diagnose(_loop(lambda i: 0), per_head=True, echo=False).message
    assert "heads 1 and 2's are never made: in their place your code makes head 0's again" in (
        message
    ), message
    # the wrong object: one head skipped is one head named
    message = diagnose(_loop(lambda i: 0 if i == 1 else i), per_head=True, echo=False).message
    assert "head 1's is never made: in its place your code makes head 0's again" in message


def heads_set_again(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d_model = x.shape
    num_heads = 4  # <-
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(b, t, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    out = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def heads_written_in(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d_model = x.shape
    d_k = d_model // 4
    q, k, v = ((x @ w.T).view(b, t, 4, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    out = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def test_a_num_heads_argument_set_again_is_named_where_it_is_set():
    (line,) = marked_lines(heads_set_again)
    result = diagnose(heads_set_again, mask=False, echo=False)
    assert result.mistakes == ("num_heads_4",), result.message
    assert f"values set on line {line}: `num_heads = 4  # <-`" in result.message, result.message
    assert "the function sets num_heads again before it" in result.message
    assert "Remove the line that sets num_heads again" in result.message
    assert "whatever num_heads says" not in result.message
    # the wrong object: a 4 written into the cut itself keeps its own hint
    result = diagnose(heads_written_in, mask=False, echo=False)
    assert result.mistakes == ("num_heads_4",), result.message
    assert "sets num_heads again" not in result.message and "a number written in" in result.message


def values_from_keys_in_a_tuple(q, k, v):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), k.repeat_interleave(group, dim=1)  # <-
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)
    return weights @ v


def keys_multiplied(q, k, v):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)
    return weights @ k  # <-


def test_values_made_from_the_keys_in_a_tuple_assignment_are_placed_there():
    (line,) = marked_lines(values_from_keys_in_a_tuple)
    result = check_exercise(values_from_keys_in_a_tuple, "shared_kv", echo=False)
    assert result.mistakes == ("keys_as_values",) and result.lines == (line,), result.message
    # the wrong object: right values, and the keys multiplied on the return line: placed there
    (line,) = marked_lines(keys_multiplied)
    result = check_exercise(keys_multiplied, "shared_kv", echo=False)
    assert result.mistakes == ("keys_as_values",) and result.lines == (line,), result.message


def keys_multiplied_after_one_line(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T  # noqa: F841 - v made, then k used: the slip
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    return weights @ k  # <-


def test_keys_multiplied_after_q_k_v_made_on_one_line_are_placed_where_they_are_multiplied():
    """The wrong object of the tuple rule: k and v made on one line, both right; the slip is the
    product."""
    (line,) = marked_lines(keys_multiplied_after_one_line)
    result = check_exercise(keys_multiplied_after_one_line, "one_head", echo=False)
    assert result.mistakes == ("keys_as_values",) and result.lines == (line,), result.message
