"""helpers.diagnose after a seventh cold trial: what the check's second call at the same sizes,
with other values, catches (a cache keyed by the inputs' shape); a division by √d_k after the
softmax named where it is made, on the weights or on what they make; a loop's v put where the
heads' outputs belong named as the values, with no invented W^O slip; and a wrong shape traced
back to the first line that makes a shape no step of the reference has. Each learner function is
written by hand with one slip, the line the message must point at marked `# <-`."""

import math

import torch

from helpers.diagnose import check_exercise, diagnose
from tests.messages import marked, says

SCORES_BY_SHAPE = {}


def induction_scores_cached_by_shape(maps):
    if maps.shape not in SCORES_BY_SHAPE:
        n = maps.size(-1) // 2
        t = torch.arange(n, 2 * n)
        SCORES_BY_SHAPE[maps.shape] = maps[:, :, t, t - n + 1].mean(dim=(0, 2))
    return SCORES_BY_SHAPE[maps.shape]


def induction_scores(maps):
    n = maps.size(-1) // 2
    t = torch.arange(n, 2 * n)
    return maps[:, :, t, t - n + 1].mean(dim=(0, 2))


EXPANDED = {}


def shared_kv_expanded_once_per_shape(q, k, v):
    key = (q.shape, k.shape)
    if key not in EXPANDED:
        r = q.shape[1] // k.shape[1]
        EXPANDED[key] = (k.repeat_interleave(r, 1), v.repeat_interleave(r, 1))
    k, v = EXPANDED[key]
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def test_a_cache_keyed_by_shape_is_caught_by_other_values_at_the_same_sizes():
    SCORES_BY_SHAPE.clear()
    EXPANDED.clear()
    for fn, name, kept in (
        (induction_scores_cached_by_shape, "induction_score", "SCORES_BY_SHAPE"),
        (shared_kv_expanded_once_per_shape, "shared_kv", "EXPANDED"),
    ):
        result = check_exercise(fn, name, echo=False)
        assert not result.ok, name
        says(result.message, "other values at the same sizes", f"the dict {kept}")


INVERTED_BY_LENGTH = {}


def masked_attention_mask_kept_by_length(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, t, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(b, t, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        hidden = INVERTED_BY_LENGTH.setdefault(t, ~mask.unsqueeze(1))
        scores = scores.masked_fill(hidden, float("-inf"))
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def test_a_mask_kept_from_an_earlier_call_is_caught_by_another_mask_at_the_same_sizes():
    """The call with other values at the same sizes brings another mask too (the tenth trial: a
    mask cached by length got ✓ when that call reused the first mask). The wrong object: the
    same code without its cache keeps its ✓."""
    INVERTED_BY_LENGTH.clear()
    result = diagnose(masked_attention_mask_kept_by_length, echo=False)
    assert not result.ok
    says(
        result.message,
        "other values at the same sizes",
        "called with a mask",
        "the dict INVERTED_BY_LENGTH",
    )
    INVERTED_BY_LENGTH.clear()
    fresh = masked_attention_mask_kept_by_length

    def no_cache(*args, **kwargs):
        INVERTED_BY_LENGTH.clear()
        return fresh(*args, **kwargs)

    assert diagnose(no_cache, echo=False).ok


def test_a_right_answer_without_state_is_not_told_it_keeps_one():
    """The wrong objects: the same code without its cache gets its ✓; code right for the first
    values only, keeping nothing, is rejected without a state invented for it."""
    assert check_exercise(induction_scores, "induction_score", echo=False).ok
    from helpers.diagnose import EXERCISES

    first = induction_scores(EXERCISES["induction_score"][0]()["maps"]).tolist()
    scope = {"torch": torch}  # right for the check's first maps only: their scores, written down
    exec(f"def written_out(maps):\n    return torch.tensor({first!r})", scope)
    result = check_exercise(scope["written_out"], "induction_score", echo=False)
    assert not result.ok
    says(result.message, "other values at the same sizes", "The check cannot tell why")
    assert "keeps the" not in result.message


def one_head_output_divided(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v / math.sqrt(q.shape[-1])  # <-


def one_head_weights_divided(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(q.shape[-1])  # <-
    return weights @ v


def test_a_division_after_the_softmax_is_named_on_the_line_that_divides():
    out = check_exercise(one_head_output_divided, "one_head", echo=False)
    assert out.mistakes == ("scaled_after_softmax",)
    assert out.lines == (marked(one_head_output_divided),)
    says(out.message, "here what the weights make")
    assert "rows sum to 1/√d_k" not in out.message  # its weights' rows sum to 1
    weights = check_exercise(one_head_weights_divided, "one_head", echo=False)
    assert weights.mistakes == ("scaled_after_softmax",)
    assert weights.lines == (marked(one_head_weights_divided),)
    says(weights.message, "rows sum to 1/√d_k")


def loop_keeping_v(x, w_q, w_k, w_v, w_o):
    kept = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        head = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(wq.shape[0]), dim=-1) @ v  # noqa: F841
        kept.append(v)
    return torch.cat(kept, dim=-1) @ w_o.T  # <-


def test_a_loops_values_kept_as_its_heads_are_named_with_no_w_o_slip():
    result = diagnose(loop_keeping_v, per_head=True, echo=False)
    assert not result.ok
    assert "w_o_missing" not in result.mistakes  # W^O is applied on the marked line
    assert result.lines == (marked(loop_keeping_v),)
    says(result.message, "yours equal the reference's values v")


def stripe_taken_in_two_steps(maps):
    n = maps.size(-1) // 2
    t = torch.arange(n, 2 * n)
    stripe = maps[:, :, t][..., t - n + 1]  # <-
    return stripe.mean(dim=(0, 2))


def test_a_wrong_shape_is_traced_back_to_the_line_that_first_makes_an_unknown_shape():
    result = check_exercise(stripe_taken_in_two_steps, "induction_score", echo=False)
    assert not result.ok
    says(
        result.message,
        "Expected shape (3,), got (3, 5)",
        f"made on line {marked(stripe_taken_in_two_steps)}:",
    )


def shared_kv_into_float32_zeros(q, k, v):
    B, h, T, d_k = q.shape
    group = h // k.shape[1]
    out = torch.zeros(B, h, T, d_k)  # <-
    for i in range(h):
        s = q[:, i] @ k[:, i // group].transpose(-2, -1) / math.sqrt(d_k)
        out[:, i] = s.softmax(dim=-1) @ v[:, i // group]
    return out


def shared_kv_into_zeros_like(q, k, v):
    B, h, T, d_k = q.shape
    group = h // k.shape[1]
    out = torch.zeros_like(q)
    for i in range(h):
        s = q[:, i] @ k[:, i // group].transpose(-2, -1) / math.sqrt(d_k)
        out[:, i] = s.softmax(dim=-1) @ v[:, i // group]
    return out


def test_an_output_made_in_float32_whatever_the_inputs_gets_a_note_beside_its_check():
    """Right on the check's float32 inputs; given float64 it returns float32. The exercise asks
    nothing of dtypes: a ✓, with a note naming the line. The wrong object: the same loop into
    zeros_like keeps the dtype and gets no note."""
    result = check_exercise(shared_kv_into_float32_zeros, "shared_kv", echo=False)
    assert result.ok
    says(
        result.message,
        "✓ Correct",
        "in float64, it returns torch.float32",
        f"made on line {marked(shared_kv_into_float32_zeros)}:",
    )
    kept = check_exercise(shared_kv_into_zeros_like, "shared_kv", echo=False)
    assert kept.ok and "Note" not in kept.message


def shared_kv_heads_grouped_the_other_way(q, k, v):
    B, h, T, d_k = q.shape
    g = k.shape[1]
    qg = q.reshape(B, h // g, g, T, d_k).transpose(1, 2)  # slip: (g, h // g) is the grouping
    w = torch.softmax(qg @ k.unsqueeze(2).transpose(-2, -1) / d_k**0.5, dim=-1)
    return (w @ v.unsqueeze(2)).reshape(B, h, T, d_k)  # <-


def test_weights_at_work_are_not_taken_for_the_keys():
    """The learner makes no block of keys per query head; weights · v has the shape of one. The
    message must not call it the keys: it names the output, where the difference shows."""
    result = check_exercise(shared_kv_heads_grouped_the_other_way, "shared_kv", echo=False)
    assert not result.ok
    assert "keys" not in result.message.split("Hint")[0]
    assert result.lines == (marked(shared_kv_heads_grouped_the_other_way),)
    slip = marked(shared_kv_heads_grouped_the_other_way, "# slip")
    says(result.message, "Your output", f"line {slip}:")  # named as a place it may be


def split_joined_with_cat(t, num_heads):
    chunks = torch.split(t, t.shape[-1] // num_heads, dim=-1)
    return torch.cat(chunks, dim=1)  # <-


def test_one_heads_slice_is_not_taken_for_where_the_shape_goes_wrong():
    """The wrong object: each chunk is one head's (B, T, d_k), a step the reference makes too; the
    shape goes wrong where the chunks are joined without a head dim."""
    result = check_exercise(split_joined_with_cat, "split_heads", echo=False)
    says(result.message, f"made on line {marked(split_joined_with_cat)}:")
