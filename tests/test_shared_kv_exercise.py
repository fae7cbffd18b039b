"""15's exercise, attention whose h query heads share g K/V heads: every correct style gets ✓ (at
two sizes, so a group size written into the code shows), the classic slip of repeating the K/V
heads as a block is named with its line, and the other catalogued mistakes too."""

import pytest
import torch
import torch.nn.functional as F

from helpers.checker.mistakes import SLIPS
from helpers.checker.stages import shared_kv_stages
from helpers.diagnose import check_exercise

CORRECT = (
    "✓ Correct: equal to the reference within atol 1e-04, at three sizes (B = 2, h = 4, g = 2, "
    "T = 5, d_k = 3; then B = 1, h = 6, g = 1, T = 7, d_k = 4; then B = 1, h = 8, g = 2, T = 4, "
    "d_k = 2)."
)


def _learner(style: str = "interleave", mistake: str | None = None, group: int | None = None):
    def my_shared_kv_attention(q, k, v):
        B, h, T, d_k = q.shape
        g = k.size(1)
        size = group or h // g
        if style == "index":
            which = torch.arange(h) // size  # query head i -> K/V head i // (h / g)
            k, v = k[:, which], v[:, which]
        elif style == "expand":
            k = k[:, :, None].expand(B, g, size, T, d_k).reshape(B, h, T, d_k)
            v = v[:, :, None].expand(B, g, size, T, d_k).reshape(B, h, T, d_k)
        elif style == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        elif mistake == "kv_tiled":
            k = k.repeat(1, size, 1, 1)
            v = v.repeat(1, size, 1, 1)
        else:
            k = k.repeat_interleave(size, dim=1)
            v = v.repeat_interleave(size, dim=1)
        scale = 1.0 if mistake == "no_scaling" else d_k**0.5
        scores = q @ k.transpose(-2, -1) / scale
        weights = scores.softmax(dim=-2 if mistake == "softmax_over_queries" else -1)
        return weights @ v

    return my_shared_kv_attention


def test_the_reference_is_pytorch_s_grouped_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 6, 5, 4, generator=g), *torch.randn(2, 2, 2, 5, 4, generator=g)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(shared_kv_stages(q, k, v)["out"], expected, atol=1e-6, rtol=0)
    tiled = shared_kv_stages(q, k, v, ("kv_tiled",))["k_heads"]  # head i reads K/V head i mod g
    assert [int(tiled[0, i, 0, 0] == k[0, i % 2, 0, 0]) for i in range(6)] == [1] * 6


@pytest.mark.parametrize("style", ["interleave", "index", "expand", "sdpa"])
def test_15_every_correct_style_is_accepted(style):
    result = check_exercise(_learner(style), "shared_kv", echo=False)
    assert result.ok and result.message == CORRECT


@pytest.mark.parametrize("mistake", ["kv_tiled", "no_scaling", "softmax_over_queries"])
def test_15_each_mistake_is_named_with_its_line(mistake):
    result = check_exercise(_learner(mistake=mistake), "shared_kv", echo=False)
    assert (result.ok, result.mistakes) == (False, (mistake,)), result.message
    head, where, hint = _own_lines(result.message)
    assert head.startswith(f"✗ This looks like a known mistake ({mistake}): ")
    assert where.startswith("  Where: line ")
    if mistake == "kv_tiled":
        assert head.endswith(f"{SLIPS['kv_tiled'][0]}.") and "repeat(1, size, 1, 1)" in where
        assert "repeat_interleave" not in hint  # the hint asks, it does not give the call


def test_15_a_group_size_that_holds_only_at_the_first_sizes_shows_at_the_second():
    result = check_exercise(_learner(group=2), "shared_kv", echo=False)  # h // g is 2, then 6
    assert not result.ok
    assert result.message.startswith(
        "✗ Right at the check's first sizes (B = 2, h = 4, g = 2, T = 5, d_k = 3), but not at a "
        "second set (B = 1, h = 6, g = 1, T = 7, d_k = 4)"
    )


def test_15_a_group_as_large_as_g_shows_at_the_third_sizes():
    """`group = k.size(1)` (g, not h // g) is right where h = g² (the first sizes) and where g = 1
    (a repeat by 1 then broadcasts): the third set, groups of 4 with g = 2, shows it."""

    def repeated_g_times(q, k, v):
        group = k.size(1)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(-1) @ v

    result = check_exercise(repeated_g_times, "shared_kv", echo=False)
    assert not result.ok
    assert result.message.startswith(
        "✗ Right at the check's first two sets of sizes (B = 2, h = 4, g = 2, T = 5, d_k = 3; "
        "then B = 1, h = 6, g = 1, T = 7, d_k = 4), but not at a third set (B = 1, h = 8, g = 2, "
        "T = 4, d_k = 2): it raised RuntimeError"
    ), result.message


def test_15_a_causal_mask_copied_from_above_is_named_where_it_is_applied():
    def with_the_notebook_s_mask(q, k, v):
        T = q.size(2)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal, enable_gqa=True)

    result = check_exercise(with_the_notebook_s_mask, "shared_kv", echo=False)
    assert result.mistakes == ("causal_mask_added",), result.message
    assert "attn_mask=causal" in result.message.split("\n")[1]  # the line that applies it


def test_15_g_written_into_the_code_fails_at_one_k_v_head():
    def two_groups(q, k, v):
        group = q.size(1) // 2  # g = 2 written in: right only while g is 2
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(-1) @ v

    result = check_exercise(two_groups, "shared_kv", echo=False)
    assert not result.ok and "g = 1" in result.message and "2 (B, g)" in result.message


def test_15_a_scale_after_the_softmax_is_named_as_such():
    def after(q, k, v):
        group = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        weights = (q @ k.transpose(-2, -1)).softmax(-1) / q.size(-1) ** 0.5
        return weights @ v

    result = check_exercise(after, "shared_kv", echo=False)
    assert result.mistakes == ("scaled_after_softmax",), result.message


def _own_lines(message: str) -> list[str]:
    """The headline, Where and Hint lines, without the notes under Where that name other lines
    the slip may be on (values read from lines the check could not compare)."""
    return [line for line in message.split("\n") if not line.startswith("    ")]
