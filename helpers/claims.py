"""Checks behind the notebooks' ✓ lines that state more than an equality or a shape.

Each takes the objects a notebook made and prints ✓ lines naming exactly what it compared, or
raises AssertionError saying what came instead. `tests/test_claims.py`,
`tests/test_claims_softmax_and_matrices.py`, `tests/test_claims_heads.py` (and, for word order,
`tests/test_positions.py`) feed each one a wrong object (a biased layer, heads that share a
matrix, a head that projects twice, a head looking elsewhere, a missing scale, a "rotation" that
turns nothing, heads holding copies of a shared K/V) and show it fails.
Notebooks 08 and 14 check counts of what a call asks of PyTorch; those checks sit beside the
counting, in `helpers.timing`.
Torch only: no plotting, no widgets.
"""

from __future__ import annotations

import inspect
import math

import torch
from torch import nn

from helpers.experiment import TrainResult, accuracy
from helpers.layouts import head_singular_values

__all__ = [
    "check_dot_product_variance",
    "check_scaled_rows_flat",
    "check_unscaled_saturates",
    "check_query_gradient",
    "check_dropout_rate",
    "check_default",
    "check_rows_are_tokens",
    "check_reach_all",
    "check_reach_own",
    "check_head_ranks",
    "check_layer_count",
    "check_less_even",
    "check_linear_layout",
    "check_separate_matrices",
    "check_head_projects_once",
    "check_parameter_count",
    "check_kv_shared",
    "check_outputs_differ",
    "check_two_heads_win",
    "check_two_place_roles",
    "check_head_patterns",
    "check_heads_resting_on",
    "check_anti_diagonal",
    "check_order_blind",
    "check_order_seen",
    "check_relative_scores",
    "check_refused",
]


def _fail(claim: str, why: str) -> AssertionError:
    return AssertionError(f"✗ {claim}: {why}")


def check_linear_layout(linear: nn.Module, x: torch.Tensor, name: str) -> None:
    """`linear` maps in_features -> out_features with no bias: its weight is stored as
    (out_features, in_features) and linear(x) = x @ weight.T. x: (..., in_features)."""
    claim = f"{name} stores (out_features, in_features), has no bias, computes x @ weight.T"
    weight = linear.weight
    d_in = x.shape[-1]
    if getattr(linear, "bias", None) is not None:
        raise _fail(claim, "it has a bias, so it computes x @ weight.T + bias, not x @ weight.T")
    if weight.dim() != 2 or weight.shape[1] != d_in:
        raise _fail(
            claim,
            f"its weight is {tuple(weight.shape)}; (out_features, in_features) needs "
            f"in_features = {d_in} as the second dim",
        )
    with torch.no_grad():
        got, expected = linear(x), x @ weight.T
    if got.shape != expected.shape or not torch.allclose(got, expected, atol=1e-5):
        raise _fail(claim, "its output is not x @ weight.T")
    d_out = weight.shape[0]
    print(
        f"✓ {name}: weight {tuple(weight.shape)} = (out_features {d_out}, in_features {d_in}), "
        "no bias, output = x @ weight.T"
    )


def check_separate_matrices(module: nn.Module) -> None:
    """A per-head module's heads hold 3h weight tensors of shape (d_k, d_model) (nn.Linear's
    layout), no two of them sharing memory: each head has its own W_i^Q, W_i^K, W_i^V."""
    h, d_k, d_model = module.num_heads, module.d_k, module.d_model
    claim = f"3h = {3 * h} separate (d_k, d_model) matrices in the heads"
    weights = [lin.weight for head in module.heads for lin in (head.w_q, head.w_k, head.w_v)]
    shapes = {tuple(w.shape) for w in weights}
    if shapes != {(d_k, d_model)}:
        raise _fail(claim, f"the heads' weights have shapes {sorted(shapes)}")
    storages = {w.untyped_storage().data_ptr() for w in weights}
    if len(storages) != 3 * h:
        raise _fail(
            claim,
            f"the {len(weights)} weights sit in only {len(storages)} separate blocks of memory: "
            "some heads share a matrix, or are views of one big one",
        )
    print(
        f"✓ {3 * h} = 3h weight tensors in the heads, no two sharing memory, each "
        f"({d_k}, {d_model}) = (d_k, d_model) in nn.Linear's layout: {d_model} × {d_k} as x·W"
    )


def check_head_projects_once(head: nn.Module, x: torch.Tensor, name: str, atol=1e-5) -> None:
    """Run `head` (one head: x (B, T, d_model) -> out (B, T, d_k), weights (B, T, T)) on x, and
    redo its attention by hand from q = x @ w_q.weight.T, k and v alike: each of its matrices
    applied once to x, nothing after. A head that projects a second time (another matrix after
    its W^Q, W^K or W^V, or a bias on W^Q or W^V) returns other weights or another output, and
    fails; a bias on W^K alone shifts each row of scores by one number, changes no map, and
    passes."""
    claim = f"{name} run on x = attention of x W^Q, x W^K, x W^V (each matrix once)"
    with torch.no_grad():
        out, weights = head(x)  # what the head computes, however it computes it
        q, k, v = (x @ lin.weight.T for lin in (head.w_q, head.w_k, head.w_v))  # (B, T, d_k)
        by_hand = (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(dim=-1)  # (B, T, T)
    gaps = {
        "map": float((weights - by_hand).abs().max()),
        "output": float((out - by_hand @ v).abs().max()),
    }
    off = {part: gap for part, gap in gaps.items() if not gap <= atol}
    if off:
        shown = ", ".join(f"its {part} by {gap:.3g}" for part, gap in off.items())
        raise _fail(claim, f"the head's result differs from one projection per matrix: {shown}")
    print(f"✓ {name}, run on x: its map and output = attention of q = x W^Q, k = x W^K, v = x W^V")
    print(f"  redone by hand from its own matrices, each applied once (within {atol:g})")


def check_parameter_count(module: nn.Module, echo: bool = True, tied: bool = True) -> int:
    """A multi-head attention with d_k = d_model / h holds 4·d_model² weights, whatever h is, plus
    4·d_model biases when its layers have them (each of the 3h + 1 layers adds its output width:
    3h·d_k + d_model). With tied=False, d_k is free and the weights are 4·h·d_k·d_model (3h
    matrices d_model × d_k and W^O of h·d_k × d_model). Returns the count; echo=False checks
    without printing."""
    d_model, h, d_k = module.d_model, module.num_heads, module.d_k
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    n_biases = sum(lin.bias.numel() for lin in linears if lin.bias is not None)
    count = sum(p.numel() for p in module.parameters())
    if tied:
        expected, symbols, numbers = 4 * d_model**2, "4·d_model²", f"4·{d_model}²"
    else:
        expected, symbols = 4 * h * d_k * d_model, "4·h·d_k·d_model"
        numbers = f"4·{h}·{d_k}·{d_model}"
    if n_biases:
        expected += 3 * h * d_k + d_model
        if h * d_k == d_model:
            symbols, numbers = f"{symbols} + 4·d_model (biases)", f"{numbers} + 4·{d_model}"
        else:
            symbols += " + (3h·d_k + d_model) (biases)"
            numbers += f" + (3·{h}·{d_k} + {d_model})"
    formula = f"{symbols} = {numbers}"
    if count != expected:
        raise _fail(
            f"{formula} = {expected:,} parameters",
            f"the module has {count:,} (h = {h}, d_k = {d_k}: h·d_k = {h * d_k}, "
            f"d_model = {d_model})",
        )
    if echo:
        print(f"✓ {count:,} parameters = {formula}")
    return count


def check_layer_count(module: nn.Module, expected: int, formula: str) -> None:
    """The module holds `expected` nn.Linear layers (its weight matrices), written `formula`."""
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    claim = f"{expected} weight matrices (nn.Linear layers) = {formula}"
    if len(linears) != expected:
        raise _fail(claim, f"the module has {len(linears)}")
    print(f"✓ {claim}")


def check_outputs_differ(a: torch.Tensor, b: torch.Tensor, name: str, at_least: float) -> float:
    """Two outputs of the same shape differ somewhere by more than `at_least` (a gap that rounding
    cannot make). Returns the largest difference."""
    gap = float((a.detach() - b.detach()).abs().max())
    if gap <= at_least:
        raise _fail(f"{name} differ", f"the largest difference is {gap:.2g}, not above {at_least}")
    print(f"✓ {name} differ: max |difference| = {gap:.2f} (> {at_least})")
    return gap


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


# --- notebooks 02 and 07: √d_k and dropout -------------------------------------------------------


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


# --- notebooks 05, 16 and 17: the heads inside the matrices --------------------------------------


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


# --- notebook 15: heads that share K and V ------------------------------------------------------


def check_kv_shared(module: nn.Module, num_kv_heads: int) -> None:
    """A per-head module with g = num_kv_heads K/V heads: the h / g heads of each group hold one
    w_k and one w_v weight (the same tensors, by `is`), and no two groups hold the same one. Its
    repr cannot tell: it lists a w_k per head, shared or not. Heads that hold copies (equal
    numbers, their own tensors) fail, and so does a module with too many or too few K/V heads."""
    h, g = module.num_heads, num_kv_heads
    if g < 1 or h % g:
        raise _fail(f"{g} K/V heads for {h} heads", f"g must divide h = {h}")
    group = h // g
    claim = f"the {h} heads use {g} w_k and {g} w_v, one of each per group of {group} heads"
    for role in ("w_k", "w_v"):
        weights = [getattr(head, role).weight for head in module.heads]
        for i, weight in enumerate(weights):
            first = (i // group) * group  # the first head of head i's group
            if weight is not weights[first]:
                raise _fail(claim, f"head {i}'s {role} is not head {first}'s (its own copy)")
        tensors = {id(w) for w in weights}
        if len(tensors) != g:
            raise _fail(claim, f"the heads hold {len(tensors)} different {role} tensors, not {g}")
    n = sum(p.numel() for p in module.parameters())  # parameters() yields a shared tensor once
    print(f"✓ {claim}")
    print(f"  (the same tensors, by `is`; parameters() counts each once: {n:,} numbers)")


# --- positions: what attention knows of word order ------------------------------------------------


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


# --- induction: two heads in two layers ----------------------------------------------------------


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


def check_refused(call, text: str, error: type[Exception] = ValueError) -> None:
    """`call(text)` refuses bad input with `error` and a message (printed after ✓); ✗ when it
    accepts the text, or fails some other way."""
    try:
        call(text)
    except error as err:
        print(f"✓ refused: {err}")
        return
    except Exception as err:  # noqa: BLE001 - any other failure is the ✗ to report
        raise _fail(f"refused {text[:20]!r}", f"raised {type(err).__name__}: {err}") from err
    raise _fail(f"refused {text[:20]!r}", f"accepted it: no {error.__name__} was raised")
