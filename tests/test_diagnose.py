"""helpers.diagnose: correct learner code in several styles is accepted; each catalogued mistake,
written the way a learner would, is named; errors and shapes become messages, never tracebacks.

The learner implementations here are written out by hand, independently of the reference."""

import math

import pytest
import torch

from helpers.attention import FusedMultiHeadAttention
from helpers.diagnose import MISTAKES, check_exercise, diagnose, reference_attention


def learner(mistake=None):
    """A learner's view/transpose implementation, with one mistake switched on."""

    def my_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        d_k = d_model // num_heads
        if mistake == "weights_transposed":
            q, k, v = x @ w_q, x @ w_k, x @ w_v
        else:
            q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        if mistake == "heads_split_without_transpose":
            q, k, v = (t.view(B, num_heads, T, d_k) for t in (q, k, v))
        else:
            q, k, v = (t.view(B, T, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1)
        if mistake == "scaled_by_d_model":
            scores = scores / math.sqrt(d_model)
        elif mistake == "scaled_by_d_k":
            scores = scores / d_k
        elif mistake != "no_scaling":
            scores = scores / math.sqrt(d_k)
        if mask is not None and mistake not in ("mask_ignored", "mask_after_softmax"):
            m = mask.unsqueeze(1)
            scores = scores.masked_fill(m if mistake == "mask_inverted" else ~m, float("-inf"))
        if mistake == "no_softmax":
            weights = scores
        else:
            weights = torch.softmax(scores, dim=2 if mistake == "softmax_over_queries" else 3)
        if mask is not None and mistake == "mask_after_softmax":
            weights = weights * mask.unsqueeze(1)
        out = weights @ (k if mistake == "keys_as_values" else v)
        if mistake == "heads_merged_without_transpose":
            out = out.reshape(B, T, d_model)
        else:
            out = out.transpose(1, 2).reshape(B, T, d_model)
        if mistake == "w_o_missing":
            return out
        return out @ (w_o if mistake == "weights_transposed" else w_o.T)

    return my_attention


def loop_style(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    d_k = x.shape[-1] // num_heads
    heads = []
    for i in range(num_heads):
        rows = slice(i * d_k, (i + 1) * d_k)  # head i's rows of each (out, in) weight
        q, k, v = x @ w_q[rows].T, x @ w_k[rows].T, x @ w_v[rows].T
        scores = q @ k.transpose(1, 2) / d_k**0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        heads.append(scores.softmax(-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def einsum_style(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d = x.shape
    q, k, v = (
        torch.einsum("btd,ed->bte", x, w).reshape(B, T, num_heads, -1) for w in (w_q, w_k, w_v)
    )
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    out = torch.einsum("bhqk,bkhe->bqhe", scores.softmax(-1), v).reshape(B, T, d)
    return torch.einsum("bte,de->btd", out, w_o)


def with_stages(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    out = learner()(x, w_q, w_k, w_v, w_o, num_heads, mask)
    return out, {}


@pytest.mark.parametrize("fn", [learner(), loop_style, einsum_style, with_stages])
def test_correct_implementations_in_several_styles_are_accepted(fn, capsys):
    result = diagnose(fn)
    assert result.ok and result.mistake is None
    assert capsys.readouterr().out.startswith(
        "✓ Your attention matches the reference within atol 1e-04"
    )


def test_the_catalogue_has_at_least_eight_mistakes():
    assert len(MISTAKES) >= 8


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_every_catalogued_mistake_is_named(mistake):
    result = diagnose(learner(mistake), echo=False)
    assert not result.ok
    assert result.mistake == mistake, result.message
    assert result.message.startswith(f"✗ This looks like a known mistake ({mistake})")
    assert "Hint: " in result.message


def test_reference_equals_the_course_module():
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    mask = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    weights = [getattr(fused, n).weight.detach() for n in ("w_q", "w_k", "w_v", "w_o")]
    for m in (None, mask):
        torch.testing.assert_close(reference_attention(x, *weights, 3, m), fused(x, m)[0].detach())


def test_exceptions_and_wrong_shapes_become_messages():
    def crashes(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        q = x @ w_q.T
        return q @ w_k[:4]  # a shape error on this line

    result = diagnose(crashes, echo=False)
    assert not result.ok and result.message.startswith("✗ Your function raised RuntimeError")
    assert "`return q @ w_k[:4]  # a shape error on this line`" in result.message
    assert "Traceback" not in result.message

    def one_head_wide(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return x[..., :4]

    result = diagnose(one_head_wide, echo=False)
    assert "expected (B, T, d_model) = (2, 5, 12), got (2, 5, 4)" in result.message
    assert "That is one head's width" in result.message

    def mask_without_head_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        out = learner()(x, w_q, w_k, w_v, w_o, num_heads, None)
        if mask is not None:
            scores = torch.zeros(2, num_heads, 5, 5).masked_fill(~mask, 0.0)  # (B,T,T) vs (B,h,T,T)
            out = out + scores.sum()
        return out

    assert "mask.unsqueeze(1)" in diagnose(mask_without_head_dim, echo=False).message


def test_unknown_mistakes_show_where_they_start():
    def off_in_values(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return learner()(x, w_q, w_k, 2 * w_v, w_o, num_heads, mask)

    result = diagnose(off_in_values, echo=False)
    assert result.mistake is None and "matches no known mistake" in result.message
    assert "token positions [0, 1, 2, 3, 4]" in result.message

    def exposes_stages(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        w_v = w_v.clone()
        w_v[4:8] *= 2  # a slip that touches head 1 only
        stages = {}
        out = reference_attention(x, w_q, w_k, w_v, w_o, num_heads, mask, intermediates=stages)
        return out, stages

    message = diagnose(exposes_stages, echo=False).message
    assert "the first stage that differs is v, most of all in head 1." in message


def test_not_done_yet_is_polite():
    def stub(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        raise NotImplementedError("write multi-head attention here")

    result = diagnose(stub, echo=False)
    assert result.message.startswith("⏳ Not done yet") and not result.ok


def test_exercises():
    def one_head(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v

    def one_head_unscaled(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v

    assert check_exercise(one_head, "one_head", echo=False).ok
    assert check_exercise(one_head_unscaled, "one_head", echo=False).mistake == "no_scaling"

    def split(t, num_heads):
        B, T, d = t.shape
        return t.view(B, T, num_heads, d // num_heads).transpose(1, 2)

    def split_wrong(t, num_heads):
        B, T, d = t.shape
        return t.view(B, num_heads, T, d // num_heads)

    assert check_exercise(split, "split_heads", echo=False).ok
    wrong = check_exercise(split_wrong, "split_heads", echo=False)
    assert not wrong.ok and "largest difference is at index" in wrong.message
