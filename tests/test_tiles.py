"""helpers.tiles: the online softmax along a row, and attention a tile at a time, equal to torch's
scaled_dot_product_attention at every block size, causal or not, in float64 and float32; and the
mistake the rescaling exists to prevent, shown to change the result."""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.tiles import online_softmax_steps, tiled_attention


def qkv(*shape, dtype=torch.float64, d_v=None):
    *lead, T, d = shape
    q, k = torch.randn(*lead, T, d, dtype=dtype), torch.randn(*lead, T + 2, d, dtype=dtype)
    return q, k, torch.randn(*lead, T + 2, d_v or d, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tiled_attention_equals_sdpa_at_every_block_size(dtype):
    q, k, v = qkv(2, 3, 6, 4, dtype=dtype, d_v=5)  # T_q = 6, T_k = 8, d_v ≠ d_k
    tol = {"atol": 1e-12, "rtol": 0} if dtype == torch.float64 else {"atol": 2e-6, "rtol": 0}
    for is_causal in (False, True):
        want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        for block_k in range(1, 10):  # 9 > T_k: one tile
            for block_q in (None, 1, 4, 6):
                got = tiled_attention(q, k, v, block_k, block_q, is_causal=is_causal)
                torch.testing.assert_close(got, want, **tol)


def test_a_mask_of_any_shape_equals_the_course_s_attention_and_an_empty_row_gives_zeros():
    from helpers.attention import scaled_dot_product_attention

    q, k, v = qkv(2, 3, 5, 4)
    for shape in [(5, 7), (2, 1, 5, 7), (2, 3, 5, 7)]:
        mask = torch.rand(shape) > 0.4
        mask[..., 1, :] = False  # a query that may attend to nothing
        want, _ = scaled_dot_product_attention(q, k, v, mask)
        for block_k in (1, 3, 7):
            got = tiled_attention(q, k, v, block_k, 2, mask=mask)
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        assert (got[..., 1, :] == 0).all()
    with pytest.raises(ValueError, match="mask must be boolean"):
        tiled_attention(q, k, v, 2, mask=torch.ones(5, 7))


def test_the_weights_come_back_exactly_from_one_number_per_row():
    q, k, v = qkv(2, 3, 6, 4)
    _, lse = tiled_attention(q, k, v, 3, 2, return_lse=True)
    scores = q @ k.mT / 2.0  # √d_k = 2
    torch.testing.assert_close(torch.exp(scores - lse), scores.softmax(-1), atol=1e-12, rtol=0)
    m = scores.amax(-1, keepdim=True)  # the wrong object: the running max alone
    assert (torch.exp(scores - m) - scores.softmax(-1)).abs().max() > 0.1


def test_the_online_softmax_ends_at_softmax_times_values_with_large_scores():
    scores = torch.tensor([3.0, 900.0, -5.0, 1000.0, 2.0], dtype=torch.float64)  # exp overflows
    values = torch.randn(5, 3, dtype=torch.float64)
    want = torch.softmax(scores, 0) @ values
    for block in range(1, 7):
        steps = online_softmax_steps(scores, values, block)
        assert len(steps) == math.ceil(5 / block)
        torch.testing.assert_close(steps[-1].out, want, atol=1e-12, rtol=0)
        assert steps[-1].m == 1000.0 and steps[0].rescale == 0.0
    steps = online_softmax_steps(scores, values, 1)
    assert [s.rescale == 1.0 for s in steps] == [False, False, True, False, True]
    assert math.isfinite(steps[-1].total)


def test_without_the_rescale_the_row_is_wrong():
    """The wrong object: the running sum and accumulator kept without exp(m_old − m_new) give a
    different row whenever a later block raises the maximum."""
    scores = torch.tensor([0.0, 1.0, 4.0, 2.0], dtype=torch.float64)
    values = torch.randn(4, 2, dtype=torch.float64)
    m, total, acc = -math.inf, 0.0, torch.zeros(2, dtype=torch.float64)
    for start in range(0, 4, 2):
        s = scores[start : start + 2]
        m = max(m, s.max().item())
        p = torch.exp(s - m)
        total, acc = total + p.sum().item(), acc + p @ values[start : start + 2]  # no rescale
    want = torch.softmax(scores, 0) @ values
    assert (acc / total - want).abs().max() > 0.05
    torch.testing.assert_close(online_softmax_steps(scores, values, 2)[-1].out, want)


def test_bad_blocks_and_shapes_say_what_is_wrong():
    q, k, v = qkv(1, 2, 4, 3)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="block_k must be a whole number"):
            tiled_attention(q, k, v, bad)
    with pytest.raises(ValueError, match="same d_k"):
        tiled_attention(q, k[..., :2], v, 2)
    with pytest.raises(ValueError, match="there are no keys to tile"):
        tiled_attention(q, k[..., :0, :], v[..., :0, :], 2, 2)
    with pytest.raises(ValueError, match="there are no queries to tile"):
        tiled_attention(q[..., :0, :], k, v, 2, 2)
    with pytest.raises(ValueError, match=r"scores must be \(T_k,\)"):
        online_softmax_steps(torch.zeros(3), torch.zeros(4, 2), 2)
