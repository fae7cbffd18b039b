"""Each ✓ that stands for a claim in notebooks 08 and 14 (and 15's cache) can fail: the same check
the notebook calls, fed what the notebook passes and a wrong object (one test per claim, named
after the notebook and the claim). The checks rest on counts (helpers.timing.count_calls), never on
times."""

import dataclasses
from functools import partial

import pytest
import torch

from helpers.attention import KVCache, PerHeadMultiHeadAttention
from helpers.examples import seeded_attention
from helpers.layouts import expand_kv, share_kv, split
from helpers.timing import (
    Calls,
    check_cache_bytes,
    check_fusing_counts,
    check_step_counts,
    count_calls,
)

B, T, D_MODEL = 2, 16, 64
HEADS = [1, 2, 4, 8]
X = torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(0))


def _fusing_counts(loop_module=split):
    """08's counts at small sizes: {name: [Calls per h in HEADS]}; loop_module(fused) makes the
    module counted as the loop."""
    counts = {"loop": [], "fused": [], "kernel": []}
    for h in HEADS:
        fused = seeded_attention(D_MODEL, h)
        loop = loop_module(fused)
        counts["loop"].append(count_calls(partial(loop, X)))
        counts["fused"].append(count_calls(partial(fused, X)))
        counts["kernel"].append(count_calls(partial(fused, X, need_weights=False)))
    return counts


def test_08_fusing_counts_pass_for_the_course_modules(capsys):
    c = _fusing_counts()
    check_fusing_counts(HEADS, c["loop"], c["fused"], c["kernel"], B, T)
    out = capsys.readouterr().out
    assert "the loop makes 5h + 1 matrix products (6 → 41), the fused module 6, the kernel 5" in out


def test_08_loop_calls_5h_plus_1_fails_for_constant_counts():
    c = _fusing_counts(loop_module=lambda fused: fused)  # "the loop" is the fused module
    with pytest.raises(
        AssertionError, match=r"the loop's products per h \[1, 2, 4, 8\] are \[6, 6, 6, 6\], not"
    ):
        check_fusing_counts(HEADS, c["loop"], c["fused"], c["kernel"], B, T)
    grows = [Calls(products=3 * h + 1) for h in HEADS]  # grows with h, but not as 5h + 1
    with pytest.raises(AssertionError, match=r"are \[4, 7, 13, 25\], not \[6, 11, 21, 41\]"):
        check_fusing_counts(HEADS, grows, c["fused"], c["kernel"], B, T)


def test_08_fused_calls_stay_constant_fails_for_a_loop():
    c = _fusing_counts()
    with pytest.raises(
        AssertionError, match=r"the fused's products per h .* are \[6, 11, 21, 41\], not \[6, 6"
    ):
        check_fusing_counts(HEADS, c["loop"], c["loop"], c["kernel"], B, T)


def test_08_same_arithmetic_fails_for_wider_heads():
    def wider(fused):  # heads of d_k = 2 · d_model / h: twice the arithmetic
        return PerHeadMultiHeadAttention(D_MODEL, fused.num_heads, d_k=2 * fused.d_k)

    c = _fusing_counts(loop_module=wider)
    with pytest.raises(AssertionError, match="at h = 1 their multiply-adds are"):
        check_fusing_counts(HEADS, c["loop"], c["fused"], c["kernel"], B, T)


def test_08_kernel_writes_no_maps_fails_for_a_kernel_that_forms_them():
    c = _fusing_counts()  # "the kernel" below is the fused module with its maps, in 5 products
    forms_maps = [dataclasses.replace(calls, products=5) for calls in c["fused"]]
    with pytest.raises(AssertionError, match=r"the loop writes .*: not the maps' B·h·T·T = "):
        check_fusing_counts(HEADS, c["loop"], c["fused"], forms_maps, B, T)


SIZES = [8, 16, 32, 64]
D_BIG = 32
TEXT = torch.randn(1, SIZES[-1] + 1, D_BIG, generator=torch.Generator().manual_seed(0))


def _step_counts(uses_cache=True):
    """14's counts at small sizes: (cached step, recompute) Calls per T in SIZES; with
    uses_cache=False the "cached" step forgets its cache and sees only the new token."""
    big = seeded_attention(D_BIG, 4)
    cached, recompute = [], []
    for T_past in SIZES:
        past = KVCache()
        with torch.no_grad():
            big(TEXT[:, :T_past], cache=past)
        mask = torch.ones(T_past + 1, T_past + 1, dtype=torch.bool).tril()
        step = KVCache()
        step.append(past.k, past.v)
        new = TEXT[:, T_past : T_past + 1]
        cache = step if uses_cache else None
        cached.append(count_calls(partial(big, new, cache=cache, need_weights=False)))
        everything = TEXT[:, : T_past + 1]
        recompute.append(count_calls(partial(big, everything, mask, need_weights=False)))
    return cached, recompute


def test_14_step_counts_pass_for_the_cache(capsys):
    cached, recompute = _step_counts()
    check_step_counts(SIZES, cached, recompute, kv_numbers_per_token=4 * D_BIG)
    assert (
        "a cached step reads at least 128 more numbers per extra token" in capsys.readouterr().out
    )


def test_14_cached_step_reads_all_keys_fails_for_a_step_without_the_cache():
    cached, recompute = _step_counts(uses_cache=False)
    with pytest.raises(AssertionError, match="from T = 8 to 16 the numbers it reads grow by 0"):
        check_step_counts(SIZES, cached, recompute, kv_numbers_per_token=4 * D_BIG)


def test_14_cached_step_grows_no_faster_than_T_fails_for_recomputing():
    _, recompute = _step_counts()
    with pytest.raises(AssertionError, match="the cached step's multiply-adds grow"):
        check_step_counts(SIZES, recompute, recompute, kv_numbers_per_token=4 * D_BIG)


def test_14_recomputing_grows_faster_than_T_fails_for_cached_steps():
    cached, _ = _step_counts()
    with pytest.raises(AssertionError, match="recomputing's multiply-adds grow .*not more than"):
        check_step_counts(SIZES, cached, cached, kv_numbers_per_token=4 * D_BIG)


def _filled_cache(module, x):
    cache = KVCache()
    with torch.no_grad():
        module(x, cache=cache)
    return cache


def test_14_cache_bytes_pass_for_mha_and_gqa(capsys):
    x = TEXT[:, :7]
    mha = seeded_attention(D_BIG, 4)
    check_cache_bytes(_filled_cache(mha, x), 4, 8, "the cache")
    check_cache_bytes(_filled_cache(share_kv(mha, 2), x), 2, 8, "GQA's cache")
    out = capsys.readouterr().out
    assert "✓ the cache holds 1,792 bytes = 2 · 4 · 8 · 7 · 4" in out
    assert "✓ GQA's cache holds 896 bytes = 2 · 2 · 8 · 7 · 4" in out


def test_14_cache_bytes_fail_for_a_gqa_model_that_caches_every_head():
    gqa = share_kv(seeded_attention(D_BIG, 4), 2)
    repeated = _filled_cache(expand_kv(gqa), TEXT[:, :7])  # same outputs, h K/V heads cached
    with pytest.raises(AssertionError, match=r"its k is \(1, 4, 7, 8\), not .* \(1, 2, 7, 8\)"):
        check_cache_bytes(repeated, 2, 8, "GQA's cache")


def test_14_cache_bytes_fail_for_the_same_bytes_in_another_shape():
    cache = _filled_cache(seeded_attention(D_BIG, 4), TEXT[:, :7])  # 4 K/V heads of d_k = 8
    with pytest.raises(AssertionError, match=r"its k is \(1, 4, 7, 8\), not .* \(1, 2, 7, 16\)"):
        check_cache_bytes(cache, 2, 16, "the cache")  # 2 · 2 · 16 · 7 · 4: the same bytes
