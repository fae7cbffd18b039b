"""Notebooks 02 and 07: why scores are divided by √d_k, and dropout's rate and default."""

from __future__ import annotations

import inspect

import torch

from helpers.claims.base import _fail


def check_dot_product_variance(
    d_ks: list[int], variances: list[float], sigma2: float = 1.0, within: float = 0.05
) -> None:
    """Each measured var(q·k) is d_k · σ⁴ within `within` (relative): the variance grows with d_k,
    and var(q·k / √d_k) = σ⁴ whatever d_k. One variance per d_k."""
    expected = [d_k * sigma2**2 for d_k in d_ks]
    claim = f"var(q·k) = d_k · σ⁴ (σ² = {sigma2:.3g}) within {100 * within:.0f} % for every d_k"
    off = [(d_k, v, e) for d_k, v, e in zip(d_ks, variances, expected) if abs(v / e - 1) > within]
    if len(variances) != len(d_ks) or off:
        shown = ", ".join(f"d_k = {d}: {v:.3g} (expected {e:.3g})" for d, v, e in off)
        raise _fail(claim, shown or f"{len(variances)} variances for {len(d_ks)} widths")
    print(f"✓ {claim}; divided by √d_k it is σ⁴ = {sigma2**2:.3g} at every d_k")


def _flat(values: list[float], within: float) -> bool:
    return max(values) <= (1 + within) * min(values)


def check_scaled_rows_flat(
    d_ks: list[int], scaled: dict[str, list[float]], within: float = 0.10
) -> None:
    """With the division, each measure given (one list per measure of `softmax_saturation`, one
    value per d_k in `d_ks`) varies by less than `within` (relative) across the widths. The ✓ line
    names the measures it compared."""
    span = f"from d_k = {d_ks[0]} to {d_ks[-1]}"
    claim = (
        f"÷ √d_k: each of {len(scaled)} measures varies by less than {100 * within:.0f} % {span}"
    )
    moving = {m: v for m, v in scaled.items() if not _flat(v, within)}
    if moving:
        shown = "; ".join(f"{m} from {min(v):.3g} to {max(v):.3g}" for m, v in moving.items())
        raise _fail(claim, f"{shown}: these rows change with the width")
    print(f"✓ {claim}:")
    print(f"  {', '.join(scaled)}")


def check_unscaled_saturates(
    d_ks: list[int], scaled: dict[str, list[float]], unscaled: dict[str, list[float]], T: int
) -> None:
    """Without the division, at the widest d_k (the last of `d_ks`): the largest weight is above
    0.85 (towards one-hot), and the keys below the top two get less than 20 % of the scores'
    gradient, against more than half with the division."""
    peak, others = unscaled["max_weight"][-1], unscaled["others_share"][-1]
    kept = scaled["others_share"][-1]
    claim = f"no scaling, d_k = {d_ks[-1]}: rows near one-hot, gradient only to the top two keys"
    if not peak > 0.85:
        raise _fail(claim, f"the largest weight is {peak:.2f}, not above 0.85")
    if not (others < 0.2 and kept > 0.5):
        raise _fail(
            claim,
            f"the {T - 2} other keys get {100 * others:.0f} % of the scores' gradient without the "
            f"division and {100 * kept:.0f} % with it (expected < 20 % and > 50 %)",
        )
    print(f"✓ no scaling, d_k = {d_ks[-1]}: largest weight {peak:.2f} (> 0.85); the {T - 2} keys")
    print(f"  below the top two get {100 * others:.0f} % of the scores' gradient (< 20 %; "
          f"÷ √d_k: {100 * kept:.0f} %)")  # fmt: skip


def check_query_gradient(
    d_ks: list[int], scaled: dict[str, list[float]], unscaled: dict[str, list[float]]
) -> None:
    """At the widest d_k (the last of `d_ks`), without the division: the gradient into the scores
    is smaller (mean over the rows); the gradient that reaches q is larger on average over the
    rows (the division scales it by 1/√d_k), but smaller in the median row, and more rows get
    less than 0.01 of it. The mean is carried by the few rows whose top two scores nearly tie."""
    s_scaled, s_unscaled = scaled["grad_norm"][-1], unscaled["grad_norm"][-1]
    q_scaled, q_unscaled = scaled["query_grad"][-1], unscaled["query_grad"][-1]
    m_scaled, m_unscaled = scaled["query_grad_median"][-1], unscaled["query_grad_median"][-1]
    f_scaled, f_unscaled = scaled["query_grad_small"][-1], unscaled["query_grad_small"][-1]
    claim = (
        f"no scaling, d_k = {d_ks[-1]}: less gradient into the scores; into q, a larger mean "
        "but a smaller median and more rows below 0.01"
    )
    if not (s_unscaled < s_scaled and q_unscaled > q_scaled):
        raise _fail(
            claim,
            f"mean ‖∂L/∂scores‖ {s_unscaled:.2f} against {s_scaled:.2f} with the division, mean "
            f"‖∂L/∂q‖ {q_unscaled:.2f} against {q_scaled:.2f} (expected smaller, then larger)",
        )
    if not (m_unscaled < m_scaled and f_unscaled > f_scaled):
        raise _fail(
            claim,
            f"median ‖∂L/∂q‖ {m_unscaled:.3f} against {m_scaled:.3f} with the division, rows "
            f"below 0.01: {100 * f_unscaled:.0f} % against {100 * f_scaled:.0f} % (expected a "
            "smaller median and more such rows)",
        )
    print(f"✓ no scaling, d_k = {d_ks[-1]}: mean ‖∂L/∂scores‖ {s_scaled / s_unscaled:.1f}× smaller "
          f"than ÷ √d_k ({s_unscaled:.2f} vs {s_scaled:.2f});")  # fmt: skip
    print(f"  ‖∂L/∂q‖: mean {q_unscaled / q_scaled:.1f}× larger ({q_unscaled:.2f} vs "
          f"{q_scaled:.2f}), median {m_scaled / m_unscaled:.1f}× smaller ({m_unscaled:.3f} vs "
          f"{m_scaled:.3f}),")  # fmt: skip
    print(f"  rows below 0.01: {100 * f_unscaled:.0f} % (÷ √d_k: {100 * f_scaled:.0f} %)")


def check_dropout_rate(draws: torch.Tensor, p: float, within: float = 0.01) -> None:
    """Of many training-mode maps `draws` (any shape), a share p within `within` is exactly 0."""
    zeroed = float((draws == 0).float().mean())
    claim = f"dropout zeroes a share p = {p} of the weights"
    if abs(zeroed - p) > within:
        raise _fail(claim, f"{zeroed:.3f} of them are 0 (within {within} of {p} expected)")
    print(f"✓ over {draws.shape[0]} draws, {zeroed:.3f} of the weights were zeroed "
          f"(p = {p}, within {within})")  # fmt: skip


def check_default(function, parameter: str, expected) -> None:
    """The installed `function`'s `parameter` defaults to `expected` (read with
    inspect.signature, so it is the version that runs, not the one a document describes)."""
    default = inspect.signature(function).parameters[parameter].default
    prefix = "nn." if function.__module__.startswith("torch.nn") else ""
    claim = f"{prefix}{function.__name__}({parameter}=…) defaults to {expected!r}"
    if default != expected:
        raise _fail(claim, f"the installed one defaults to {default!r}")
    print(f"✓ {claim} (inspect.signature, the installed version)")
