"""Notebook 21's claims: a sliding window lets each query see its last W positions (and is the
causal mask once W ≥ T), on every head alike; information crosses at most W − 1 positions a
layer; a cache that keeps the sinks and the last window gives the same outputs as the windowed
forward while its memory stops growing; and a token dropped from a row leaves the others' weights
divided by what it did not take."""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.attention import FusedMultiHeadAttention, KVCache
from helpers.checks import default_atol
from helpers.claims.base import _fail
from helpers.windows import window_mask


def check_window_rows(
    T: int, mask_of: Callable[[int, int, int], torch.Tensor] = window_mask
) -> None:
    """`mask_of(T, T, W)` for W = 1 … 2T: query p may attend exactly the positions
    max(0, p − W + 1) … p (its last min(p + 1, W), its own included), so for every W ≥ T it is
    the causal mask; ✗ names the first W and query that differ."""
    claim = "each query sees its last W positions"
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for W in range(1, 2 * T + 1):
        got = mask_of(T, T, W)
        for p in range(T):
            want = list(range(max(0, p - W + 1), p + 1))
            seen = got[p].nonzero().flatten().tolist()
            if seen != want:
                raise _fail(claim, f"with W = {W}, query {p} sees positions {seen}, not {want}")
        if W >= T and not torch.equal(got, causal):
            raise _fail(claim, f"with W = {W} ≥ T = {T}, the mask is not the causal one")
    print(f"✓ W = 1 … {2 * T}: each query p sees positions max(0, p − W + 1) … p, its last "
          f"min(p + 1, W); for W = {T} … {2 * T} (W ≥ T), that is the causal mask")  # fmt: skip


@torch.no_grad()
def check_every_head_windowed(weights: torch.Tensor, mask: torch.Tensor) -> None:
    """weights (B, h, T_q, T_k) from a layer given `mask` (T_q, T_k): in every head, every weight
    outside the mask is 0 and each row sums to 1."""
    claim = "every head's weights stay inside the window"
    inside = weights.masked_select(mask.expand_as(weights))
    if inside.numel() and inside.min() <= 0:
        heads = (weights.masked_fill(~mask, 1.0) <= 0).flatten(2).any(-1).any(0)
        which = [int(i) for i in heads.nonzero().flatten()]
        raise _fail(claim, f"head{'s' if len(which) > 1 else ''} {which} put no weight on a key "
                           "inside it (a narrower mask there)")  # fmt: skip
    outside = weights.masked_select(~mask.expand_as(weights))
    if outside.numel() and outside.abs().max() > 0:
        heads = (weights * ~mask).flatten(2).abs().amax(-1).amax(0)
        which = [int(i) for i in (heads > 0).nonzero().flatten()]
        raise _fail(claim, f"head{'s' if len(which) > 1 else ''} {which} put weight outside it "
                           f"(up to {float(outside.abs().max()):.3g})")  # fmt: skip
    rows = weights.sum(-1)
    atol = default_atol(weights)
    if not torch.allclose(rows, torch.ones_like(rows), atol=atol):
        raise _fail(claim, f"a row sums to {float(rows.flatten()[(rows - 1).abs().argmax()]):.4g}")
    print(f"✓ all {weights.size(1)} heads: weight above 0 on every key inside the window and 0 "
          f"outside it (the same mask in every head), every row summing to 1 within atol "
          f"{atol:.0e}")  # fmt: skip


def check_reach(
    reach_of: Callable[[int, int, int], torch.Tensor], windows: tuple[int, ...], layers: int, T: int
) -> None:
    """`reach_of(W, L, T)` (T, T), which positions can have reached which after L layers: for each
    W and L = 1 … layers, row p holds exactly the positions max(0, p − L · (W − 1)) … p (a window
    of L · (W − 1) + 1 positions: nothing later, nothing missing, nothing further back)."""
    claim = "after L layers, information has crossed at most L · (W − 1) positions"
    for W in windows:
        for L in range(1, layers + 1):
            got, want = reach_of(W, L, T), window_mask(T, T, L * (W - 1) + 1)
            if not torch.equal(got.bool(), want):
                p = int((got.bool() != want).any(-1).nonzero()[0])
                seen = got[p].nonzero().flatten().tolist()
                layer = f"{L} layer{'s' * (L > 1)}"
                raise _fail(claim, f"with W = {W}, after {layer}, position {p} draws on {seen}, "
                                   f"not {max(0, p - L * (W - 1))} … {p}")  # fmt: skip
    widths = ", ".join(map(str, windows))
    print(f"✓ W = {widths}, L = 1 … {layers} layers (T = {T}): each position p can have drawn "
          "on exactly the positions from p − L · (W − 1) (or the first) to p")  # fmt: skip


@torch.no_grad()
def check_window_cache(
    module: FusedMultiHeadAttention,
    x: torch.Tensor,
    window: int,
    sinks: int,
    cache: KVCache,
    prompt: int,
    expected_bytes: int,
) -> None:
    """Decoding x with `cache` (a prompt of `prompt` tokens, then one at a time) gives the
    module's windowed output, module(x, window_mask(T, T, window, sinks)), and the cache never
    holds more than `expected_bytes`, which it reaches once full; ✗ when the outputs differ or
    the cache keeps growing."""
    claim = "the window cache = the windowed forward, its memory flat"
    T = x.size(1)
    want, _ = module(x, mask=window_mask(T, T, window, sinks))
    outs = [module(x[:, :prompt], cache=cache)[0]]
    held = [cache.nbytes]  # between steps: after the prompt, then after each new token
    for t in range(prompt, T):
        outs.append(module(x[:, t : t + 1], cache=cache)[0])
        held.append(cache.nbytes)
    got = torch.cat(outs, 1)
    atol = default_atol(x)
    if not torch.allclose(got, want, atol=atol, rtol=0):
        raise _fail(claim, f"the outputs differ by up to {float((got - want).abs().max()):.3g}")
    full = next((i for i, n in enumerate(held) if n == expected_bytes), None)
    if max(held) > expected_bytes or full is None or set(held[full:]) != {expected_bytes}:
        raise _fail(claim, f"between steps the cache held {held[0]:,} → {held[-1]:,} bytes (at "
                           f"most {max(held):,}), not a flat {expected_bytes:,}")  # fmt: skip
    per_token = 2 * x.size(0) * module.num_kv_heads * module.d_k * x.element_size()
    print(f"✓ decoding {T} tokens (a prompt of {prompt}, then one at a time) with sinks = {sinks} "
          f"and W = {window}: equal to the windowed forward within atol {atol:.0e}; between "
          f"steps the cache holds at most {expected_bytes:,} bytes, {expected_bytes // per_token} "
          "tokens, and exactly that from the step it first holds it")  # fmt: skip


@torch.no_grad()
def check_renormalised(full: torch.Tensor, without: torch.Tensor, dropped: int) -> None:
    """`full` (…, T_k) a softmax's rows, `without` the same rows with key `dropped` masked out:
    each other key's weight is its full weight divided by 1 − (the dropped key's weight)."""
    claim = "dropping a key divides the others' weights by 1 − its weight"
    a = full[..., dropped : dropped + 1]
    keep = torch.ones(full.size(-1), dtype=torch.bool)
    keep[dropped] = False
    want = full[..., keep] / (1 - a)
    atol = default_atol(full)
    if without[..., dropped].abs().max() > 0 or not torch.allclose(
        without[..., keep], want, atol=atol, rtol=1e-4
    ):
        raise _fail(
            claim, f"largest difference {float((without[..., keep] - want).abs().max()):.3g}"
        )
    print(f"✓ every row given, every head: with key {dropped} masked, each other weight = its "
          "weight with it ÷ (1 − the weight it had), within atol "
          f"{atol:.0e}, rtol 1e-04")  # fmt: skip
