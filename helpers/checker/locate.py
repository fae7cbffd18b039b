"""The line to blame for a departure: the record's own line, or, where that line is right given what
it was given (a view, a slice, a cat), the line that made its input; a scale's lines."""

from __future__ import annotations

import ast
import dataclasses
import re

import torch

from helpers.checker.compare import (
    _BOUNDARY,
    _JOINS,
    _MADE_LATE,
    _PRODUCT_OPS,
    _REARRANGE,
    _REDUCTIONS,
    _SELECTS,
    ATOL,
    Finding,
    _comparable,
    _forms,
    _is_index,
    _op,
    _Run,
    _same,
    _same_in_some_form,
)
from helpers.checker.mistakes import DEPENDS, HOME, KINDS
from helpers.checker.scales import _SCALES, _scale_hint
from helpers.checker.sources import _position
from helpers.checker.trace import Record

# tensors made from nothing (zeros, empty, full): a buffer to fill, never a step's values
_FACTORIES = {"zeros", "zeros_like", "empty", "empty_like", "ones", "ones_like", "full",
              "full_like", "new_zeros", "new_empty", "new_ones", "new_full"}  # fmt: skip


def _role(stage: str, stages: dict, found: dict, records: list[Record]) -> int | None:
    """The learner's tensor made in place of `stage` (its input to the next step), or None."""
    if KINDS[stage] == "out":
        return len(records) - 1
    shapes = {tuple(f.shape) for f in _forms(stages[stage], KINDS[stage])}
    start = max((found[d] for d in DEPENDS.get(stage, ()) if d in found), default=-1)
    inputs = _closure(stage) - {stage}  # a tensor equal to one of them, made after this stage's
    taken = {i for n, i in found.items() if n not in inputs or i <= start}  # inputs: used here
    # a view of a matched tensor in one of that stage's layouts is not new; the same numbers
    # rearranged into another layout (the heads reshaped to (B, T, d_model)) are, and so is a join
    # (a loop's per-head v put side by side where the heads' outputs belong)
    owned: dict[int, set] = {}
    for name, i in found.items():
        if name in stages:
            forms = _forms(stages[name], KINDS[name])
            owned.setdefault(records[i].family, set()).update(tuple(f.shape) for f in forms)
    index = KINDS[stage] == "index"
    candidates = [i for i in range(start + 1, len(records) - 1)
                  if tuple(records[i].tensor.shape) in shapes and i not in taken
                  and records[i].op not in _FACTORIES
                  and _is_index(records[i]) == index
                  and (tuple(records[i].tensor.shape) not in owned.get(records[i].family, ())
                       or _op(records[i]) in _JOINS)
                  ]  # fmt: skip
    if not candidates:
        return None
    if index:  # the positions the code reads with, not a step on the way to them (t - n)
        used = {p for r in records if not _is_index(r) for p in r.parents}
        candidates = [i for i in candidates if i in used] or candidates
    ops = [records[i].op for i in candidates]
    if stage in ("scores", "masked"):  # the last one before the mask (scores) or the softmax
        ends = _BOUNDARY if stage == "scores" else ("softmax",)
        stop = next((i for i, op in zip(candidates, ops) if op.startswith(ends)), None)
        before = [i for i in candidates if stop is None or i < stop]
        return before[-1] if before else candidates[0]
    if stage == "weights":
        return next((i for i, op in zip(candidates, ops) if "softmax" in op), candidates[0])
    if stage in ("q", "k", "v", "xw"):  # a projection, not x changed on the way (a layer
        # norm, or x divided by √d_k before it is used twice)
        return next((i for i, op in zip(candidates, ops) if op in _PRODUCT_OPS), candidates[0])
    return candidates[0]


def _holds(parent: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether every number of `value` is somewhere among `parent`'s numbers (within atol)."""
    a, b = _comparable(value).flatten(), _comparable(parent).flatten().sort().values
    if not len(b) or a.isnan().any() or b.isnan().any():
        return True  # nothing to say: keep the blame where it is
    at = torch.searchsorted(b, a).clamp(max=len(b) - 1)
    near = torch.minimum((b[at] - a).abs(), (b[(at - 1).clamp(min=0)] - a).abs())
    return bool((near <= ATOL).all())


def _heads_equal(t: torch.Tensor, stages: dict) -> tuple[bool, set[int]]:
    """(whether t equals one of `stages` in one of its all-heads forms, the heads j whose
    slice of a stage t equals)."""
    whole, heads = False, set()
    for name, value in stages.items():
        if KINDS[name] == "out":
            continue
        if value.dim() == 4 and value.shape[1] > 1:
            slices = value.unbind(1)
            heads |= {j for j, v in enumerate(slices)
                      if any(f.shape == t.shape and _same(t, f) for f in (v, v.mT))}  # fmt: skip
            if any(f.shape == t.shape and _same(t, f) for f in _forms(value, KINDS[name])[:3]):
                whole = True
        elif _same_in_some_form(t, name, value):
            whole = True
    return whole, heads


def _stands_for_input(t: torch.Tensor, stage: str, stages: dict) -> bool:
    """Whether t has the layout of an input of `stage` (a stage it is made from) and not of
    `stage` itself: the tensor the learner used in that input's place."""
    own = {tuple(f.shape) for f in _forms(stages[stage], KINDS[stage])}
    inputs = {tuple(f.shape) for name in _closure(stage) - {stage} if name in stages
              and KINDS[name] not in ("out", "index")
              for f in _forms(stages[name], KINDS[name])}  # fmt: skip
    return tuple(t.shape) in inputs and tuple(t.shape) not in own


def _blamed_input(finding: Finding, runs: list[_Run], at: list[dict]) -> Finding:
    """The line to blame, where the finding's line is right given what it was given (a line
    whose own op is right must not be blamed): (1) a selection or view (diag[..., 1:]) taken from
    a tensor that does not hold the stage's numbers: the line that made that tensor; (2) a step
    made from an input, on another line, that equals no reference value in any layout (k zeroed
    at the masked keys before the scores), or, in a loop, another head's value (q of head i made
    with w_q[i - 1]): that input's line. `at`: each run's stages when the finding was made (the
    reference with the mistakes found before it made), what the learner's tensors are held to."""
    record, run, stages = finding.record, runs[-1], at[-1]
    if record is None or KINDS.get(finding.stage) in (None, "out") or record.lineno is None:
        return finding
    if finding.mistake in _MADE_LATE and finding.headline:  # its input is unscaled on purpose
        return finding
    index = {id(r): i for i, r in enumerate(run.records)}
    if id(record) not in index:
        which = next((i for i, r in enumerate(runs) if id(record) in {id(x) for x in r.records}),
                     None)  # fmt: skip
        if which is None:
            return finding
        run, stages = runs[which], at[which]
        index = {id(r): i for i, r in enumerate(run.records)}
    value = stages.get(finding.stage)
    if value is None:
        return finding
    moved, other_head = record, False
    while _op(moved).strip("_") in _SELECTS and moved.parents:  # (1)
        parent = run.records[moved.parents[0]]
        if not parent.dtype.is_floating_point or _holds(parent.tensor, value):
            break
        moved = parent
    if moved is record:  # (2): the inputs this line was given, from other lines
        key = (record.lineno, record.op, tuple(record.tensor.shape))
        siblings = [r for r in run.records if (r.lineno, r.op, tuple(r.tensor.shape)) == key]
        heads = stages["q_heads"].shape[1] if "q_heads" in stages else 1
        loop_pass = next(k for k, r in enumerate(siblings) if r is record)
        seen, todo, frontier = set(), list(record.parents), []
        while todo:
            j = todo.pop(0)
            if j in seen:
                continue
            seen.add(j)
            r = run.records[j]
            if r.lineno == record.lineno or (_op(r).strip("_") in _REARRANGE and r.parents):
                todo += r.parents  # the same line, or the same numbers laid out anew
            elif r.dtype.is_floating_point:
                frontier.append(r)
        for r in sorted(frontier, key=lambda r: index[id(r)]):
            whole, of_heads = _heads_equal(r.tensor, stages)
            other_head = (not whole and of_heads and len(siblings) == heads > 1
                          and loop_pass not in of_heads)  # fmt: skip
            nothing = (not whole and not of_heads and _op(r) not in _PRODUCT_OPS
                       and _stands_for_input(r.tensor, finding.stage, stages))  # fmt: skip
            if other_head or nothing:
                moved = r
                break
    if moved is record:
        return finding
    hint = finding.hint  # a scale's hint names the other lines that scale: from the new one
    rescaled = _op(moved).strip("_") in _SCALES and "at another scale" in finding.detail
    if hint.startswith("look at the scale on this line") or rescaled:  # `q /= √d_k`, then the
        hint = _scale_hint(moved, run)  # scores divided again: the scale, not a product
    elif not hint and not finding.mistake and other_head:  # not the stage's hint for its own line
        hint = (
            "in at least one pass of the loop this line makes another head's numbers: look at "
            "which head's matrices or features it takes in each pass."
        )
    return dataclasses.replace(finding, record=moved, position=_position(moved, runs), hint=hint)


def _unseen_lines(name: str, stage: str, record: Record | None, runs: list[_Run]) -> tuple:
    """The lines before `record` that could hold named mistake `name` but that the check could
    not compare: when the mistake is made at a stage before `stage` (its HOME) and the learner's
    code holds no tensor for that stage (15's query heads grouped in a 5-D view, say), the line
    found is only where the mistake is first seen. Those are the lines of its ancestors that no
    matched stage accounts for; () when the home stage was matched or the mistake has none."""
    home = HOME.get(name)
    if record is None or record.lineno is None or home is None or home == stage:
        return ()
    run = next((r for r in runs if any(x is record for x in r.records)), runs[0])
    if home in run.found or home not in run.stages:
        return ()
    at = next(i for i, x in enumerate(run.records) if x is record)
    matched = {run.records[i].lineno for i in run.found.values()}
    on_line = [r for r in run.records[: at + 1] if r.lineno == record.lineno]  # `return` has
    seen, todo, lines = set(), [j for r in on_line for j in r.parents], set()  # no parents
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        r = run.records[j]
        if r.lineno is not None and r.lineno < record.lineno and r.lineno not in matched:
            lines.add((r.lineno, r.code))
        if j not in run.found.values():
            todo += r.parents
    return tuple(sorted(lines))


def _only_layout_calls(code: str) -> bool:
    """Whether a line's calls only lay numbers out anew or average them (`return x.mean(0)`)."""
    calls = re.findall(r"\.?([A-Za-z_]\w*)\s*\(", code or "")
    allowed = _REARRANGE | _SELECTS | set(_JOINS) | set(_REDUCTIONS) | {"stack"}
    return bool(calls) and all(c in allowed for c in calls)


def _layout_source(finding: Finding, runs: list[_Run]) -> Finding:
    """A finding whose line only lays numbers out anew (a permute, a stack, a mean, an index)
    from a tensor made on another line by such a step too (a view, a split, slices, an index):
    the slip may be on either line, or in an index those lines use. Names that input's line as
    the finding's `source`; a step whose input comes from a product or a softmax stays as it is
    (its own line is the place)."""
    layout = _REARRANGE | _SELECTS | set(_JOINS) | set(_REDUCTIONS) | {"stack", "index_select"}
    record = finding.record
    if record is None or record.lineno is None:
        return finding
    run = next((r for r in runs if any(x is record for x in r.records)), runs[0])
    if _op(record) == "return" or not any(x is record for x in run.records):
        # the value returned (or a copy of its record): the step on that line that made it
        made = [r for r in run.records if r.lineno == record.lineno and _op(r) != "return"
                and r.tensor.shape == record.tensor.shape]  # fmt: skip
        if made:
            record = made[-1]
        elif not finding.mistake and _only_layout_calls(record.code):  # `return x.mean(0)`
            before = [r for r in run.records if r.lineno != record.lineno
                      and r.dtype.is_floating_point and _op(r) != "return"]  # fmt: skip
            last = before[-1] if before else None
            if last is not None and _op(last).strip("_") in layout | {"getitem"}:
                return dataclasses.replace(finding, source=last)
            return finding
    if _op(record).strip("_") not in layout:
        return finding
    if finding.mistake and _op(record) in _REDUCTIONS:  # a named sum or mean: that line's own
        return finding
    seen, todo, inputs = set(), list(record.parents), []
    while todo:  # the tensors this line was given, from other lines
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        r = run.records[j]
        if r.lineno == record.lineno:
            todo += r.parents
        elif r.dtype.is_floating_point:
            inputs.append(r)
    laid_out = [r for r in inputs if _op(r).strip("_") in layout | {"getitem"}]
    if not laid_out or len(laid_out) != len(inputs):
        return finding
    return dataclasses.replace(finding, source=max(laid_out, key=lambda r: r.lineno or 0))


def _fused_call(record: Record, stage: str, run: _Run, hint: str) -> tuple[str, str]:
    """(headline, hint) for a difference made inside F.scaled_dot_product_attention, whose
    weights the check cannot see: a causal mask where the run has none is named (is_causal=True);
    else the hint says the check cannot tell whether the weights or the values differ."""
    stages_of, value = run.stages_of, run.stages.get(stage)
    keywords = getattr(stages_of, "keywords", {})
    if value is not None and "mask" in keywords and keywords["mask"] is None and "x" in keywords:
        b, t = keywords["x"].shape[:2]
        t_k = keywords["context"].shape[1] if keywords.get("context") is not None else t
        causal = torch.ones(t, t_k, dtype=torch.bool).tril().expand(b, t, t_k)
        try:
            masked = stages_of.func(**{**keywords, "mask": causal}).get(stage)
        except (RuntimeError, ValueError, TypeError):
            masked = None
        if masked is not None and _same_in_some_form(record.tensor, stage, masked):
            return (
                "your heads' outputs are the reference's with a causal mask (each query sees "
                "only the keys up to itself), a mask this exercise does not ask for.",
                "look at this call's arguments: is_causal=True (or an attn_mask) hides keys; "
                "this exercise passes no mask, so every query should see every key.",
            )
    return "", (
        "this line computes the weights inside F.scaled_dot_product_attention, where the check "
        "cannot see them: it cannot tell whether the weights or the values differ. Look at every "
        "argument of the call: q, k, v, and any attn_mask (a float one is added to the scores; "
        "a boolean one means True = may attend), is_causal or scale."
    )


def _own_twin(record: Record, stage: str, run: _Run) -> Record:
    """The record to blame for `stage` when the one found holds another stage's numbers (k made
    with w_v equals v): a record with the same numbers on another line that assigns a name like
    the stage's (`k = ...`), when the one found assigns another (`v = ...`); else the one found."""

    def assigned(r: Record) -> str:
        match = re.match(r"\s*([A-Za-z_]\w*)\s*(?:,[^=]*)?=[^=]", r.code or "")
        return match.group(1).lower() if match else ""

    name = stage.split("_")[0]
    if assigned(record) in ("", name):
        return record
    twins = [r for r in run.records
             if r.lineno != record.lineno and r.dtype.is_floating_point
             and r.tensor.shape == record.tensor.shape and _same(r.tensor, record.tensor)
             and assigned(r) == name]  # fmt: skip
    return twins[0] if twins else record


def _assigned_name(record: Record, records: list[Record]) -> str:
    """The name its line assigns the record's tensor to: `k = ...` gives "k"; in `k, v = (... for w
    in ...)` the line's i-th tensor of its shape made by a product goes to the i-th name. '' when
    the line does not tell."""
    try:
        tree = ast.parse((record.code or "").strip())
    except SyntaxError:
        return ""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return ""
    target = tree.body[0].targets[0]
    if isinstance(target, ast.Name):
        return target.id
    if not isinstance(target, ast.Tuple) or not all(isinstance(t, ast.Name) for t in target.elts):
        return ""
    made = [r for r in records if r.lineno == record.lineno and _op(r) in _PRODUCT_OPS
            and r.tensor.shape == record.tensor.shape]  # fmt: skip
    at = next((n for n, r in enumerate(made) if r.family == record.family), None)
    if at is None or len(made) != len(target.elts):
        return ""
    return target.elts[at].id


def _same_line(j: int, stage: str, run: _Run) -> bool:
    """Whether record j is made on the line that makes `stage` (the output: on the line that
    makes the returned numbers)."""
    i = _role(stage, run.stages, run.found, run.records)
    if i is None:
        return False
    record = _made_at(run) if i == len(run.records) - 1 else run.records[i]
    return record.lineno is not None and record.lineno == run.records[j].lineno


def _made_at(run: _Run) -> Record:
    """The returned value's record, placed on the line that made its numbers (`out = w @ v`
    before `return out`), when that line is in the function checked."""
    return _made_at_records(run.records)


def _made_at_records(records: list[Record]) -> Record:
    """_made_at, from the records alone."""
    final = records[-1]
    made = [r for r in records[:-1] if r.family == final.family and r.lineno is not None
            and r.caller is None and r.tensor.shape == final.tensor.shape
            and _same(r.tensor, final.tensor)]  # fmt: skip
    if final.caller is not None or not made:
        return final
    return Record(final.tensor, final.op, made[0].lineno, made[0].code, None, final.family)


def _merge_start(record: Record, run: _Run) -> Record:
    """The line where the learner's merge departs: `record` (B, T, d_model) is made from the
    heads by a chain of views and transposes; the first link after the last one that holds the
    heads as (B, h, T, d_k) or (B, T, h, d_k) (a reshape of which merges them right)."""
    index = {id(r): i for i, r in enumerate(run.records)}
    chain, i = [record], index.get(id(record))
    while i is not None:
        current = run.records[i]
        if current.op.strip("_") not in _REARRANGE or not current.parents:
            break
        parent = run.records[current.parents[0]]
        if parent.family != record.family:
            break
        chain.append(parent)
        i = current.parents[0]
    heads = run.stages.get("heads")
    if heads is None or heads.dim() != 4:
        return record
    good = (heads, heads.transpose(1, 2))
    chain.reverse()  # from the heads on
    right = [n for n, r in enumerate(chain) if any(_same(r.tensor, g) for g in good)]
    if not right or right[-1] + 1 >= len(chain):
        return record
    return chain[right[-1] + 1]


def _made_after_the_weights(stage: str, record: Record | None, run: _Run) -> bool:
    """Whether `record`, taken for a stage the weights are made from (the keys, the scores), is
    made from a softmax's output: then it is the weights at work (weights · v), not that stage."""
    if record is None or "weights" not in run.stages or "weights" in _closure(stage):
        return False
    index = {id(r): i for i, r in enumerate(run.records)}
    todo, seen = [index.get(id(record))], set()
    while todo:
        i = todo.pop()
        if i is None or i in seen:
            continue
        seen.add(i)
        if "softmax" in run.records[i].op:
            return True
        todo += run.records[i].parents
    return False


def _closure(stage: str) -> set[str]:
    """The stage and every stage it is computed from."""
    found, todo = {stage}, [stage]
    while todo:
        for earlier in DEPENDS.get(todo.pop(), ()):
            if earlier not in found:
                found.add(earlier)
                todo.append(earlier)
    return found
