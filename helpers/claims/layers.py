"""A layer as the notebooks build it: its weight's layout, separate matrices, a head that projects
once, parameter and layer counts, outputs that differ (03, 04, 06, 07), and K/V tensors shared
by groups of heads (15)."""

from __future__ import annotations

import torch
from torch import nn

from helpers.claims.base import _fail


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
