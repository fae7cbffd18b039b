"""helpers.diagnose on slips a second round of cold tries found: a masked score filled with a
finite number (the leak hides under the tolerance), d_k and num_heads swapped, a causal mask inside
F.scaled_dot_product_attention where none is asked for, state kept between calls, and a merge
blamed on its own line after an earlier slip. Each learner function is written by hand, one slip,
with the line the message must point at marked `# <-`."""

import inspect
import math

import torch
import torch.nn.functional as F

from helpers.diagnose import check_exercise, diagnose


def marked_line(fn) -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, line in enumerate(lines) if "# <-" in line)


def says(message: str, *texts: str) -> None:
    for text in texts:
        assert text in message, f"{text!r} missing from:\n{message}"


def mask_filled_with_minus_ten(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), -10.0)  # <-
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def mask_filled_with_minus_1e9(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), -1e9)
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def test_a_finite_fill_is_named_even_when_the_output_is_within_tolerance():
    result = diagnose(mask_filled_with_minus_ten, echo=False)
    assert not result.ok
    assert result.mistakes == ("mask_filled_with_a_finite_number",), result.message
    assert list(result.lines) == [marked_line(mask_filled_with_minus_ten)]
    says(result.message, "finite value (-10) instead of −inf", "under the check's tolerance")
    # -1e9 gives exactly 0 after the softmax: no leak, a ✓
    assert diagnose(mask_filled_with_minus_1e9, echo=False).ok


def mask_multiplied_in_after_the_softmax(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
    if mask is not None:  # the hidden keys' weights set to 0, each row divided by its new sum
        weights = weights * mask.unsqueeze(1)
        weights = weights / weights.sum(-1, keepdim=True)
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def mask_multiplied_into_a_finite_fill(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:  # the mask multiplied into the scores: hidden scores 0, not -inf
        scores = scores.masked_fill(~mask.unsqueeze(1), -10.0)  # <-
        scores = scores * mask.unsqueeze(1)
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def test_weights_zeroed_after_the_softmax_and_renormalised_are_right():
    """The softmax of the unmasked scores leaks, but its hidden weights are set to exactly 0
    before they reach the values: a right way to mask, not a finite fill."""
    assert diagnose(mask_multiplied_in_after_the_softmax, echo=False).ok
    # zeros made later, in the scores rather than the weights, do not hide a leak from the check
    result = diagnose(mask_multiplied_into_a_finite_fill, echo=False)
    assert not result.ok


def d_k_and_num_heads_swapped(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = num_heads
    h = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, h, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))  # <-
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def four_heads_written_in(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // 4
    q, k, v = ((x @ w.T).view(B, T, 4, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))  # <-
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def test_d_k_and_num_heads_swapped_is_said_so_and_a_written_4_is_not():
    swapped = diagnose(d_k_and_num_heads_swapped, echo=False)
    assert not swapped.ok
    assert list(swapped.lines) == [marked_line(d_k_and_num_heads_swapped)], swapped.message
    says(swapped.message, "d_k and num_heads are swapped", "4 heads of 3 here")
    written = diagnose(four_heads_written_in, echo=False)
    assert not written.ok
    assert "swapped" not in written.message, written.message
    says(written.message, "a number written in")


def sdpa_causal(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # <-
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def sdpa_scaled_twice(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    q = q / math.sqrt(q.shape[-1])
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_causal_mask_inside_sdpa_is_named_and_an_unseen_difference_is_not_guessed():
    causal = diagnose(sdpa_causal, echo=False, mask=False)
    assert not causal.ok
    assert list(causal.lines) == [marked_line(sdpa_causal)], causal.message
    says(causal.message, "with a causal mask", "is_causal=True")
    other = diagnose(sdpa_scaled_twice, echo=False, mask=False)
    assert not other.ok
    assert "causal" not in other.message, other.message


KEPT = {}


def keys_kept_from_the_first_call(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    if "k" not in KEPT:
        KEPT["k"] = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = KEPT["k"]
    q, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


CALLS = []


def scaled_from_the_second_call(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    CALLS.append(1)
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T * (1.0 if len(CALLS) == 1 else 2.0)


def test_state_kept_between_calls_is_named_not_only_blamed_on_the_sizes():
    KEPT.clear()
    kept = diagnose(keys_kept_from_the_first_call, echo=False)
    assert not kept.ok
    says(kept.message, "other values at the same sizes", "the dict KEPT", "reuse what an earlier")
    CALLS.clear()
    again = diagnose(scaled_from_the_second_call, echo=False, mask=False)
    assert not again.ok
    says(again.message, "a second call with the same inputs is not", "the list CALLS")


def test_a_right_function_with_no_state_gets_no_state_message():
    """The wrong object: a right function that keeps nothing must still get its ✓."""
    assert diagnose(mask_filled_with_minus_1e9, echo=False, mask=False).ok


# --- a second cold trial: which line, and how many heads --------------------------------------


def _cut(t, i, num_heads, d_k):
    if i == num_heads:
        return []
    return [t[..., i * d_k : (i + 1) * d_k]] + _cut(t, i + 2, num_heads, d_k)  # <-


def split_by_a_recursion_that_never_ends(t, num_heads):
    return torch.stack(_cut(t, 0, num_heads, t.shape[-1] // num_heads), dim=1)


def test_a_recursion_error_names_the_learners_line_not_the_standard_librarys():
    result = check_exercise(split_by_a_recursion_that_never_ends, "split_heads", echo=False)
    assert not result.ok
    says(result.message, "RecursionError", f"(line {marked_line(_cut)}: `return [t[...,")


def view_with_d_k_and_num_heads_swapped(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, d_k, num_heads).transpose(1, 2) for w in (w_q, w_k, w_v))  # <-
    out = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_cut_into_other_heads_says_what_the_cut_is_and_nothing_after_it():
    """The wrong object: 'cut into 1 head' (what explained most) and a second finding after it."""
    result = diagnose(view_with_d_k_and_num_heads_swapped, echo=False, mask=False)
    assert not result.ok and len(result.findings) == 1, result.message
    assert list(result.lines) == [marked_line(view_with_d_k_and_num_heads_swapped)]
    says(result.message, "cut into 4 heads of 3 features", "d_k and num_heads are swapped")
    assert "1 head" not in result.message


def keys_made_with_w_q(x, w_q, w_k, w_v):
    q = x @ w_q.T
    k = x @ w_q.T  # <-
    v = x @ w_v.T
    scores = q @ k.transpose(-2, -1) / math.sqrt(w_q.shape[0])
    return scores.softmax(-1) @ v


def test_keys_made_with_w_q_are_blamed_on_the_keys_line_not_the_scores():
    result = check_exercise(keys_made_with_w_q, "one_head", echo=False)
    assert result.mistakes == ("keys_from_w_q",), result.message
    assert list(result.lines) == [marked_line(keys_made_with_w_q)]


def split_with_overlapping_slices(t, num_heads):
    d_k = t.shape[-1] // num_heads
    heads = [t[:, :, i : i + d_k] for i in range(num_heads)]  # <-
    return torch.stack(heads, dim=1)


def test_a_stack_of_wrong_slices_names_both_lines_and_says_it_cannot_tell_which():
    result = check_exercise(split_with_overlapping_slices, "split_heads", echo=False)
    assert not result.ok
    line = marked_line(split_with_overlapping_slices)
    says(result.message, f"It is made from line {line}:", "the check cannot tell whether the slip")


def queries_grouped_in_the_wrong_order(q, k, v):
    B, h, T, d = q.shape
    g = k.size(1)
    grouped = q.view(B, h // g, g, T, d)  # query head i lands in group i mod g
    s = grouped @ k.unsqueeze(1).transpose(-2, -1) / d**0.5
    o = s.softmax(-1) @ v.unsqueeze(1)
    return o.reshape(B, h, T, d)  # <-


def test_a_mistake_first_seen_at_the_output_names_the_lines_the_check_could_not_compare():
    """15: the query heads grouped (h/g, g) in a 5-D view: head i reads K/V head i mod g
    (kv_tiled), but no tensor before the output has a layout the check can compare, so the
    output's line is only where it is first seen: the message says so and lists the lines."""
    result = check_exercise(queries_grouped_in_the_wrong_order, "shared_kv", echo=False)
    assert result.mistakes == ("kv_tiled",), result.message
    line = marked_line(queries_grouped_in_the_wrong_order)
    assert list(result.lines) == [line]
    says(
        result.message,
        f"what line {line - 3}: `grouped = q.view(B, h // g, g, T, d)",
        f"; line {line - 2}: `s = grouped @ k",
        f"and line {line - 1}: `o = s.softmax(-1) @ v.unsqueeze(1)` make with the reference",
        "the slip may be there or on this line",
        "pairs each query head with a K/V head",
    )
    # where the block of keys per query head is made on its own line, that line alone is named
    right_line = check_exercise(keys_repeated_as_one_block, "shared_kv", echo=False)
    assert list(right_line.lines) == [marked_line(keys_repeated_as_one_block)]
    assert "first sees it" not in right_line.message, right_line.message


def keys_repeated_as_one_block(q, k, v):
    rep = q.shape[1] // k.shape[1]
    k = k.repeat(1, rep, 1, 1)  # <-
    v = v.repeat_interleave(rep, dim=1)
    return F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def mask_repeated_in_the_wrong_order(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    if mask is not None:
        m = mask.repeat(num_heads, 1, 1).view(B, num_heads, T, T)  # batch and heads mixed up
        scores = scores.masked_fill(~m, float("-inf"))  # <-
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_mask_made_on_another_line_is_named_as_a_place_the_slip_may_be():
    """The check does not trace boolean masks: a mask built wrong on its own line shows where
    it is applied, and the message names both lines, not only the masked_fill."""
    result = diagnose(mask_repeated_in_the_wrong_order, echo=False)
    assert not result.ok
    line = marked_line(mask_repeated_in_the_wrong_order)
    assert list(result.lines) == [line]
    says(
        result.message,
        f"The mask this line applies is made on line {line - 1}: `m = mask.repeat",
        "the slip may be in that mask or on this line",
    )
    # a finite fill is the fill's own slip: no word about where the mask is made
    filled = diagnose(mask_filled_with_minus_ten, echo=False)
    assert "The mask this line applies" not in filled.message


def context_first(context, x, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (context @ w_v.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def w_k_before_w_q_and_wrong(x, w_k, w_q, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    out = (q @ k.transpose(-2, -1)).softmax(-1) @ v  # no scale
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_parameters_in_another_order_are_said_so_once_not_as_two_mistakes():
    """A signature (context, x, ...) receives x as `context`: one slip, said as what each
    parameter receives, and whether the function is right given its arguments by name."""
    result = check_exercise(context_first, "cross_attention", echo=False)
    assert not result.ok and result.findings == ()
    says(
        result.message,
        "your `context` receives the check's x",
        "your `x` receives the check's context",
        "your function is right",
    )
    wrong = diagnose(w_k_before_w_q_and_wrong, echo=False)
    assert not wrong.ok
    says(wrong.message, "your `w_k` receives the check's w_q", "it still differs")
    assert "your function is right" not in wrong.message


def d_k_read_from_the_wrong_dim(x, w_q, w_k):
    d_k = w_q.shape[1]  # d_model, not one head's d_k
    scale = 1 / math.sqrt(d_k)
    w_qk = w_q.T @ w_k
    return x @ w_qk @ x.transpose(-2, -1) * scale  # <-


def heads_in_reverse_order(x, w_q, w_k, w_v, w_o):
    heads = []
    for i in reversed(range(len(w_q))):  # the slip: the heads come out last first
        q, k, v = x @ w_q[i].T, x @ w_k[i].T, x @ w_v[i].T  # <-
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
        heads.append(weights @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def test_a_slip_in_a_number_or_a_loop_names_the_lines_the_check_could_not_compare():
    """A scale read from the wrong dim two lines up, or a loop that visits the heads in another
    order, shows on a later line whose own op is right: the message names the earlier lines
    that set what it reads, and says the slip may be there."""
    scaled = check_exercise(d_k_read_from_the_wrong_dim, "head_scores", echo=False)
    assert scaled.mistakes == ("scaled_by_d_model",), scaled.message
    line = marked_line(d_k_read_from_the_wrong_dim)
    assert list(scaled.lines) == [line]
    says(scaled.message, f"line {line - 2}: `scale = 1 / math.sqrt(d_k)`",
         f"line {line - 3}: `d_k = w_q.shape[1]", "the slip may be there")  # fmt: skip
    order = diagnose(heads_in_reverse_order, per_head=True, echo=False)
    line = marked_line(heads_in_reverse_order)
    assert list(order.lines) == [line]
    says(order.message, f"line {line - 1}: `for i in reversed(range(len(w_q))):")
    # a scale slip on its own line with nothing read from elsewhere gets no such note
    own = check_exercise(lambda x, w_q, w_k: x @ w_q.T @ w_k @ x.mT, "head_scores", echo=False)
    assert "It reads values set on" not in own.message, own.message


def calls_itself_without_a_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    if mask is None:
        return calls_itself_without_a_mask(x, w_q, w_k, w_v, w_o, num_heads, mask)  # <-
    return x


def test_a_recursion_names_the_line_that_calls_itself_not_the_deepest_comparison():
    result = diagnose(calls_itself_without_a_mask, echo=False)
    assert not result.ok
    says(result.message, "RecursionError", f"(line {marked_line(calls_itself_without_a_mask)}: ")


def values_made_from_the_keys(q, k, v):
    group = q.size(1) // k.size(1)
    v = k.repeat_interleave(group, dim=1)  # <-
    k = k.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return scores.softmax(dim=-1) @ v


def test_values_made_from_the_keys_are_blamed_on_the_line_that_makes_them():
    result = check_exercise(values_made_from_the_keys, "shared_kv", echo=False)
    assert result.mistakes == ("keys_as_values",), result.message
    assert list(result.lines) == [marked_line(values_made_from_the_keys)]
