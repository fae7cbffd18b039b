"""Notebook 18: copying, induction heads, the phase change, and the two heads' composition."""

from __future__ import annotations

import torch

from helpers.claims.base import _fail


def check_copying(first: float, repeat: float, chance: float, name: str) -> None:
    """A model that copies: the repeat's loss far below the first copy's, near chance."""
    if not (repeat < first / 4 and first > 0.9 * chance):
        raise _fail(
            f"{name} copies the repeat",
            f"repeat loss {repeat:.2f}, first copy {first:.2f} (chance ln vocab = {chance:.2f})",
        )
    print(
        f"✓ {name}: loss {repeat:.2f} on the repeat, {first:.2f} on the first copy "
        f"(chance {chance:.2f}): it copies"
    )


def check_cannot_copy(
    repeat: float, chance: float, name: str, copying: float | None = None
) -> None:
    """A model that does not complete the repeat: its loss there stays above half of chance (a
    model that copies gets it far lower; `copying` is such a model's loss, printed beside it).
    It may still do better than chance, by favouring tokens seen earlier in the sequence."""
    if repeat < 0.5 * chance:
        raise _fail(
            f"{name} cannot complete the repeat",
            f"repeat loss {repeat:.2f} < half of chance {chance:.2f}",
        )
    beside = f", against {copying:.2f} for the model that copies" if copying is not None else ""
    print(
        f"✓ {name}: loss {repeat:.2f} on the repeat{beside} (chance {chance:.2f}, half of it "
        f"{chance / 2:.2f}): above half of chance, it does not complete the repeat"
    )


def check_induction_heads(previous: torch.Tensor, induction: torch.Tensor) -> tuple[int, list[int]]:
    """previous: (layers, h) previous-token scores; induction: (layers, h) induction scores.
    Layer 0 must have a head with at least 0.4 on the previous token, layer 1 heads with at least
    0.5 on the induction target. Returns the previous-token head and the induction heads."""
    head = int(previous[0].argmax())
    found = [int(i) for i in (induction[1] >= 0.5).nonzero().flatten()]
    if previous[0, head] < 0.4 or not found:
        raise _fail(
            "a previous-token head in layer 0 and induction heads in layer 1",
            f"best previous-token score {float(previous[0, head]):.2f} (< 0.4?), layer 1's "
            f"induction scores {[round(float(s), 2) for s in induction[1]]} (none ≥ 0.5?)",
        )
    print(
        f"✓ layer 0, head {head}: {float(previous[0, head]):.2f} of its weight on the previous "
        f"token; layer 1, heads {found}: mean weight ≥ 0.5 on the token after the earlier copy "
        "of the query's token"
    )
    return head, found


def check_phase_change(
    repeat: list[float], window: int = 50, at_most: float = 0.25, faster: float = 2.0
) -> int:
    """The repeat's loss drops abruptly. Smoothed over `window` steps, it falls to 80 % of its
    start by step `slow` and to 30 % by step `fast`. Abrupt means: the second fall (50 % of the
    start) takes at most `at_most` of the training's steps and goes at least `faster` times as
    fast per step as the first (20 %, counted from step `window`, where the first mean ends).
    Returns `slow`."""
    from helpers.induction import phase_change

    slow, fast = phase_change(repeat, window)
    steps = len(repeat)
    speedup = (50 / max(fast - slow, 1)) / (20 / max(slow - window, 1))
    if fast >= steps or fast - slow > at_most * steps or speedup < faster:
        raise _fail(
            "the repeat's loss drops abruptly",
            f"it fell to 80 % of its start by step {slow} and to 30 % by step {fast} of {steps}"
            f" (never, or in more than {100 * at_most:.0f} % of the steps, or less than"
            f" {faster:g}× as fast per step as before: {speedup:.1f}×)",
        )
    print(
        f"✓ the repeat's loss (mean of {window} steps) fell to 80 % of its start by step {slow}"
        f" and to 30 % by step {fast}: the second fall took {fast - slow} steps "
        f"({100 * (fast - slow) / steps:.0f} % of the {steps}) and went {speedup:.1f}× as fast"
        f" per step as the fall to 80 % (counted from step {window}, where the first mean ends):"
        " an abrupt drop"
    )
    return slow


def check_composition(base: float, without: dict[str, float], chance: float) -> None:
    """Ablations, each measured as the repeat's loss: silencing the previous-token head multiplies
    it at least 4 times (measured 4.7-9.9 times at seeds 0-7); silencing layer 1's induction
    heads together takes it to at least 90 % of chance (the copying is gone; measured 3.49-3.51
    against 3.47); silencing any one of them alone raises it less than silencing the
    previous-token head (at most 0.65 of it at seeds 0-7) and keeps it below 40 % of chance (the
    others still copy, less well). without: {"previous": loss, "induction": all induction heads,
    "one induction": the largest loss over the induction heads silenced one at a time}."""
    one = without["one induction"]
    fails = (
        without["previous"] < 4 * base
        or without["induction"] < 0.9 * chance
        or one >= without["previous"]
        or one > 0.4 * chance
    )
    if fails:
        raise _fail(
            "the two kinds of head work together",
            f"repeat loss {base:.2f}; without each: "
            + ", ".join(f"{k} {v:.2f}" for k, v in without.items()),
        )
    print(
        f"✓ repeat loss {base:.2f}; without the previous-token head {without['previous']:.2f} "
        f"({without['previous'] / base:.1f}×, at least 4×); without the induction heads together "
        f"{without['induction']:.2f}: chance is {chance:.2f}, the copying is gone; without any one "
        f"of them at most {one:.2f} ({one / base:.1f}×): less than without the previous-token "
        "head, and below 40 % of chance: the others still copy, less well"
    )
