"""helpers.diagnose after the sixteenth trial's judges: each message that was false, with the
learner that showed it (written out here by hand) and what the message must now say or not say."""

import math

import numpy as np
import torch

from helpers.diagnose import check_exercise, diagnose
from tests.diagnose_support import marked_lines
from tests.messages import says


def first_row_of_the_mask_only(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        keep = mask[:, :1].unsqueeze(1)  # <- every query gets query 0's row
        scores = scores.masked_fill(~keep, float("-inf"))
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_mask_read_from_its_first_row_only_is_refused():
    """Padding masks have every query row alike: a causal one shows the slip (it got a ✓)."""
    result = diagnose(first_row_of_the_mask_only, echo=False)
    assert not result.ok, result.message
    says(result.message, "but not with a mask whose rows differ", "does each query get its own row")


def softmax_masked_then_softmaxed_again(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(dim=-1)  # <-
    out = weights @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_mask_followed_by_a_softmax_is_not_called_a_mask_after_the_softmax():
    """Its rows sum to 1: 'mask_after_softmax' (rows that no longer sum to 1) was false, and so
    were the 45 entries said to be masked that the reference keeps."""
    result = diagnose(softmax_masked_then_softmaxed_again, echo=False)
    assert not result.ok
    for false in ("mask_after_softmax", "masked that the reference keeps", "4 mistakes"):
        assert false not in result.message, result.message
    # the weights it uses are the ones that differ: shown there, not at its right last line
    assert list(result.lines) == marked_lines(softmax_masked_then_softmaxed_again), result.message
    says(result.message, "Your weights (the softmax of the scores) differ")


def cut_by_a_reshape_then_a_permute(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads

    def heads(t):
        return t.reshape(B, d_k, T, num_heads).permute(0, 3, 2, 1)  # <-

    q, k, v = heads(x @ w_q.T), heads(x @ w_k.T), heads(x @ w_v.T)
    out = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_reshape_undone_by_a_permute_is_not_called_a_cut_into_other_heads():
    """(B, d_k, T, h) then permuted: num_heads heads of d_k, each mixing tokens. It was named
    num_heads_4 with 'd_k and num_heads are swapped'; its output is no 4-head cut's."""
    result = diagnose(cut_by_a_reshape_then_a_permute, mask=False, echo=False)
    assert not result.ok and result.mistake is None, result.message
    assert list(result.lines) == marked_lines(cut_by_a_reshape_then_a_permute), result.message
    assert "swapped" not in result.message and "4 heads" not in result.message


def softmax_over_queries_in_numpy(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    s = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).numpy()
    e = np.exp(s - s.max())
    weights = torch.from_numpy(e / e.sum(axis=1, keepdims=True))  # <-
    return weights @ v


def test_a_slip_made_outside_torch_names_the_lines_the_check_could_not_see():
    result = check_exercise(softmax_over_queries_in_numpy, "one_head", echo=False)
    assert result.mistake == "softmax_over_queries", result.message
    line = marked_lines(softmax_over_queries_in_numpy)[0]
    says(result.message, f"It reads values set on line {line}:")


def weights_times_the_queries(x, w_q, w_k, w_v, w_o):
    outs = []
    for wq, wk, wv in zip(w_q, w_k, w_v, strict=True):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T  # noqa: F841 - v made, never used
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
        outs.append(weights @ q)  # <-
    return torch.cat(outs, dim=-1) @ w_o.T


def test_a_loops_difference_is_said_to_be_one_pass_and_an_empty_list_is_not_suspected():
    result = diagnose(weights_times_the_queries, per_head=True, echo=False)
    says(result.message, "in head 0's pass")
    assert "outs = []" not in result.message, result.message


def scores_transposed_by_the_einsum(x, w_q, w_k):
    w_qk = (w_q.T @ w_k).numpy()
    s = np.einsum("bsm,mn,btn->bts", x.numpy(), w_qk, x.numpy())  # <-
    return torch.from_numpy(s) / math.sqrt(w_q.shape[0])


def test_a_right_w_qk_rules_out_w_qk_reversed():
    """The output equals the reversed W_QK's, but the learner's own W_QK is the right one."""
    result = check_exercise(scores_transposed_by_the_einsum, "head_scores", echo=False)
    assert result.mistake is None, result.message
    says(result.message, "transposed")


def tokens_normalised_first(x, w_q, w_k):
    w_qk = w_q.T @ w_k
    x_n = x / x.norm(dim=-1, keepdim=True)  # <-
    return x_n @ w_qk @ x_n.transpose(-2, -1) / math.sqrt(w_q.shape[0])


def test_a_difference_measured_from_the_learners_own_step_says_so():
    """The scores' 0.34 was against the reference's steps applied to the learner's x·W_QK."""
    result = check_exercise(tokens_normalised_first, "head_scores", echo=False)
    if "largest difference 0.34" in result.message:
        says(result.message, "measured from your own")
    assert torch.is_tensor(torch.zeros(1))


# --- the seventeenth trial's judges -------------------------------------------------------------


def one_sequence_left_out(x, w_q, w_k, w_v):
    B, T, _ = x.shape
    out = torch.zeros(B, T, w_v.shape[0])
    for b in range(B - 1):  # <- the last sequence is never computed
        q, k, v = x[b] @ w_q.T, x[b] @ w_k.T, x[b] @ w_v.T
        out[b] = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v
    return out


def test_a_buffer_of_zeros_is_not_taken_for_the_queries():
    """`out = torch.zeros(B, T, d_k)` has q's shape: it was said to be 'your queries', 1.92 off."""
    message = check_exercise(one_sequence_left_out, "one_head", echo=False).message
    assert "queries" not in message.split("\n")[0], message
    line = marked_lines(one_sequence_left_out)[0]
    assert f"line {line}:" in message, message


def scaled_in_numpy(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    s = (q @ k.transpose(-2, -1)).numpy() / q.shape[-1] ** 0.5
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    weights = torch.from_numpy(e / e.sum(axis=-2, keepdims=True))  # <- over the queries
    return weights @ v


def test_a_scale_applied_in_numpy_is_not_called_missing():
    message = check_exercise(scaled_in_numpy, "one_head", echo=False).message
    for false in ("no_scaling", "scaled_after_softmax", "are not scaled"):
        assert false not in message, message
    says(
        message,
        "this line goes through numpy, which the check cannot follow; it compares what "
        "`matmul` returns on this line",
    )
