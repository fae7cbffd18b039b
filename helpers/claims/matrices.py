"""Notebooks 05, 16 and 17: the heads inside the matrices (rows that are tokens, what each head's
output can reach, head ranks, trained heads less even than fresh ones)."""

from __future__ import annotations

import torch
from torch import nn

from helpers.claims.base import _fail
from helpers.layouts import head_singular_values


def check_rows_are_tokens(cut: torch.Tensor, name: str) -> None:
    """`cut` (h, T, d_k) holds in each cell the number of the token it came from: every head's row
    t must hold token t only (what splitting q into heads must keep)."""
    h, T, _ = cut.shape
    own = torch.arange(T, dtype=cut.dtype)[:, None]  # (T, 1): the token row t should hold
    wrong = (cut != own).any(-1)  # (h, T): rows holding another token's features
    claim = f"{name}: every head's row t holds token t"
    if wrong.any():
        i, t = wrong.nonzero()[0].tolist()
        held = cut[i, t].unique().int().tolist()
        raise _fail(claim, f"{int(wrong.sum())} of {h * T} head rows hold another token "
                    f"(first: head {i}, row {t} holds tokens {held})")  # fmt: skip
    print(f"✓ {name}: all {h * T} head rows hold their own token")


def _reach(moved: torch.Tensor, tol: float) -> list[list[int]]:
    return [torch.nonzero(row > tol).flatten().tolist() for row in moved]


def check_reach_all(moved: torch.Tensor, tol: float = 1e-6) -> None:
    """`moved` (h, d_model): how much each output feature moves when head i is silenced. Every
    head moves every feature: true of a generic (e.g. random) W^O, not a trained fact."""
    h, d_model = moved.shape
    short = {i: len(f) for i, f in enumerate(_reach(moved, tol)) if len(f) < d_model}
    claim = f"with W^O, each head moves all {d_model} output features"
    if short:
        raise _fail(claim, ", ".join(f"head {i} moves {n}" for i, n in short.items()))
    print(f"✓ {claim} (so would a generic, e.g. random, W^O)")


def check_reach_own(moved: torch.Tensor, d_k: int, tol: float = 1e-6) -> None:
    """`moved` (h, d_model) as in check_reach_all, for out = concat (no W^O): head i moves exactly
    its own features i·d_k … (i+1)·d_k and no others."""
    claim = f"without W^O, head i moves exactly its own {d_k} features i·d_k … (i+1)·d_k − 1"
    for i, features in enumerate(_reach(moved, tol)):
        if features != list(range(i * d_k, (i + 1) * d_k)):
            shown = f"{features[0]} … {features[-1]}" if features else "none"
            raise _fail(claim, f"head {i} moves {len(features)} features ({shown})")
    print(f"✓ {claim}")


def check_head_ranks(modules: list[nn.Module], at_least: float | None = None) -> None:
    """Every head's W_QK and W_OV in `modules` (attention modules with the same d_k, one per layer)
    has rank d_k. Almost any matrices give that: two random (d_model, d_k) factors make rank d_k.
    With `at_least`, also none of the d_k directions has collapsed: each matrix's d_k-th singular
    value is at least `at_least` times its largest, which training need not keep."""
    d_k, total, smallest, ranks = modules[0].d_k, 0, 1.0, set()
    for module in modules:
        for singular in head_singular_values(module):  # (h, d_k) each, largest first
            tol = singular[:, :1] * module.d_model * torch.finfo(torch.float64).eps
            ranks |= set((singular > tol).sum(-1).tolist())
            smallest = min(smallest, float((singular[:, -1] / singular[:, 0]).min()))
            total += singular.shape[0]
    heads = "the one head's" if total == 2 else f"all {total // 2} heads'"
    claim = f"{heads} W_QK and W_OV have rank d_k = {d_k}"
    if ranks != {d_k}:
        raise _fail(claim, f"their ranks are {sorted(ranks)}")
    if at_least is None:
        print(f"✓ {claim} (a generic fact: random weights give it too)")
        return
    if smallest < at_least:
        raise _fail(
            claim + ", none with a collapsed direction",
            f"a d_k-th singular value is {100 * smallest:.2g} % of its largest "
            f"(expected ≥ {100 * at_least:.0f} %)",
        )
    print(f"✓ {claim}; in each, the smallest of the {d_k} singular values")
    print(f"  is at least {100 * smallest:.1f} % of the largest (≥ {100 * at_least:.0f} %): "
          "no direction has collapsed (fresh random weights pass this too)")  # fmt: skip


def _evenness(modules: list[nn.Module]) -> torch.Tensor:
    """Every head's W_QK and W_OV, each as its d_k-th ÷ largest singular value: (2·h·layers,)."""
    return torch.cat(
        [(s[:, -1] / s[:, 0]) for module in modules for s in head_singular_values(module)]
    )


def check_less_even(trained: list[nn.Module], fresh: nn.Module) -> None:
    """Training spread the heads' use of their d_k directions: the median, over every W_QK and
    W_OV of `trained`, of its smallest ÷ largest singular value is below the least even matrix
    of `fresh` (untrained weights of the same shape). The median, so one odd head is not enough.
    Prints the trained matrices' lowest and median ratio and the fresh range."""
    ours, theirs = _evenness(trained), _evenness([fresh])
    median, lowest, below = float(ours.quantile(0.5)), float(ours.min()), int((ours < 0.1).sum())
    fresh_low, fresh_high = float(theirs.min()), float(theirs.max())
    claim = "the median trained W_QK or W_OV uses its directions less evenly than every fresh one"
    if not median < fresh_low:
        shares = f"median {100 * median:.0f} % trained, lowest {100 * fresh_low:.0f} % fresh"
        raise _fail(claim, f"smallest ÷ largest singular value: {shares}")
    print(f"✓ {claim}:")
    print(f"  smallest ÷ largest singular value, {ours.numel()} trained matrices: median "
          f"{100 * median:.0f} %, lowest {100 * lowest:.1f} % ({below} below 10 %); "
          f"{theirs.numel()} fresh: {100 * fresh_low:.0f} to {100 * fresh_high:.0f} %")  # fmt: skip
