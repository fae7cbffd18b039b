"""helpers.diagnose after the nineteenth and twentieth trials' judges (120 attempts each; 5 false
messages each, and a wrong answer given a ✓): each false message's slip written again by hand, with
the line the message must name marked `# <-`, and, where a fix could go too far, the wrong object
beside it (right code, or the slip the old words were for)."""

import math

import numpy as np
import torch

from helpers.diagnose import check_exercise, diagnose
from tests.messages import marked, says


def returns_after_the_first_block(q, k, v, block):
    t_q, d_k = q.shape
    best = torch.full((t_q, 1), -math.inf)
    norm, out = torch.zeros(t_q, 1), torch.zeros(t_q, v.shape[-1])
    for first in range(0, k.shape[0], block):
        scores = q @ k[first : first + block].T / math.sqrt(d_k)
        new = torch.maximum(best, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new)
        shrink = torch.exp(best - new)
        norm = norm * shrink + weights.sum(-1, keepdim=True)
        out = out * shrink + weights @ v[first : first + block]
        best = new
        return out / norm  # <-


def returns_when_the_last_block_is_read(q, k, v, block):
    """Right: a `return` in the loop, under an `if` that holds at the last block only."""
    t_q, d_k = q.shape
    best = torch.full((t_q, 1), -math.inf)
    norm, out = torch.zeros(t_q, 1), torch.zeros(t_q, v.shape[-1])
    for first in range(0, k.shape[0], block):
        scores = q @ k[first : first + block].T / math.sqrt(d_k)
        new = torch.maximum(best, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new)
        shrink = torch.exp(best - new)
        norm = norm * shrink + weights.sum(-1, keepdim=True)
        out = out * shrink + weights @ v[first : first + block]
        best = new
        if first + block >= k.shape[0]:
            return out / norm


def test_a_return_inside_the_tiled_loop_is_named_on_its_own_line():
    message = check_exercise(returns_after_the_first_block, "tiled_attention", echo=False).message
    line = marked(returns_after_the_first_block)
    loop = f"is inside the loop that starts on line {line - 8}"
    says(message, f"Where: line {line}: `return out / norm", loop, "returns while that loop is "
         "still running", "after the loop")  # fmt: skip
    assert "look at what this line computes at block 1" not in message, message
    # the wrong object: a return in the loop that is right (under an `if` at the last block)
    right = check_exercise(returns_when_the_last_block_is_read, "tiled_attention", echo=False)
    assert right.ok, right.message


def shared_kv_repeated_by_numpy_without_an_axis(q, k, v):
    b, h, t, d_k = q.shape
    g = k.shape[1]
    k = torch.from_numpy(np.repeat(k.numpy(), h // g)).view(b, h, t, d_k)  # <-
    v = torch.from_numpy(np.repeat(v.numpy(), h // g, axis=1))
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d_k), dim=-1) @ v


def test_a_line_through_numpy_names_the_op_whose_result_is_compared():
    """The op here comes after the numpy round trip: the check compares what `view` returns,
    and no longer says it sees the tensor before `.numpy()`."""
    fn = shared_kv_repeated_by_numpy_without_an_axis
    message = check_exercise(fn, "shared_kv", echo=False).message
    says(message, f"Where: line {marked(fn)}:", "this line goes through numpy, which the check "
         "cannot follow; it compares what `view` returns on this line")  # fmt: skip
    assert "before `.numpy()`" not in message, message


def one_head_with_v_divided(x, w_q, w_k, w_v):
    q, k = x @ w_q.T, x @ w_k.T
    v = (x @ w_v.T) / math.sqrt(q.shape[-1])  # <-
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def heads_with_v_divided(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v, strict=True):
        q, k = x @ wq.T, x @ wk.T
        v = x @ wv.T / math.sqrt(wq.shape[0])  # <-
        heads.append(torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def fused_with_v_divided(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d = x.shape
    d_k = d // num_heads
    q, k, v = ((x @ w.T).view(b, t, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    v = v / math.sqrt(d_k)  # <-
    out = torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d) @ w_o.T


def one_head_scaled_after_the_softmax(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(q.shape[-1]) @ v  # <-


def test_v_divided_by_the_root_of_d_k_is_named_on_v_s_line():
    """weights·(v/√d_k) equals (weights/√d_k)·v: the output is scaled_after_softmax's, but the
    division is on the line that makes v, in 01, 03 and 06 alike; the wrong object, a division
    after the softmax, keeps the catalogue's words and its own line."""
    for fn, run in (
        (one_head_with_v_divided, lambda f: check_exercise(f, "one_head", echo=False)),
        (heads_with_v_divided, lambda f: diagnose(f, per_head=True, echo=False)),
        (fused_with_v_divided, lambda f: diagnose(f, mask=False, echo=False)),
    ):
        message = run(fn).message
        says(message, "√d_k divides the values v, not the scores", f"Where: line {marked(fn)}:",
             "the division by √d_k belongs to the scores, before the softmax")  # fmt: skip
        assert "It is used in that role" not in message, message
    fn = one_head_scaled_after_the_softmax
    message = check_exercise(fn, "one_head", echo=False).message
    says(message, "scaled_after_softmax", f"Where: line {marked(fn)}:")
    assert "divides the values v" not in message, message


def scores_of_the_queries_with_themselves(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v, strict=True):
        q = x @ wq.T
        k = x @ wk.T
        v = x @ wv.T
        scores = q @ q.transpose(-2, -1) / math.sqrt(k.shape[-1])  # <-
        heads.append(scores.softmax(-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def keys_made_with_w_q(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, _, wv in zip(w_q, w_k, w_v, strict=True):
        q = x @ wq.T
        k = x @ wq.T  # <-
        v = x @ wv.T
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        heads.append(scores.softmax(-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def test_keys_made_right_then_q_times_q_is_not_called_keys_made_with_w_q():
    """q·qᵀ gives the output of keys made with w_q; when the learner's k is right, the message
    names the scores' line, says k is right, and sends to the scores, not to the line making k.
    The wrong object: k really made with w_q keeps the catalogue's words, on k's line."""
    fn = scores_of_the_queries_with_themselves
    message = diagnose(fn, per_head=True, echo=False).message
    k_line = marked(fn) - 2
    says(message, "the queries stand where the keys go (q·qᵀ)", f"Where: line {marked(fn)}:",
         f"your k, made on line {k_line}, is right", "this line should use your k")  # fmt: skip
    assert "look at the line that makes k" not in message, message
    fn = keys_made_with_w_q
    message = diagnose(fn, per_head=True, echo=False).message
    says(message, "the keys are made with w_q, not w_k", f"line {marked(fn)}:")
    assert "stand where the keys go" not in message, message


def fused_cut_into_d_k_by_tokens(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d = x.shape
    d_k = d // num_heads

    def heads_of(y):
        return y.view(b, t, d_k, num_heads).transpose(1, 3)  # <-

    q, k, v = heads_of(x @ w_q.T), heads_of(x @ w_k.T), heads_of(x @ w_v.T)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(b, t, d) @ w_o.T


def fused_in_the_layout_before_the_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    """Right: q, k, v kept as (B, T, h, d_k), the heads' dim carried by einsum."""
    b, t, d = x.shape
    q, k, v = ((x @ w.T).view(b, t, num_heads, -1) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // num_heads)
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
    return out.reshape(b, t, d) @ w_o.T


def test_a_cut_into_b_h_d_k_t_is_named_in_the_helper_that_cuts_not_where_k_is_transposed():
    """The helper's view(B, T, d_k, h).transpose(1, 3) gives (B, h, d_k, T); the scores' line,
    whose k.transpose(-2, -1) happens to make a (B, h, T, d_k) tensor, cut nothing."""
    fn = fused_cut_into_d_k_by_tokens
    message = diagnose(fn, mask=False, echo=False).message
    says(message, f"Where: line {marked(fn)}:", "your cut gives them shape (2, 3, 4, 5) on this "
         "line, where the reference's are (B, h, T, d_k) = (2, 3, 5, 4)")  # fmt: skip
    right = diagnose(fused_in_the_layout_before_the_transpose, mask=False, echo=False)
    assert right.ok, right.message


def running_maximum_from_zero(q, k, v, block):
    t_q, d_k = q.shape
    best = torch.zeros(t_q, 1)  # <-
    norm, out = torch.zeros(t_q, 1), torch.zeros(t_q, v.shape[-1])
    for first in range(0, k.shape[0], block):
        scores = q @ k[first : first + block].T / math.sqrt(d_k)
        new = torch.maximum(best, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new)
        shrink = torch.exp(best - new)
        norm = norm * shrink + weights.sum(-1, keepdim=True)
        out = out * shrink + weights @ v[first : first + block]
        best = new
    return out / norm


def test_a_running_maximum_from_zero_is_refused_where_a_row_s_scores_are_all_low():
    """Exact in arithmetic, and right at the check's sizes and at ±170 (every row has a score
    above 0 there): it was accepted. A row whose scores all lie below −103 underflows to 0 / 0."""
    message = check_exercise(running_maximum_from_zero, "tiled_attention", echo=False).message
    says(message, "✗ Right at the check's three sets of sizes and with large scores, but not",
         "whose scores all lie between −227 and −142", "holds NaN", "starting from −∞")  # fmt: skip
    right = check_exercise(returns_when_the_last_block_is_read, "tiled_attention", echo=False)
    says(right.message, "and with one query's scores all between −227 and −142")


def split_with_d_k_from_a_four(t, num_heads):
    b, t_len, d_model = t.shape
    size = d_model // 4  # <-
    return t.reshape(b, t_len, -1, size).transpose(1, 2)


def split_into_four_on_the_cut_line(t, num_heads):
    b, t_len, d_model = t.shape
    return t.view(b, t_len, 4, d_model // 4).transpose(1, 2)  # <-


def test_a_number_of_heads_written_on_another_line_is_named_there():
    """The cut reads its width from a line that writes 4: the hint names that line, not "this
    line"; the wrong object, 4 written on the cut's own line, keeps "on this line"."""
    fn = split_with_d_k_from_a_four
    message = check_exercise(fn, "split_heads", echo=False).message
    says(message, "num_heads_4", f"look at the number 4 written on line {marked(fn)} (`size = "
         "d_model // 4  # <-`): the code cuts 4 heads")  # fmt: skip
    fn = split_into_four_on_the_cut_line
    message = check_exercise(fn, "split_heads", echo=False).message
    says(message, f"Where: line {marked(fn)}:", "look at the number 4 written on this line")


# --- the twentieth trial (120 attempts): its five false messages --------------------------------


def exp_called_and_dropped(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores.exp()  # <-
    return scores / scores.sum(dim=-1, keepdim=True) @ v


def exp_kept(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).exp()
    return scores / scores.sum(dim=-1, keepdim=True) @ v


def test_a_method_whose_result_is_dropped_is_named_as_dropped():
    """`scores.exp()` alone on its line: its result was compared as the weights ("differ by
    3.67"), though the weights the code goes on with are made without it."""
    fn = exp_called_and_dropped
    message = check_exercise(fn, "one_head", echo=False).message
    says(message, "are made without what this line computes: `exp` returns a new tensor, and "
         "nothing keeps it", f"Where: line {marked(fn)}:")  # fmt: skip
    assert check_exercise(exp_kept, "one_head", echo=False).ok


def one_sequence_at_a_time_max_without_keepdim(x, w_q, w_k, w_v):
    rows = []
    for b in range(x.shape[0]):
        q, k, v = x[b] @ w_q.T, x[b] @ w_k.T, x[b] @ w_v.T
        s = q @ k.T / math.sqrt(q.shape[-1])
        e = torch.exp(s - s.max(dim=-1).values)
        rows.append(e / e.sum(dim=-1, keepdim=True) @ v)
    return torch.stack(rows)  # <-


def test_a_loop_over_the_batch_is_not_taken_for_the_queries():
    """No tensor of a per-sequence loop stands for a step the check follows: the returned stack
    was compared as "your queries" (differ by 2.19). Now the output is, with its real difference."""
    fn = one_sequence_at_a_time_max_without_keepdim
    message = check_exercise(fn, "one_head", echo=False).message
    says(message, "Your output (weights·v) differs from the reference's", f"line {marked(fn)}:")
    assert "queries" not in message.splitlines()[0], message


def fused_split_by_num_heads_in_a_helper(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d = x.shape

    def heads(y):
        return torch.stack(y.split(num_heads, dim=-1), dim=1)  # <-

    q, k, v = heads(x @ w_q.T), heads(x @ w_k.T), heads(x @ w_v.T)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // num_heads), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(b, t, d) @ w_o.T


def test_pieces_of_a_split_are_not_taken_for_the_cut():
    """split(num_heads) then stack: the cut is (B, d_model / num_heads, T, num_heads), the known
    swap; it was said to be the split's pieces' shape, (2, 5, 3)."""
    fn = fused_split_by_num_heads_in_a_helper
    message = diagnose(fn, mask=False, echo=False).message
    says(message, "d_k and num_heads are swapped", f"Where: line {marked(fn)}:")
    assert "your cut gives them shape" not in message, message


def masked_in_place_on_a_copy(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, t, d = x.shape
    q, k, v = ((x @ w.T).view(b, t, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)
    hidden = scores.clone()
    if mask is not None:
        hidden.masked_fill_(~mask.unsqueeze(1), float("-inf"))  # <-
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d) @ w_o.T


def masked_without_assigning(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, t, d = x.shape
    q, k, v = ((x @ w.T).view(b, t, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)
    if mask is not None:
        scores.masked_fill(~mask.unsqueeze(1), float("-inf"))  # <-
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d) @ w_o.T


def test_an_in_place_mask_on_a_tensor_nobody_reads_is_not_called_thrown_away():
    """masked_fill_ masks its copy (it does not return a new tensor to throw away); the softmax
    reads the other tensor. The wrong object, masked_fill not assigned, keeps its words."""
    fn = masked_in_place_on_a_copy
    message = diagnose(fn, echo=False).message
    says(message, "mask_ignored", f"Where: line {marked(fn)}:", "masked_fill_ masks its tensor "
         "in place", f"the softmax on line {marked(fn) + 1} reads another tensor")  # fmt: skip
    assert "returns a new tensor" not in message, message
    message = diagnose(masked_without_assigning, echo=False).message
    says(message, "masked_fill returns a new tensor and leaves its input as it was")


def keys_tiled_values_repeated_in_numpy(q, k, v):
    b, h, t, d_k = q.shape
    group = h // k.shape[1]
    keys = torch.from_numpy(np.tile(k.numpy(), (1, group, 1, 1)))
    values = torch.from_numpy(np.repeat(v.numpy(), group, axis=1))
    return torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ values


def test_a_difference_after_a_named_mistake_says_what_it_is_measured_against():
    """Keys tiled, values repeated right, both in numpy (the check sees neither): kv_tiled is
    named, and the output's further difference is measured against the reference with kv_tiled
    made in it (k and v both), which the message now says."""
    message = check_exercise(keys_tiled_values_repeated_in_numpy, "shared_kv", echo=False).message
    says(message, "kv_tiled", "measured against the reference with kv_tiled made in it")


# --- the twenty-first trial (124 attempts) ------------------------------------------------------


def heads_through_numpy_softmax_over_the_queries(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v, strict=True):
        q, k, v = ((x @ w.T).numpy() for w in (wq, wk, wv))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        heads.append(torch.from_numpy(e / e.sum(axis=1, keepdims=True) @ v))  # slip: axis
    return torch.cat(heads, dim=-1) @ w_o.T  # <-


def test_a_step_handed_to_numpy_is_not_taken_for_the_heads_outputs():
    """x·W_i^Q, right, then .numpy(): the check saw it as the heads' outputs ("look at what the
    weights multiply on this line", on the line making q). Now the output's difference, with the
    lines it reads."""
    fn = heads_through_numpy_softmax_over_the_queries
    message = diagnose(fn, per_head=True, echo=False).message
    says(message, "Your output differs from the reference's", f"Where: line {marked(fn)}:")
    assert "look at what the weights multiply" not in message, message
