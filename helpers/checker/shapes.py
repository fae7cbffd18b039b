"""The messages for an exercise's output of the wrong shape or type: a numpy array, the right
numbers with their dims in another order (a transpose missing, one too many, or a stack along
another dim), the same sizes in another order."""

from __future__ import annotations

import itertools

import torch

from helpers.checker.compare import _same
from helpers.checker.sizes import check_sizes
from helpers.checker.trace import Record, Trace


def _shape_message(
    out: torch.Tensor | None, expected: torch.Tensor, trace: Trace, name: str
) -> str:
    """'✗ Expected shape …, got …' and what the numbers say about it (`out` None: the function
    returned no tensor)."""
    got = tuple(out.shape) if out is not None else type(trace.result).__name__
    message = f"✗ Expected shape {tuple(expected.shape)}, got {got}."
    order = _permuted(out, expected) if out is not None else None
    if order is not None and _rearranges(trace.records):
        message += (
            " The same numbers with the dims in another order: look at the steps that set "
            "the order of the dims (a transpose or permute, an einsum's output, or the dim a "
            "stack or cat joins along)."
        )
    elif order is not None:
        moved = [i for i, j in enumerate(order) if i != j]
        dims = " and ".join(map(str, moved)) if len(moved) == 2 else f"in the order {order}"
        message += (
            " The same numbers with the dims in another order: yours are the reference's "
            f"with dims {dims} {'swapped' if len(moved) == 2 else ''}".rstrip()
            + ", and your code never reorders its dims: that step is missing."
        )
    elif out is not None and sorted(out.shape) == sorted(expected.shape):
        if _same(out.detach().flatten().sort().values, expected.flatten().sort().values):
            message += (  # a reshape that reads them in another order (B and T swapped)
                " The same sizes in another order and the same numbers, but no reordering of "
                "the dims puts them where the reference's are: a reshape or view may read "
                f"them in another order. {check_sizes(name)}"
            )
        else:
            message += (
                f" The same sizes in another order, but not the same numbers. {check_sizes(name)}"
            )
    return message


def _permuted(out: torch.Tensor, expected: torch.Tensor) -> tuple[int, ...] | None:
    """The order of `expected`'s dims that gives `out` (a transpose too many, or one missing), if
    `out` holds the same numbers with its dims in another order; else None."""
    if out.dim() != expected.dim() or out.dim() > 5:
        return None
    return next(
        (
            order for order in itertools.permutations(range(expected.dim()))
            if tuple(expected.shape[i] for i in order) == tuple(out.shape)
            and _same(out, expected.permute(order))
        ),
        None,
    )  # fmt: skip


_TRANSPOSES = (
    "transpose",
    "permute",
    "t",
    "swapaxes",
    "swapdims",
    "movedim",
    "get",
    "einsum",
    "stack",
    "cat",
    "concat",
    "concatenate",
)  # a join's dim sets an order too


def _rearranges(records: list[Record]) -> bool:
    """Whether the learner's code sets the order of dims: transposes or permutes a tensor (x.T and
    x.mT are "__get__"), or joins tensors along a dim."""
    return any(r.op.strip("_") in _TRANSPOSES for r in records)


def _is_numpy(result: object) -> bool:
    return type(result).__module__.split(".")[0] == "numpy"


def _numpy_message(result: object, expected: torch.Tensor, what: str) -> str:
    """For a function that returns a numpy array: say so, and whether its numbers are right."""
    try:
        numbers = torch.as_tensor(result)
        right = numbers.shape == expected.shape and _same(numbers.float(), expected)
    except Exception:  # noqa: BLE001 - an array torch cannot read
        right = False
    same = " Its numbers equal the reference's." if right else ""
    return (
        f"✗ Your function returned a numpy array ({type(result).__name__}), not a torch tensor; "
        f"it should return {what}.{same} Hint: keep the computation in torch: a tensor's "
        ".numpy() leaves torch, and the check needs a torch tensor back."
    )
