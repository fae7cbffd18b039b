"""A step the learner made right but used in the wrong place, or whose result nothing kept: q·qᵀ
with k made right, k and v swapped where they are used, √d_k on v, q handed to numpy, a tensor
method called alone (`scores.exp()`), a mask filled into a copy nobody reads. What `explain`
asks before it names a catalogued mistake or a difference on a line."""

from __future__ import annotations

import ast
import re

import torch

from helpers.checker.compare import (
    _PRODUCT_OPS,
    _forms,
    _op,
    _ratio,
    _Run,
    _same_in_some_form,
)
from helpers.checker.departures import (
    _discarded,
)
from helpers.checker.locate import (
    _assigned_name,
    _closure,
)
from helpers.checker.mistakes import KINDS
from helpers.checker.trace import Record


def _unread_upstream(record: Record | None, target: str, run: _Run) -> bool:
    """Whether `record`, taken for `target`, is one of the reference's earlier steps (q = x·W^Q,
    right) that no op the check sees reads afterwards (`(x @ wq.T).numpy()`): the learner's own
    earlier step, whose later use the check cannot follow; not their `target`."""
    if record is None:
        return False
    at = next((i for i, r in enumerate(run.records) if r is record), None)
    if at is None or any(at in r.parents for r in run.records) or _returned(record, run):
        return False
    return any(
        name in run.reference and _same_in_some_form(record.tensor, name, run.reference[name])
        for name in _closure(target) - {target}
    )


def _returned(record: Record | None, run: _Run) -> bool:
    """Whether `record` is the tensor the function returns (or a view of it)."""
    return (
        record is not None
        and bool(run.records)
        and record is not run.records[-1]
        and record.family == run.records[-1].family
    )


_STAGE_WORDS = {"weights": "your weights", "scores": "your scores", "masked": "your masked "
                "scores", "out": "your output", "heads": "your heads' outputs"}  # fmt: skip


def _dropped_method(record: Record, run: _Run) -> str | None:
    """The method's name when `record` is the result of a tensor method called alone on its line
    (`scores.exp()`: not an in-place `exp_`, not `heads.append(h)`) that nothing reads and the
    function does not return, else None."""
    at = next((i for i, r in enumerate(run.records) if r is record), None)
    if at is None or record.caller is not None or not record.code:
        return None
    if any(at in r.parents for r in run.records) or record.family == run.records[-1].family:
        return None
    try:
        tree = ast.parse(record.code.strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    name = call.func.attr
    return None if name.endswith("_") or name in ("append", "extend", "insert") else name


def _softmax_after(record: Record, runs: list[_Run]) -> Record | None:
    """The first softmax the learner's code takes after `record`, in the run that holds it."""
    for run in runs:
        at = next((i for i, r in enumerate(run.records) if r is record), None)
        if at is not None:
            return next((r for r in run.records[at + 1 :] if _op(r) == "softmax"), None)
    return None


def _unused_mask(runs: list[_Run]) -> Record | None:
    """The learner's masked_fill or torch.where whose result nothing uses, if any."""
    for run in runs:
        unused = _discarded(run.records)
        for j, r in enumerate(run.records):
            if j in unused and _op(r) in ("masked_fill", "where"):
                return r
    return None


def _divided_by_root_d_k(mine: torch.Tensor, stage: str, before: dict) -> bool:
    """Whether the learner's tensor is the reference's stage divided by √d_k, in some layout."""
    if stage not in before:
        return False
    d_k = before["q_heads" if "q_heads" in before else "q"].shape[-1]
    forms = [f for f in _forms(before[stage], KINDS[stage]) if f.shape == mine.shape]
    return any(
        (c := _ratio(mine, form)) is not None and abs(c * d_k**0.5 - 1) < 1e-3 for form in forms
    )


_V_DIVIDED = (
    "√d_k divides the values v, not the scores: the output is the same as dividing the weights "
    "after the softmax, and the scores before it stay unscaled"
)


# a tensor made from the wrong weight, as the output shows it: (the stage made, the tensor used in
# its place, what the right product is)
_IN_ITS_PLACE = {
    "keys_from_w_q": ("k", "q", "q·kᵀ", "the queries stand where the keys go (q·qᵀ)"),
    "values_from_w_k": ("v", "k", "the weights times v", "the keys stand where the values go"),
}


def _made_right_elsewhere(
    name: str, stage: str, record: Record | None, run: _Run, reference: dict
) -> Record | None:
    """For keys_from_w_q (values_from_w_k) named on a later line than the one that makes k (v):
    the learner's record before it that makes k (v) right (`reference`: the stages before the
    mistake), if there is one: the slip is then in how the later line uses it, not in the weight
    k is made with."""
    if name not in _IN_ITS_PLACE or record is None:
        return None
    made = _IN_ITS_PLACE[name][0]
    if stage.removesuffix("_heads") == made:
        return None
    names = [n for n in (f"{made}_heads", made) if n in reference]
    before = next((i for i, r in enumerate(run.records) if r is record), len(run.records))
    return next((r for r in run.records[:before] if r.lineno is not None and any(
        _same_in_some_form(r.tensor, n, reference[n]) for n in names)), None)  # fmt: skip


def _used_in_its_place(name: str, made_right: Record) -> tuple[str, str]:
    made, used, product, words = _IN_ITS_PLACE[name]
    headline = (
        f"{words}: the same as {made} made with w_{used}, though your {made}, made on "
        f"line {made_right.lineno}, is right"
    )
    return headline, f"this line should use your {made}, not {used}: {product}."


def _made_swapped(runs: list[_Run], kept: list) -> bool:
    """For keys_values_swapped: whether both k and v are made with the swap (none kept right) and
    the tensor that equals the reference's values is made as the keys (`k = x @ w_v.T`), not made
    as v and then used in the keys' place."""
    if any(
        keep.get(n) is not None for _, _, keep in kept for n in ("k", "v", "k_heads", "v_heads")
    ):
        return False
    for run, (_, found, _) in zip(runs, kept):
        i = found.get("k", found.get("k_heads"))
        if i is None:
            return False
        name = _assigned_name(run.records[i], run.records).lower()
        if not re.fullmatch(r"k(_?\w{0,6})?|keys?(_\w*)?", name):
            return False
    return True


def _keys_made_as_queries(records: list[Record], own: dict) -> Record | None:
    """Where the scores' product is written q·kᵀ but its first factor is the reference's keys (q
    made with W^K, k with W^Q): the record that made that first factor, else None."""
    j = own["scores"]
    while _op(records[j]) not in _PRODUCT_OPS and len(records[j].parents) == 1:
        j = records[j].parents[0]  # back through the division by √d_k
    keys = {own.get("k"), own.get("k_heads")} - {None}
    if _op(records[j]) not in _PRODUCT_OPS or not records[j].parents:
        return None
    if not _written_q_first(records[j].code or ""):  # `k @ q.mT`: the slip is on that line
        return None
    family = records[records[j].parents[0]].family  # the factor, or a view of it (its heads)
    made = [i for i in keys if records[i].family == family]
    return records[min(made)] if made else None


def _written_q_first(code: str) -> bool:
    """Whether a line's names read a query-like name before a key-like one (`q @ k.mT`,
    `torch.matmul(q_i, k_i.transpose(1, 2))`): the learner means q·kᵀ there."""
    names = re.findall(r"[A-Za-z_]\w*", code.split("=", 1)[-1] if "==" not in code else code)
    kinds = ["q" if re.fullmatch(r"q(_?\w{0,6})?|quer\w*", n, re.IGNORECASE)
             else "k" if re.fullmatch(r"k(_?\w{0,6})?|keys?(_\w*)?", n, re.IGNORECASE)
             and n != "keepdim" else "" for n in names]  # fmt: skip
    return "q" in kinds and "k" in kinds and kinds.index("q") < kinds.index("k")
