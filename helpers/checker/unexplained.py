"""A departure no known mistake explains: what the learner's tensor is instead (a right tensor in
another stage's place, a head never made or made twice, another stage of the reference), where a
right tensor was first used, and which earlier stage's input changed."""

from __future__ import annotations

import re

from helpers.checker.compare import (
    _JOINS,
    _PRODUCT_OPS,
    _REDUCTIONS,
    _forms,
    _Found,
    _is_index,
    _op,
    _Run,
    _same,
    _same_in_some_form,
    _vouched,
)
from helpers.checker.locate import _assigned_name, _closure, _role
from helpers.checker.mistakes import DEPENDS, KINDS
from helpers.checker.trace import Record


def _made_in_place(stage: str, run: _Run) -> bool:
    """Whether the learner made a tensor in `stage`'s place (17's code that never makes q has no
    tensor in q's place: the departure is not there)."""
    if KINDS[stage] == "out":
        return True
    target = _cut_first(stage, run)
    return _role(target, run.stages, run.found, run.records) is not None


def _own(found: _Found) -> dict[str, int]:
    return {name: i for name, i in found.items() if name not in found.borrowed}


def _misplaced(run: _Run):
    """A right tensor used in the wrong place: the first stage no tensor matches is computed (in
    the learner's code) from a tensor that equals a stage it does not depend on (scores made from
    a k that equals the reference's v: w_k and w_v swapped). Then (the stage of the tensor's role,
    the same, the learner's record where it was made, detail, hint), else None."""
    stage = next((n for n in run.stages if n not in _vouched(run.found, run.stages)), None)
    if stage is None or KINDS[stage] == "out":
        return None
    i = _role(_cut_first(stage, run), run.stages, run.found, run.records)
    if i is None:
        return None
    stage_of = {}
    for name, j in _own(run.found).items():
        stage_of.setdefault(run.records[j].family, name)
    seen, todo, inputs = set(), list(run.records[i].parents), {}
    while todo:  # the learner's tensors this one is made from, back to ones that match a stage
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        name = stage_of.get(run.records[j].family)
        if name is None:
            todo += run.records[j].parents
        else:
            inputs.setdefault(name, j)
    allowed = _closure(stage)
    for name, _ in sorted(inputs.items(), key=lambda item: item[1]):
        if name in allowed:
            continue
        kind = KINDS[name]
        roles = [n for n in DEPENDS.get(stage, ()) if n in run.stages and KINDS[n] == kind
                 and n not in inputs
                 and run.stages[n].shape == run.stages[name].shape]  # fmt: skip
        if not roles:
            continue
        role, made = roles[0], name
        base_role, base = role.removesuffix("_heads"), name.removesuffix("_heads")
        if base_role != role and base in run.found and base not in run.found.borrowed:
            role, made = base_role, base  # point at the line that made it, before the cut
        record = run.records[run.found[made]]
        detail = f"yours equal the reference's {{{made}}}"
        hint = "look at the line that makes it: which input and which weight does it use?"
        return role, role, record, detail, hint
    return None


def _missing_head(run: _Run):
    """Code that works one head at a time, where a stage matches head 0's slice but some head's
    slice is never made (head 0's matrices taken for every head): (the stage, the same, the
    learner's tensor in that head's place, detail, hint), else None."""
    own = _own(run.found)
    for stage in ("q_heads", "k_heads", "v_heads", "weights", "heads"):
        if stage not in own or stage not in run.stages:
            continue
        value = run.stages[stage]
        if value.dim() != 4 or value.shape[1] < 2:
            continue
        mine = run.records[own[stage]]
        per_head = value.unbind(1)
        if mine.tensor.shape not in (per_head[0].shape, per_head[0].mT.shape):
            continue  # matched as all heads at once
        same = mine.tensor.shape == per_head[0].shape

        def equal(t, k, same=same, per_head=per_head):
            return _same(t, per_head[k] if same else per_head[k].mT)

        h = len(per_head)
        missing = [
            k
            for k in range(h)
            if not any(
                r.tensor.shape == mine.tensor.shape and equal(r.tensor, k) for r in run.records
            )
        ]
        if not missing:
            continue
        key = (mine.lineno, mine.op, mine.tensor.shape)
        siblings = [r for r in run.records if (r.lineno, r.op, r.tensor.shape) == key]
        index = next(n for n, r in enumerate(siblings) if r is mine)
        per_pass = len(siblings) // h if len(siblings) % h == 0 else 0
        head = missing[0]
        at = index + head * per_pass
        record = siblings[at] if per_pass and at < len(siblings) else None
        copies = [k for k in range(h) if record is not None and equal(record.tensor, k)]
        # how many of the learner's tensors equal each head's: "again" only for one made twice
        made = [sum(r.tensor.shape == mine.tensor.shape and equal(r.tensor, k)
                    for r in run.records) for k in range(h)]  # fmt: skip
        several = len(missing) > 1
        detail = f"head{'s' if several else ''} {_and([str(k) for k in missing])}'s "
        detail += f"{'are' if several else 'is'} never made"
        if copies and made[copies[0]] > 1:
            detail += f": in {'their' if several else 'its'} place your code makes head "
            detail += f"{copies[0]}'s again"
            hint = (
                "each head needs its own slice: look at which head's matrices or features this "
                "line takes in each pass of the loop."
            )
        elif len(siblings) >= h:  # a pass for every head, some made wrong: not "never made"
            continue
        else:  # fewer passes than heads: one is skipped, not replaced
            ones = [str(k) for k in range(h) if made[k]]
            detail += f": your code makes head{'s' if len(ones) > 1 else ''} {_and(ones)}'s only"
            hint = (
                f"every head from 0 to {h - 1} needs its own pass: look at which heads your code "
                "goes through (a loop's range, for instance)."
            )
            record = mine
        return stage, None, record, detail, hint
    return None


def _wrong_pass(run: _Run):
    """Code that works one head at a time, where a stage's first pass matches head 0's slice (so
    the stage counts as found) but a later pass differs from its own head's slice (its scale or
    its matrices taken per pass): (the stage, None, that pass's tensor, detail, hint), else
    None."""
    own = _own(run.found)
    for stage in ("q_heads", "k_heads", "v_heads", "scores", "masked", "weights", "heads"):
        if stage not in own or stage not in run.stages:
            continue
        value = run.stages[stage]
        if value.dim() != 4 or value.shape[1] < 2:
            continue
        mine, per_head = run.records[own[stage]], value.unbind(1)
        if mine.tensor.shape not in (per_head[0].shape, per_head[0].mT.shape):
            continue  # all heads at once
        h, passes = len(per_head), _passes(mine, run.records)
        if len(passes) != h or passes[0][0] is not mine or len({len(p) for p in passes}) > 1:
            continue  # not one tensor of this kind per pass, one pass per head
        for k in range(h):
            record = passes[k][0]
            ref = per_head[k] if mine.tensor.shape == per_head[k].shape else per_head[k].mT
            if _same(record.tensor, ref):
                continue
            gap = (record.tensor - ref).abs().masked_fill(record.tensor == ref, 0)
            detail = f"largest difference {float(gap.max()):.3g}, in head {k}'s pass of the loop"
            flip = ref is not per_head[k]
            other = [j for j in range(h) if j != k
                     and _same(record.tensor, per_head[j].mT if flip else per_head[j])]  # fmt: skip
            hint = ""  # the stage's own hint (the scores': the product and the scale)
            if other:
                detail += f", where it equals head {other[0]}'s"
                hint = (
                    "each head needs its own slice: look at which head's matrices or features "
                    "this line takes in each pass of the loop."
                )
            elif stage in ("q_heads", "k_heads", "v_heads"):
                hint = (
                    f"look at what this line makes in head {k}'s pass of the loop: which "
                    "matrices or features, and what is done to them?"
                )
            return stage, None, record, detail, hint
    return None


def _passes(mine: Record, records: list[Record]) -> list[list[Record]]:
    """The records made like `mine` (its line, op and shape), grouped into a loop's passes: a pass
    ends where a record made on another line comes between two of them (`q, k, v = ...` makes
    three on one line in each pass), from mine's place in its group on."""
    key = (mine.lineno, mine.op, mine.tensor.shape)
    groups: list[list[Record]] = []
    broken = True
    for r in records:
        if (r.lineno, r.op, r.tensor.shape) == key:
            if broken:
                groups.append([])
            groups[-1].append(r)
            broken = False
        elif r.lineno != mine.lineno:
            broken = True
    at = next((n for g in groups for n, r in enumerate(g) if r is mine), None)
    return [] if at is None else [g[at:] for g in groups]


def _and(items: list[str]) -> str:
    """['1', '2', '3'] -> '1, 2 and 3'."""
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1]


def _transposed_input(record: Record, run: _Run) -> bool:
    """Whether the product that made `record` (or a view of it) took a transposed tensor (w.T):
    then the layout hint (x @ w.T) is no news to the learner."""
    made = [r for r in run.records if r.family == record.family and r.op in _PRODUCT_OPS]
    return any(
        run.records[p].op in ("__get__", "t", "transpose", "permute", "swapaxes", "movedim")
        for r in made[:1]
        for p in r.parents
    )


def _right_until(run: _Run) -> str:
    """For an output that differs in no known way: the hint that the tensor it is made from is
    right (the line that makes it), when the learner's code made a right stage and then changed
    it on the return line; else ''."""
    last = len(run.records) - 1
    made = [i for i in range(last) if run.records[i].family == run.records[last].family]
    if not made:
        return ""
    stage_of = {i: name for name, i in _own(run.found).items() if KINDS[name] != "out"}
    seen, todo = set(), list(run.records[made[0]].parents)
    while todo:
        j = max(todo)
        todo.remove(j)
        if j in seen:
            continue
        seen.add(j)
        if j in stage_of:
            right = run.records[j]
            if right.lineno == run.records[made[0]].lineno:
                return ""  # made and changed on one line: the stage's own hint says more
            where = right.where or "an earlier line"
            return f"the tensor made on {where} is right: look at what your code does to it after."
        todo += run.records[j].parents
    return ""


def _equals_other_stage(record: Record, stage: str, run: _Run) -> str:
    """'it equals the reference's values v = x·W^V' when the learner's tensor in `stage`'s place
    is another stage of the reference (for the same inputs), else ''."""
    for name, value in run.reference.items():
        if name == stage or KINDS[name] == "out" or _same(value, run.reference[stage]):
            continue
        if _same_in_some_form(record.tensor, name, value):
            return f"yours equal the reference's {{{name}}}"
    return ""


def _first_use(record: Record, stage: str, run: _Run) -> str:
    """Where record's tensor (or a view of it) is first taken by a step that is not a view of it,
    when record's own line also makes `stage`'s tensor right (`q, k, v = x @ wq.T, x @ wk.T,
    x @ wv.T`, then `attend(q, v, k)`: both made right, so the swap may be where they are used)
    and that step is on another line: 'line 3: `...`, called from line 11: `...`'; else ''
    (`k = x @ w_v.T` on a line of its own: the slip is there)."""
    index = {id(r): i for i, r in enumerate(run.records)}
    i = index.get(id(record))
    value = run.reference.get(stage)
    if i is None or value is None:
        return ""
    place = (record.lineno, record.caller)
    beside = [r for r in run.records if (r.lineno, r.caller) == place
              and r.family != record.family
              and _same_in_some_form(r.tensor, stage, value)]  # fmt: skip
    if not beside and not _right_under_its_name(record, stage, run):
        return ""
    family = {j for j, r in enumerate(run.records) if r.family == record.family}
    use = next((r for j, r in enumerate(run.records) if j > i and r.family != record.family
                and family & set(r.parents)), None)  # fmt: skip
    if use is None or not use.where or (use.lineno, use.caller) == (record.lineno, record.caller):
        return ""
    return use.where


def _right_under_its_name(record: Record, stage: str, run: _Run) -> bool:
    """Whether record's tensor, found in `stage`'s place, is another of q, k and v made right
    under that one's own name (`k = context @ w_k.T`, equal to the reference's k, then passed
    where v goes, as in `attend(q, v, k)`): its line is right, so the swap may be where it is
    used."""
    name = _assigned_name(record, run.records).lower()
    letter = name[:1] if re.fullmatch(r"[qkv](_?\w{0,6})?", name) else ""
    words = {"query": "q", "queries": "q", "key": "k", "keys": "k", "value": "v", "values": "v"}
    letter = letter or words.get(name.split("_")[0], "")
    if not letter or letter == stage[:1]:
        return False
    other = f"{letter}{stage[1:]}"  # the same form: k_heads in v_heads' place
    for form in dict.fromkeys((other, letter)):
        value = run.reference.get(form)
        if value is not None and _same_in_some_form(record.tensor, form, value):
            return True
    return False


def _cut_first(stage: str, run: _Run) -> str:
    """q, k or v's heads stage when the learner's first tensor in its place is already cut into
    heads (v = x.view(B, T, h, d_k) made from x, not from x·W^V), else the stage itself."""
    cut = f"{stage}_heads"
    if stage not in ("q", "k", "v") or cut not in run.stages:
        return stage
    flat = _role(stage, run.stages, run.found, run.records)
    split = _role(cut, run.stages, run.found, run.records)
    return cut if split is not None and (flat is None or split < flat) else stage


def _changed_input(stage: str, run: _Run) -> tuple[str, int] | None:
    """The input of `stage` that the learner changed after making it right (weights computed,
    then rolled): (its stage, the learner's first changed tensor), if a tensor of its shape that
    equals no form of it was made from the right one before `stage`'s own."""
    for earlier in DEPENDS.get(stage, ()):
        j = _changed_in(earlier, stage, run)
        if j is not None:
            return earlier, j
    return None


def _changed_in(earlier: str, stage: str, run: _Run) -> int | None:
    """The learner's first tensor made from the right `earlier` that is no longer right, before
    `stage`'s own (see _changed_input), or None."""
    if earlier not in run.found or earlier not in run.stages or KINDS[earlier] == "index":
        return None  # positions are worked on (t - n + 1 from t - n) before they are read
    end = _role(stage, run.stages, run.found, run.records)
    end = len(run.records) - 1 if end is None else end
    other = {j for name, value in run.stages.items() for j in run.hits_of(name, value)}
    out = run.stages["out"]  # the right output, made before the learner changed it
    other |= {j for j, r in enumerate(run.records) if r.tensor.shape == out.shape
              and _same(r.tensor, out)}  # fmt: skip
    value, kind = run.stages[earlier], KINDS[earlier]
    shapes = {tuple(f.shape) for f in _forms(value, kind)}
    right = set(run.hits_of(earlier, value)) | other  # k is not a changed q
    family = run.records[run.found[earlier]].family
    return next(
        (
            j for j in range(run.found[earlier] + 1, end)
            if tuple(run.records[j].tensor.shape) in shapes and j not in right
            and _is_index(run.records[j]) == (kind == "index")
            and any(run.records[p].family == family for p in run.records[j].parents)
            and not (stage == "merged" and _op(run.records[j]) in _JOINS)  # the merge itself
            and _op(run.records[j]) not in _REDUCTIONS  # a sum over it: the next step, not it
        ),
        None,
    )  # fmt: skip


def _right_head_then_more(record: Record, target: str, run: _Run) -> int | None:
    """For a head's output that differs: the head whose output the product it is made from on the
    same line equals (`a @ v @ w_o[blk, blk].T`: a @ v is right, the product after it is not part
    of the head), else None."""
    if target != "heads" or _op(record) not in _PRODUCT_OPS or not record.parents:
        return None
    heads = run.stages["heads"]
    if heads.dim() != 4:
        return None
    for j in record.parents:
        made = run.records[j]
        if (made.lineno, made.caller) != (record.lineno, record.caller):
            continue
        for i in range(heads.size(1)):
            if made.tensor.shape == heads[:, i].shape and _same(made.tensor, heads[:, i]):
                return i
    return None
