"""Notebook 20's claims: attention a tile at a time is the same multi-head attention (every tile
size, causal or not), it never holds a T × T tensor where the plain computation holds h of them,
and nn.MultiheadAttention forms the maps when asked for them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from helpers.attention import FusedMultiHeadAttention, merge_heads, split_heads
from helpers.checks import check_close, default_atol
from helpers.claims.base import _fail
from helpers.tiles import tiled_attention
from helpers.timing import Calls


@torch.no_grad()
def check_tiles_match(
    module: FusedMultiHeadAttention, x: torch.Tensor, attend: Callable = tiled_attention
) -> None:
    """For every tile shape, 1 … T queries by 1 … T keys, the module's heads computed by
    `attend(q, k, v, block_k, block_q, is_causal=…)`, merged and mixed by its W^O, equal the
    module's own output, without a mask and with a causal one; ✗ names the first shape and mask
    that differ."""
    T = x.size(1)
    q = split_heads(module.w_q(x), module.num_heads)
    k = split_heads(module.w_k(x), module.num_heads)
    v = split_heads(module.w_v(x), module.num_heads)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    claim = "tiled attention = the fused module's output at every tile shape"
    for is_causal, mask in ((False, None), (True, causal)):
        want, _ = module(x, mask)
        for block_q in range(1, T + 1):
            for block_k in range(1, T + 1):
                heads = attend(q, k, v, block_k, block_q, is_causal=is_causal)
                try:
                    check_close(module.w_o(merge_heads(heads)), want, claim, echo=False)
                except AssertionError as err:
                    where = "with a causal mask" if is_causal else "without a mask"
                    why = str(err).split(": ", 1)[-1]  # after "✗ {claim}: "
                    raise _fail(claim, f"tiles of {block_q} queries by {block_k} keys, {where}: "
                                       f"{why}") from None  # fmt: skip
    print(
        f"✓ tiled attention = the fused module's output at every tile shape, 1 … {T} queries by "
        f"1 … {T} keys ({T * T} shapes), without a mask and with a causal one: equal within atol "
        f"{default_atol(x):.0e}"
    )


def check_never_held(
    sizes: Sequence[int],
    plain: Sequence[Calls],
    tiled: Sequence[Calls],
    B: int,
    h: int,
    d_k: int,
    block: int,
) -> None:
    """One Calls per T in `sizes` for the plain computation (scores and weights formed) and the
    tiled one (tiles of `block` queries by `block` keys): the plain one makes a tensor of at
    least B·h·T·T numbers at every T; the tiled one never makes one larger than the output
    (B·h·T·d_k) or one tile (B·h·block·block), both smaller than B·h·T·T."""
    claim = "the tiles never make a T × T tensor"
    for T, p, t in zip(sizes, plain, tiled):
        maps, bound = B * h * T * T, max(B * h * T * d_k, B * h * block * block)
        if p.largest < maps:
            raise _fail(claim, f"at T = {T} the plain computation's largest tensor has "
                               f"{p.largest:,} numbers, fewer than the maps' {maps:,}")  # fmt: skip
        if t.largest > bound or t.largest >= maps:
            raise _fail(
                claim,
                f"at T = {T} the tiled computation makes a tensor of {t.largest:,} numbers, more "
                f"than the output's {B * h * T * d_k:,} or one tile's {B * h * block * block:,}"
                f" (the maps: {maps:,})",
            )
    first, last = sizes[0], sizes[-1]
    print(f"✓ T = {first} → {last}: the plain computation's largest tensor, at least B·h·T·T (the "
          f"h maps): {plain[0].largest:,} → {plain[-1].largest:,} numbers;")  # fmt: skip
    print(
        f"  the tiled one's, never more than the output (B·h·T·d_k) or one {block} × {block} "
        f"tile per head (B·h·{block}·{block}): {tiled[0].largest:,} → {tiled[-1].largest:,}"
    )


def check_maps_formed(with_maps: Calls, without: Calls, B: int, h: int, T: int) -> None:
    """nn.MultiheadAttention in training mode (its general path, whose calls count_calls sees; in
    inference it may take a fast path that is one call, whose inside is not seen): asked for its
    weights it makes a tensor of B·h·T·T numbers (the maps); with need_weights=False it makes
    none that large and calls PyTorch's fused kernel (`_scaled_dot_product_*`) instead."""
    maps = B * h * T * T
    claim = "asking for the weights forms the T × T maps"
    if with_maps.largest < maps:
        raise _fail(claim, f"with need_weights=True the largest tensor has {with_maps.largest:,} "
                           f"numbers, fewer than B·h·T·T = {maps:,}")  # fmt: skip
    kernel = [op for op in without.ops if op.startswith("_scaled_dot_product")]
    if without.largest >= maps or [without.ops[op] for op in kernel] != [1]:
        calls = ", ".join(f"{op} × {without.ops[op]}" for op in kernel)
        raise _fail(
            claim,
            f"with need_weights=False the largest tensor has {without.largest:,} numbers "
            f"(the maps: {maps:,}) and the calls include "
            f"{calls or 'no _scaled_dot_product_* kernel'} (one kernel call expected)",
        )
    print(f"✓ need_weights=True: a tensor of {with_maps.largest:,} numbers, at least B·h·T·T = "
          f"{maps:,} (the maps, before averaging over heads); need_weights=False: at most "
          f"{without.largest:,}, and one call to {kernel[0]}")  # fmt: skip
