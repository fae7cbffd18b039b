"""helpers.diagnose on where else a slip may be, after a cold review of the third trial's
messages: the values a line reads from earlier lines are followed to the line that made them (an
index `j = n - 1 - i`, a list filled at its front, an alias `v = k`), a scale only through what
the line computes with (not its indices or a reshape's sizes), every such line is named (none
dropped), and an argument changed in place after its last use leaves the diagnosis as it is.
Each learner function is written by hand, one slip, with the line the message must point at
marked `# <-` and the slip's own line marked `# slip`."""

import math

import torch
import torch.nn.functional as F

from helpers.checker.exercises import _inputs, _per_head_args
from helpers.diagnose import check_exercise, diagnose
from tests.messages import marked, says


def heads_read_through_a_reversed_index(x, w_q, w_k, w_v, w_o):
    heads = []
    n = len(w_q)
    for i in range(n):
        j = n - 1 - i  # slip
        q, k, v = x @ w_q[j].T, x @ w_k[j].T, x @ w_v[j].T  # <-
        heads.append((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def heads_put_at_the_front(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        heads.insert(0, (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v)  # slip
    return torch.cat(heads, dim=-1) @ w_o.T  # <-


def test_an_order_is_followed_to_the_index_and_the_list_call_that_set_it():
    """The heads come out in another order: a pass that reads another head's matrices is named
    on the line that reads them, with the index that chose them; heads made right and put at the
    list's front, on the cat, with the call that put them there. A size read from a shape cannot
    reorder and is not named."""
    for fn in (heads_read_through_a_reversed_index, heads_put_at_the_front):
        result = diagnose(fn, per_head=True, echo=False)
        assert list(result.lines) == [marked(fn)], result.message
        says(result.message, f"line {marked(fn, '# slip')}: `", "the slip may be there")
        assert "len(w_q)" not in result.message.split("It reads")[1], result.message


def scale_read_far_above(q, k, v):
    scale = q.shape[-2] ** -0.5  # slip: T, not d_k
    h, g = q.shape[1], k.shape[1]
    group = h // g
    outs = []
    for i in range(h):
        j = i // group
        s = q[:, i] @ k[:, j].transpose(-2, -1) * scale  # <-
        outs.append(s.softmax(dim=-1) @ v[:, j])
    return torch.stack(outs, dim=1)


def test_a_scale_is_followed_through_what_the_line_computes_with_and_no_line_is_dropped():
    """The scores are × a wrong number made five lines up; the line also reads i and j, which
    only index: the message names the scale's line, and not the loop's or the index's."""
    result = check_exercise(scale_read_far_above, "shared_kv", echo=False)
    assert list(result.lines) == [marked(scale_read_far_above)], result.message
    says(result.message, f"line {marked(scale_read_far_above, '# slip')}: `scale = q.shape[-2]")
    after = result.message.split("It reads")[1].split("Hint")[0]
    assert "for i in range(h)" not in after and "j = i // group" not in after, result.message


def output_doubled_after_a_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    out = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T * 2  # <-


def test_a_reshape_s_sizes_are_not_where_a_scale_comes_from():
    result = diagnose(output_doubled_after_a_reshape, mask=False, echo=False)
    assert list(result.lines) == [marked(output_doubled_after_a_reshape)], result.message
    says(result.message, "× 2")
    assert "It reads values set on" not in result.message, result.message


def values_aliased_to_the_keys(q, k, v):
    group = q.size(1) // k.size(1)
    v = k  # <-
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    return (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1) @ v


def values_aliased_and_used_at_once(q, k, v):
    group = q.size(1) // k.size(1)
    v = k  # <-
    k = k.repeat_interleave(group, dim=1)
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)
    return w @ v.repeat_interleave(group, dim=1)


def test_values_taken_from_the_keys_by_a_plain_assignment_are_blamed_there():
    """`v = k` makes no tensor, so no step of the trace is on its line: the line that later
    repeats or uses v is not the slip; the assignment is."""
    for fn in (values_aliased_to_the_keys, values_aliased_and_used_at_once):
        result = check_exercise(fn, "shared_kv", echo=False)
        assert result.mistakes == ("keys_as_values",), result.message
        assert list(result.lines) == [marked(fn)], result.message
        says(result.message, "look at what v is made from")


def x_zeroed_after_its_last_use(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    x.zero_()
    weights = (q @ k.transpose(-2, -1) / d_model).softmax(dim=-1)  # <-
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def x_zeroed_before_its_use(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    x.zero_()
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_an_argument_changed_after_its_last_use_leaves_the_diagnosis_standing():
    """x is zeroed once q, k and v are made: no later step reads it, so the scale slip after it
    is named on its line, with a note on the change; zeroed before its use, the check says it
    cannot tell the change from other slips."""
    after = diagnose(x_zeroed_after_its_last_use, mask=False, echo=False)
    assert list(after.lines) == [marked(x_zeroed_after_its_last_use)], after.message
    says(after.message, "changes its argument x in place", "the caller's x would change too")
    assert "cannot tell which differences" not in after.message, after.message
    before = diagnose(x_zeroed_before_its_use, mask=False, echo=False)
    says(before.message, "cannot tell which differences come from that change")
    assert not before.lines, before.message


def softmax_by_hand_over_everything(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    scores = q @ k.transpose(-2, -1) / math.sqrt(w_q.shape[0])
    e = torch.exp(scores)
    weights = e / e.sum()  # <- the sum of the whole tensor, not of each row
    return weights @ v


def test_weights_made_over_two_lines_are_blamed_on_the_line_that_finishes_them():
    """exp on one line, the division on the next: the weights are what the division makes, so
    that line is named, with the exp's line as a place the slip may be."""
    result = check_exercise(softmax_by_hand_over_everything, "one_head", echo=False)
    line = marked(softmax_by_hand_over_everything)
    assert list(result.lines) == [line], result.message
    says(result.message, "Your weights differ", f"line {line - 1}: `e = torch.exp(scores)`")


def scaled_twice(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k / math.sqrt(d_k)  # <-
    return x @ w_qk @ x.transpose(-2, -1) / math.sqrt(d_k)


def test_a_scale_hint_names_the_other_line_that_scales_not_its_own():
    result = check_exercise(scaled_twice, "head_scores", echo=False)
    line = marked(scaled_twice)
    assert list(result.lines) == [line], result.message
    says(result.message, f"your code also scales on line {line + 1};")
    assert f"also scales on line {line};" not in result.message


def mask_turned_round(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    if mask is not None:
        scores = scores.masked_fill(~mask.transpose(-2, -1).unsqueeze(1), float("-inf"))  # <-
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_nan_from_rows_with_every_key_masked_names_the_line_that_masked_them():
    """The mask transposed hides every key of some queries: the softmax makes NaN there. The
    message names the masking line and says the check's own mask leaves each query a key."""
    result = diagnose(mask_turned_round, echo=False)
    line = marked(mask_turned_round)
    says(
        result.message,
        "NaN",
        f"Its input, made on line {line}: `scores = scores.masked_fill(",
        "whose every score is −inf",
        "the check's mask leaves every query at least one key",
    )


def keys_made_with_w_v(x, w_q, w_k, w_v, w_o):
    outs = []
    for i in range(len(w_q)):
        q = x @ w_q[i].T
        k = x @ w_v[i].T  # <-
        v = x @ w_v[i].T
        outs.append(F.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v)
    return torch.cat(outs, dim=-1) @ w_o.T


def test_a_loop_s_tensor_is_compared_with_its_own_head_and_its_index_is_not_blamed():
    """Head 0's keys made with w_v: the largest difference is against head 0's keys (not the
    nearest of all heads'), and the loop's `i`, which only indexes, is not a place named."""
    result = diagnose(keys_made_with_w_v, per_head=True, echo=False)
    assert list(result.lines) == [marked(keys_made_with_w_v)], result.message
    args = _per_head_args(_inputs())  # the check's own inputs
    own = (args["x"] @ args["w_v"][0].T - args["x"] @ args["w_k"][0].T).abs().max()
    says(result.message, f"largest difference {float(own):.3g} in head 0's pass;")
    assert "It reads values set on" not in result.message, result.message


def causal_mask_out_of_habit(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))  # <-
    return (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def merged_interleaved_after_a_generator(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).reshape(B, T, num_heads, d_k).permute(0, 2, 1, 3) for w in (w_q, w_k, w_v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    out = (weights @ v).permute(0, 2, 3, 1).reshape(B, T, d_model)  # <-
    return out @ w_o.T


def test_a_line_whose_value_is_right_and_a_generator_s_loop_are_not_named():
    """The scores before an unasked-for mask equal the reference's: their line is not a place
    the slip may be; nor is a generator expression's line a loop that sets the heads' order."""
    for fn in (causal_mask_out_of_habit, merged_interleaved_after_a_generator):
        result = diagnose(fn, mask=False, echo=False)
        assert list(result.lines) == [marked(fn)], result.message
        assert "It reads values set on" not in result.message, result.message


def transposed_x_before_w_qk(x, w_q, w_k):
    w_qk = w_q.T @ w_k
    return x.transpose(-2, -1) @ w_qk @ x / math.sqrt(w_q.shape[0])


def dropout_left_on(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    weights = F.dropout((q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1), p=0.1)  # <-
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def filled_with_a_tiny_number(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], -1e-9)  # <-
    return (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_hints_say_what_this_code_did():
    """A square W_QK on the side of a failing product: no sentence on the weights' layout (a
    transpose of it cannot fix the shapes); dropout: named; -1e-9 for -1e9: the number written."""
    failed = check_exercise(transposed_x_before_w_qk, "head_scores", echo=False)
    says(failed.message, "the two sides of a product do not line up")
    assert "out_features" not in failed.message, failed.message
    dropped = diagnose(dropout_left_on, mask=False, echo=False)
    assert list(dropped.lines) == [marked(dropout_left_on)], dropped.message
    says(dropped.message, "this line applies dropout")
    tiny = diagnose(filled_with_a_tiny_number, echo=False)
    assert tiny.mistakes == ("mask_filled_with_zero",), tiny.message
    says(tiny.message, "masked scores are set to -1e-9, as good as 0 to the softmax")


def keys_made_with_w_q_in_one_line(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_q.T, x @ w_v.T  # <-
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return scores.softmax(dim=-1) @ v


def attend(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def keys_and_values_swapped_in_a_call(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T  # <-
        heads.append(attend(q, v, k))  # slip
    return torch.cat(heads, dim=-1) @ w_o.T


def heads_gathered_with_an_interleaved_index(t, num_heads):
    B, T, d_model = t.shape
    d_k = d_model // num_heads
    idx = torch.arange(d_model).view(d_k, num_heads).T  # slip
    gathered = t[..., idx]
    return gathered.transpose(1, 2)  # <-


def test_a_tensor_made_right_and_used_in_another_s_place_names_both_lines():
    """k made with w_q beside q on one line: that line, not the scores'. v made right, then
    passed where k belongs: the line that makes it, and the call that uses it, both named. An
    index tensor that interleaves the features: its line named as a place the slip may be."""
    keys = check_exercise(keys_made_with_w_q_in_one_line, "one_head", echo=False)
    assert keys.mistakes == ("keys_from_w_q",), keys.message
    assert list(keys.lines) == [marked(keys_made_with_w_q_in_one_line)], keys.message
    swapped = diagnose(keys_and_values_swapped_in_a_call, per_head=True, echo=False)
    fn = keys_and_values_swapped_in_a_call
    assert list(swapped.lines) == [marked(fn)], swapped.message
    says(swapped.message, "It is used in that role on line",
         f"called from line {marked(fn, '# slip')}: `heads.append(attend(q, v, k))")  # fmt: skip
    index = check_exercise(heads_gathered_with_an_interleaved_index, "split_heads", echo=False)
    assert index.mistakes == ("heads_split_interleaved",), index.message
    says(index.message, "`idx = torch.arange(d_model).view(d_k, num_heads).T")


def keys_and_values_swapped_where_used(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k, v = ((context @ w.T).view(B, T_k, num_heads, d_k).transpose(1, 2) for w in (w_k, w_v))
    weights = (q @ v.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)  # slip
    return (weights @ k).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T  # slip 2


def test_keys_and_values_made_right_and_swapped_where_used_name_where_each_is_used():
    """k and v made right on one line, then the scores taken against v and the weights applied
    to k: each finding names the line that makes the tensors and the line that uses each in the
    other's place, and calls it the tensor used as the keys, not 'your keys'."""
    fn = keys_and_values_swapped_where_used
    result = check_exercise(fn, "cross_attention", echo=False)
    assert not result.ok
    says(result.message, "the tensor your code uses as the keys",
         f"It is used in that role on line {marked(fn, '# slip')}:",
         f"It is used in that role on line {marked(fn, '# slip 2')}:")  # fmt: skip
    assert "your keys k = context·W^K differ" not in result.message


def _attend(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return weights @ v


def keys_and_values_made_right_and_passed_swapped(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (context @ w_v.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    out = _attend(q, v, k)  # slip
    return out.transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def test_keys_and_values_made_right_on_lines_of_their_own_then_passed_swapped():
    """k and v each made right on its own line, then passed to a helper in each other's place: the
    message names the call that swaps them, and sends the learner to the lines that make k and v
    only together with the line that uses each."""
    fn = keys_and_values_made_right_and_passed_swapped
    result = check_exercise(fn, "cross_attention", echo=False)
    assert not result.ok
    call = f"called from line {marked(fn, '# slip')}:"
    assert result.message.count(call) == 2, result.message
    assert "look at the line that makes" not in result.message, result.message


def _attend_from(query_src, kv_src, w_q, w_k, w_v, num_heads):
    B, L_q, D = query_src.shape
    L_k, d_k = kv_src.shape[1], D // num_heads
    q = (query_src @ w_q.T).view(B, L_q, num_heads, d_k).transpose(1, 2)
    k = (kv_src @ w_k.T).view(B, L_k, num_heads, d_k).transpose(1, 2)
    v = (kv_src @ w_v.T).view(B, L_k, num_heads, d_k).transpose(1, 2)
    w = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(B, L_q, D)


def cross_attention_the_wrong_way_round(x, context, w_q, w_k, w_v, w_o, num_heads):
    return _attend_from(context, x, w_q, w_k, w_v, num_heads) @ w_o.T


def test_a_second_mistake_does_not_call_right_what_the_first_one_changed():
    """Queries from the context and keys and values from x: the second finding must not say
    q is made right (it is the first finding), nor that this is self-attention."""
    result = check_exercise(cross_attention_the_wrong_way_round, "cross_attention", echo=False)
    assert result.mistakes == ("queries_from_context", "keys_values_from_x"), result.message
    assert "q is made right" not in result.message, result.message
    assert "that is self-attention)" in result.message  # only as a condition, in brackets


def layer_norm_before_the_projections(x, context, w_q, w_k, w_v, w_o, num_heads):
    x = F.layer_norm(x, x.shape[-1:])  # slip
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)  # <-
    k, v = ((context @ w.T).view(B, T_k, num_heads, d_k).transpose(1, 2) for w in (w_k, w_v))
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def test_x_changed_before_a_projection_is_one_difference_in_the_queries_with_both_lines():
    """A layer norm the exercise does not ask for: the queries differ where they are projected,
    and the layer norm's line is named as where the slip may be (not two differences, not a
    hint about a weight on a line with none)."""
    fn = layer_norm_before_the_projections
    result = check_exercise(fn, "cross_attention", echo=False)
    assert list(result.lines) == [marked(fn)], result.message
    assert not result.message.startswith("✗ This looks like 2"), result.message
    says(result.message, f"line {marked(fn, '# slip')}: `x = F.layer_norm(x, x.shape[-1:])")


def scaled_on_q_in_place_then_on_the_scores(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    q /= d_k**0.5  # scale
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (context @ w_v.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / d_k**0.5  # scale again
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def test_a_scale_applied_twice_names_both_scales_not_a_product():
    """q divided in place, then the scores divided again: the hint is about the two scales (the
    line it shows holds no product)."""
    fn = scaled_on_q_in_place_then_on_the_scores
    result = check_exercise(fn, "cross_attention", echo=False)
    assert "× 0.5" in result.message, result.message
    says(result.message, f"also scales on line {marked(fn, '# scale again')}")
    assert "the product" not in result.message, result.message


def scaled_only_under_a_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores / d_k**0.5  # slip: scaled only when there is a mask
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def test_a_slip_that_shows_only_without_a_mask_is_named_and_said_to_be_there():
    """Right with the check's mask, wrong without one: the call that shows it is said, and the
    catalogued mistake its output matches (no scaling) is named, not 'no known mistake'."""
    result = diagnose(scaled_only_under_a_mask, echo=False)
    assert result.message.startswith(
        "✗ Right when called with a mask, but not when called without a mask. This looks like a "
        "known mistake (no_scaling)"
    ), result.message


def each_head_through_its_own_block_of_w_o(x, w_q, w_k, w_v, w_o):
    d_k = w_q[0].shape[0]
    outs = []
    for i, (wq, wk, wv) in enumerate(zip(w_q, w_k, w_v)):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        weights = torch.softmax(q @ k.transpose(-2, -1) / d_k**0.5, dim=-1)
        block = slice(i * d_k, (i + 1) * d_k)
        outs.append(weights @ v @ w_o[block, block].T)  # slip
    return torch.cat(outs, dim=-1)


def test_a_head_output_multiplied_again_on_its_line_is_not_called_wrong_weights_times_v():
    """weights·v right, then a W^O block on the same line: the message says weights·v is right
    and the line multiplies it again; it does not send the learner to what the weights multiply."""
    fn = each_head_through_its_own_block_of_w_o
    result = diagnose(fn, per_head=True, echo=False)
    assert not result.ok
    says(result.message, "weights·v is head 0's output, right", f"line {marked(fn, '# slip')}")
    assert "what the weights multiply" not in result.message, result.message
