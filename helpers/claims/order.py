"""Positions: what attention knows of word order (blind without positions, sees order with them,
RoPE's scores relative)."""

from __future__ import annotations

import torch
from torch import nn

from helpers.claims.base import _fail


def _permuted_gap(module: nn.Module, x: torch.Tensor, perm: torch.Tensor, mask=None) -> float:
    """The largest difference between permuting the output and outputting the permuted input,
    outputs and maps alike: 0 (up to rounding) for attention that is blind to order."""
    with torch.no_grad():
        out, weights = module(x, mask)  # (B, T, d_model), (B, h, T, T)
        out_p, weights_p = module(x[:, perm], mask)
    moved = weights[:, :, perm][..., perm]  # rows and columns both follow the tokens
    return max(float((out_p - out[:, perm]).abs().max()), float((weights_p - moved).abs().max()))


def check_order_blind(
    module: nn.Module,
    x: torch.Tensor,
    perm: torch.Tensor,
    name: str,
    atol: float = 1e-5,
    echo: bool = True,
) -> float:
    """Permute the tokens: a module blind to order gives the outputs permuted the same way, and
    every map's rows and columns permuted too (permutation-equivariance). Returns the largest gap;
    echo=False checks without printing."""
    gap = _permuted_gap(module, x, perm)
    if gap > atol:
        raise _fail(
            f"{name}: blind to order",
            f"permuting the tokens changes more than the order: max gap {gap:.3g} > {atol:g}",
        )
    if not echo:
        return gap
    print(
        f"✓ {name}: tokens permuted → outputs and all maps permuted the same way (within {atol:g})"
    )
    return gap


def check_order_seen(
    module: nn.Module, x: torch.Tensor, perm: torch.Tensor, name: str, mask=None, at_least=1e-3
) -> None:
    """The opposite: with positions (or a causal mask) the permuted input gives more than the
    permuted output, by at least `at_least` somewhere."""
    gap = _permuted_gap(module, x, perm, mask)
    if gap < at_least:
        raise _fail(
            f"{name}: sees the order",
            f"the permuted input gives only the permuted output (max gap {gap:.2g} < {at_least:g})",
        )
    print(f"✓ {name}: tokens permuted → not just permuted outputs (max gap {gap:.2f})")


def check_relative_scores(
    q: torch.Tensor, k: torch.Tensor, rotate, shifts, name: str, at_least: float = 1e-3
) -> None:
    """RoPE's promise: the score of a query vector at position m against a key vector at position
    n depends on the two vectors and, of the positions, on m − n alone, and it does depend on it.
    q, k: (T, d_k); rotate(t, offset) turns t's rows as positions offset .. offset + T − 1.
    1. For every shift s, the scores of the rows turned from s on equal those turned from 0
       (positions added to the vectors fail this).
    2. q's row 0 and k's row 0 put at every position, (T, T) scores: equal wherever m − n is
       equal, and spread over the 2T − 1 offsets by more than `at_least` × the largest |score|
       (a "rotation" that turns nothing, or turns every position alike, fails this)."""
    scores = rotate(q, 0) @ rotate(k, 0).T  # (T, T): query at m, key at n
    worst = max(float((rotate(q, s) @ rotate(k, s).T - scores).abs().max()) for s in shifts)
    scale = float(scores.abs().max())
    if worst > 1e-5 * max(scale, 1.0):
        raise _fail(
            f"{name}: scores depend only on m − n",
            f"shifting both positions changes a score by {worst:.3g}",
        )
    T = q.shape[0]
    one_q, one_k = q[:1].repeat(T, 1), k[:1].repeat(T, 1)  # (T, d_k): one vector at every place
    pair = rotate(one_q, 0) @ rotate(one_k, 0).T  # (T, T): the same two vectors, at m and at n
    diagonals = [pair.diagonal(offset) for offset in range(-(T - 1), T)]  # one per n − m
    unequal = max(float(d.max() - d.min()) for d in diagonals)  # within one m − n
    means = torch.stack([d.mean() for d in diagonals])
    spread = float(means.max() - means.min())  # across the offsets
    size = max(float(pair.abs().max()), 1e-12)
    if unequal > 1e-5 * max(size, 1.0):
        raise _fail(
            f"{name}: equal m − n, equal score",
            f"one query and one key at two pairs of places with the same m − n differ by "
            f"{unequal:.3g}",
        )
    if spread <= at_least * size:
        raise _fail(
            f"{name}: the score changes with m − n",
            f"one query and one key score within {spread:.3g} of each other at every m − n "
            f"(needs > {at_least:g} × {size:.3g}): the positions change nothing",
        )
    print(
        f"✓ {name}: every score unchanged when query and key both move by"
        f" {', '.join(map(str, shifts))} positions"
    )
    print(f"✓ {name}: q's row 0 and k's row 0 put at every pair of places (m, n): one score")
    print(
        f"  per m − n, and it changes with m − n (between {float(means.min()):.2f} and"
        f" {float(means.max()):.2f} over m − n = −{T - 1} … {T - 1})"
    )
