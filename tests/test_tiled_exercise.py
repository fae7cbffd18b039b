"""19's exercise, attention a block of keys at a time: every classic slip of the online softmax is
named with its line, right code in several styles is accepted, the whole map is refused even when
the output is right, and a slip no catalogue entry explains is followed block by block without
inventing a name. Each learner is written by hand, its slip marked `# <-`."""

import math
import re

import pytest
import torch

from helpers.checker.online import ONLINE_MISTAKES, online_steps, tiled_args
from helpers.diagnose import check_exercise
from tests.diagnose_support import lines_in, marked_lines


def check(fn):
    return check_exercise(fn, "tiled_attention", echo=False, time_limit=5)


def learner(mistake=None):
    """The loop as the notebook's own solution writes it, with one slip switched on."""

    def my_tiled_attention(q, k, v, block):
        t_q, d_k = q.shape
        m = torch.full((t_q, 1), float("-inf"))
        total, acc = torch.zeros(t_q, 1), torch.zeros(t_q, v.shape[-1])
        stop = (k.shape[0] // block) * block if mistake == "last_keys_dropped" else k.shape[0]
        for start in range(0, stop, block):  # <-last_keys_dropped
            s = q @ k[start : start + block].T  # <-no_scaling
            if mistake != "no_scaling":
                s = s / (d_k if mistake == "scaled_by_d_k" else math.sqrt(d_k))  # <-scaled_by_d_k
            new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - new)
            if mistake == "each_block_normalised":
                p = p / p.sum(dim=-1, keepdim=True)  # <-each_block_normalised
            factor = torch.exp(m - new)
            if mistake in ("sum_not_rescaled", "never_rescaled"):
                total = total + p.sum(dim=-1, keepdim=True)  # <-sum_not_rescaled
            else:
                total = total * factor + p.sum(dim=-1, keepdim=True)
            if mistake in ("acc_not_rescaled", "never_rescaled", "each_block_normalised"):
                acc = acc + p @ v[start : start + block]  # <-acc_not_rescaled
            else:
                acc = acc * factor + p @ v[start : start + block]
            m = new
        if mistake in ("final_division_missing", "each_block_normalised"):
            return acc  # <-final_division_missing
        return acc / total

    return my_tiled_attention


def _lines_for(mistake):
    fn = learner(mistake)
    marks = {}
    import inspect

    source, start = inspect.getsourcelines(learner)
    for offset, line in enumerate(source):
        found = re.search(r"# <-(\w+)", line)
        if found:
            marks.setdefault(found.group(1), []).append(start + offset)
    return fn, marks


@pytest.mark.parametrize(
    "mistake",
    ["sum_not_rescaled", "acc_not_rescaled", "final_division_missing", "last_keys_dropped",
     "no_scaling", "scaled_by_d_k", "each_block_normalised"],
)  # fmt: skip
def test_each_slip_is_named_with_its_line(mistake):
    fn, marks = _lines_for(mistake)
    result = check(fn)
    assert not result.ok and result.mistake == mistake, result.message
    assert lines_in(result.message) == marks[mistake], result.message


def test_neither_sum_rescaled_names_both_lines():
    fn, marks = _lines_for("never_rescaled")
    result = check(fn)
    assert result.mistake == "never_rescaled", result.message
    named = [int(n) for n in re.findall(r"line (\d+)", result.message)]
    assert named == [*marks["sum_not_rescaled"], *marks["acc_not_rescaled"]], result.message


def factor_after_the_update(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / q.shape[1] ** 0.5
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        m = new
        factor = torch.exp(m - new)  # <-
        total = total * factor + torch.exp(s - m).sum(-1, keepdim=True)
        acc = acc * factor + torch.exp(s - m) @ v[j : j + block]
    return acc / total


def test_a_factor_computed_after_the_update_is_shown_first():
    result = check(factor_after_the_update)
    assert result.mistake == "never_rescaled", result.message
    assert lines_in(result.message)[0] == marked_lines(factor_after_the_update)[0]
    assert "makes a factor of 1 where the maximum rose" in result.message


def blocks_averaged(q, k, v, block):
    outs = []
    for j in range(0, k.shape[0], block):
        w = torch.softmax(q @ k[j : j + block].T / math.sqrt(q.shape[1]), dim=-1)  # <-
        outs.append(w @ v[j : j + block])
    return torch.stack(outs).mean(dim=0)


def test_blocks_normalised_then_averaged():
    result = check(blocks_averaged)
    assert result.mistake == "each_block_normalised_averaged", result.message
    assert lines_in(result.message) == marked_lines(blocks_averaged)


def right_with_vectors(q, k, v, block):
    m = torch.full((q.shape[0],), -float("inf"))
    total, o = torch.zeros(q.shape[0]), torch.zeros(q.shape[0], v.shape[1])
    for i in range(0, len(k), block):
        s = q @ k[i : i + block].T / math.sqrt(q.shape[-1])
        mn = torch.maximum(m, s.max(dim=1).values)
        a = torch.exp(m - mn)
        p = torch.exp(s - mn[:, None])
        total, o, m = total * a + p.sum(1), o * a[:, None] + p @ v[i : i + block], mn
    return o / total[:, None]


def right_with_one_maximum_per_block(q, k, v, block):
    """Any maximum works in exact arithmetic if both sums are rescaled by the same one: this
    uses each row's maximum within the block, not the running one (in float32 its factor
    exp(m_old − m_new) overflows when a block's maximum is far below the one before)."""
    m, total, acc = None, 0.0, 0.0
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = s.amax(-1, keepdim=True)
        factor = torch.exp(m - new) if m is not None else 0.0
        total = total * factor + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * factor + torch.exp(s - new) @ v[j : j + block]
        m = new
    return acc / total


def right_with_logsumexp(q, k, v, block):
    lse = torch.full((q.shape[0], 1), -math.inf, dtype=q.dtype)
    out = torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype)
    for blk_k, blk_v in zip(k.split(block), v.split(block), strict=True):
        s = q @ blk_k.T / math.sqrt(q.shape[1])
        new = torch.logaddexp(lse, torch.logsumexp(s, dim=-1, keepdim=True))
        out = out * torch.exp(lse - new) + torch.exp(s - new) @ blk_v
        lse = new
    return out


def right_one_query_at_a_time(q, k, v, block):
    rows = []
    for row in q:
        m, total, acc = -math.inf, torch.tensor(0.0), torch.zeros(v.shape[1])
        for j in range(0, k.shape[0], block):
            s = k[j : j + block] @ row / math.sqrt(q.shape[1])
            new = max(m, s.max().item())
            total = total * math.exp(m - new) + torch.exp(s - new).sum()
            acc = acc * math.exp(m - new) + torch.exp(s - new) @ v[j : j + block]
            m = new
        rows.append(acc / total)
    return torch.stack(rows)


@pytest.mark.parametrize(
    "fn",
    [learner(), right_with_vectors, right_with_logsumexp, right_one_query_at_a_time],
)  # fmt: skip
def test_right_code_in_every_style_is_accepted(fn):
    result = check(fn)
    assert result.ok, result.message
    assert "no float tensor your function made holds as many numbers as the T_q × T_k" in (
        result.message
    )


def whole_map(q, k, v, block):
    weights = torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=-1)  # <-
    return weights @ v


def blocks_joined_into_the_map(q, k, v, block):
    tiles = [q @ k[j : j + block].T / math.sqrt(q.shape[1]) for j in range(0, len(k), block)]
    scores = torch.cat(tiles, dim=-1)  # <-
    return scores.softmax(dim=-1) @ v


@pytest.mark.parametrize("fn", [whole_map, blocks_joined_into_the_map])
def test_the_whole_map_is_refused_though_the_output_is_right(fn):
    """The ✓'s second half can fail: right numbers, made from a T_q × T_k tensor."""
    result = check(fn)
    assert not result.ok, result.message
    assert result.message.startswith("✗ Your output is right, but line")
    assert lines_in(result.message.replace("but line", "Where: line")) == marked_lines(fn)
    assert "(6, 10)" in result.message


def max_over_queries(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = torch.maximum(m, s.amax(dim=0, keepdim=True))  # <-
        factor = torch.exp(m - new)
        total = total * factor + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * factor + torch.exp(s - new) @ v[j : j + block]
        m = new
    return acc / total


def test_a_maximum_over_the_queries_is_named_where_it_is_taken():
    result = check(max_over_queries)
    assert not result.ok
    assert f"Earlier, line {marked_lines(max_over_queries)[0]}:" in result.message, result.message
    assert "over the queries" in result.message


def acc_slightly_off(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        factor = torch.exp(m - new)
        total = total * factor + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * factor**2 + torch.exp(s - new) @ v[j : j + block]  # <-
        m = new
    return acc / total


def test_an_unknown_slip_is_followed_to_its_block_and_not_named():
    result = check(acc_slightly_off)
    assert not result.ok and result.mistake is None, result.message
    assert "matches no known mistake" in result.message
    assert "The check does not know which slip this is" in result.message
    line = marked_lines(acc_slightly_off)[0]
    assert f"after block 0, made on line {line}:" in result.message, result.message
    assert "but not after block 1 (keys 3–5)" in result.message


def wrong_way_from_minus_infinity(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        factor = torch.exp(new - m)  # <-
        total = total * factor + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * factor + torch.exp(s - new) @ v[j : j + block]
        m = new
    return acc / total


def test_a_nan_is_traced_to_the_first_line_that_makes_one_not_to_the_minus_inf_start():
    result = check(wrong_way_from_minus_infinity)
    assert "holds NaN" in result.message
    assert lines_in(result.message.replace("is made on line", "Where: line")) == marked_lines(
        wrong_way_from_minus_infinity
    ), result.message


def never_ends(q, k, v, block):
    start = 0
    while start < k.shape[0]:
        s = q @ k[start : start + block].T
    return s


def test_a_loop_that_never_ends_comes_back():
    result = check_exercise(never_ends, "tiled_attention", echo=False, time_limit=1)
    assert not result.ok and "did not finish within the check's time limit" in result.message


def test_the_first_sizes_tell_every_slip_apart():
    """At the check's first inputs each slip gives its own output, none the right one, and the
    maximum rises after the first block in most rows (where a rescale slip shows)."""
    args = tiled_args()
    steps, right = online_steps(**args)
    outs = {name: online_steps(**args, mistakes=(name,))[1] for name in ONLINE_MISTAKES}
    for name, out in outs.items():
        assert out.shape != right.shape or (out - right).abs().max() > 1e-2, name
        for other, theirs in outs.items():
            if other < name and theirs.shape == out.shape:
                assert (theirs - out).abs().max() > 1e-2, (name, other)
    rose = sum(int((s["factor"] < 1).any(-1).sum()) for s in steps[1:])
    assert rose >= args["q"].shape[0]


def test_the_reference_is_attention():
    args = tiled_args()
    _, out = online_steps(**args)
    q, k, v = (args[n].double() for n in "qkv")
    assert torch.allclose(out, torch.softmax(q @ k.T / math.sqrt(q.shape[1]), -1) @ v)


WRONG = {
    **{m: learner(m) for m in ("sum_not_rescaled", "acc_not_rescaled", "never_rescaled",
                               "final_division_missing", "last_keys_dropped", "no_scaling",
                               "scaled_by_d_k", "each_block_normalised")},
    "factor_after_the_update": factor_after_the_update, "blocks_averaged": blocks_averaged,
    "max_over_queries": max_over_queries, "acc_slightly_off": acc_slightly_off,
    "wrong_way": wrong_way_from_minus_infinity, "whole_map": whole_map,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(WRONG))
def test_no_message_hands_over_the_fix_as_code(name):
    from tests.test_diagnose_words import fix_as_code

    message = check(WRONG[name]).message
    assert not message.startswith("✓") and fix_as_code(message) == [], message


# --- after the judged trial of this exercise: each message that was false or vague -------------


def acc_of_the_weights_alone(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], 1)
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - new)
        total = total * torch.exp(m - new) + p.sum(-1, keepdim=True)
        acc = acc * torch.exp(m - new) + p.sum(-1, keepdim=True)  # <- the values never enter
        m = new
    return (acc / total) * v.mean(0)


def test_a_running_value_never_found_is_named_not_the_line_after_the_loop():
    """m and total follow the reference to the last block; the accumulator never does: it was
    said that every running value was right and the difference came after the loop."""
    message = check(acc_of_the_weights_alone).message
    assert "the difference comes after the loop" not in message, message
    assert "none of your tensors equals its accumulator" in message


def scaled_by_the_values_width(q, k, v, block):
    scale = v.shape[1] ** 0.5
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / scale  # <-
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        total = total * torch.exp(m - new) + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * torch.exp(m - new) + torch.exp(s - new) @ v[j : j + block]
        m = new
    return acc / total


def test_scores_at_another_scale_are_given_their_factor_and_line():
    message = check(scaled_by_the_values_width).message
    factor = math.sqrt(4) / math.sqrt(3)  # √d_k / √d_v at the check's first sizes
    assert f"× {factor:.4g} in every entry" in message, message
    assert lines_in(message) == marked_lines(scaled_by_the_values_width)


def maximum_without_its_column(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = torch.maximum(m, s.amax(-1))  # <- (T_q, 1) against (T_q,): (T_q, T_q)
        p = torch.exp(s - new)
        total = total * torch.exp(m - new) + p.sum(-1, keepdim=True)
        acc = acc * torch.exp(m - new) + p @ v[j : j + block]
        m = new
    return acc / total


def test_a_column_broadcast_against_a_vector_is_named_before_the_line_that_raises():
    message = check(maximum_without_its_column).message
    line = marked_lines(maximum_without_its_column)[0]
    assert f"Earlier, line {line}:" in message and "(6, 6)" in message, message


def scores_by_broadcasting(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        s = (q[:, None, :] * k[j : j + block][None]).sum(-1) / math.sqrt(q.shape[1])  # <-
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        total = total * torch.exp(m - new) + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * torch.exp(m - new) + torch.exp(s - new) @ v[j : j + block]
        m = new
    return acc / total


def test_a_large_tensor_that_is_not_the_map_is_not_called_the_map():
    """(T_q, block, d_k) = 72 numbers ≥ the map's 60: refused, and said to be what it is."""
    message = check(scores_by_broadcasting).message
    assert message.startswith("✗ Your output is right, but line"), message
    assert "72 numbers, at least as many as the whole T_q × T_k map (6 × 10 = 60)" in message
    assert "as many numbers as the whole map of scores" not in message


def no_maximum_at_all(q, k, v, block):
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        p = torch.exp(q @ k[j : j + block].T / math.sqrt(q.shape[1]))  # <-
        total, acc = total + p.sum(-1, keepdim=True), acc + p @ v[j : j + block]
    return acc / total


def one_maximum_for_the_whole_tile(q, k, v, block):
    m, total, acc = None, 0.0, 0.0
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[1])
        new = s.max() if m is None else torch.maximum(m, s.max())  # <-
        factor = torch.exp(m - new) if m is not None else 0.0
        total = total * factor + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * factor + torch.exp(s - new) @ v[j : j + block]
        m = new
    return acc / total


@pytest.mark.parametrize(
    "fn", [no_maximum_at_all, one_maximum_for_the_whole_tile, right_with_one_maximum_per_block]
)
def test_exact_in_arithmetic_but_not_in_float32_is_refused_at_large_scores(fn):
    """Right at small scores; at scores of ±170, exp overflows or a row's terms all underflow."""
    result = check(fn)
    assert not result.ok and "but not at the first sizes with q × 30" in result.message, (
        result.message
    )


def one_whole_row_at_a_time(q, k, v, block):
    rows = [torch.softmax(k @ row / math.sqrt(q.shape[1]), dim=0) @ v for row in q]  # <-
    return torch.stack(rows)


def test_a_whole_row_at_a_time_is_refused_though_no_tensor_is_map_sized():
    message = check(one_whole_row_at_a_time).message
    assert message.startswith("✗ Your output is right, but line"), message
    assert "all T_k = 10 keys at once" in message


def blocks_one_key_too_wide(q, k, v, block):
    m = torch.full((q.shape[0], 1), -math.inf)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[1])
    for j in range(0, k.shape[0], block):
        kb, vb = k[j : j + block + 1], v[j : j + block + 1]
        s = q @ kb.T / math.sqrt(q.shape[1])  # <- its keys run one past the block
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        total = total * torch.exp(m - new) + torch.exp(s - new).sum(-1, keepdim=True)
        acc = acc * torch.exp(m - new) + torch.exp(s - new) @ vb
        m = new
    return acc / total


def test_blocks_that_overlap_are_shown_by_their_width():
    message = check(blocks_one_key_too_wide).message
    assert "makes the first block's scores over 4 keys, where the block holds 3" in message
    assert lines_in(message) == marked_lines(blocks_one_key_too_wide), message


def test_a_nan_at_large_scores_is_called_nan_not_inf():
    """A tile-wide maximum lowers query 0's scores (≤ 45) by 173: 0 / 0 there, NaN, not inf."""
    message = check(one_maximum_for_the_whole_tile).message
    assert "its output holds NaN with large scores (in row 0)" in message, message
    assert "largest difference inf" not in message


def right_with_running_values_in_the_default_dtype(q, k, v, block):
    rows = []
    for qi in q:
        m = torch.tensor(float("-inf"))  # <- float32 whatever q's dtype
        total = torch.tensor(0.0)
        acc = torch.zeros(v.shape[-1])
        for s in range(0, k.shape[0], block):
            scores = k[s : s + block] @ qi / math.sqrt(q.shape[-1])
            new = torch.maximum(m, scores.max())
            rescale, p = torch.exp(m - new), torch.exp(scores - new)
            total.mul_(rescale).add_(p.sum())  # in place: total stays float32
            acc.mul_(rescale).add_(p @ v[s : s + block])
            m = new
        rows.append(acc / total)
    return torch.stack(rows)


def test_the_float64_note_names_the_first_line_that_makes_the_default_dtype():
    """The running maximum made by torch.tensor on an early line: the note names that line, not the
    first float32 tensor the trace happens to record (a later one)."""
    fn = right_with_running_values_in_the_default_dtype
    result = check(fn)
    assert result.ok, result.message
    line = marked_lines(fn)[0]
    assert f"The first tensor in another dtype is made on line {line}:" in result.message
