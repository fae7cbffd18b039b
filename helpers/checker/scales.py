"""The scores' scale: what a learner's code divides or multiplies them by, on which lines, and the
hint that names those lines."""

from __future__ import annotations

import torch

from helpers.checker.compare import _forms, _op, _ratio, _Run
from helpers.checker.mistakes import KINDS
from helpers.checker.trace import Record


def _scale_of(mine: torch.Tensor, stage: str, value: torch.Tensor) -> float | None:
    """c if the learner's tensor is c times the stage (in a form of its shape), else None."""
    for form in _forms(value, KINDS[stage]):
        if form.shape == mine.shape:
            c = _ratio(mine, form)
            if c is not None:
                return c
    return None


_SCALES = ("div", "truediv", "rtruediv", "itruediv", "true_divide", "divide", "mul", "rmul",
           "imul", "multiply")  # fmt: skip


def _scale_lines(run: _Run) -> list[int]:
    """The lines where the learner multiplies or divides a tensor (one of its own, or an input such
    as x) by a number on the way to the output, and the result equals no stage of the
    reference."""
    records, stages = run.records, run.reference
    right = {j for name, value in stages.items() for j in run.hits_of(name, value)}
    final = records[-1]  # the returned value: follow what made it
    todo = [j for j, r in enumerate(records[:-1]) if r.family == final.family]
    seen, lines = set(), set()
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        r = records[j]
        if _op(r) in _SCALES and len(r.parents) <= 1 and j not in right and r.lineno:
            lines.add(r.lineno)
        todo += r.parents
    return sorted(lines)


def _d_k(run: _Run) -> int | None:
    for name in ("q_heads", "q"):
        if name in run.reference:
            return int(run.reference[name].shape[-1])
    return None


def _scale_hint(record: Record, run: _Run) -> str:
    """For a tensor at another scale than the reference's (q / √d_k and k / √d_k): where else the
    code scales, and what the reference does."""
    lines = _scale_lines(run)
    others = [n for n in lines if n != record.lineno]
    listed = " and ".join(", ".join(map(str, others)).rsplit(", ", 1))
    plural = "s" if len(others) > 1 else ""
    d_k = _d_k(run)
    root = f"√d_k = {d_k**0.5:.3g}" if d_k else "√d_k"
    reference = f"the reference divides only the scores, by {root}, once."
    if others and record.lineno not in lines:  # this line goes on from what was scaled before
        return (
            f"look at the scale on line{plural} {listed}, which this line goes on from: {reference}"
        )
    also = f" your code also scales on line{plural} {listed};" if others else ""
    return f"look at the scale on this line:{also} {reference}"
