"""What trained heads look at: notebook 11's two-place task, 12's pretrained heads, 13's
reversal (cross-attention)."""

from __future__ import annotations

import math

import torch

from helpers.claims.base import _fail
from helpers.experiment import TrainResult, accuracy


def check_two_heads_win(one: TrainResult, two: TrainResult) -> None:
    """Notebook 11's experiment: a 1-head and a 2-head model with the same parameter count, trained
    alike. The 2-head one names both tokens (previous, first) right at 99 % or more of the
    positions with a final loss below 0.05; the 1-head one stays above 0.15 and misses one of the
    two at more than 10 % of the positions. Accuracy on 1,024 fresh sequences."""
    claim = "two heads learn the task, one head with the same parameters does not"
    heads = (one.model.attention.num_heads, two.model.attention.num_heads)
    n_one, n_two = (sum(p.numel() for p in r.model.parameters()) for r in (one, two))
    if heads != (1, 2) or n_one != n_two:
        raise _fail(claim, f"the models have {heads} heads and {n_one:,} / {n_two:,} parameters")
    right_one, right_two = accuracy(one.model), accuracy(two.model)
    if two.final_loss >= 0.05 or min(right_two) < 0.99:
        raise _fail(
            claim,
            f"two heads: final loss {two.final_loss:.2f}, right {_pcts(right_two)} (needs < 0.05, "
            "≥ 99 %)",
        )
    if one.final_loss <= 0.15 or min(right_one) >= 0.9:
        raise _fail(
            claim,
            f"one head: final loss {one.final_loss:.2f}, right {_pcts(right_one)} (needs > 0.15 "
            "and one below 90 %)",
        )
    worse = "first" if right_one[1] < right_one[0] else "previous"
    print(f"✓ {n_one:,} parameters each; two heads name both tokens right (≥ 99 %); one head")
    print(f"  still misses the {worse} token at {1 - min(right_one):.0%} of the positions")


def _pcts(right: tuple[float, float]) -> str:
    return f"previous {right[0]:.0%}, first {right[1]:.0%}"


def _mean_on(weights: torch.Tensor, offset: int | None) -> torch.Tensor:
    """Mean weight (over sequences and query positions t >= 2) on key t − 1 (offset=1) or on key 0
    (offset=None). weights: (B, h, T, T) -> (h,)."""
    t = torch.arange(2, weights.shape[-1])
    keys = t - offset if offset is not None else torch.zeros_like(t)
    return weights[:, :, t, keys].mean(dim=(0, 2))


def check_two_place_roles(weights_one: torch.Tensor, weights_two: torch.Tensor) -> None:
    """Notebook 11's learned maps, (B, 1, T, T) and (B, 2, T, T) on the same sequences: one of the
    two heads looks at the previous position and the other at position 0 (each >= 0.9 of its
    weight on average over queries t >= 2), while the single head splits its weight between the
    two places (each below 0.9, together above 0.8)."""
    claim = "two heads: one on the previous position, one on position 0"
    previous, first = _mean_on(weights_two, 1), _mean_on(weights_two, None)
    p_head, f_head = int(previous.argmax()), int(first.argmax())
    if p_head == f_head or previous[p_head] < 0.9 or first[f_head] < 0.9:
        raise _fail(
            claim,
            f"mean weight on the previous position per head {_fmt(previous)}, on position 0 "
            f"{_fmt(first)}; each place needs its own head with at least 0.9",
        )
    one_p, one_f = float(_mean_on(weights_one, 1)[0]), float(_mean_on(weights_one, None)[0])
    if max(one_p, one_f) >= 0.9 or one_p + one_f <= 0.8:
        raise _fail(
            "one head splits its weight between the two places",
            f"it gives {one_p:.2f} to the previous position and {one_f:.2f} to position 0",
        )
    print(
        f"✓ 2 heads: head {p_head} puts {float(previous[p_head]):.2f} of its weight on the "
        f"previous position, head {f_head} {float(first[f_head]):.2f} on position 0"
    )
    print(f"✓ 1 head: {one_p:.2f} on the previous position and {one_f:.2f} on position 0, split")


def _fmt(values: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(v):.2f}" for v in values) + "]"


def check_head_patterns(
    scores: dict[str, torch.Tensor],
    found: dict[str, float],
    absent: dict[str, float],
    times_mean: float = 4.0,
) -> None:
    """Notebook 12's tour. scores: {pattern: (n_layers, h)} mean weights. For each pattern in
    `found`, the best head gives it more than the threshold and more than `times_mean` × the mean
    head (except [CLS], on which many heads rest); for each pattern in `absent`, no head gives it
    as much as the threshold."""
    for name, threshold in found.items():
        best, mean = float(scores[name].max()), float(scores[name].mean())
        if best <= threshold:
            raise _fail(f"a head for {name}", f"the best head gives it {best:.2f} ≤ {threshold}")
        if name != "[CLS]" and best <= times_mean * mean:
            raise _fail(
                f"a head for {name}",
                f"the best head's {best:.2f} is not above {times_mean:g}× the mean head's "
                f"{mean:.2f}",
            )
    for name, threshold in absent.items():
        best = float(scores[name].max())
        if best >= threshold:
            raise _fail(f"no head looks mostly at {name}", f"one head gives it {best:.2f}")
    rare = [n for n in found if n != "[CLS]"]
    print(f"✓ the best head beats the threshold for each pattern ({_thresholds(found)})")
    print(f"✓ and, for all but [CLS], more than {times_mean:g}× the mean head ({', '.join(rare)})")
    print(f"✓ no head gives {' or '.join(absent)} as much as its threshold ({_thresholds(absent)})")


def check_heads_resting_on(
    scores: torch.Tensor, token: str, share: float = 0.25, most: float = 0.5, nearly_all=0.8
) -> tuple[int, int]:
    """Notebook 12: how many heads rest on `token`, not only the best one. scores: (n_layers, h),
    each head's mean weight from word queries to `token`. At least `share` of all heads give it
    more than `most`, and at least one more than `nearly_all`. Returns the two counts."""
    total = scores.numel()
    n_most, n_nearly = int((scores > most).sum()), int((scores > nearly_all).sum())
    needed = math.ceil(share * total)
    claim = f"at least {needed} of the {total} heads ({share:.0%}) give {token} more than {most}"
    if n_most < needed or n_nearly < 1:
        raise _fail(claim, f"{n_most} give it more than {most}, {n_nearly} more than {nearly_all}")
    print(
        f"✓ {n_most} of the {total} heads give {token} more than {most} of their weight "
        f"(checked: at least {share:.0%} of them, {needed}); {n_nearly} more than {nearly_all}"
    )
    return n_most, n_nearly


def _thresholds(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {threshold}" for name, threshold in values.items())


def check_anti_diagonal(weights: torch.Tensor, at_least: float = 0.5, most: float = 0.9) -> None:
    """Notebook 13's reversal. weights: (B, h, T_q, T_k) with T_q = T_k = T, one sequence per row of
    the batch. Every head, at every output position t of every sequence, puts at least `at_least`
    of its weight on source position T − 1 − t, and at least 0.9 in a share `most` of the cases."""
    B, h, T, _ = weights.shape
    t = torch.arange(T)
    on = weights[:, :, t, T - 1 - t]  # (B, h, T)
    lowest, share = float(on.min()), float((on >= 0.9).double().mean())
    claim = "each head puts its weight on the mirrored source position"
    if lowest < at_least or share < most:
        raise _fail(
            claim,
            f"the lowest weight there is {lowest:.2f} (needs ≥ {at_least}) and {share:.0%} of "
            f"the cases reach 0.9 (needs ≥ {most:.0%})",
        )
    print(
        f"✓ on {B} sequences, every head at every output position puts at least {at_least:.0%} "
        f"of its weight on the mirrored source position (lowest {lowest:.2f}), and at least 90% "
        f"in {share:.0%} of the {on.numel():,} cases"
    )
