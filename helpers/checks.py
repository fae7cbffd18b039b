"""Live checks that notebooks call after each step, for learners to read.

On success each check prints one line starting with ✓ that says what was checked; on failure it
raises AssertionError saying what was expected, what came, and a hint where to look.
Torch only: no plotting, no widgets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

__all__ = [
    "check_shape",
    "check_close",
    "check_close_all",
    "check_attention_rows",
    "default_atol",
]


def _fmt(shape: Sequence) -> str:
    return (
        "("
        + ", ".join("*" if n is None else str(n) for n in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def _say(line: str, echo: bool) -> str | None:
    """Print the ✓ line for a notebook, or return it for a widget to show."""
    if echo:
        print(line)
        return None
    return line


def _dim_names(dims: str | Sequence[str] | None, rank: int) -> list[str] | None:
    if dims is None:
        return None
    names = dims.replace(",", " ").split() if isinstance(dims, str) else list(dims)
    if len(names) != rank:
        raise ValueError(
            f"dims names {len(names)} dims ({', '.join(names)}) but the expected shape has {rank}; "
            "give one name per dim, e.g. dims='B T d_k'."
        )
    return names


def _shape_hint(got: tuple[int, ...], expected: tuple[int | None, ...]) -> str:
    numel_known = all(n is not None for n in expected)
    same_numel = numel_known and math.prod(got) == math.prod(expected)
    if len(got) != len(expected):
        if len(got) == len(expected) - 1 and tuple(expected[1:]) == got:
            return "The batch dim is missing: yours is the expected shape without its first dim."
        if same_numel:
            return (
                "All the numbers are there, grouped into other dims: some dims still need splitting"
                " or merging."
            )
        return "Follow the tensor back to the view, transpose or product that made it."
    if numel_known and sorted(got) == sorted(expected):
        return (
            "The same sizes in another order: a step that reorders dims is missing, or swaps the"
            " wrong ones."
        )
    if same_numel:
        return "The same number of entries, cut differently: check the view that split the dims."
    return "Follow the tensor back to the matrix or view that produced the differing dim."


def check_shape(
    tensor: torch.Tensor,
    expected: Sequence[int | None],
    name: str,
    dims: str | Sequence[str] | None = None,
    echo: bool = True,
) -> str | None:
    """Check that `tensor` has shape `expected` (None = any size); `dims` names the dims.

    Prints the ✓ line, or with echo=False returns it (for widgets).

    >>> check_shape(torch.zeros(2, 6, 8), (2, 6, 8), "q", dims="B T d_k")
    ✓ q: (2, 6, 8) = (B, T, d_k)
    """
    expected = tuple(expected)
    names = _dim_names(dims, len(expected))
    got = tuple(tensor.shape)
    named = f" = ({', '.join(names)})" if names else ""
    fits = len(got) == len(expected) and all(e is None or e == g for g, e in zip(got, expected))
    if fits:
        return _say(f"✓ {name}: {_fmt(got)}{named}", echo)
    lines = [f"✗ {name}: expected {_fmt(expected)}{named}, got {_fmt(got)}."]
    if len(got) == len(expected):
        for i, (g, e) in enumerate(zip(got, expected)):
            if e is not None and g != e:
                label = f"dim {i} ({names[i]})" if names else f"dim {i}"
                lines.append(f"  {label} is {g}, not {e}.")
    lines.append(f"  Hint: {_shape_hint(got, expected)}")
    raise AssertionError("\n".join(lines))


def default_atol(*tensors: torch.Tensor) -> float:
    """The tolerance the course uses: 1e-10 when every tensor is float64, else 1e-5."""
    return 1e-10 if all(t.dtype == torch.float64 for t in tensors) else 1e-5


def check_close(
    a: torch.Tensor, b: torch.Tensor, name: str, atol: float | None = None, echo: bool = True
) -> str | None:
    """Check that a and b have the same shape and differ by at most `atol` anywhere.

    `atol` defaults to `default_atol(a, b)`: 1e-10 for float64, 1e-5 for float32. The ✓ line
    names only the tolerance: the exact rounding error differs between CPUs, and the committed
    notebooks must print the same everywhere.
    """
    atol = default_atol(a, b) if atol is None else atol
    if a.shape != b.shape:
        raise AssertionError(
            f"✗ {name}: the shapes differ, {_fmt(a.shape)} and {_fmt(b.shape)}, so the values "
            "cannot be compared.\n  Hint: check_shape each one against what you expect first."
        )
    a64, b64 = a.detach().double(), b.detach().double()
    for label, t in (("the first", a64), ("the second", b64)):
        if torch.isnan(t).any():
            raise AssertionError(
                f"✗ {name}: {label} tensor contains NaN at {int(torch.isnan(t).sum())} places.\n"
                "  Hint: a softmax over a row where every score is -inf gives NaN (a fully "
                "masked query)."
            )
    diff = (a64 - b64).abs()
    worst = float(diff.max()) if diff.numel() else 0.0
    if worst <= atol:
        return _say(f"✓ {name}: equal within atol {atol:.0e}", echo)
    index = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    raise AssertionError(
        f"✗ {name}: max |difference| = {worst:.3g} at index {index}, more than atol {atol:.0e} "
        f"(there {float(a64[index]):.4g} vs {float(b64[index]):.4g}; "
        f"{int((diff > atol).sum())} of {diff.numel()} entries differ).\n"
        "  Hint: a difference this large is not rounding: one step differs (the scaling, the "
        "softmax dim, the order of the heads, a weight used transposed, a missing W^O)."
    )


def check_close_all(
    got: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor], name: str
) -> None:
    """check_close for every tensor of two {name: tensor} dicts with the same names (e.g. every
    parameter of two modules, or every gradient). Prints one ✓ line naming how many it compared."""
    if set(got) != set(expected):
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        raise AssertionError(
            f"✗ {name}: not the same tensors: missing {missing or 'none'}, extra {extra or 'none'}."
        )
    for key in expected:
        check_close(got[key], expected[key], f"{name}, {key}", echo=False)
    atol = default_atol(*got.values(), *expected.values())
    print(f"✓ {name}: all {len(expected)} equal within atol {atol:.0e} ({', '.join(expected)})")


def check_attention_rows(
    weights: torch.Tensor,
    name: str = "weights",
    mask: torch.Tensor | None = None,
    atol: float | None = None,
    echo: bool = True,
) -> str | None:
    """Check attention weights (..., T_q, T_k): entries in [0, 1], each row summing to 1.

    With a boolean `mask` (True = may attend, broadcastable to the weights), entries where the
    mask is False must be 0, and a row whose mask is all False must be all 0 (no NaN).
    """
    atol = default_atol(weights) if atol is None else atol
    w = weights.detach().double()
    n_rows = w[..., 0].numel()
    if torch.isnan(w).any():
        raise AssertionError(
            f"✗ {name}: {int(torch.isnan(w).sum())} entries are NaN.\n"
            "  Hint: a row where every score is -inf (a query that may attend to nothing) gives "
            "NaN under softmax; give it zero weights instead."
        )
    if (w < -atol).any() or (w > 1 + atol).any():
        raise AssertionError(
            f"✗ {name}: entries run from {float(w.min()):.4g} to {float(w.max()):.4g}, outside "
            "[0, 1].\n  Hint: these are not softmax outputs yet: apply softmax over the keys."
        )
    target = torch.ones_like(w[..., 0])
    n_empty = 0
    if mask is not None:
        mask = torch.broadcast_to(mask, w.shape)
        if (w.masked_fill(mask, 0.0).abs() > atol).any():
            raise AssertionError(
                f"✗ {name}: some weight goes to a key the mask forbids.\n"
                "  Hint: set the forbidden scores to -inf before the softmax, not after it."
            )
        target = mask.any(dim=-1).double()
        n_empty = int((target == 0).sum())
    sums = w.sum(dim=-1)
    worst = float((sums - target).abs().max()) if sums.numel() else 0.0
    if worst > atol:
        index = tuple(
            int(i) for i in torch.unravel_index((sums - target).abs().argmax(), sums.shape)
        )
        col_sums = w.sum(dim=-2)
        hint = (
            "the columns sum to 1 instead: the softmax ran over the queries (the second-to-last "
            "dim), not the keys: each query's row must sum to 1."
            if float((col_sums - 1).abs().max()) <= atol
            else "weights are (..., T_q, T_k): the softmax must run over the keys, so that each "
            "query's row sums to 1."
        )
        raise AssertionError(
            f"✗ {name}: row {index} sums to {float(sums[index]):.6g}, not "
            f"{float(target[index]):.0f} (atol {atol:.0e}).\n  Hint: {hint}"
        )
    if n_rows == 1:
        rows = "the row"
    else:
        rows = f"all {n_rows} rows" if not n_empty else f"{n_rows - n_empty} of {n_rows} rows"
    sums = "sums" if rows == "the row" or n_rows - n_empty == 1 else "sum"
    empty = ""
    if n_empty:
        empty = (
            "; the fully masked row is all 0"
            if n_empty == 1
            else (f"; the {n_empty} fully masked rows are all 0")
        )
    return _say(
        f"✓ {name}: {rows} of {_fmt(w.shape)} {sums} to 1 within {atol:.0e}, entries in "
        f"[0, 1]{empty}",
        echo,
    )
