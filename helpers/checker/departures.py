"""Telling departures apart: a stage reworked later, a scale found elsewhere, the heads' count and
cut, a head left out (the heuristics `_explain` consults, named after what they detect)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

import torch

from helpers.checker.compare import (
    _SCALING,
    Finding,
    _forms,
    _Found,
    _is_index,
    _op,
    _Run,
    _same,
    _vouched,
)
from helpers.checker.locate import _role
from helpers.checker.mistakes import KINDS, WRONG_NUM_HEADS
from helpers.checker.scales import _d_k, _scale_of
from helpers.checker.trace import Record
from helpers.checker.unexplained import _own

# arithmetic that changes a tensor's numbers in place of a stage (not the next stage's op)
_REWORK = {
    "div", "truediv", "rtruediv", "itruediv", "true_divide", "divide", "mul", "rmul", "imul",
    "multiply", "add", "radd", "iadd", "sub", "rsub", "isub", "subtract", "pow", "sqrt", "exp",
    "setitem", "sigmoid", "tanh", "relu", "gelu", "elu", "softplus", "abs", "log", "neg",
    "square", "clamp", "clip", "sign", "normalize", "log_softmax", "exp2", "log2", "reciprocal",
    "floordiv", "rfloordiv", "ifloordiv", "floor_divide", "remainder", "fmod", "mod", "floor",
    "ceil", "round", "trunc",
}  # fmt: skip


def _end_of_rework(record: Record, run: _Run) -> Record:
    """The last of the arithmetic steps a tensor goes through on later lines, each of the same
    shape and none matched to a stage (`e = exp(s)`, then `w = e / e.sum(-1)`): the tensor the
    next stage takes, and the line that finishes it. Steps on the record's own line are one."""
    index = {id(r): i for i, r in enumerate(run.records)}
    i, matched = index.get(id(record)), set(run.found.values())
    while i is not None:
        later = [j for j in range(i + 1, len(run.records)) if i in run.records[j].parents
                 and j not in matched and _op(run.records[j]) in _REWORK
                 and run.records[j].tensor.shape == run.records[i].tensor.shape]  # fmt: skip
        if len(later) != 1:
            break
        i = later[0]
    return run.records[i] if i is not None else record


def _reworked(run: _Run, stages: dict, found: _Found) -> bool:
    """Whether a stage that a trial mistake changes matches a learner's tensor that the learner
    then worked on further (divided, multiplied, ...) into a tensor of the same shape that equals
    no stage: q·kᵀ matches the unscaled scores, but if the learner then divided it by a wrong
    number, "no scaling" is not what they did."""
    records = run.records
    changed = [
        name for name in stages
        if name in found and name not in found.borrowed
        and (name not in run.stages or not _same(run.stages[name], stages[name]))
    ]  # fmt: skip
    matched = None
    for name in changed:
        i = found[name]
        if KINDS[name] == "index" and any(
            i in r.parents and not _is_index(r) for r in records
        ):  # fmt: skip
            continue  # positions used as they are (t - n + 1 made from them is another stage)
        shape = records[i].tensor.shape
        views = {i} | {  # the same tensor rearranged (transposed) before the rework
            j for j, r in enumerate(records[:-1])
            if r.family == records[i].family and j > i and r.tensor.shape == shape
        }  # fmt: skip
        children = [
            j for j, r in enumerate(records[:-1])
            if views & set(r.parents) and r.tensor.shape == shape
            and _op(r) in _REWORK
        ]  # fmt: skip
        if not children:
            continue
        if matched is None:
            matched = {j for n, value in stages.items() for j in run.hits_of(n, value)}
            if "out" in found:  # what the learner returns: its record and every view of it
                matched |= {j for j, r in enumerate(records) if r.family == records[-1].family}
        if any(j not in matched for j in children):
            return True
    return False


def _contradicted(name: str, runs: list[_Run]) -> bool:
    """Whether the learner's own ops rule a mistake out: code that calls a softmax did not leave
    it out, and code that masks its scores (masked_fill, where) did not ignore the mask."""
    ops = {_op(r) for run in runs for r in run.records}
    if name == "no_softmax":
        return any("softmax" in op for op in ops)
    if name == "mask_ignored":  # a mask whose result is thrown away has no effect
        return any(
            _op(r) in ("masked_fill", "where") and j not in _discarded(run.records)
            for run in runs
            for j, r in enumerate(run.records)
        )
    if name == "mask_after_softmax":  # masked before any softmax: not after it
        for run in runs:
            ops_in_order = [_op(r) for r in run.records]
            first = next((i for i, op in enumerate(ops_in_order) if "softmax" in op), None)
            masks = [i for i, op in enumerate(ops_in_order) if op in ("masked_fill", "where")]
            if first is not None and masks and masks[0] < first:
                return True
            last = max((i for i, op in enumerate(ops_in_order) if "softmax" in op), default=None)
            if last is not None and masks and masks[-1] < last:  # a softmax after the last mask:
                return True  # the masked weights are not left at 0 after it
    if name in (*_SCALING, "scaled_after_softmax"):  # scores taken out of torch (numpy): a
        # division there is not seen
        if any(".numpy(" in r.code or "np." in r.code for run in runs for r in run.records):
            return True
    if name == "w_qk_reversed":  # the learner's own W_QK, made in the right order
        for run in runs:
            right = run.reference.get("w_qk")
            if right is not None and any(r.tensor.shape == right.shape and _same(r.tensor, right)
                                         for r in run.records):  # fmt: skip
                return True
    return False


def _scaled_stand_in(run: _Run) -> str | None:
    """A stage that a later matched stage vouches for, whose place the learner filled with a
    tensor at another scale (W_QK built from w_q.T / √d_k, the scores then divided again): the
    first tensor that departs, though a later one equals a stage."""
    own = _own(run.found)
    vouched = _vouched(own, run.stages)
    for name in run.stages:
        if KINDS[name] == "out" or name in own or name not in vouched:
            continue
        i = _role(name, run.stages, run.found, run.records)
        if i is not None and _scale_of(run.records[i].tensor, name, run.stages[name]) is not None:
            return name
    return None


def _splits(code: str) -> bool:
    """Whether a line cuts with Tensor.split or torch.split (not a function of the learner's own
    that is named split, nor chunk)."""
    return re.search(r"(\.|\btorch\.)split\(", code) is not None and "chunk" not in code


def _swap_here(run: _Run, count: int) -> bool:
    """Whether the learner's output is, at these sizes too, the reference's cut into `count`
    heads (d_model / num_heads of them): a swap said only where the numbers show it."""
    try:
        stages, _ = run.trial((f"{WRONG_NUM_HEADS}{count}",))
    except (RuntimeError, ValueError):
        return False
    out = stages.get("out")
    return out is not None and bool(run.records) and _same(run.records[-1].tensor, out)


# ops that only rearrange their input's numbers: a cut into heads is made of them
_REARRANGING = ("view", "reshape", "unflatten", "transpose", "permute", "contiguous", "swapaxes",
                "swapdims", "movedim", "split", "chunk", "unbind", "tensor_split", "stack", "cat",
                "concat", "concatenate")  # fmt: skip


def _rearranged(records: list[Record], at: int) -> list[Record]:
    """The records made from records[at] through rearranging ops alone, in order (a view, then a
    transpose: the learner's cut of that tensor)."""
    chain, found = {at}, []
    for i in range(at + 1, len(records)):
        r = records[i]
        if r.op.strip("_") in _REARRANGING and any(p in chain for p in r.parents):
            chain.add(i)
            found.append(r)
    return found


def _cut_into(run: _Run, record: Record | None, count: int) -> bool:
    """Whether record holds q, k or v cut into `count` heads as the reference would cut them."""
    if record is None:
        return False
    try:
        stages, _ = run.trial((f"{WRONG_NUM_HEADS}{count}",))
    except (RuntimeError, ValueError):
        return False
    return any(
        name in stages and form.shape == record.tensor.shape and _same(record.tensor, form)
        for name in ("q_heads", "k_heads", "v_heads")
        for form in _forms(stages[name], KINDS[name])
    )


def _heads_hint(
    finding: Finding,
    run: _Run,
    outside: Iterable[str],
    written: Mapping = MappingProxyType({}),
    swapped: Callable[[], bool] | None = None,
) -> Finding:
    """A wrong number of heads, with a hint for how the line got it: Tensor.split(n), which cuts
    pieces of n features (not n pieces); a size read from outside the function; a number written
    in the code (`written`: the numbers in its source); or d_k and num_heads swapped (d_model /
    num_heads heads of num_heads features), when `swapped()` says so at the second sizes too."""
    if not (finding.mistake or "").startswith(WRONG_NUM_HEADS) or finding.hint:
        return finding
    code = finding.record.code if finding.record else ""
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", code))
    names = [n for n in outside if n in words]
    count = finding.mistake.removeprefix(WRONG_NUM_HEADS)
    cut = next(v for n, v in run.reference.items() if n in ("q_heads", "out"))
    heads, d_k = cut.shape[1], cut.shape[-1]  # the right cut is (B, h, T, d_k)
    if swapped is not None and d_k != heads and _swap_here(run, d_k) and swapped():
        # the output is the reference's with d_model / num_heads heads, at both sizes: whatever
        # number of heads explained most at the first sizes, that is the number cut
        count, split = str(d_k), _splits(code)
        how = (
            "the split on this line" if split else "how this line gets the number of heads and d_k"
        )
        hint = (
            f"look at {how}: it cuts d_model / num_heads heads of num_heads features each "
            f"({count} heads of {heads} here, and the same swap at the check's second sizes): d_k "
            "and num_heads are swapped. Each of num_heads heads should get d_k = d_model // "
            "num_heads features."
        )
        if split:
            hint += " Tensor.split(n, dim) cuts pieces of n features each, not n pieces."
        headline = (
            f"{{cut}} cut into d_model / num_heads heads of num_heads features ({count} heads of "
            f"{heads} here): d_k and num_heads are swapped"
        )
        return dataclasses.replace(
            finding, mistake=f"{WRONG_NUM_HEADS}{count}", hint=hint, headline=headline
        )
    b_t = (cut.shape[0], cut.shape[2])  # (B, T)
    line = finding.record.lineno if finding.record is not None else None
    cuts = [tuple(r.tensor.shape) for r in run.records if r.lineno == line and r.tensor.dim() == 4
            and (r.tensor.shape[0], r.tensor.shape[2]) == b_t]  # fmt: skip
    shape = cuts[-1] if line is not None and cuts else ()
    record = finding.record
    if not shape and record is not None and record.tensor.dim() == 3 and count == "1":
        # a tensor not yet cut stands for a cut into one head (the same numbers): the learner's
        # cut, if there is one, is the first (B, ·, T, ·) tensor made after it, on another line
        # (a helper function's view)
        after = next((i for i, r in enumerate(run.records) if r is record), len(run.records))
        chain = _rearranged(run.records, after)  # what the learner's own cut makes of it

        def is_cut(r: Record) -> bool:
            t = r.tensor
            return (
                t.dim() == 4
                and (t.shape[0], t.shape[2]) == b_t
                and t.shape[1] * t.shape[3] == heads * d_k
            )

        def before_transpose(r: Record) -> bool:  # (B, T, h, d_k): einsum reads it as it is
            return tuple(r.tensor.shape) == (b_t[0], b_t[1], heads, d_k)

        if (
            chain
            and chain[-1].tensor.dim() == 4  # the pieces of a split are not yet the cut
            and not any(is_cut(r) or before_transpose(r) for r in chain)
        ):  # a cut into (B, h, d_k, T) or the like:
            last = chain[-1]  # say the shape it ends in, name no count of heads
            return dataclasses.replace(
                finding, mistake=None, stage="q_heads", record=last,
                detail=f"your cut gives them shape {tuple(last.tensor.shape)} on this line, "
                f"where the reference's are (B, h, T, d_k) = {tuple(cut.shape)}",
                hint="look at how this line cuts q, k and v into heads: which dims does it "
                "split, in which order, and what does each head get?",
            )  # fmt: skip
        later = [r for r in chain if is_cut(r)] or [
            r for r in run.records[after + 1 :]
            if r.tensor.dim() == 4 and (r.tensor.shape[0], r.tensor.shape[2]) == b_t
        ]  # fmt: skip
        if later and later[0].tensor.shape[1] * later[0].tensor.shape[3] == heads * d_k:
            record, shape = later[0], tuple(later[0].tensor.shape)
            finding, code = dataclasses.replace(finding, record=record), record.code
    if len(shape) == 4 and shape[1] != int(count) and shape[1] * shape[3] == heads * d_k:
        # the learner's own cut has another number of heads than the one that explained most:
        # say what the cut is, not the count (nor what follows from it)
        got, width = shape[1], shape[3]
        cut_record = next((r for r in reversed(run.records) if r.lineno == line
                           and tuple(r.tensor.shape) == shape), record)  # fmt: skip
        if not _cut_into(run, cut_record, got):  # a (B, ·, T, ·) step that is not a cut into heads
            return dataclasses.replace(  # (a reshape a permute then undoes): name nothing
                finding, mistake=None, stage="q_heads", record=record, detail="",
                hint="look at how this line cuts q, k and v into heads: which dims does it "
                "split, in which order, and what does each head get?",
            )  # fmt: skip
        swap = (got, width) == (d_k, heads)
        headline = (
            f"{{cut}} cut into {got} heads of {width} features, where the check expects "
            f"num_heads = {heads} heads of d_k = {d_k}" + (": d_k and num_heads are swapped" * swap)
        )
        hint = (
            "look at how this line gets the number of heads and each head's width: each of "
            "num_heads heads should get d_k = d_model // num_heads features. The check cannot "
            "tell what else differs until the cut is right."
        )
        return dataclasses.replace(
            finding, mistake=f"{WRONG_NUM_HEADS}{got}", hint=hint, headline=headline, record=record
        )
    if _splits(code):
        hint = (
            "look at the split on this line: Tensor.split(n, dim) cuts pieces of n features "
            f"each, not n pieces, so splitting by num_heads makes {count} pieces. Aim for "
            "num_heads pieces of d_k features each."
        )
    elif names:
        hint = (
            f"look at the number of heads on this line: it comes from {' and '.join(names)}, read "
            "from outside the function (see the note); use the num_heads argument."
        )
    elif outside:
        hint = (
            "look at the number of heads on this line: use the num_heads argument, not a number "
            "or a size read from outside the function (see the note)."
        )
    elif int(count) in written:
        lines = [(n, text) for n, text in written[int(count)] if text]
        line = finding.record.lineno if finding.record else None
        here = "on this line" if not lines or any(n == line for n, _ in lines) else (
            " and ".join(f"on line {n} (`{text}`)" for n, text in lines)
        )  # fmt: skip
        hint = (
            f"look at the number {count} written {here}: the code cuts {count} "
            f"head{'' if count == '1' else 's'}, whatever "
            "num_heads says. Take the number of heads (and d_k) from the num_heads argument, not "
            "a number written in."
        )
    else:
        hint = (
            f"look at how this line gets the number of heads: at these sizes it cuts {count} "
            f"head{'' if count == '1' else 's'}, where num_heads is {heads}. Take the number of "
            "heads (and d_k = d_model // num_heads) from the num_heads argument."
        )
    return dataclasses.replace(finding, hint=hint)


def _outside_divisor(finding: Finding, run: _Run, outside: Iterable[str]) -> Finding | None:
    """A scaling mistake on a line that reads a size from outside the function (d_k = 16 left in
    a notebook): the numbers say "divided by d_k", but the code may divide by √ of another d_k.
    Then say only what the divisor is; the note names the outside value."""
    record = finding.record
    scaled = finding.mistake is None and "at another scale" in finding.detail
    if not (finding.mistake in _SCALING or scaled) or record is None or not record.code:
        return None
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", record.code))
    names = [n for n in outside if n in words]
    if not names or "scores" not in run.reference:
        return None
    scale = _scale_of(record.tensor, "scores", run.reference["scores"])
    d_k = _d_k(run)
    if scale is None or not d_k:
        return None
    divisor = d_k**0.5 / scale
    headline = (
        f"the scores are divided by {divisor:.3g}, where the reference divides them by "
        f"√d_k = {d_k**0.5:.3g}: yours are the reference's × {scale:.3g}."
    )
    hint = (
        f"look at the divisor on this line: it reads {' and '.join(names)} from outside the "
        "function (see the note)."
    )
    return Finding(None, "scores", record, "", finding.position, hint, headline)


def _scaled_elsewhere(run: _Run, stages: dict, found: _Found) -> bool:
    """Whether the learner's scores (as matched in a trial) are made from a tensor that the
    learner multiplied or divided and that equals no stage, of another shape than the scores
    (q / √d_k, w_q.T / √d_k): then the scale is applied there, not to the scores."""
    if "scores" not in found or "scores" in found.borrowed:
        return False
    records, home = run.records, found["scores"]
    shapes = {tuple(f.shape) for f in _forms(stages["scores"], KINDS["scores"])}
    matched = {j for name, value in stages.items() for j in run.hits_of(name, value)}
    seen, todo = set(), list(records[home].parents)
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        r = records[j]
        if (_op(r) in _REWORK and j not in matched
                and tuple(r.tensor.shape) not in shapes):  # fmt: skip
            return True
        todo += r.parents
    return False


# stages made side by side (q, k and v, and their heads): a mistake may be made in some of them
# and not in the others (only k cut without the transpose)
_SIDE_BY_SIDE = ("q", "k", "v", "q_heads", "k_heads", "v_heads")


def _moved(name: str, stages: dict, right: dict) -> bool:
    """Whether the trial gives `name` the value of another stage the learner's records match (k
    and v swapped: the records matched by value alone, each in the other's place)."""
    return any(
        other != name and other in stages and _same(stages[name], value)
        for other, value in right.items()
        if stages[name].shape == value.shape
    )


def _right_stages(run: _Run) -> dict[str, torch.Tensor]:
    """The stages the learner's own records match as they stand, every head of them (a loop's
    records that match head 0 only say so for head 0), and that the code goes on with (not the
    result of a masked_fill it throws away)."""
    unused = _discarded(run.records)
    read = {p for r in run.records if not _is_index(r) for p in r.parents}  # positions read
    return {
        name: run.stages[name]
        for name, i in _own(run.found).items()
        if name in run.stages and i not in unused and _every_head(run, name, i)
        and (KINDS[name] != "index" or i in read)
    }  # fmt: skip


def _every_head(run: _Run, name: str, i: int) -> bool:
    """Whether record i, matched to `name`, stands for all of it: the whole tensor, or one head's
    slice in a loop whose passes make every head's slice, in order."""
    value, mine = run.stages[name], run.records[i]
    if value.dim() != 4 or value.shape[1] < 2 or mine.tensor.dim() != 3:
        return True
    per_head = value.unbind(1)
    if mine.tensor.shape not in (per_head[0].shape, per_head[0].mT.shape):
        return True  # all heads at once, (B·h, T, ·)
    key = (mine.lineno, mine.op, mine.tensor.shape)
    siblings = [r for r in run.records if (r.lineno, r.op, r.tensor.shape) == key]
    index = next((n for n, r in enumerate(siblings) if r is mine), None)
    h = len(per_head)
    if index is None or len(siblings) % h:
        return True  # the passes cannot be told apart: as before
    per_pass = len(siblings) // h
    if index >= per_pass:
        return True
    return all(
        any(_same(siblings[index + k * per_pass].tensor, f) for f in (per_head[k], per_head[k].mT))
        for k in range(h)
    )


def _kept_trial(run: _Run, mistakes: tuple[str, ...]):
    """(stages, found, kept) for `mistakes` made where the learner's code departs, or None when
    they would change a stage the learner's records match right (the evidence of that stage
    beats a hypothesis that explains more: one head makes every cut equal the uncut tensor). A
    mistake in q, k and v alike is kept out of those of them the learner made right (kept)."""
    stages, found = run.trial(mistakes)
    right = run.right
    changed = [n for n, value in right.items() if n not in stages or not _same(stages[n], value)]
    moved = {n for n in changed if n in _SIDE_BY_SIDE and n in stages and _moved(n, stages, right)}
    right = {n: value for n, value in right.items() if n not in moved}  # matched by value alone
    changed = [n for n in changed if n not in moved]
    keep = {n: right[n] for n in changed if n in _SIDE_BY_SIDE}
    if not changed or not keep:
        return (stages, found, {}) if not changed else None
    touched = [n for n in _SIDE_BY_SIDE if n in stages and n in run.stages and n not in keep
               and not _same(stages[n], run.stages[n])]  # fmt: skip
    stages, found = run.trial(mistakes, keep)
    if any(n not in stages or not _same(stages[n], value) for n, value in right.items()):
        return None  # it changes a later stage the learner's code makes right
    return stages, found, {**keep, **dict.fromkeys(touched)}  # None: made with the mistake


def _discarded(records: list[Record]) -> set[int]:
    """The records that nothing uses: no op takes them and they are not returned (the result of
    scores.masked_fill(...) not assigned)."""
    used = {p for r in records for p in r.parents}
    returned = records[-1].family if records else None
    return {j for j, r in enumerate(records[:-1]) if j not in used and r.family != returned}
