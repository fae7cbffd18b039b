"""helpers.windows: the window mask, what it lets through after several layers, and the cache that
keeps the sinks and the last window (equal to the full windowed forward, memory flat)."""

import pytest
import torch

from helpers.attention import FusedMultiHeadAttention, KVCache
from helpers.windows import WindowKVCache, reach, window_cache_bytes, window_mask


def test_a_window_as_long_as_the_text_is_causal_and_a_shorter_one_is_not():
    for T in (1, 5, 9):
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        assert torch.equal(window_mask(T, T, T), causal)
        assert torch.equal(window_mask(T, T, T + 4), causal)
    assert not torch.equal(window_mask(6, 6, 5), torch.ones(6, 6, dtype=torch.bool).tril())


def test_each_query_sees_its_last_window_and_the_sinks():
    mask = window_mask(8, 8, 3, sinks=2)
    assert mask[7].nonzero().flatten().tolist() == [0, 1, 5, 6, 7]
    assert mask[2].nonzero().flatten().tolist() == [0, 1, 2]  # the window reaches the sinks
    assert mask.sum(-1).max() == 5  # sinks + window
    # queries as the last T_q positions, as in decoding
    assert torch.equal(window_mask(2, 8, 3, sinks=2), mask[6:])


@pytest.mark.parametrize("bad", [dict(window=0), dict(window=-1), dict(sinks=-1), dict(window=2.5)])
def test_bad_sizes_get_a_message(bad):
    with pytest.raises(ValueError, match="window|sinks"):
        window_mask(4, 4, **{"window": 2, **bad})
    with pytest.raises(ValueError, match="T_q = 5 > T_k = 4"):
        window_mask(5, 4, 2)


def test_information_travels_layers_times_window_minus_one_positions():
    T = 24
    for window, layers in [(3, 1), (3, 2), (4, 3), (2, 5)]:
        seen = reach(window, layers, T)
        farthest = max(int(p - seen[p].nonzero().min()) for p in range(T))
        assert farthest == min(layers * (window - 1), T - 1)


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize(("window", "sinks"), [(3, 0), (3, 2), (1, 1), (20, 0)])
def test_decoding_with_the_window_cache_equals_the_windowed_forward(rope, window, sinks):
    torch.manual_seed(0)
    T = 9
    m = FusedMultiHeadAttention(16, 4, num_kv_heads=2, rope=rope).double()
    x = torch.randn(2, T, 16, dtype=torch.double)
    full, _ = m(x, mask=window_mask(T, T, window, sinks))
    cache = WindowKVCache(window, sinks)
    outs, held = [m(x[:, :4], cache=cache)[0]], []  # a prompt of 4, then one token at a time
    for t in range(4, T):
        outs.append(m(x[:, t : t + 1], cache=cache)[0])
        held.append(len(cache))
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=0, atol=1e-12)
    assert held == [min(t + 1, sinks + window - 1) for t in range(4, T)]  # flat once full
    assert cache.nbytes == 2 * 2 * 2 * 4 * held[-1] * 8
    if sinks + window - 1 < T:
        assert cache.nbytes == window_cache_bytes(window, sinks, 2, 4, bytes_per_number=8, B=2)
        # the wrong object: a plain cache holds every token, and its causal output differs
        plain = KVCache()
        causal = torch.cat([m(x[:, t : t + 1], cache=plain)[0] for t in range(T)], 1)
        assert plain.nbytes > cache.nbytes
        assert (causal - full).abs().max() > 1e-3


def test_the_mask_needs_a_step_first():
    with pytest.raises(ValueError, match="append the new tokens"):
        WindowKVCache(3).mask(1)
