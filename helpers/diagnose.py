"""Tell a learner whether their attention code is right, and if not, what differs and on which line.

`diagnose(my_attention)` runs a learner's `my_attention(x, w_q, w_k, w_v, w_o, num_heads,
mask=None)` on fixed inputs, without and with a mask, and compares it with the reference.
`check_exercise(fn, name)` does the same for the smaller exercises of the notebooks. Both use one
engine:

1. The learner's function runs under `helpers.trace`, which records every tensor it makes and the
   line of their code that made it.
2. If the output differs, the engine looks among those tensors for the reference's stages
   (`helpers.mistakes.attention_stages`: q, k, v, cut into heads, scores, masked scores, weights,
   the heads' outputs, merged, out), in any layout the course teaches: all heads at once, one head
   at a time in a loop, (B, T, h, d_k) before the transpose, kᵀ.
3. The first stage that no tensor matches (and no later matched stage vouches for) is where the
   code departs. The engine switches on each known mistake in turn (the catalogue, MISTAKES, and
   further SLIPS) and keeps the one that lets the most stages match; it then goes on from there to
   find a second departure downstream. A departure no known mistake explains is reported as such,
   at the first stage the learner made a tensor for (17's code never makes q), or where a head's
   slice is never made (head 0's matrices in every pass of a loop), or where a right tensor is
   used in another's place (w_k and w_v swapped); the engine continues from the learner's own
   tensor. When it cannot tell the line, the message says so.
4. Each departure is reported with what differs, the learner's line, and a hint that points at the
   line, not at the solution.

Conventions (as everywhere in the course): x is (B, T, d_model); weights are plain tensors in
nn.Linear's (out_features, in_features) layout, so a projection is `x @ w_q.T`; mask is boolean,
True = may attend, broadcastable to (B, T, T). Never raises because of the learner's code: every
problem becomes the message. Only the output alone can get a ✓: a learner who returns a tuple or a
list, e.g. (out, weights) or (out, {stage: tensor}), is told so, and its first item is diagnosed
(the stages of a dict are searched too). The sizes each exercise's check uses are CHECK_SIZES, in
words check_sizes(name); a function that reads integers from outside it (a notebook's h = 4) is
told which, with those sizes. A function right at those sizes is run once more at a second set,
SECOND_CHECK_SIZES (B = 1, T = 3, d_model = 16, 2 heads of d_k = 8; 13's T_k = 4): the ✓ says it
was checked at both; code right only at the first (view(2, 5, 3, 4), / 2 for √d_k) is told so,
with the numbers written in it that equal a size of the first.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import dis
import functools
import inspect
import itertools
import linecache
import re
import sysconfig
import textwrap
import time
import traceback
import types
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from helpers.mistakes import (
    CIRCUIT_MISTAKES,
    CONTEXT_MISTAKES,
    DEPENDS,
    HOME,
    INDUCTION_MISTAKES,
    KINDS,
    MISTAKES,
    SHARED_KV_MISTAKES,
    SLIPS,
    STAGE_WORDS,
    WRONG_NUM_HEADS,
    attention_stages,
    describe,
    head_scores_stages,
    induction_stages,
    shared_kv_stages,
    split_stages,
)
from helpers.trace import Place, Record, Trace, trace_call

__all__ = [
    "Diagnosis",
    "Finding",
    "MISTAKES",
    "SLIPS",
    "CONTEXT_MISTAKES",
    "CIRCUIT_MISTAKES",
    "diagnose",
    "check_exercise",
    "CHECK_SIZES",
    "SECOND_CHECK_SIZES",
    "check_sizes",
    "reference_attention",
]

ATOL = 1e-4
B, T, D_MODEL, HEADS = 2, 5, 12, 3  # d_k = 4: every scaling mistake gives different numbers
ONE_HEAD_D_K = 4  # 01's and 17's one head
CROSS_T_K = T + 2  # 13's context: longer than x, so a mix-up changes the shape or the numbers
# a second set of sizes, checked once the first gives the right output: code that hard-codes a
# size (view(2, 5, 3, 4), / 2 for √d_k) is right only at the first
B2, T2, D_MODEL2, HEADS2, ONE_HEAD_D_K2, CROSS_T_K2 = 1, 3, 16, 2, 8, 4
_MOST_NEGATIVE = -1e4  # a masked score filled with -1e9 or finfo.min counts as -inf
_MAX_FINDINGS = 4
TIME_LIMIT = 10.0  # s: a check stops the learner's function after this long, all its calls together
TRACE_LIMIT_MB = 256  # the trace's copies of the tensors the function makes, at most (a right
# answer makes well under 1 MB at the check's sizes)


@dataclass(frozen=True)
class Finding:
    """One place where the learner's code departs from the reference."""

    mistake: str | None  # a name in MISTAKES or SLIPS; None: it differs in no known way
    stage: str  # the first stage where it shows (a key of STAGE_WORDS)
    record: Record | None  # the learner's tensor there, with its line
    detail: str = ""  # for an unknown difference: how large, and where
    position: int = 0  # where its record stands in the code's order (see _position)
    hint: str = ""  # for an unknown difference: a hint worded for it (else the stage's)
    headline: str = ""  # what differs, in place of the stage's words and the detail
    only: tuple[str, ...] = ()  # a mistake made in some of q, k and v only: those ("k",)
    right: tuple[str, ...] = ()  # ... and those the learner made right ("q", "v")
    source: Record | None = None  # a layout step's input from another line (see _layout_source)
    upstream: tuple[tuple[int, str], ...] = ()  # (line, source) before it that the check could
    # not compare (_unseen_lines)
    mask_line: str = ""  # where the mask this line applies is made (_mask_made_elsewhere)
    used_at: str = ""  # where a right tensor is used in another's role (_misplaced's, made once)
    made_elsewhere: tuple[str, ...] = ()  # earlier lines the values it reads are set on


@dataclass
class Diagnosis:
    ok: bool
    mistake: str | None  # the first named mistake, if any
    message: str
    findings: tuple[Finding, ...] = field(default=())

    @property
    def mistakes(self) -> tuple[str | None, ...]:
        """Every departure's name, in the order the code makes them (None: no known mistake)."""
        return tuple(f.mistake for f in self.findings)

    @property
    def lines(self) -> tuple[int | None, ...]:
        """The learner's line for each departure (None where it is not known)."""
        return tuple(f.record.lineno if f.record else None for f in self.findings)

    def __repr__(self) -> str:
        return f"Diagnosis(ok={self.ok}, mistakes={self.mistakes!r})"


def reference_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor | None,
    num_heads: int,
    mask: torch.Tensor | None = None,
    mistake: str | None = None,
    intermediates: dict | None = None,
    context: torch.Tensor | None = None,
) -> torch.Tensor:
    """Multi-head attention from plain weights, or with `mistake` the same with that one error.

    With mistake=None it equals `FusedMultiHeadAttention` (a unit test checks this). w_o=None
    leaves W^O out (one-head exercises). `intermediates`, if given, receives q, k, v, scores and
    weights, each (B, h, T, ·). `context` (B, T_k, d_model), if given, gives the keys and values
    (cross-attention); the mask is then (B, T_q, T_k).
    """
    mistakes = () if mistake is None else (mistake,)
    s = attention_stages(x, w_q, w_k, w_v, w_o, num_heads, mask, context, mistakes)
    if intermediates is not None:
        intermediates.update(q=s["q_heads"], k=s["k_heads"], v=s["v_heads"],
                             scores=s.get("masked", s["scores"]), weights=s["weights"])  # fmt: skip
    return s["out"]


# --- comparing the learner's tensors with the reference's stages ---------------------------------


def _comparable(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float32).clamp(min=_MOST_NEGATIVE)  # NaN stays NaN


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(
        _comparable(a), _comparable(b), atol=ATOL, rtol=0, equal_nan=True
    )


def _forms(t: torch.Tensor, kind: str) -> list[torch.Tensor]:
    """The layouts in which a learner may hold a stage's numbers: all heads (B, h, T, ·), before
    the transpose (B, T, h, ·), batch and heads flattened (B·h, T, ·), one head (B, T, ·), and for
    q, k, v their transposes (kᵀ)."""
    if kind in ("out", "matrix"):
        return [t]
    if kind == "stripe":  # 18's (B, h, queries), or one query's (B, h) in a loop over queries
        return [t, *t.unbind(-1)]
    if t.dim() != 4:
        return [t, t.transpose(-2, -1)] if kind in ("tokens", "heads") else [t]
    b, h = t.shape[:2]
    forms = [t, t.transpose(1, 2), t.reshape(b * h, *t.shape[2:]), *t.unbind(1)]
    return forms + [f.transpose(-2, -1) for f in forms] if kind == "heads" else forms


class _Found(dict):
    """stage -> index of the record that matches it; `borrowed` holds the stages whose only match
    is a record another, unrelated stage already took (k made with w_q equals q, so q's record
    says nothing about which tensor the learner used as k)."""

    borrowed: set[str]


def _is_index(record: Record) -> bool:
    """Whether a record is an integer tensor (positions, heads to read): it can only stand for an
    index stage, and a float one only for the others."""
    return not record.dtype.is_floating_point


def _related(a: str, b: str) -> bool:
    return a in DEPENDS.get(b, ()) or b in DEPENDS.get(a, ())


class _Hits:
    """Which records equal a stage's value in one of its forms, remembered per value: most of the
    stages are the same in every trial of a mistake, so each is compared with the records once."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_shape: dict[tuple, list[int]] = {}  # (index?, shape) -> records
        for i, record in enumerate(records[:-1]):
            key = (_is_index(record), tuple(record.tensor.shape))
            self.by_shape.setdefault(key, []).append(i)
        self.seen: dict[tuple, list[int]] = {}

    def __call__(self, name: str, value: torch.Tensor) -> list[int]:
        """The matching records, in order."""
        return self.per_form(name, value)[0]

    def per_form(self, name: str, value: torch.Tensor) -> tuple[list[int], list[int]]:
        """(the matching records in order, the first match of each form): one head's slice, the
        transpose, ... each has its own first match."""
        kind = KINDS[name]
        key = (kind, tuple(value.shape), value.detach().contiguous().numpy().tobytes())
        if key not in self.seen:
            if kind == "out":
                same = bool(self.records) and _same(self.records[-1].tensor, value)
                last = [len(self.records) - 1] if same else []
                self.seen[key] = (last, last)
            else:
                per_form = [
                    [i for i in self.by_shape.get((kind == "index", tuple(form.shape)), ())
                     if _same(self.records[i].tensor, form)]
                    for form in _forms(value, kind)
                ]  # fmt: skip
                hits = sorted({i for form_hits in per_form for i in form_hits})
                self.seen[key] = (hits, [form_hits[0] for form_hits in per_form if form_hits])
        return self.seen[key]


def _match(stages: dict, records: list[Record], hits_of: _Hits | None = None) -> _Found:
    """Each stage's first record equal to one of its forms, preferring records no earlier stage
    took. The last record is the returned value: only it can match "out", and "out" only it."""
    hits_of = hits_of or _Hits(records)
    found = _Found()
    found.borrowed = set()
    owners: dict[int, str] = {}  # family of records -> the first stage that took it
    for name, value in stages.items():
        hits, firsts = hits_of.per_form(name, value)
        if not hits:
            continue
        if value.isnan().all():  # equals NaN everywhere, and proves nothing
            if KINDS[name] != "out":
                continue
            found.borrowed.add(name)
        families = [records[i].family for i in hits]
        free = [
            i for i, fam in zip(hits, families)
            if fam not in owners or _related(owners[fam], name)
        ]  # fmt: skip
        found[name] = free[0] if free else hits[0]
        if not free:
            found.borrowed.add(name)
        for i in firsts if free else ():  # a loop's heads: each head's tensor is this stage's
            owners.setdefault(records[i].family, name)
    return found


def _vouched(found: dict[str, int], stages: dict) -> set[str]:
    """The matched stages and every stage they are computed from (a loop never makes the fused q,
    and F.scaled_dot_product_attention never shows its weights, yet both are right)."""
    vouched, todo = set(found), list(found)
    while todo:
        for earlier in DEPENDS.get(todo.pop(), ()):
            if earlier in stages and earlier not in vouched:
                vouched.add(earlier)
                todo.append(earlier)
    return vouched


# arithmetic that changes a tensor's numbers in place of a stage (not the next stage's op)
_REWORK = {
    "div", "truediv", "rtruediv", "itruediv", "true_divide", "divide", "mul", "rmul", "imul",
    "multiply", "add", "radd", "iadd", "sub", "rsub", "isub", "subtract", "pow", "sqrt", "exp",
    "setitem", "sigmoid", "tanh", "relu", "gelu", "elu", "softplus", "abs", "log", "neg",
    "square", "clamp", "clip", "sign", "normalize", "log_softmax", "exp2", "log2", "reciprocal",
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


def _op(record: Record) -> str:
    """The op's name without underscores: div_, __truediv__ and div are all "div"-like."""
    return record.op.strip("_")


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
    return False


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
    """The lines where the learner multiplies or divides a tensor by a number on the way to the
    output, and the result equals no stage of the reference."""
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
        if _op(r) in _SCALES and len(r.parents) == 1 and j not in right and r.lineno:
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
    others = [n for n in _scale_lines(run) if n != record.lineno]
    also = ""
    if others:
        listed = " and ".join(", ".join(map(str, others)).rsplit(", ", 1))
        also = f" your code also scales on line{'s' if len(others) > 1 else ''} {listed};"
    d_k = _d_k(run)
    root = f"√d_k = {d_k**0.5:.3g}" if d_k else "√d_k"
    return (
        f"look at the scale on this line:{also} the reference divides only the scores, by "
        f"{root}, once."
    )


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


def _heads_hint(
    finding: Finding,
    run: _Run,
    outside: Iterable[str],
    written: frozenset = frozenset(),
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
    if swapped is not None and d_k != heads and swapped():
        # the output is the reference's with d_model / num_heads heads, at both sizes: whatever
        # number of heads explained most at the first sizes, that is the number cut
        count, split = str(d_k), "split" in words and "chunk" not in words
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
    if len(shape) == 4 and shape[1] != int(count) and shape[1] * shape[3] == heads * d_k:
        # the learner's own cut has another number of heads than the one that explained most:
        # say what the cut is, not the count (nor what follows from it)
        got, width = shape[1], shape[3]
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
            finding, mistake=f"{WRONG_NUM_HEADS}{got}", hint=hint, headline=headline
        )
    if "split" in words and "chunk" not in words:
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
        hint = (
            f"look at the number of heads on this line: the code cuts {count} "
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
    keep = {n: right[n] for n in changed if n in _SIDE_BY_SIDE}
    if not changed or not keep:
        return (stages, found, {}) if not changed else None
    touched = [n for n in _SIDE_BY_SIDE if n in stages and n in run.stages and n not in keep
               and not _same(stages[n], run.stages[n])]  # fmt: skip
    stages, found = run.trial(mistakes, keep)
    if any(n not in stages or not _same(stages[n], value) for n, value in right.items()):
        return None  # it changes a later stage the learner's code makes right
    return stages, found, {**keep, **dict.fromkeys(touched)}  # None: made with the mistake


def _departure(run: _Run) -> str:
    """The stage where the learner's values first differ: the first stage no own record vouches
    for that the learner made a tensor in place of (else the output)."""
    vouched = _vouched(_own(run.found), run.stages)
    return next(
        (n for n in run.stages if n not in vouched and _made_in_place(n, run)), "out"
    )  # fmt: skip


def _explains_departure(run: _Run, stages: dict, found: _Found) -> bool:
    """Whether a trial's stages, with the mistake made, explain the stage where the learner's
    values first differ in a run that departs: a learner's record then matches it, or a later
    one vouches for it."""
    if "out" in run.found:
        return False
    return "out" in found or run.departs in _vouched(_own(found), stages)


def _partly(kept: list) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """For a mistake made in some of q, k and v only: (those it is made in, those the learner
    made right), else ((), ())."""
    held = {
        n.removesuffix("_heads") for _, _, keep in kept for n, t in keep.items() if t is not None
    }
    if not held:
        return (), ()
    made = {n.removesuffix("_heads") for _, _, keep in kept for n, t in keep.items() if t is None}
    order = ("q", "k", "v")
    return tuple(n for n in order if n in made - held), tuple(n for n in order if n in held)


def _discarded(records: list[Record]) -> set[int]:
    """The records that nothing uses: no op takes them and they are not returned (the result of
    scores.masked_fill(...) not assigned)."""
    used = {p for r in records for p in r.parents}
    returned = records[-1].family if records else None
    return {j for j, r in enumerate(records[:-1]) if j not in used and r.family != returned}


def _unused_mask(runs: list[_Run]) -> Record | None:
    """The learner's masked_fill or torch.where whose result nothing uses, if any."""
    for run in runs:
        unused = _discarded(run.records)
        for j, r in enumerate(run.records):
            if j in unused and _op(r) in ("masked_fill", "where"):
                return r
    return None


def _same_in_some_form(t: torch.Tensor, stage: str, value: torch.Tensor) -> bool:
    return any(_same(t, form) for form in _forms(value, KINDS[stage]) if form.shape == t.shape)


def _progress(found: _Found, stages: dict) -> int:
    """How far the learner's records follow the stages: borrowed matches do not count."""
    own = {name: i for name, i in found.items() if name not in found.borrowed}
    return len(_vouched(own, stages)) + ("out" in found)


# mistakes that leave a stage before their home as another mistake would (scaled after the
# softmax: the scores unscaled, as with no scaling): the first stage they change is not where they
# are made
_MADE_LATE = frozenset({"scaled_after_softmax"})


# what such a mistake is when the learner makes it on a later stage than its home
_LATE_WORDS = {
    "scaled_after_softmax": (
        "√d_k divides after the softmax, here what the weights make (the same as dividing the "
        "weights), instead of the scores before it"
    ),
}


def _where_named(name: str, before: dict, after: dict, found: _Found, records: list[Record]):
    """(stage, record) where mistake `name` is made: its HOME stage if the learner's tensors match
    it there, else the earliest stage it changes that they match (not through a borrowed record,
    and not a stage it leaves equal to an earlier one)."""
    own = {n: i for n, i in found.items() if n not in found.borrowed}
    changed = [n for n in after if n not in before or not _same(before[n], after[n])]
    home = HOME.get(name)
    if home in changed and home in found.borrowed:  # k made with w_q: the record like q's, after it
        taken = records[found[home]]
        twins = [r for r in records[found[home] + 1 :]
                 if r.tensor.shape == taken.tensor.shape and r.dtype.is_floating_point
                 and (r.lineno != taken.lineno or r.family != taken.family)  # `q, k, v = ...`
                 and _same(r.tensor, taken.tensor)]  # fmt: skip
        if twins:
            return home, twins[0]
    if home in own and home in changed:
        if home == "out" and name != "w_o_missing":  # `return out`: the line that made out
            return home, _made_at_records(records)
        return home, records[own[home]]
    if name.startswith(WRONG_NUM_HEADS) and "out" in own:  # 03: the view that cuts, not return
        family = records[own["out"]].family
        cut = [r for r in records[:-1] if r.family == family and _op(r) in _CUTS]
        if cut:
            return "out", cut[0]
    if name in _MADE_LATE and home in changed:  # made at its home or after, not before
        changed = changed[changed.index(home) :] + changed[: changed.index(home)]
    for skip_copies in (True, False):
        for stage in changed:
            copy = any(_same(after[d], after[stage]) for d in DEPENDS.get(stage, ()) if d in after)
            if stage in own and not (skip_copies and copy):
                made = _made_at_records(records) if own[stage] == len(records) - 1 else None
                if made is not None and made.lineno != records[-1].lineno:  # `return blocks`:
                    return stage, made  # the line that made blocks
                return stage, records[own[stage]]
    return (changed[0] if changed else "out"), None


_BOUNDARY = ("softmax", "masked_fill", "where")
_PRODUCT_OPS = ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "einsum", "linear")
_CUTS = ("view", "reshape", "unflatten", "split", "chunk", "tensor_split", "unbind")


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
    if stage in ("q", "k", "v"):  # a projection, not x changed on the way (a layer norm)
        return next((i for i, op in zip(candidates, ops) if op in _PRODUCT_OPS), candidates[0])
    return candidates[0]


def _difference(
    mine: torch.Tensor, stage: str, value: torch.Tensor, heads: int = 1, head: int | None = None
) -> str:
    """'largest difference 0.781, most of all in head 1' between the learner's tensor and the
    stage, in the form with the learner's shape; `head`: the head a loop's pass made mine for
    (compared with that head's, not with the nearest of all heads')."""
    forms = [f for f in _forms(value, KINDS[stage]) if f.shape == mine.shape]
    if head is not None and value.dim() == 4 and head < value.shape[1]:
        forms = [value[:, head]] if value[:, head].shape == mine.shape else forms
    if not forms:
        return f"shape {tuple(mine.shape)}, where the reference has {tuple(value.shape)}"
    diffs = [(_comparable(mine) - _comparable(f)).abs().nan_to_num(float("inf")) for f in forms]
    diff, form = min(zip(diffs, forms), key=lambda pair: float(pair[0].max()))
    text = f"largest difference {float(diff.max()):.3g}"
    ratio = _ratio(mine, form)
    if ratio is not None and stage in ("scores", "xw", "out"):
        return f"yours are the reference's × {ratio:.3g}: the same numbers at another scale"
    hidden, theirs = _comparable(mine) <= _MOST_NEGATIVE, _comparable(form) <= _MOST_NEGATIVE
    if (hidden != theirs).any():  # -inf against a number: say which entries, not 1e4
        extra, missing = int((hidden & ~theirs).sum()), int((theirs & ~hidden).sum())
        parts = [_entries(extra, "masked that the reference keeps") if extra else "",
                 _entries(missing, "kept that the reference masks") if missing else ""]  # fmt: skip
        text = ", ".join(part for part in parts if part)
        filled = _comparable(mine)[theirs & ~hidden].unique() if missing else None
        if filled is not None and filled.numel() == 1:  # one finite number where -inf belongs
            parts[1] = _entries(missing, "that the reference masks")
            parts[1] += f" hold {float(filled):g} in yours, a finite number"
            text = ", ".join(part for part in parts if part)
        diff = (hidden != theirs).float()
    elif KINDS[stage] in ("maps", "out") and _transposed_of(mine, form):
        return "yours are the reference's transposed: rows and columns swapped"
    elif _reordered(mine, form):
        order = ": the same numbers as the reference's, in another order"
        if KINDS[stage] == "out":
            where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
            return f"{text}, at index {where}{order}"
        return f"{text}{order}"
    if KINDS[stage] == "out":
        where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
        return f"{text}, at index {where}"
    if diff.dim() == 4 and mine.shape == value.shape and value.shape[1] > 1:
        return f"{text}, {_which_heads(diff.amax(dim=(0, 2, 3)))}"
    if KINDS[stage] == "tokens" and heads > 1 and mine.shape == value.shape:  # (B, T, h·d_k)
        return f"{text}, {_which_heads(diff.unflatten(-1, (heads, -1)).amax(dim=(0, 1, 3)))}"
    return text


def _pass(record: Record, run: _Run) -> int | None:
    """Which pass of a loop over the heads made record (the i-th record of its line, op and
    shape, when the line makes one per head), or None."""
    heads = run.stages["q_heads"].shape[1] if "q_heads" in run.stages else 1
    key = (record.lineno, record.op, tuple(record.tensor.shape))
    siblings = [r for r in run.records if (r.lineno, r.op, tuple(r.tensor.shape)) == key]
    if heads < 2 or len(siblings) != heads:
        return None
    return next((i for i, r in enumerate(siblings) if r is record), None)


def _transposed_of(mine: torch.Tensor, form: torch.Tensor) -> bool:
    """Whether mine is form with its last two dims swapped (and form is not symmetric)."""
    if form.dim() < 2 or form.shape[-1] != form.shape[-2] or mine.shape != form.shape:
        return False
    return _same(mine, form.transpose(-2, -1)) and not _same(mine, form)


def _reordered(mine: torch.Tensor, form: torch.Tensor) -> bool:
    """Whether mine holds form's numbers, in another order."""
    a, b = _comparable(mine).flatten().sort().values, _comparable(form).flatten().sort().values
    return bool(a.isfinite().all()) and torch.allclose(a, b, atol=ATOL, rtol=0)


def _ratio(mine: torch.Tensor, form: torch.Tensor) -> float | None:
    """c if mine = c · form (c ≠ 1, c ≠ 0, both finite), else None. All zeros is no scale of
    anything: c = 0 is not reported."""
    a, b = mine.detach().double().flatten(), form.detach().double().flatten()
    if not (a.isfinite().all() and b.isfinite().all()) or float(b @ b) == 0:
        return None
    c = float(a @ b / (b @ b))
    close = torch.allclose(a, c * b, atol=ATOL, rtol=1e-4)
    return c if close and abs(c - 1) > 1e-3 and abs(c) > 1e-3 else None


def _alike(values: torch.Tensor) -> bool:
    return float(values.max() - values.min()) <= ATOL


def _entries(n: int, how: str) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'} {how}"


def _which_heads(per_head: torch.Tensor) -> str:
    """'only in heads 1, 2' when some heads are right, else 'most of all in head 1'."""
    wrong = [i for i, d in enumerate(per_head.tolist()) if d > ATOL]
    if len(per_head) > 1 and len(wrong) == len(per_head) and _alike(per_head):
        return "in every head alike"
    if 0 < len(wrong) < len(per_head):
        return f"only in head{'s' if len(wrong) > 1 else ''} {', '.join(map(str, wrong))}"
    return f"most of all in head {int(per_head.argmax())}"


class _Run:
    """One call of the learner's function: its records (the returned value last), the stages of
    the reference for the same inputs, and what the engine has settled so far."""

    def __init__(self, records: list[Record], stages_of: Callable[..., dict]) -> None:
        self.records, self.stages_of = records, stages_of
        self.given: dict[str, torch.Tensor] = {}  # stages taken from the learner's own tensors
        self.hits_of = _Hits(records)
        self.stages = stages_of()
        self.reference = dict(self.stages)  # the right stages, for saying what a tensor equals
        self.found = _match(self.stages, records, self.hits_of)
        self.right: dict[str, torch.Tensor] = {}  # see _right_stages, for the current stages
        self.departs = "out"  # see _departure

    def trial(self, mistakes: tuple[str, ...], keep: dict | None = None) -> tuple[dict, _Found]:
        """The stages with `mistakes` made, and the learner's records matched to them; `keep`:
        stages held at their current value (where the learner's code is right)."""
        stages = self.stages_of(mistakes=mistakes, given={**self.given, **(keep or {})})
        return stages, _match(stages, self.records, self.hits_of)


def _explain(
    runs: list[_Run],
    candidates: Iterable[str],
    outside: Iterable[str] = (),
    written: frozenset = frozenset(),
    swapped: Callable[[], bool] | None = None,
) -> list[Finding]:
    """Every departure of the learner's records from the reference, in the order the code makes
    them (see the module doc). A mistake must help in every run (without and with a mask): a
    mask's -inf can make wrong numbers equal elsewhere."""
    made: list[str] = []
    findings: list[Finding] = []
    stages_at: list[list[dict]] = []  # each finding's runs' stages when it was made
    while len(findings) < _MAX_FINDINGS:
        pending = [run for run in runs if "out" not in run.found]
        if not pending:
            break
        scored, current = [], sum(_progress(run.found, run.stages) for run in runs)
        for run in runs:  # what the learner's code makes right, and where it first departs
            run.right, run.departs = _right_stages(run), _departure(run)
        for name in candidates:
            if name in made:
                continue
            try:
                kept = [_kept_trial(run, (*made, name)) for run in runs]
            except (RuntimeError, ValueError, IndexError):  # cannot happen with these shapes
                continue
            if None in kept:  # it would change a stage the learner's code makes right
                continue
            trials = [(stages, found) for stages, found, _ in kept]
            if not any(_explains_departure(run, *t) for run, t in zip(runs, trials)):
                continue  # it explains no stage where the learner's values first differ
            if any(_reworked(run, *t) for run, t in zip(runs, trials)):
                continue  # the learner did more to that tensor: the mistake does not explain it
            if _contradicted(name, runs):
                continue
            if name in _SCALING and any(_scaled_elsewhere(run, *t) for run, t in zip(runs, trials)):
                continue  # the learner scales q, k or W_QK: "the scores are divided by" is not it
            score = sum(_progress(found, stages) for stages, found in trials)
            if score > current:
                scored.append((score, name, kept))
        if scored:  # the mistake that explains most; of equals, the one made earliest in the code
            top = max(score for score, _, _ in scored)
            options = []
            for _, name, kept in (option for option in scored if option[0] == top):
                places = [
                    _where_named(name, run.stages, stages, found, run.records)
                    for run, (stages, found, _) in zip(runs, kept)
                ]
                stage, record = next((p for p in places if p[1] is not None), places[-1])
                options.append((_position(record, runs), name, stage, record, kept))
            position, name, stage, record, kept = min(options, key=lambda o: o[0])
            trials = [(stages, found) for stages, found, _ in kept]
            only, right = _partly(kept)
            earlier = {HOME.get(m, "").removesuffix("_heads") for m in made}  # q from the context,
            right = tuple(n for n in right if n not in earlier)  # found first: not "made right"
            hint = ""
            unused = _unused_mask(runs) if name == "mask_ignored" else None
            if unused is not None:  # the mask is there, but its result is thrown away
                record, position = unused, _position(unused, runs)
                fn = "masked_fill" if _op(unused) == "masked_fill" else "torch.where"
                hint = (
                    f"{fn} returns a new tensor and leaves its input as it was: this line "
                    "throws the result away, so the scores that go on from here are still "
                    "unmasked."
                )
            stages_at.append([run.stages for run in runs])
            made.append(name)
            for run, (stages, found, keep) in zip(runs, kept):
                run.stages, run.found = stages, found
                run.given.update({n: t for n, t in keep.items() if t is not None})  # made right
            upstream = _unseen_lines(name, stage, record, runs)
            finding = Finding(name, stage, record, position=position, hint=hint, only=only)
            if name in _MADE_LATE and record is not None and stage not in ("scores", HOME[name]):
                finding = dataclasses.replace(finding, headline=_LATE_WORDS[name])
            if record is not None and stage.removesuffix("_heads") in ("q", "k", "v"):
                used_at = next(filter(None, (_first_use(record, stage, run) for run in runs)), "")
                finding = dataclasses.replace(finding, used_at=used_at)  # k, v made, then swapped
            findings.append(dataclasses.replace(finding, right=right, upstream=upstream))
            continue
        # a departure no known mistake explains: report it once (from the first run that shows
        # it) and go on from the learner's own tensor in every run that departs there
        first = pending[0]
        special = [_missing_head(run) or _misplaced(run) for run in pending]
        if special[0]:
            stage, target, record, detail, hint = special[0]
            stages_at.append([run.stages for run in runs])
            finding = Finding(None, stage, record, detail, _position(record, runs), hint)
            if "yours equal the reference's" in detail:  # made right, used in another's place?
                finding = dataclasses.replace(finding, used_at=_first_use(record, stage, first))
            findings.append(finding)
            if stage == target and all(
                s and s[1] == target and s[2].tensor.shape == run.stages[target].shape
                for run, s in zip(pending, special)
            ):  # a right tensor in the wrong place: go on from it
                for run, s in zip(pending, special):
                    run.given[target] = s[2].tensor
                    run.stages, run.found = run.trial(tuple(made))
                continue
            break
        unvouched = [n for n in first.stages if n not in _vouched(first.found, first.stages)]
        stage = next((n for n in unvouched if _made_in_place(n, first)), "out")
        scaled = _scaled_stand_in(first)  # W_QK made at another scale, then scaled again
        if scaled is not None:
            stage = scaled
        departs, changed = stage, None if scaled else _changed_input(stage, first)
        if (
            changed
            and first.records[changed[1]].family == first.records[first.found[changed[0]]].family
            and _same_line(changed[1], departs, first)
        ):  # `weights.mT @ v`: the right weights, rearranged on the line of the next step
            changed = None
        stage = changed[0] if changed else stage
        if stage != "out" and _same_in_some_form(first.stages["out"], stage, first.stages[stage]):
            stage = "out"  # one head and no W^O: what it makes is the output itself
        target = _cut_first(stage, first)  # the stage whose tensor the learner made instead
        followed = []
        for run in pending:
            i = _changed_in(target, departs, run) if changed and target == stage else None
            i = _role(target, run.stages, run.found, run.records) if i is None else i
            followed.append((run, run.records[i] if i is not None else None))
        if target != "out" and _made_after_the_weights(target, followed[0][1], first):
            stage = target = "out"  # no tensor of the learner's stands for that stage: say what
            followed = [  # differs where it shows, the output
                (run, run.records[i] if (i := _role("out", run.stages, run.found, run.records))
                 is not None else None)
                for run in pending
            ]  # fmt: skip
        record = followed[0][1]
        if record is not None:  # k made with w_v: not v's own line, but the line like it
            record = _own_twin(record, target, first)
            if target == "weights":  # a softmax by hand: e = exp(s), then e / e.sum(...)
                record = _end_of_rework(record, first)
            followed[0] = (followed[0][0], record)
        if record is not None and _same_in_some_form(record.tensor, target, first.stages[target]):
            break  # the learner's tensor there is right: the departure is not one to name
        if any(f.stage == stage and f.record is record for f in findings):
            break  # said already
        heads = first.stages["q_heads"].shape[1] if "q_heads" in first.stages else 1
        detail = (
            _difference(record.tensor, target, first.stages[target], heads, _pass(record, first))
            if record
            else ""
        )
        scale = _scale_of(record.tensor, target, first.stages[target]) if record else None
        if scale is not None and (_op(record) in _REWORK or target == "w_qk"):
            detail = f"yours are the reference's × {scale:.3g}: the same numbers at another scale"
        alias = _equals_other_stage(record, target, first) if record else ""
        detail = f"{detail}; {alias}" if detail and alias else detail or alias
        hint = _right_until(first) if stage == "out" else ""
        if stage in ("q", "k", "v") and record is not None and _transposed_input(record, first):
            hint = "look at the line that makes it: which input and which weight does it use?"
        if target in ("scores", "masked") and "masked that the reference keeps" in detail:
            if "masked" not in first.stages:
                hint = (
                    "this line hides scores with a mask the check did not ask for: this call "
                    "passes no mask, so every score should stay."
                )
            elif "kept that the reference masks" not in detail:
                hint = (
                    "look at the mask on this line: it hides scores that the check's mask keeps "
                    "(True = may attend)."
                )
        if scale is not None and target not in ("scores", "masked", "weights", "out"):
            hint = _scale_hint(record, first)
        if target == "out" and not hint and "at another scale" in detail:
            hint = (
                "the same numbers at another scale: look at what the result is multiplied or "
                "divided by on its way (a sum where a mean belongs, or another divisor)."
            )
        if "reference's transposed" in detail:
            hint = (
                "look at the order of the product and the transposes on this line: row a of the "
                "scores holds query a's scores."
            )
        headline = ""
        if record is not None and "scaled_dot_product_attention" in record.op:
            headline, hint = _fused_call(record, target, first, hint)
        shown = _merge_start(record, first) if target == "merged" and record else record
        shown = _made_at(first) if target == "out" and record is not None else shown
        stages_at.append([run.stages for run in runs])
        findings.append(Finding(None, stage, shown, detail, _position(shown, runs), hint, headline))
        if any(r is None or r.tensor.shape != run.stages[target].shape for run, r in followed):
            break  # the learner's tensor is laid out another way: stop here
        for run, r in followed:
            run.given[target] = r.tensor
            run.stages, run.found = run.trial(tuple(made))
    findings = [_blamed_input(f, runs, at) for f, at in zip(findings, stages_at)]
    findings = [_layout_source(f, runs) for f in findings]
    findings = [_outside_divisor(f, runs[0], outside) or f for f in findings]
    findings = [_heads_hint(f, runs[0], outside, written, swapped) for f in findings]
    cut = next((f for f in findings if f.headline.startswith("{cut} cut into")), None)
    if cut is not None:  # a cut into another number of heads: what follows it is not known
        findings = [cut]
    return sorted(findings, key=lambda f: f.position)


# ops that take some of a tensor's numbers, or the same numbers in another layout (and
# _REARRANGE's, defined below)
_SELECTS = {"getitem", "diagonal", "narrow", "select", "index_select", "gather",
            "take_along_dim", "masked_select", "unbind", "split", "chunk", "view", "reshape",
            "transpose", "permute", "contiguous", "flatten", "t", "movedim", "swapaxes",
            "swapdims", "mT", "get", "unflatten"}  # fmt: skip


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
    moved = record
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
    if hint.startswith("look at the scale on this line"):
        hint = _scale_hint(moved, run)
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


_REARRANGE = {"view", "reshape", "transpose", "permute", "contiguous", "flatten", "t",
              "movedim", "swapaxes", "swapdims", "mT", "get"}  # fmt: skip


def _made_in_place(stage: str, run: _Run) -> bool:
    """Whether the learner made a tensor in `stage`'s place (17's code that never makes q has no
    tensor in q's place: the departure is not there)."""
    if KINDS[stage] == "out":
        return True
    target = _cut_first(stage, run)
    return _role(target, run.stages, run.found, run.records) is not None


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
        record = siblings[index + head * per_pass] if per_pass else None
        copies = [k for k in range(h) if record is not None and equal(record.tensor, k)]
        detail = f"head {head}'s is never made"
        if copies:
            detail += f": in its place your code makes head {copies[0]}'s again"
        hint = (
            "each head needs its own slice: look at which head's matrices or features this line "
            "takes in each pass of the loop."
        )
        return stage, None, record, detail, hint
    return None


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
            if right.lineno == run.records[last].lineno:
                return ""  # the stage's own hint says more
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
    if not beside:
        return ""
    family = {j for j, r in enumerate(run.records) if r.family == record.family}
    use = next((r for j, r in enumerate(run.records) if j > i and r.family != record.family
                and family & set(r.parents)), None)  # fmt: skip
    if use is None or not use.where or (use.lineno, use.caller) == (record.lineno, record.caller):
        return ""
    return use.where


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


_JOINS = ("cat", "concat", "concatenate", "stack", "hstack", "dstack", "vstack")
# ops that fold a dim away: what they make from a stage is the next step, not the stage changed
_REDUCTIONS = ("sum", "mean", "nansum", "nanmean", "prod", "amax", "amin", "logsumexp", "norm")


def _position(record: Record | None, runs: list[_Run]) -> int:
    """Where a record stands in the code's order: its index in the last run (with a mask: the
    run that makes every step), matched by line, op and shape; else its index in its own run."""
    if record is None:
        return len(runs[-1].records)
    for other_index, other in enumerate(runs[-1].records):
        if (other.lineno, other.op, other.tensor.shape) == (
            record.lineno,
            record.op,
            record.tensor.shape,
        ):
            return other_index
    for run in runs:
        for i, other in enumerate(run.records):
            if other is record:
                return i
    return len(runs[-1].records)


# --- messages ---------------------------------------------------------------------------------

STAGE_HINTS: dict[str, str] = {
    **dict.fromkeys(
        ("q", "k", "v"),
        "look at the line that makes it: which weight does it multiply, and which way round? "
        "nn.Linear stores (out_features, in_features): the input's d_model features must "
        "meet the weight's in_features, its second dim.",
    ),
    **dict.fromkeys(
        ("q_heads", "k_heads", "v_heads"),
        "look at how this line cuts the features into heads: head i owns the d_k features "
        "i·d_k .. (i+1)·d_k of each token; all heads together are (B, h, T, d_k).",
    ),
    "scores": "look at the product and the scale on this line.",
    "masked": "look at the mask's condition and the value your masked_fill puts in.",
    "weights": "look at the softmax on this line: what goes in, and over which dim?",
    "heads": "look at what the weights multiply on this line.",
    "merged": "look at how this line puts the heads back side by side.",
    "out": "look at this line: what is left to do once the heads are merged?",
    "w_qk": "look at the product on this line: which matrices, in which order?",
    "xw": "look at the product on this line, and the order of its factors.",
    "query_index": "look at the positions this line makes: which queries have an earlier "
    "occurrence of their token?",
    "key_index": "look at the positions this line makes: which key does query t read?",
    "stripe": "look at which entries of the maps this line reads: which query, and which key "
    "for each?",
    "kv_index": "look at the heads this line makes: which K/V head should query head i read?",
}


# hints worded for an exercise: exercise -> {mistake: hint}
_EXERCISE_HINTS: dict[str, dict[str, str]] = {
    "shared_kv": {  # "stage:NAME": the hint for an unnamed difference at that stage
        **dict.fromkeys(
            ("stage:k_heads", "stage:v_heads"),
            "look at the line that makes one block per query head: query head i should read "
            "K/V head i // (h / g), and all blocks together are (B, h, T, d_k).",
        ),
    },
    "head_scores": {
        "no_scaling": "look at the line that computes x·W_QK·xᵀ: the scores should be divided "
        "by something.",
    },
    "split_heads": {
        WRONG_NUM_HEADS: "look at the number of heads on this line: use the num_heads argument, "
        "not a number or an h left over from another cell.",
    },
}

# a stage's words for an exercise, where the general ones would not be true ("cut": what a
# wrong number of heads cuts)
_EXERCISE_WORDS: dict[str, dict[str, str]] = {
    "cross_attention": {"k": "keys k = context·W^K", "v": "values v = context·W^V"},
    "split_heads": {"cut": "t is"},
    "loop": {  # 03's loop gets each head's matrices: nothing is cut
        "q_heads": "queries of each head (x·W_i^Q)",
        "k_heads": "keys of each head (x·W_i^K)",
        "v_heads": "values of each head (x·W_i^V)",
    },
    "shared_kv": {
        "k_heads": "keys, one block per query head",
        "v_heads": "values, one block per query head",
        "scores": "scores q·kᵀ/√d_k",
    },
}


def _only_lays_out(record: Record | None) -> bool:
    """Whether `record`'s line only lays numbers out anew or joins them: its calls are such steps
    and it has no operator that computes (`return torch.cat(outs, dim=1)`)."""
    code = record.code if record is not None else ""
    return _only_layout_calls(code) and not re.search(r"[+*/@%]|-(?!\d)", code)


def _entry(
    finding: Finding,
    indent: str,
    out: tuple[str, str] | None,
    hints: dict[str, str],
    words_of: dict[str, str],
) -> tuple[str, list[str]]:
    """(the headline, the Where and Hint lines) of one finding; `out` = (words, hint) for what
    an exercise returns, if not multi-head attention's output; `hints` reword a mistake's hint
    (a key "num_heads_" stands for every number of heads, "stage:NAME" for an unnamed difference
    at that stage), `words_of` a stage's words."""
    words_of = {**STAGE_WORDS, **words_of}
    if finding.mistake:
        what, hint = describe(
            finding.mistake, words_of.get("cut", "q, k and v"), finding.only, finding.right
        )
        generic = WRONG_NUM_HEADS if finding.mistake.startswith(WRONG_NUM_HEADS) else ""
        hint = finding.hint or hints.get(finding.mistake, hints.get(generic, hint))
        if finding.headline:  # what this code does, in place of the catalogue's words
            cut = words_of.get("cut", "q, k and v")
            verb = cut if cut.endswith((" is", " are")) else f"{cut} are"
            what = finding.headline.replace("{cut}", verb)
        head = f"{finding.mistake}: {what}."
    else:
        words = words_of[finding.stage]
        hint = hints.get(f"stage:{finding.stage}", STAGE_HINTS[finding.stage])
        if finding.stage == "out" and out:
            words, hint = out
        record = finding.record
        if finding.stage == "weights" and record is not None and "softmax" not in record.op:
            words = "weights"  # not "the softmax of the scores": there is none on its line
            hint = "look at how this line turns the scores into weights: which function, over "
            hint += "which dim?"
        if _only_lays_out(record):  # a reshape, a cat: the line has no product to look at
            hint = hint.replace(
                "look at what the weights multiply on this line",
                "look at what the weights multiply, where it is made: this line multiplies "
                "nothing, it only lays out or joins the heads it is given",
            )
        if "another order" in finding.detail and finding.stage != "merged":
            hint = ("the same numbers in another order: look at which head, token or feature "
                    "each place of this line's result gets (an index, a loop's order, a "
                    "transpose).")  # fmt: skip
        if record is not None and "dropout" in record.op:  # F.dropout trains by default
            hint = (
                "this line applies dropout, which zeroes numbers at random and scales the rest "
                "up (F.dropout does, unless training=False): the check expects no dropout."
            )
        hint = finding.hint or hint
        verb = "differs" if words.startswith(("output", "W_QK", "x·W_QK")) else "differ"
        detail = finding.detail
        for name, stage_words in words_of.items():  # "yours equal the reference's {v}"
            detail = detail.replace("{" + name + "}", stage_words)
        detail = f" ({detail})" if detail else ""
        head = (
            f"your {words} {verb} from the reference's{detail}, in a way that matches no known "
            "mistake."
        )
        if finding.used_at:  # made right on its line, then used in another tensor's place
            detail = detail.replace("(yours equal", "(it equals")
            head = (
                f"the tensor your code uses as the {words} differs from the reference's{detail}, "
                "in a way that matches no known mistake."
            )
        head = finding.headline or head
    record = finding.record
    if record is not None and "masked_fill" not in record.code:  # a mask applied another way
        hint = hint.replace(
            "the value your masked_fill puts in", "the value a masked score gets on this line"
        ).replace("the condition in your masked_fill", "the condition of your mask")
    where = record.where if record else ""
    if not where:  # no line to point at: the hint must not say "this line"
        hint = hint.replace(" on this line", "").replace("this line", "the line that makes it")
    if not where and not finding.mistake:
        where = "the check cannot tell which line of your code makes it."
    lines = [f"{indent}Where: {where}"] if where else []
    if where and finding.upstream:
        *most, last = [f"line {n}: `{code}`" if code else f"line {n}" for n, code in
                       finding.upstream]  # fmt: skip
        listed = f"{'; '.join(most)} and {last} make" if most else f"{last} makes"
        lines.append(
            f"{indent}  This is where the check first sees it: it could not compare what "
            f"{listed} with the reference, so the slip may be there or on this line."
        )
        hint = hint.replace(  # 15's heads grouped in a view: it may make no such block
            "look at the line that makes one key block per query head",
            "look at how your code pairs each query head with a K/V head",
        ).replace("look at the line that", "look at the line (this one or one before it) that")
    if where and finding.used_at:
        lines.append(
            f"{indent}  It is used in that role on {finding.used_at}: the slip may be there "
            "(which tensor goes where) or on this line."
        )
    if where and finding.mask_line:
        lines.append(
            f"{indent}  The mask this line applies is made on {finding.mask_line}; the check "
            "does not see masks themselves, so the slip may be in that mask or on this line."
        )
    index = record is not None and not record.dtype.is_floating_point  # `arange(h) % g`
    if where and (finding.made_elsewhere or finding.upstream or index):
        hint = hint.replace(  # the K/V head each query head reads may be chosen elsewhere
            "look at the line that makes one key block per query head",
            "look at how your code pairs each query head with a K/V head",
        )
    if where and finding.source is not None and finding.source.where:
        hint = hint.replace(  # the step may be on the line it is made from
            "look at how this line ",
            f"look at how this line, or line {finding.source.lineno} that it is made from, ",
            1,
        )
        lines.append(
            f"{indent}  It is made from {finding.source.where}; this step only rearranges, "
            "stacks or averages numbers, so the check cannot tell whether the slip is on this "
            "line or in what it is given."
        )
    if where and finding.made_elsewhere:
        *most, last = finding.made_elsewhere
        listed = f"{'; '.join(most)} and {last}" if most else last
        who = "It" if finding.source is None else f"It and line {finding.source.lineno}"
        lines.append(
            f"{indent}  {who} read{'s' if finding.source is None else ''} values set on {listed}, "
            "for which the check has no reference value, so the slip may be there or on this line."
        )
        numbers = [m.group(1) for m in map(re.compile(r"line (\d+)").match, finding.made_elsewhere)
                   if m]  # fmt: skip
        if numbers:
            which = (
                f"lines {', '.join(numbers[:-1])} and {numbers[-1]}, which set"
                if len(numbers) > 1
                else f"line {numbers[0]}, which sets"
            )
            hint = f"{hint} Then look at {which} values it reads."
    return head, [*lines, f"{indent}Hint: {hint}"]


def _message(
    findings: list[Finding],
    out: tuple[str, str] | None = None,
    hints: dict | None = None,
    words: dict | None = None,
) -> str:
    hints, words = hints or {}, words or {}
    if len(findings) == 1:
        finding = findings[0]
        head, rest = _entry(finding, "  ", out, hints, words)
        if finding.mistake:
            what = head.split(": ", 1)[1]
            head = f"This looks like a known mistake ({finding.mistake}): {what}"
        else:
            head = head[0].upper() + head[1:]
        return "\n".join([f"✗ {head}", *rest])
    lines = [f"✗ This looks like {len(findings)} mistakes, in the order your code makes them:"]
    for i, finding in enumerate(findings, 1):
        head, rest = _entry(finding, "     ", out, hints, words)
        lines += [f"  {i}. {head}", *rest]
    return "\n".join(lines)


def _verdict(
    ok: bool, message: str, echo: bool, findings: Iterable[Finding] = (), note: str = ""
) -> Diagnosis:
    """The Diagnosis, printed if `echo`; `note` is added to a message that is not a ✓."""
    if not ok and note:
        message = f"{message}\n  {note}"
    if echo:
        print(message)
    findings = tuple(findings)
    first = next((f.mistake for f in findings if f.mistake), None)
    return Diagnosis(ok, first, message, findings)


# --- running the learner's code ---------------------------------------------------------------


class _Halted(Exception):
    """A check ends early (the function was stopped, or the learner interrupted it): the message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class _Limits:
    seconds: float  # the time limit, as the message states it
    deadline: float  # time.monotonic() when the check's time is up
    max_bytes: int


_LIMITS: ContextVar[_Limits | None] = ContextVar("check_limits", default=None)


def _checked(check: Callable[[], Diagnosis], echo: bool, time_limit: float | None) -> Diagnosis:
    """Run one check under its limits (TIME_LIMIT, TRACE_LIMIT_MB): a function stopped or
    interrupted ends it with one line, never a traceback."""
    seconds = TIME_LIMIT if time_limit is None else time_limit
    limits = _Limits(seconds, time.monotonic() + seconds, int(TRACE_LIMIT_MB * 2**20))
    token = _LIMITS.set(limits)
    try:
        return check()
    except _Halted as halted:
        return _verdict(False, halted.message, echo)
    except KeyboardInterrupt:  # while the check compared, not while the function ran
        return _verdict(False, "■ Check stopped by you before it finished.", echo)
    finally:
        _LIMITS.reset(token)


def _traced(fn: Callable, copies: list, watch=(), inputs=None, when: str = "") -> Trace:
    """trace_call under the check's limits; raises _Halted when the call was stopped."""
    limits = _LIMITS.get() or _Limits(TIME_LIMIT, time.monotonic() + TIME_LIMIT,
                                      int(TRACE_LIMIT_MB * 2**20))  # fmt: skip
    trace = trace_call(
        fn, copies, watch, deadline=limits.deadline, max_bytes=limits.max_bytes, inputs=inputs
    )
    if trace.stopped is None:
        return trace
    why, place = trace.stopped
    where = f" while running {place.where}" if place.where else ""
    loops = _enclosing_loops(getattr(fn, "__code__", None), place) if place.where else []
    where += "".join(f", {'itself ' if i else ''}inside the loop on {loop}"
                     for i, loop in enumerate(loops))  # fmt: skip
    question = (
        "does one of these loops never end?" if len(loops) > 1 else "does a loop there never end?"
    )
    if why == "interrupt":
        raise _Halted(f"■ Check stopped by you{where}.")
    where = f": it was stopped{where}" if where else ""
    if why == "time":
        head = (
            f"✗ Your function did not finish within the check's time limit "
            f"({limits.seconds:g} s){when}{where}."
        )
        rest = "A right answer takes well under a second at the check's sizes."
    else:
        head = (
            f"✗ Your function made more than {limits.max_bytes / 2**20:g} MB of tensors{when} "
            f"(the check keeps a copy of each){where}."
        )
        rest = "A right answer makes well under 1 MB at the check's sizes."
    raise _Halted(f"{head} Hint: {question} {rest}")


def _enclosing_loops(code: types.CodeType | None, place: Place) -> list[str]:
    """['line 8: `for b in range(T):`', 'line 7: `while a < T:`'], the loops of the learner's
    function around the line a call was stopped on, the innermost first (the one that never ends
    may be any of them), or [] (the line is a loop's own and no other holds it, or in a helper)."""
    if code is None or place.caller is not None or place.lineno is None:
        return []
    return [f"line {header}: `{linecache.getline(code.co_filename, header).strip()}`"
            for header in _loop_headers(code.co_filename, place.lineno)]  # fmt: skip


def _loop_headers(filename: str, line: int) -> list[int]:
    """The lines of the `for` and `while` statements whose bodies hold `line` (not a
    comprehension's, whose loop is on its own line), the innermost first."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return []
    loops = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.For | ast.While)
             and node.lineno < line <= (node.end_lineno or 0)]  # fmt: skip
    return sorted(loops, reverse=True)


def _loop_header(filename: str, line: int) -> int | None:
    """The line of the innermost `for` or `while` statement whose body holds `line`, or None."""
    return next(iter(_loop_headers(filename, line)), None)


_LIBRARY_DIRS = tuple(
    {sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _where_in_learner_code(err: BaseException) -> str:
    """' (line 7: `scores = q @ k`)' for the deepest frame in the learner's own code (not in
    helpers, torch, Python's standard library or an installed package: a RecursionError can be
    raised inside linecache or warnings), if any."""
    frames = [
        f for f in traceback.extract_tb(err.__traceback__)
        if not re.search(r"[/\\](helpers|torch)[/\\]", f.filename)
        and not f.filename.startswith(_LIBRARY_DIRS) and not f.filename.startswith("<frozen")
    ]  # fmt: skip
    if not frames:
        return ""
    frame = frames[-1]
    if isinstance(err, RecursionError):  # the line that calls itself again: the most repeated
        counts = collections.Counter((f.filename, f.lineno) for f in frames[:-1])
        if counts:
            (place, n), *_ = counts.most_common(1)
            if n > 1:
                frame = next(f for f in reversed(frames) if (f.filename, f.lineno) == place)
    code = (frame.line or "").strip()
    return f" (line {frame.lineno}: `{code}`)" if code else f" (line {frame.lineno})"


def _globals_read(fn: Callable) -> list[tuple[str, int]]:
    """The integers the function reads from outside itself (a notebook's h = 4), by name."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    names, todo = [], [code]
    while todo:
        current = todo.pop()
        names += [i.argval for i in dis.get_instructions(current)
                  if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]  # fmt: skip
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    scope = getattr(fn, "__globals__", {})
    return [
        (name, scope[name]) for name in dict.fromkeys(names)
        if isinstance(scope.get(name), int) and not isinstance(scope.get(name), bool)
    ]  # fmt: skip


def _note(fn: Callable, name: str) -> str:
    """For a check that fails: which integers the function reads from outside it, and the sizes
    the check calls it with."""
    read = _globals_read(fn)
    if not read:
        return ""
    listed = ", ".join(f"{n} (= {v})" for n, v in read)
    return (
        f"Note: your function reads {listed} from outside it, not from its arguments; the check "
        f"calls it with {_sizes_text(name)}: take every size from the arguments."
    )


def _run(
    fn: Callable, args: dict, when: str = "", name: str = ""
) -> tuple[Trace | None, str | None]:
    """Call the learner's function on copies of args, traced; return (trace, None) or
    (None, the message for what it raised). `when` says which call, e.g. ' without a mask';
    `name` is the exercise's (see CHECK_SIZES). Raises _Halted if the call was stopped.
    `trace.changed` holds the arguments the call changed in place, compared with args."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args.values()]
    copies = [[w.clone() for w in a] if isinstance(a, list) else a for a in copies]
    matrices = [w for a in copies for w in (a if isinstance(a, list) else [a])
                if isinstance(w, torch.Tensor) and w.dim() == 2]  # fmt: skip
    given = dict(_named_tensors(args.items()))
    inputs = dict(_named_tensors(zip(args, copies, strict=True)))
    # positional: the learner may name them freely
    trace = _traced(fn, copies, matrices, inputs, when)
    trace.changed = {
        arg: trace.changed.get(arg, ("", Place(None)))
        for arg, copy in inputs.items()
        if copy.shape != given[arg].shape or not torch.equal(copy, given[arg])
    }
    err = trace.error
    if err is None:
        return trace, None
    if isinstance(err, NotImplementedError):
        return None, (
            "○ Not done yet: fill in the function in the exercise cell above (it still raises "
            "NotImplementedError), run that cell, then run this check again."
        )
    text = str(err)
    hint = ""
    kinds = trace.failed[1] if trace.failed else ()
    if "cannot be multiplied" in text or "Expected size for first two dimensions" in text:
        hint = (
            " Hint: the two sides of a product do not line up: write down the shape of each on "
            "that line."
        )
        if "weight" in kinds:  # a weight matrix as given is a side of the product
            hint += (
                " The weight matrices are stored as (out_features, in_features), like "
                "nn.Linear's weight: the input's d_model features must meet a weight's "
                "in_features, its second dim."
            )
        elif "weight product" in kinds and _odd_product(trace, args):  # W^Q·W^Kᵀ made from
            hint += (  # them, of a shape that cannot meet x's d_model features
                " The weight matrices are stored as (out_features, in_features), like "
                "nn.Linear's weight, while the x·W layout's W^Q is (in_features, "
                "out_features)."
            )
    elif "must match the size" in text or "broadcast" in text:
        hint = " Hint: two tensors do not line up: write down the shape of each on that line."
        if args.get("mask") is not None:
            hint += (
                " A mask of shape (B, T, T) has no head dim, so it cannot broadcast against "
                "scores of shape (B, h, T, T): what shape lets one mask line up with every head?"
            )
    sizes_matter = isinstance(err, IndexError) or "is invalid for input of size" in text
    if name and sizes_matter and not _globals_read(fn):  # else the note says it
        hint += f" {check_sizes(name)}"
    return None, (
        f"✗ Your function raised {type(err).__name__}{when}: {err}"
        f"{_where_in_learner_code(err)}.{hint}"
    )


def _named_tensors(items: Iterable[tuple[str, object]]) -> Iterable[tuple[str, torch.Tensor]]:
    """('x', x), ('w_q[0]', ...): the tensors among arguments, a list's items by their index."""
    for arg, a in items:
        if isinstance(a, torch.Tensor):
            yield arg, a
        elif isinstance(a, list):
            yield from ((f"{arg}[{i}]", t) for i, t in enumerate(a) if isinstance(t, torch.Tensor))


def _side_effects(trace: Trace, out: torch.Tensor, expected: torch.Tensor) -> list[str]:
    """What the call did besides its output: the arguments it changed in place, a reseed of
    torch's random numbers, and (`expected`: right numbers) an output dtype not the inputs'."""
    found = []
    if len(trace.changed) == 1:
        ((arg, (_, place)),) = trace.changed.items()
        where = f", on {place.where}" if place.where else ""
        found.append(
            f"your function changes its argument {arg} in place{where}: the caller's {arg} would "
            "change too (the check passed a copy)."
        )
    elif trace.changed:
        parts = [f"{arg} ({place.where})" if place.where else arg
                 for arg, (_, place) in trace.changed.items()]  # fmt: skip
        found.append(
            f"your function changes its arguments {', '.join(parts[:-1])} and {parts[-1]} in "
            "place: the caller's tensors would change too (the check passed copies)."
        )
    if trace.changed:
        found[-1] += (
            " Hint: make a new tensor instead (`x = x / 2` rather than `x /= 2`, masked_fill "
            "rather than masked_fill_)."
        )
    if trace.reseeded is not None:
        where = f" on {trace.reseeded.where}" if trace.reseeded.where else ""
        found.append(
            f"your function reseeds torch's random number generator{where}: each call resets "
            "the random numbers the rest of the notebook draws (the check put them back). Hint: "
            "this function needs no random numbers; seed once, at the top of the notebook."
        )
    if expected is not None and out.dtype != expected.dtype:
        made = next((r for r in trace.records if r.dtype == out.dtype and r.where), None)
        where = f" (from {made.where})" if made else ""
        got, want = (str(d).removeprefix("torch.") for d in (out.dtype, expected.dtype))
        found.append(
            f"its dtype is {got}{where}, where the inputs' is {want}. Hint: return {want}, the "
            "inputs' dtype."
        )
    return found


_LEAK = 1e-12  # a masked key's weight above this is a leak (e^(-10) ≈ 4.5e-5 is; -1e9 gives 0)


def _zeroed_later(records: list, index: int, where: torch.Tensor) -> bool:
    """Whether a tensor made from records[index]'s, of its shape, holds exactly 0 where `where`
    is True: the softmax's weights on the hidden keys were zeroed afterwards (the mask multiplied
    in after the softmax, then each row divided by its sum): not what reaches the values."""
    made_from = {index}
    for i in range(index + 1, len(records)):
        later = records[i]
        if not made_from.intersection(later.parents):
            continue
        made_from.add(i)
        t = later.tensor
        if (
            t.shape == where.shape
            and t.dtype.is_floating_point
            and not t[where].abs().max() > _LEAK
        ):
            return True
    return False


def _mask_leak(trace: Trace, mask: torch.Tensor) -> Finding | None:
    """For output within atol of the reference: a softmax of the learner's whose weights on the
    keys the mask hides are not 0 (masked scores filled with -10, not -inf: the leak hides under
    the tolerance at these scores, and grows with larger ones), as a finding on the line that
    gives the masked scores their value; else None. A weight computed inside
    F.scaled_dot_product_attention is not seen."""
    hidden = ~mask.bool()  # (B, T, T): True where a key is hidden from a query
    records = trace.records
    for index, record in enumerate(records):
        t = record.tensor
        if "softmax" not in record.op or not t.dtype.is_floating_point:
            continue
        if t.shape == hidden.shape:
            where = hidden
        elif t.dim() == 4 and t.shape[0] == hidden.shape[0] and t.shape[2:] == hidden.shape[1:]:
            where = hidden.unsqueeze(1).expand_as(t)
        else:
            continue
        if not where.any():
            continue
        leak = float(t[where].abs().max())
        if not leak > _LEAK or _zeroed_later(records, index, where):
            continue
        made = records[record.parents[0]] if record.parents else record
        filled = made.tensor[where]
        value = f" ({float(filled[0]):g})" if float(filled.max() - filled.min()) == 0 else ""
        headline = (
            f"masked scores get a finite value{value} instead of −inf, so the softmax still "
            f"gives the masked keys weight: up to {leak:.2g} here, under the check's tolerance, "
            "where it must be exactly 0 (with larger scores the leak grows)"
        )
        hint = (
            "look at the value a masked score gets on this line: use float('-inf') (or a number "
            "so negative that its e^x is 0, like -1e9): after the softmax a masked key's weight "
            "must be exactly 0."
        )
        return Finding(
            "mask_filled_with_a_finite_number", "masked", made, hint=hint, headline=headline
        )
    return None


def _side_effect_message(trace: Trace, out: torch.Tensor, expected: torch.Tensor) -> str:
    """'' for a call with no side effect and the inputs' dtype; else the ✗ for a right output."""
    found = _side_effects(trace, out, expected)
    if not found:
        return ""
    if len(found) == 1:
        return f"✗ Your output's numbers are right, but {found[0]}"
    lines = ["✗ Your output's numbers are right, but:"]
    return "\n".join([*lines, *(f"  {i}. {f[0].upper()}{f[1:]}" for i, f in enumerate(found, 1))])


def _changed_in_place(trace: Trace) -> str:
    """For a wrong output from a call that changed an argument in place, unless one named
    mistake explains it: the message. The check's stages are made from the arguments as given,
    so it cannot tell which later steps differ only because of the change: it says so, and
    names nothing else."""
    if not trace.changed or not trace.read_after_change:  # changed after its last use: the
        return ""  # steps compared are the same as without the change; a note says it
    parts = [f"{arg} in place, on {place.where}" if place.where else f"{arg} in place"
             for arg, (_, place) in trace.changed.items()]  # fmt: skip
    args = " and ".join(trace.changed)
    return (
        f"✗ Your output differs from the reference's, and your function changes its argument"
        f"{'s' if len(parts) > 1 else ''} {'; '.join(parts)}. The check compares your steps with "
        f"the reference's made from {args} as given: where your later steps use the changed "
        f"{args}, it cannot tell which differences come from that change and which are other "
        "slips. Hint: make a new "
        "tensor instead (`x = x / 2` rather than `x /= 2`, masked_fill rather than masked_fill_), "
        "then check again."
    )


def _side_effect_note(trace: Trace) -> str:
    """'' or the note, for a wrong output, on what the call did besides it."""
    return " ".join(f"Note: {found}" for found in _side_effects(trace, trace.result, None))


def _container(result: object) -> str:
    """'a tuple of 2 items' when the learner returned a tuple or list, else ''."""
    if not isinstance(result, tuple | list):
        return ""
    n = len(result)
    return f"a {type(result).__name__} of {n} item{'' if n == 1 else 's'}"


def _returned_note(result: object, shape: tuple, right: bool) -> str:
    """The message (the output is right) or the note (it is not) for a tuple or a list."""
    what = _container(result)
    if right:
        return (
            f"✗ Your function returns {what}; the check expects the output alone, a tensor of "
            f"shape {shape}. Its first item is right: return that alone."
        )
    return f"Note: your function returns {what}; the check reads its first item as the output."


def _unpack(result: object) -> tuple[torch.Tensor | None, dict]:
    """The learner may return out, (out, weights), [out, weights] or (out, {stage: tensor}); only
    out alone can be right (the check says so), but the others are diagnosed all the same."""
    if isinstance(result, torch.Tensor):
        return result, {}
    if isinstance(result, tuple | list) and result and isinstance(result[0], torch.Tensor):
        extra = result[1] if len(result) > 1 and isinstance(result[1], dict) else {}
        return result[0], extra
    return None, {}


def _records(trace: Trace, out: torch.Tensor, extra: dict) -> list[Record]:
    """The trace's records, the stages the learner returned (no line), and last the output."""
    returned = [
        Record(t.detach().to(torch.float32), "returned", None, "", family=_family(trace, t, -1 - i))
        for i, t in enumerate(extra.values())
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() >= 2
    ]
    made = trace.record_of(out)
    where = (made.lineno, made.code, made.caller) if made else (None, "", None)
    if trace.returned_at and not (made and made.caller):  # the learner's `return` line
        where = (*trace.returned_at, None)
    family = made.family if made else -1 - len(extra)
    final = Record(out.detach().to(torch.float32), "return", *where, family=family)
    return _Records([*trace.records, *returned, final], lines_run=trace.lines_run)


class _Records(list):
    """A call's records, with the learner's lines that ran (a branch not taken did not)."""

    def __init__(self, records: Iterable[Record], lines_run: frozenset = frozenset()) -> None:
        super().__init__(records)
        self.lines_run = lines_run


def _family(trace: Trace, t: torch.Tensor, default: int) -> int:
    made = trace.record_of(t)
    return made.family if made else default


def _shape_hint(got: tuple, expected: tuple) -> str:
    if len(got) == 4:
        return " It still has a head dim: merge the heads back into d_model features."
    if len(got) == 3 and got[:2] == expected[:2] and got[2] * HEADS == expected[2]:
        return (
            " That is one head's width, d_k: the output has d_model features, made from every "
            "head's output through W^O."
        )  # true of heads concatenated and of per-head W^O slices summed (issue 37)
    return ""


def _shape_reading(trace: Trace, out: torch.Tensor, stages: dict, args: dict) -> str:
    """For an output of the wrong shape: ' It equals the reference's weights (…), of that shape;
    it is made on line 13: `…`.' when its numbers are a step of the reference's (in one of the
    step's layouts); ' Its shape is that of the input x; …' when it has an input's shape; else
    where the shape first goes wrong (_shape_origin); '' if none of these is known."""
    made = trace.record_of(out)
    at = f"; it is made on {made.where}" if made is not None and made.where else ""
    for name, value in stages.items():
        if name == "out" or not isinstance(value, torch.Tensor) or not value.is_floating_point():
            continue
        if any(_same(out, form) for form in _forms(value, KINDS.get(name, "out"))):
            words = STAGE_WORDS.get(name, name)
            return (
                f" Your output holds the reference's {words}, a step on the way to the output"
                f"{at}: is that the tensor to return, or does a step after it not happen?"
            )
    inputs = [n for n, a in args.items() if isinstance(a, torch.Tensor) and a.shape == out.shape]
    if inputs and at:
        named = " or ".join(f"`{n}`" for n in inputs)
        return (
            f" Its shape is that of the input {named}{at}: which tensors does that line "
            "multiply or return?"
        )
    return _shape_origin(trace, out, stages, args)


def _shape_origin(trace: Trace, out: torch.Tensor, stages: dict, args: dict) -> str:
    """' Following your output back, …': the earliest line on the output's way whose tensor has a
    shape that no input and no step of the reference has (in any of its layouts), reached through
    tensors of such shapes only; '' if there is none or its line is unknown."""
    known = {tuple(a.shape) for a in args.values() if isinstance(a, torch.Tensor)}
    for name, value in stages.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():  # not the positions
            known |= {tuple(f.shape) for f in _forms(value, KINDS.get(name, "out"))}
            if value.dim() == 4:  # one head's slice of (B, h, T, ·): a step on the way too
                known.add((value.shape[0], *value.shape[2:]))
    records = trace.records

    def odd(record: Record) -> bool:
        return record.dtype.is_floating_point and tuple(record.tensor.shape) not in known

    made = trace.record_of(out)
    if made is None or not odd(made):
        return ""
    at = next((i for i, r in enumerate(records) if r is made), None)
    small = at is None  # a vector or a number: not among the records
    todo = [j for j in made.parents if odd(records[j])] if small else [at]
    seen, origins = set(), []
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        parents = [j for j in records[i].parents if odd(records[j])]
        todo += parents
        if not parents:
            origins.append(i)
    origin = next((records[i] for i in sorted(origins) if records[i].where), None)
    if origin is None and small and made.where:  # made from tensors of the reference's shapes
        origin = made
    if origin is None:
        return ""
    return (
        " Following your output back, the first tensor on its way with a shape that no step of "
        f"the reference has is made on {origin.where} (shape {tuple(origin.tensor.shape)}): the "
        "shape may go wrong there."
    )


_HALF = (torch.float16, torch.bfloat16)


def _odd_product(trace: Trace, args: dict) -> bool:
    """Whether a product of the weight matrices that went into the op that raised is not
    (d_model, d_model) (w_q @ w_k.T: (d_k, d_k)), so that their layout may be why."""
    x = args.get("x")
    d_model = x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() else None
    kinds = trace.failed[1] if trace.failed else ()
    return any(
        kind == "weight product" and shape != (d_model, d_model)
        for kind, shape in zip(kinds, trace.failed_shapes or [()] * len(kinds))
    )


def _numeric_problem(
    records: list[Record], out: torch.Tensor, expected: torch.Tensor, masked: bool = False
) -> str:
    """The message for NaN in the output, or for code that computes in half precision; ''.
    `masked`: the call was given the check's mask (which leaves every query a key)."""
    if out.isnan().any() and not expected.isnan().any():
        first = next((r for r in records if r.tensor.isnan().any()), None)
        where = f" The first NaN is made on {first.where}." if first and first.where else ""
        rows = _rows_all_minus_inf(first, records)
        infinite = "" if rows else _infinite_input(first, records)
        if infinite:
            return (
                f"✗ Your output has NaN in {int(out.isnan().sum())} of its {out.numel()} numbers."
                f"{where} {infinite}"
            )
        if rows:
            given = "the check's mask leaves every query at least one key, so " if masked else ""
            return (
                f"✗ Your output has NaN in {int(out.isnan().sum())} of its {out.numel()} numbers."
                f"{where} {rows} Hint: {given}look at where those −inf come from; for a mask, "
                "at its condition and at which dim is queries and which keys."
            )
        return (
            f"✗ Your output has NaN in {int(out.isnan().sum())} of its {out.numel()} numbers."
            f"{where} Hint: NaN comes from 0·∞, ∞ − ∞, 0/0, the square root of a negative "
            "number, or a softmax over a row that is all −inf: look at what goes into that line."
        )
    half = next((r for r in records if r.dtype in _HALF), None)
    if half is not None and not _same(out, expected):
        where = f", from {half.where}" if half.where else ""
        name = str(half.dtype).removeprefix("torch.")
        return (
            f"✗ Your code computes in {name}{where}: half precision keeps about 3 significant "
            f"digits, too few to match the reference (float32) within {ATOL:.0e}. Hint: keep "
            "every tensor in float32 on that line."
        )
    return ""


def _infinite_input(first: Record | None, records: list[Record]) -> str:
    """For the op that makes the first NaN: 'Its input, made on line 12: `…`, holds +∞ in 20
    places: …' when an input it reads holds +∞ (a softmax: ∞ − ∞) or ±∞ (any other op); ''
    when none does (then the NaN comes from elsewhere: 0/0, a square root, …)."""
    if first is None:
        return ""
    softmax = "softmax" in first.op
    for j in first.parents:
        given = records[j]
        if not given.dtype.is_floating_point:
            continue
        plus = int((given.tensor == float("inf")).sum())
        both = int(given.tensor.isinf().sum())
        count = plus if softmax else both
        if not count:
            continue
        where = f", made on {given.where}," if given.where else ""
        sign = "+∞" if softmax or both == plus else "±∞"
        why = (
            "a softmax row that holds +∞ computes ∞ − ∞, which is NaN. Hint: to keep a key out, "
            "fill its score with −∞ (or a large negative number), not +∞."
            if softmax
            else "∞ − ∞, 0·∞ and ∞/∞ are NaN. Hint: look at where those ∞ come from."
        )
        return f"Its input{where} holds {sign} in {count} place{'s' if count > 1 else ''}: {why}"
    return ""


def _rows_all_minus_inf(first: Record | None, records: list[Record]) -> str:
    """For a softmax that makes the first NaN: 'Its input, made on line 7: `...`, has 6 rows
    whose every score is −inf: a softmax of such a row is 0/0.' (the rows along the softmax's
    last dim); '' when that is not why."""
    if first is None or "softmax" not in first.op or not first.parents:
        return ""
    given = records[first.parents[0]]
    empty = int((given.tensor == float("-inf")).all(dim=-1).sum()) if given.tensor.dim() else 0
    if not empty:
        return ""
    where = f", made on {given.where}," if given.where else ""
    return (
        f"Its input{where} has {empty} row{'s' if empty > 1 else ''} whose every score is −inf "
        "(every key masked): a softmax of such a row is 0/0."
    )


def _explains(findings: list[Finding], out: torch.Tensor, stages_of: Callable) -> bool:
    """Whether the named mistakes, made in the reference, give the learner's output (NaN and
    all): then the names stand even where the output has NaN."""
    named = tuple(f.mistake for f in findings)
    if not named or None in named:
        return False
    try:
        return _same(out, stages_of(mistakes=named)["out"])
    except Exception:  # noqa: BLE001 - mistakes that cannot be made together
        return False


def _safe_explain(
    runs: list[tuple[list[Record], Callable]],
    candidates,
    fn: Callable | None = None,
    swapped: Callable[[], bool] | None = None,
) -> list[Finding]:
    """_explain over (records, stages_of) pairs; odd tensors must not become a traceback. `fn`:
    the learner's function, whose integers read from outside it matter to a divisor, and whose
    written numbers to a number of heads; `swapped()`: whether it cuts d_model / num_heads heads
    at the second sizes too (see _heads_hint)."""
    outside = [name for name, _ in _globals_read(fn)] if fn is not None else []
    written = _written_numbers(fn) if fn is not None else frozenset()
    try:
        made = [_Run(records, stages_of) for records, stages_of in runs]
        findings = _explain(made, candidates, outside, written, swapped)
        findings = _last_step_alone(findings, made)
        findings = [_values_made_from_keys(f, made, fn) for f in findings]
        findings = [_mask_made_elsewhere(f, fn, made) for f in findings]
        findings = [_fill_as_written(f) for f in findings]
        return [_names_made_elsewhere(f, fn, made) for f in findings]
    except Exception:  # noqa: BLE001
        return []


def _last_step_alone(findings: list[Finding], runs: list[_Run]) -> list[Finding]:
    """W^O named as missing where it is not: the learner's heads put side by side equal the
    reference's on a line of their own, and the output made from them is not them (`merged @
    w_v.T`: another matrix in W^O's place). Then the heads side by side were not "the output",
    and what differs is the last step alone: one finding there, with the line it reads."""
    if not any(f.mistake == "w_o_missing" for f in findings):
        return findings
    run = runs[0]
    merged, final = run.reference.get("merged"), run.records[-1]
    if merged is None or _same(final.tensor, merged):
        return findings
    made = [r for r in run.records[:-1] if r.where and r.tensor.shape == merged.shape
            and _same(r.tensor, merged)]  # fmt: skip
    out = run.reference.get("out")
    if not made or out is None or final.tensor.shape != out.shape:
        return findings
    record = _made_at_records(run.records)
    if record.lineno == made[-1].lineno:  # on one line with the heads side by side: as it was
        return findings
    last = [r for r in run.records[:-1]
            if r.lineno == record.lineno and r.tensor.shape == out.shape]  # fmt: skip
    if not last or not any(run.records[j] is made[-1] for j in last[-1].parents):
        return findings  # not made from them directly: as it was
    gap = (final.tensor - out).abs()
    detail = (
        f"largest difference {gap.max().item():.3g}; the heads put back side by side that it is "
        f"made from, on {made[-1].where}, equal the reference's"
    )
    hint = (
        "look at this last step: which matrix, in which layout, should multiply the heads side "
        "by side?"
    )
    return [Finding(None, "out", record, detail=detail, hint=hint)]


def _stores_and_loads(code: types.CodeType) -> tuple[dict, dict, set]:
    """({name: lines that assign or change it}, {line: names read on it}, the lines that change
    a list or dict by a method: `heads.insert(0, o)`) over fn's code and the code nested in it
    (a generator expression, a helper). Loops are read from the source (_loop_header)."""
    stores: dict[str, set] = {}
    mutated: set[int] = set()
    loads: dict[int, set] = {}
    todo, loaded = [code], None
    while todo:
        current = todo.pop(0)
        for ins in dis.get_instructions(current):
            line = ins.positions.lineno if ins.positions else None
            if not line or not isinstance(ins.argval, str):
                continue
            if ins.opname.startswith("STORE_") and ins.opname != "STORE_ATTR":
                stores.setdefault(ins.argval, set()).add(line)
            elif ins.opname in ("LOAD_METHOD", "LOAD_ATTR") and ins.argval in _MUTATORS:
                if loaded is not None:  # heads.append(out): a line that changes `heads`
                    stores.setdefault(loaded, set()).add(line)
                    mutated.add(line)
            if ins.opname in _LOADS:
                loads.setdefault(line, set()).add(ins.argval)
                loaded = ins.argval
            else:
                loaded = None
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return stores, loads, mutated


_LOADS = ("LOAD_FAST", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR")
_MUTATORS = ("append", "extend", "insert", "add", "update", "__setitem__", "reverse", "sort")

# the findings a number that is not a tensor can cause: a scale, a position, a head's index
_NUMBER_MADE = {"scaled_by_d_model", "scaled_by_d_k", "multiplied_by_sqrt_d_k", "kv_tiled",
                "heads_split_interleaved",
                "mask_inverted", "induction_on_the_twin",
                "induction_on_the_previous_token", "induction_with_a_first_half_query"}  # fmt: skip


def _names_made_elsewhere(finding: Finding, fn: Callable | None, runs: list[_Run]) -> Finding:
    """A finding on a line that reads names set on earlier lines the check could not compare
    (a number: `d_k = w_q.shape[1]`, `scale = ...`, `j = i % g`; a loop's variables:
    `for wq, wk, wv in zip(...)`; a tensor no step of the reference matches): the slip may be
    on those lines. Names them all, the nearest first, as `made_elsewhere`; only for findings
    such a value can cause (a scale, positions, a head's index, or a difference no known
    mistake explains), and not when another note already says where else to look.

    A scale is followed through the names the line computes with, not through its indices
    (`q[:, i] @ k[:, j].mT * scale`: scale); an order through every name, across the tensors
    the check matched too (`heads.append(w @ v)` after `v = x @ w_v[j].T` after `j = n - 1 - i`).
    Never named: a line whose value equals a reference step, one that unpacks a whole shape
    (`B, T, d = x.shape`), and, but for a scale, one that only sets sizes (`d_k = d // h`)."""
    record, code = finding.record, getattr(fn, "__code__", None)
    if record is None or record.lineno is None or code is None:
        return finding
    if finding.mask_line or finding.upstream or finding.used_at:
        return finding
    order = "another order" in finding.detail
    scale = "another scale" in finding.detail
    if finding.mistake not in _NUMBER_MADE and not (finding.mistake is None or order or scale):
        return finding
    scale = scale or finding.mistake in _SCALING
    other_stage = "yours equal the reference's" in finding.detail  # another tensor, not a number
    run = next((r for r in runs if any(x is record for x in r.records)), runs[0])
    ran = _lines_run(runs)
    compared = {run.records[i].lineno for i in run.found.values()}  # with a helper's callers
    compared |= {run.records[i].caller[0] for i in run.found.values() if run.records[i].caller}
    compared |= _lines_equal_to_a_stage(run, record)
    params = set(inspect.signature(fn).parameters) if callable(fn) else set()
    stores, loads, mutated = _stores_and_loads(code)
    if scale or other_stage:  # the names the line computes with, not those it indexes with
        loads = {**loads, record.lineno: _names_outside_indices(record.code)
                 & loads.get(record.lineno, set())}  # fmt: skip
    sizes: set = set()  # names only sizes are stored in (B, T, d_model, d_k), in line order
    for line in sorted({n for at in stores.values() for n in at}):
        text = linecache.getline(code.co_filename, line)
        if _sizes_from(text, params | sizes):
            sizes |= {name for name, at in stores.items() if line in at}
    sizes = {name for name in sizes
             if all(_sizes_from(linecache.getline(code.co_filename, n), params | sizes)
                    for n in stores[name])}  # fmt: skip
    lines, todo, seen = set(), [record.lineno], set()
    if finding.source is not None and finding.source.lineno:  # what the line it is made from reads
        todo.append(finding.source.lineno)
        compared.add(finding.source.lineno)
    if order:  # a list a loop fills: the loop sets the order
        for name in loads.get(record.lineno, ()):
            for at in stores.get(name, ()):
                header = _loop_header(code.co_filename, at)
                lines |= {header} if header is not None and header < record.lineno else set()
    while todo:
        line = todo.pop(0)
        names = loads.get(line, set())
        if (scale or other_stage) and line != record.lineno:  # what it computes with, again
            names = names & _names_outside_indices(linecache.getline(code.co_filename, line))
        for name in names:
            if name in seen or name in params and name not in stores:
                continue
            seen.add(name)
            earlier = [n for n in stores.get(name, ()) if n < record.lineno and n != line]
            if not earlier or max(earlier) == record.lineno:
                continue
            if ran:  # only lines that ran (in any call): a branch not taken set nothing
                earlier = [n for n in earlier if (code.co_filename, n) in ran]
            if not earlier:
                continue
            at = max(earlier)
            text = linecache.getline(code.co_filename, at).strip()
            if text.startswith(("def ", "class ", "@")):
                continue
            if at in compared:  # a tensor the check matched with one of the reference's steps:
                if order:  # which one it is may come from an index made before it (followed:
                    # its indices, and the tensors it is made from), and where it goes from the
                    # call that puts it in a list, unless at its end
                    indices = _names_in_indices(text)
                    tensors = compared | mutated
                    loads[at] = {
                        n
                        for n in loads.get(at, ())
                        if n in indices or stores.get(n, set()) & tensors
                    }
                    todo.append(at)
                    lines |= {at} & mutated if ".append(" not in text else set()
                continue
            if _WHOLE_SHAPE.match(text):
                continue  # `B, T, d_model = x.shape`: every size as it is
            if not scale and _sizes_from(text, params | sizes):
                continue  # d_k = d_model // num_heads: a size, no offset: it can only scale
            lines.add(at)
            todo.append(at)
    if not lines:
        return finding
    nearest = sorted(lines, reverse=True)
    texts = [linecache.getline(code.co_filename, n).strip() for n in nearest]
    where = [f"line {n}: `{t}`" if t else f"line {n}" for n, t in zip(nearest, texts)]
    return dataclasses.replace(finding, made_elsewhere=tuple(where))


# a line that unpacks a tensor's whole shape: `B, T, d_model = x.shape` (names in another order
# would make another error first)
_WHOLE_SHAPE = re.compile(r"\s*\w+(?:\s*,\s*\w+)+\s*=\s*\w+\.(?:shape|size\(\s*\))\s*(?:#.*)?$")


_SHAPING = {"view", "reshape", "transpose", "permute", "expand", "flatten", "unflatten", "split",
            "chunk", "unsqueeze", "squeeze", "movedim", "swapaxes", "repeat", "repeat_interleave",
            "narrow", "select", "size", "tril", "triu", "diagonal", "roll"}  # fmt: skip


def _sizes_from(text: str, names: set) -> bool:
    """Whether a line only sets names to sizes: a tensor's dims (`x.shape[1]`, `k.size(1)`,
    `len(w_q)`), `names` (sizes and parameters), and their products and floor quotients, with
    no number written but a dim's index (`d_k = d_model // num_heads`, `group = q.size(1) //
    k.size(1)`; not `n = T // 2`, whose 2 may be the slip)."""
    tree = _parsed(text)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return False
    value, dims = tree.body[0].value, set()
    for node in ast.walk(value):  # the numbers that only pick a dim
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
            dims |= {id(n) for n in ast.walk(node.slice)} if node.value.attr == "shape" else set()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            dims |= (
                {id(n) for a in node.args for n in ast.walk(a)}
                if node.func.attr == "size"
                else set()
            )
    for node in ast.walk(value):
        if id(node) in dims or isinstance(node, ast.Load | ast.FloorDiv | ast.Mult | ast.Tuple):
            continue
        if isinstance(node, ast.Name) and (node.id in names or node.id == "len"):
            continue
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "size"):
            continue
        if isinstance(node, ast.Subscript | ast.Call | ast.BinOp):
            continue  # their parts are checked on their own
        return False  # another name, a number, another operation
    return True


def _names_in_indices(code: str) -> set:
    """The names a line of code reads inside a subscript (`x @ w_q[j].T`: j)."""
    tree = _parsed(code)
    if tree is None:
        return set(re.findall(r"[A-Za-z_]\w*", code or ""))
    return {n.id for sub in ast.walk(tree) if isinstance(sub, ast.Subscript)
            for n in ast.walk(sub.slice) if isinstance(n, ast.Name)}  # fmt: skip


def _parsed(code: str) -> ast.AST | None:
    """One line of code parsed on its own (a `return` as its expression), or None."""
    for text in (code.strip().removeprefix("return ").strip() or "0", code.strip()):
        try:
            return ast.parse(text)
        except SyntaxError:
            continue
    return None


def _names_outside_indices(code: str) -> set:
    """The names a line of code reads outside any subscript and any shaping call's arguments
    (`q[:, i] @ k[:, j].mT * s`: q, k, s; `o.reshape(B, T, d) * 2`: o); every name it reads if
    it does not parse on its own."""
    tree = _parsed(code)
    if tree is None:
        return set(re.findall(r"[A-Za-z_]\w*", code or ""))
    layout = [c for c in ast.walk(tree) if isinstance(c, ast.Call)  # .reshape(B, T, d): sizes
              and isinstance(c.func, ast.Attribute) and c.func.attr in _SHAPING]  # fmt: skip
    inside = {id(n) for sub in ast.walk(tree) if isinstance(sub, ast.Subscript)
              for n in ast.walk(sub.slice)}  # fmt: skip
    inside |= {id(n) for c in layout for a in (*c.args, *c.keywords) for n in ast.walk(a)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in inside}


def _lines_equal_to_a_stage(run: _Run, record: Record) -> set:
    """The lines before record's whose last tensor (what the line makes; once per line, a loop's
    line each time) equals one of the reference's steps in some layout (scores right before a
    mask the exercise does not ask for): their values are right, so no slip is there, though no
    stage was matched to them."""
    last: dict[int, list[Record]] = {}
    for r, after in zip(run.records, [*run.records[1:], None]):
        if r.lineno is None or r.lineno >= (record.lineno or 0) or r.caller is not None:
            continue
        if after is None or after.lineno != r.lineno:  # the line's last op, this time round
            last.setdefault(r.lineno, []).append(r)

    def same(r: Record) -> bool:
        return r.dtype.is_floating_point and any(
            _same_in_some_form(r.tensor, name, value)
            for name, value in run.reference.items()  # the right steps, no mistake made
            if isinstance(value, torch.Tensor) and value.numel() == r.tensor.numel()
        )

    return {line for line, made in last.items() if all(same(r) for r in made)}


def _lines_run(runs: list[_Run]) -> set:
    """(file, line) of every line of the learner's that ran, in any of the calls."""
    return set().union(*(getattr(r.records, "lines_run", ()) for r in runs))


def _values_made_from_keys(finding: Finding, runs: list[_Run], fn: Callable | None) -> Finding:
    """keys_as_values where the code names the keys `v` (`v = k.repeat_interleave(...)`): the
    line that assigns a v-name the keys' numbers, before the line found, is the slip's place."""
    record = finding.record
    if finding.mistake != "keys_as_values" or record is None or record.lineno is None:
        return finding
    run = next((r for r in runs if any(x is record for x in r.records)), runs[0])
    keys = [run.stages[n] for n in ("k_heads", "k") if n in run.stages]
    for r in run.records:
        match = re.match(r"\s*(v\w*)\s*=[^=]", r.code or "", re.IGNORECASE)
        if (r.lineno is None or r.lineno >= record.lineno or match is None
                or not r.dtype.is_floating_point):  # fmt: skip
            continue
        if any(_same_in_some_form(r.tensor, "k_heads", key) for key in keys):
            position, alias = _position(r, runs), _aliased_from(r, match.group(1), fn)
            if alias is not None:  # `v = k` on an earlier line: there
                r = dataclasses.replace(r, lineno=alias.lineno, code=alias.code)
            return dataclasses.replace(finding, record=r, position=position, hint=_V_FROM_K)
    code = getattr(fn, "__code__", None)  # `v = k`, then `weights @ v`: no v-line has a record
    names = _stores_and_loads(code)[1].get(record.lineno, ()) if code is not None else ()
    for name in sorted(n for n in names if n.lower().startswith("v")):
        alias = _aliased_from(record, name, fn)
        if alias is not None:
            record = dataclasses.replace(record, lineno=alias.lineno, code=alias.code)
            return dataclasses.replace(finding, record=record, hint=_V_FROM_K)
    return finding


_V_FROM_K = (
    "look at what v is made from, on this line or before it: the values come from the v "
    "the function is given, not from k."
)


def _fill_as_written(finding: Finding) -> Finding:
    """mask_filled_with_zero where the code writes another tiny number (`-1e-9` for `-1e9`):
    the headline says the number, not "0"."""
    record = finding.record
    if finding.mistake != "mask_filled_with_zero" or record is None:
        return finding
    match = re.search(r",\s*(?:value\s*=\s*)?([-+]?\d[\d.]*(?:e[-+]?\d+)?)\s*\)", record.code)
    if match is None or float(match.group(1)) == 0:
        return finding
    number = match.group(1)
    headline = (
        f"masked scores are set to {number}, as good as 0 to the softmax (e to the {number} is "
        "about 1), instead of −inf, so the softmax still gives the masked keys weight"
    )
    return dataclasses.replace(finding, headline=headline)


def _aliased_from(record: Record, name: str, fn: Callable | None) -> Place | None:
    """The line that last set `name` before record's line by a plain assignment of another
    name (`v = k`: no op, so no record), when record's line reads `name` itself (`v =
    v.repeat_interleave(...)`): the place the values were first taken from the keys."""
    code = getattr(fn, "__code__", None)
    if code is None or record.lineno is None or record.caller is not None:
        return None
    stores, loads, _ = _stores_and_loads(code)
    if name not in loads.get(record.lineno, ()):
        return None
    earlier = [n for n in stores.get(name, ()) if n < record.lineno]
    if not earlier:
        return None
    text = linecache.getline(code.co_filename, max(earlier)).strip()
    if not re.fullmatch(rf"{re.escape(name)}\s*=\s*[A-Za-z_]\w*\s*(#.*)?", text):
        return None
    return Place(max(earlier), text)


def _mask_made_elsewhere(
    finding: Finding, fn: Callable | None, runs: list | None = None
) -> Finding:
    """A finding on a line that applies a mask (masked_fill, where) made from a name the
    function assigns on an earlier line (`m = mask.repeat(...)`): the check does not trace
    boolean tensors, so the slip may be in that mask. Names the last such line as `mask_line`."""
    record, code = finding.record, getattr(fn, "__code__", None)
    if record is None or record.lineno is None or code is None:
        return finding
    if finding.mistake not in (None, "mask_inverted"):  # a fill value, a mask left unused: here
        return finding
    call = re.search(r"(?:masked_fill_?|where)\(", record.code or "")
    if call is None:
        return finding
    argument, depth = "", 0  # the first argument, up to its comma at depth 0
    for char in record.code[call.end() :]:
        if char in ",)" and depth == 0:
            break
        depth += (char in "([{") - (char in ")]}")
        argument += char
    names = set(re.findall(r"(?<![.\w])[A-Za-z_]\w*", argument))
    stored, todo = [], [code]
    while todo:
        current = todo.pop(0)
        for ins in dis.get_instructions(current):
            line = ins.positions.lineno if ins.positions else None
            if ins.opname.startswith("STORE_") and ins.argval in names and line:
                stored.append(line)
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    ran = _lines_run(runs or [])
    sizes = re.compile(r"\.shape\b|\.size\(")  # `B, T, d = x.shape` makes no mask
    earlier = [n for n in stored if n < record.lineno
               and (not ran or (code.co_filename, n) in ran)
               and not sizes.search(linecache.getline(code.co_filename, n))]  # fmt: skip
    if not earlier:
        return finding
    line = max(earlier)
    text = linecache.getline(code.co_filename, line).strip()
    where = f"line {line}: `{text}`" if text else f"line {line}"
    return dataclasses.replace(finding, mask_line=where)


def _fallback(out: torch.Tensor, expected: torch.Tensor) -> str:
    diff = (out.detach().float() - expected).abs().nan_to_num(float("inf"))
    if diff.dim() == 3:
        per_token = diff.amax(dim=(0, 2))
        tokens = [int(t) for t in (per_token > ATOL).nonzero().flatten()]
        return (
            f"✗ Your output differs from the reference at token positions {tokens} (largest "
            f"difference {float(diff.max()):.3g}). The check cannot tell which line of your code "
            "departs first, and it matches no known mistake."
        )
    where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    return (
        f"✗ Not equal to the reference: the largest difference is at index {where}. The check "
        "cannot tell which line of your code departs first, and it matches no known mistake."
    )


# --- the checks the notebooks call ------------------------------------------------------------


def _sizes(second: bool = False) -> tuple[int, int, int, int, int, int]:
    """(B, T, d_model, num_heads, one head's d_k, 13's T_k): the first set, or the second."""
    if second:
        return B2, T2, D_MODEL2, HEADS2, ONE_HEAD_D_K2, CROSS_T_K2
    return B, T, D_MODEL, HEADS, ONE_HEAD_D_K, CROSS_T_K


def _inputs(seed: int = 0, second: bool = False) -> dict:
    """The fixed inputs: x (2, 5, 12), four (12, 12) weights, 3 heads, a padding mask (2, 5, 5)
    under which every query keeps at least one key either way round; `second`: the same at the
    second sizes (1, 3, 16), 2 heads."""
    b, t, d_model, heads, _, _ = _sizes(second)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, d_model, generator=g)
    weights = {name: torch.randn(d_model, d_model, generator=g) / d_model**0.5 for name in
               ("w_q", "w_k", "w_v", "w_o")}  # fmt: skip
    lengths = torch.tensor([4, 3] if not second else [2])
    mask = (torch.arange(t) < lengths.view(b, 1)).view(b, 1, t).expand(b, t, t)  # (B, T, T)
    return {"x": x, **weights, "num_heads": heads, "mask": mask}


def _call_args(run_args: dict, mask: bool, per_head: bool) -> dict:
    """The arguments diagnose passes to the learner's function."""
    if per_head:
        return _per_head_args(run_args)
    if not mask:  # the exercise's function has no mask parameter
        return {name: a for name, a in run_args.items() if name != "mask"}
    return run_args


def _reordered_parameters(
    fn: Callable, args: dict, expected: torch.Tensor, only_if_right: bool = False
) -> str:
    """'' unless fn's parameters carry the exercise's names in another order (`context, x`
    where the check passes x, context): then what each moved parameter receives, and whether
    fn is right when each argument goes to the parameter of its name (run, not guessed)."""
    try:
        params = list(inspect.signature(fn).parameters)[: len(args)]
    except (TypeError, ValueError):
        return ""
    names = list(args)
    if params == names or sorted(params) != sorted(names):
        return ""
    copies = [args[p].clone() if isinstance(args[p], torch.Tensor) else args[p] for p in params]
    copies = [[w.clone() for w in a] if isinstance(a, list) else a for a in copies]
    try:
        out, _ = _unpack(_traced(fn, copies).result)
    except _Halted:
        out = None
    moved = [(mine, theirs) for mine, theirs in zip(params, names) if mine != theirs]
    gets = "; ".join(f"your `{mine}` receives the check's {theirs}" for mine, theirs in moved)
    right = out is not None and out.shape == expected.shape and _same(out, expected)
    if only_if_right and not right:
        return ""
    then = (
        "Given each argument under its own name, your function is right: put its parameters "
        "in the exercise's order."
        if right
        else "Put its parameters in the exercise's order, then check again: given each argument "
        "under its own name, it still differs from the reference."
    )
    return (
        f"✗ Your function's parameters are ({', '.join(params)}), in another order than the "
        f"exercise's ({', '.join(names)}), and the check passes its arguments in the exercise's "
        f"order: {gets}. {then}"
    )


def _second_problem(fn: Callable, args: dict, expected: torch.Tensor, when: str = "") -> str:
    """'' if fn gives the expected output for args (the second sizes), else what went wrong."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args.values()]
    copies = [[w.clone() for w in a] if isinstance(a, list) else a for a in copies]
    trace = _traced(fn, copies, when=when)
    err = trace.error
    if err is not None:
        return f"it raised {type(err).__name__}{when}: {err}{_where_in_learner_code(err)}."
    out = trace.result
    if not isinstance(out, torch.Tensor):
        return f"it returned {type(out).__name__}{when}."
    if out.shape != expected.shape:
        return (
            f"its output has shape {tuple(out.shape)}{when}, where {tuple(expected.shape)} is "
            "expected."
        )
    if not _same(out, expected):
        diff = (out.detach().float() - expected).abs().nan_to_num(float("inf"))
        factor = _constant_factor(out, expected)
        scaled = (
            f"; it is the reference's times {factor:.3g} in every entry, as if a factor that "
            "depends on the sizes (the scale?) were computed another way"
            if factor is not None
            else ""
        )
        return (
            f"its output differs from the reference's{when} (largest difference "
            f"{float(diff.max()):.3g}){scaled}."
        )
    return ""


def _constant_factor(out: torch.Tensor, expected: torch.Tensor) -> float | None:
    """c when `out` is `expected` times one number c ≠ 1 in every entry (least squares, then
    checked entry by entry); else None."""
    o, e = out.detach().double(), expected.detach().double()
    if not (o.isfinite().all() and e.isfinite().all()) or not e.abs().sum():
        return None
    c = float((o * e).sum() / (e * e).sum())
    close = torch.allclose(o, c * e, atol=ATOL, rtol=1e-4)
    return c if close and abs(c - 1) > 1e-3 and c != 0 else None


def _per_head_args(args: dict) -> dict:
    """The learner's arguments for the loop exercise: x, then each of w_q, w_k, w_v as a list of h
    per-head (d_k, d_model) matrices (nn.Linear's layout), then w_o."""
    d_k = args["w_q"].shape[0] // args["num_heads"]
    per_head = {name: list(args[name].split(d_k)) for name in ("w_q", "w_k", "w_v")}
    return {"x": args["x"], **per_head, "w_o": args["w_o"]}


_SCALING = ("no_scaling", "scaled_by_d_model", "scaled_by_d_k", "multiplied_by_sqrt_d_k")
_ONE_HEAD = (*_SCALING, "softmax_over_queries", "no_softmax", "keys_as_values", "keys_from_w_q",
             "values_from_w_k", "scaled_after_softmax", "softmax_over_batch",
             "queries_keys_swapped")  # fmt: skip
_MULTI_HEAD = (*_ONE_HEAD, "weights_transposed", "w_o_transposed", "w_o_missing",
               "heads_split_without_transpose", "heads_split_interleaved",
               "heads_merged_without_transpose", "softmax_over_heads",
               "residual_added")  # fmt: skip


def _wrong_head_counts() -> list[str]:
    """The slips "num_heads_k": every other number of heads that divides the test's d_model."""
    counts = [k for k in range(1, D_MODEL + 1) if D_MODEL % k == 0 and k != HEADS]
    return [f"{WRONG_NUM_HEADS}{k}" for k in counts]


_MASKS = ("mask_ignored", "mask_inverted", "mask_after_softmax", "mask_filled_with_zero")


def diagnose(
    fn: Callable,
    echo: bool = True,
    mask: bool = True,
    per_head: bool = False,
    time_limit: float | None = None,
) -> Diagnosis:
    """Check `fn(x, w_q, w_k, w_v, w_o, num_heads, mask=None)` against the reference, without and
    (if `mask`) with a mask; name each mistake it makes, with the line that makes it.

    mask=False checks `fn(x, w_q, w_k, w_v, w_o, num_heads)`, with no mask parameter. per_head=True
    checks the loop exercise: `fn(x, w_q, w_k, w_v, w_o)` where w_q, w_k and w_v are lists of h
    per-head (d_k, d_model) matrices, and no mask. `time_limit`: seconds for all the calls
    together (TIME_LIMIT if None); the function is stopped then, or when its tensors pass
    TRACE_LIMIT_MB, with a ✗ that names the line it was running.
    """
    return _checked(lambda: _diagnose(fn, echo, mask, per_head), echo, time_limit)


def _diagnose(fn: Callable, echo: bool, mask: bool, per_head: bool) -> Diagnosis:
    args = _inputs()
    runs = {"without a mask": {**args, "mask": None}}
    if mask and not per_head:
        runs["with a mask"] = args
    exercise = "loop" if per_head else "masked" if mask else "fused"
    note = _note(fn, exercise)
    candidates = [
        name for name in (*_MULTI_HEAD, *(_MASKS if len(runs) > 1 else ()))
        if not (per_head and name.startswith("heads_split"))
    ] + ([] if per_head else _wrong_head_counts())  # fmt: skip
    results = {}
    for label, run_args in runs.items():
        call_args = _call_args(run_args, mask, per_head)
        when = f" when called {label}" if len(runs) > 1 else ""
        trace, problem = _run(fn, call_args, when, exercise)
        if problem:
            return _verdict(False, problem, echo, note="" if problem[0] == "○" else note)
        out, extra = _unpack(trace.result)
        expected = reference_attention(**run_args)
        if out is None or not _same(out, expected):
            reordered = _reordered_parameters(fn, call_args, expected)
            if reordered:
                return _verdict(False, reordered, echo, note=note)
        if out is None:
            got = type(trace.result).__name__
            missing = " (is its last line a `return`?)" if trace.result is None else ""
            message = (
                f"✗ Your function returned {got}{missing}; it should return out (B, T, d_model)."
            )
            if _is_numpy(trace.result):
                message = _numpy_message(trace.result, expected, "out (B, T, d_model)")
            return _verdict(False, message, echo, note=note)
        if out.shape != expected.shape:
            message = (
                f"✗ Wrong shape{f' {label}' if len(runs) > 1 else ''}: expected (B, T, d_model) "
                f"= {tuple(expected.shape)}, got "
                f"{tuple(out.shape)}.{_shape_hint(tuple(out.shape), tuple(expected.shape))}"
            )
            if not _shape_hint(tuple(out.shape), tuple(expected.shape)):
                stages = attention_stages(**run_args)
                message += _shape_reading(trace, out, stages, call_args)
            return _verdict(False, message, echo, note=note)
        results[label] = (trace, out, extra, expected)
    returned = [t.result for t, _, _, _ in results.values()
                if not isinstance(t.result, torch.Tensor)]  # fmt: skip
    if all(_same(out, expected) for _, out, _, expected in results.values()):
        if returned:  # the right output, inside a tuple or a list
            message = _returned_note(returned[0], tuple(expected.shape), right=True)
            return _verdict(False, message, echo)
        for trace, out, _, expected in results.values():  # in place, a reseed, the dtype
            message = _side_effect_message(trace, out, expected)
            if message:
                return _verdict(False, message, echo)
        for label, (trace, _, _, _) in results.items():  # masked keys must get exactly 0
            leak = (
                _mask_leak(trace, runs[label]["mask"]) if runs[label]["mask"] is not None else None
            )
            if leak is not None:
                return _verdict(False, _message([leak]), echo, [leak])
        for label, run_args in runs.items():  # the same at the second sizes
            second = {**_inputs(second=True), "mask": run_args["mask"]}
            if second["mask"] is not None:
                second["mask"] = _inputs(second=True)["mask"]
            when = f" (called {label})" if len(runs) > 1 else ""
            again = _second_call_problem(
                fn, _call_args(run_args, mask, per_head), reference_attention(**run_args), when
            )
            other = {**_inputs(seed=1), "mask": run_args["mask"]}  # other values, same sizes
            again = again or _other_values_problem(
                fn, _call_args(other, mask, per_head), reference_attention(**other), when
            )
            if again:  # wrong again at the same sizes: not the sizes
                return _verdict(False, again, echo, note=note)
            problem = _second_problem(
                fn, _call_args(second, mask, per_head), reference_attention(**second), when
            )
            if problem:
                return _verdict(False, _at_second_sizes(exercise, fn, problem), echo, note=note)
        which = "without and with a mask" if len(runs) > 1 else "on fixed inputs"
        message = (
            f"✓ Your attention matches the reference within atol {ATOL:.0e}, {which}, "
            f"{_two_sizes(exercise)}."
        )
        last = list(runs.values())[-1]  # with the mask, if there is one
        dtype = _float64_note(fn, _call_args(last, mask, per_head))
        return _verdict(True, f"{message}\n  {dtype}" if dtype else message, echo)
    if returned:
        note = "\n  ".join(n for n in (_returned_note(returned[0], (), False), note) if n)
    effects = dict.fromkeys(_side_effect_note(t) for t, _, _, _ in results.values())
    plain_note, note = note, "\n  ".join(n for n in (note, *effects) if n)
    second_args = {**_inputs(second=True), "mask": None}
    findings = _safe_explain(
        [
            (_records(trace, out, extra), functools.partial(attention_stages, **runs[label]))
            for label, (trace, out, extra, _) in results.items()
        ],
        candidates,
        fn,
        None
        if per_head
        else _swap_check(
            fn,
            _call_args(second_args, mask, per_head),
            lambda a: reference_attention(**{**second_args, "num_heads": a["num_heads"]}),
        ),
    )
    label = [lbl for lbl, (_, out, _, exp) in results.items() if not _same(out, exp)][0]
    trace, out, _, expected = results[label]
    problem = _numeric_problem(trace.records, out, expected, runs[label]["mask"] is not None)
    if problem and not _explains(findings, out, functools.partial(attention_stages, **runs[label])):
        return _verdict(False, problem, echo, note=note)  # NaN or float16 the names do not explain
    if _changed_in_place(trace) and not (len(findings) == 1 and findings[0].mistake):
        return _verdict(False, _changed_in_place(trace), echo, note=plain_note)
    words = _EXERCISE_WORDS.get(exercise)
    message = _message(findings, words=words) if findings else _fallback(out, expected)
    return _verdict(False, message, echo, findings, note)


# The smaller exercises: name -> (arguments, the stages of its reference, the mistakes that apply)
def _one_head_args(second: bool = False, seed: int = 0) -> dict:
    b, t, d_model, _, d_k, _ = _sizes(second)
    g = torch.Generator().manual_seed(1 + 100 * seed)
    x = torch.randn(b, t, d_model, generator=g)
    return {
        "x": x,
        **{
            n: torch.randn(d_k, d_model, generator=g) / d_model**0.5 for n in ("w_q", "w_k", "w_v")
        },  # fmt: skip
    }


def _one_head_stages(x, w_q, w_k, w_v, mistakes=(), given=None) -> dict:
    return attention_stages(x, w_q, w_k, w_v, None, 1, mistakes=mistakes, given=given)


def _head_scores_args(second: bool = False, seed: int = 0) -> dict:
    """x (2, 5, 12) and one head's w_q, w_k (d_k = 4, d_model = 12) in nn.Linear's layout."""
    a = _one_head_args(second, seed)
    return {"x": a["x"], "w_q": a["w_q"], "w_k": a["w_k"]}


def _head_scores_reference(mistake=None, **a) -> torch.Tensor:
    """One head's scores x · W_QK · xᵀ / √d_k (B, T, T), W_QK = W^Q·W^Kᵀ in the x·W layout; or
    the same with one mistake."""
    return head_scores_stages(**a, mistakes=() if mistake is None else (mistake,))["out"]


def _split_args(second: bool = False, seed: int = 0) -> dict:
    """t (B, T, d_model) counting 0, 1, 2, … (from 1000 · seed), so each number tells where it
    came from."""
    b, t, d_model, heads, _, _ = _sizes(second)
    count = torch.arange(b * t * d_model, dtype=torch.float32) + 1000 * seed
    return {
        "t": count.view(b, t, d_model),
        "num_heads": heads,
    }


def _cross_args(second: bool = False, seed: int = 0) -> dict:
    """x (B, T_q = 5, d_model) and a longer context (B, T_k = 7, d_model): a mix-up of the two
    changes the numbers or the shape."""
    b, _, d_model, _, _, t_k = _sizes(second)
    args = {name: a for name, a in _inputs(2 + 100 * seed, second).items() if name != "mask"}
    context = torch.randn(b, t_k, d_model, generator=torch.Generator().manual_seed(3 + 100 * seed))
    return {"x": args.pop("x"), "context": context, **args}


def _cross_stages(x, context, w_q, w_k, w_v, w_o, num_heads, mistakes=(), given=None) -> dict:
    return attention_stages(x, w_q, w_k, w_v, w_o, num_heads, None, context, mistakes, given)


INDUCTION_SIZES = {"B": 2, "h": 3, "T": 10, "n": 5}  # 18's exercise: n = T // 2
INDUCTION_SIZES2 = {"B": 1, "h": 2, "T": 14, "n": 7}


def _induction_args(second: bool = False, seed: int = 0) -> dict:
    """maps (B, h, T, T): causal softmax rows of random scores (every query's weights spread over
    itself and the keys before it), for sequences whose first T // 2 tokens repeat."""
    sizes = INDUCTION_SIZES2 if second else INDUCTION_SIZES
    b, h, t = sizes["B"], sizes["h"], sizes["T"]
    scores = 2 * torch.randn(b, h, t, t, generator=torch.Generator().manual_seed(4 + 100 * seed))
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    return {"maps": scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)}


SHARED_KV_SIZES = {"B": 2, "h": 4, "g": 2, "T": 5, "d_k": 3}  # 15's exercise: groups of 2
SHARED_KV_SIZES2 = {"B": 1, "h": 6, "g": 1, "T": 7, "d_k": 4}  # one K/V head (MQA)
SHARED_KV_SIZES3 = {"B": 1, "h": 8, "g": 2, "T": 4, "d_k": 2}  # groups of 4: h // g is neither
# g (h = g² at the first sizes) nor 2, and the repeat is not a broadcast as at g = 1

# further sets of sizes, after the second, for an exercise whose first two let a slip through
FURTHER_CHECK_SIZES: dict[str, tuple[dict[str, int], ...]] = {"shared_kv": (SHARED_KV_SIZES3,)}


def _shared_kv_args(second: bool | int = False, seed: int = 0) -> dict:
    """q (B, h, T, d_k) and k, v (B, g, T, d_k): h query heads, g K/V heads; `second`: the
    second set of sizes (True or 1) or a further one (2)."""
    sizes = (SHARED_KV_SIZES, SHARED_KV_SIZES2, SHARED_KV_SIZES3)[int(second)]
    b, h, g, t, d_k = (sizes[n] for n in ("B", "h", "g", "T", "d_k"))
    gen = torch.Generator().manual_seed(5 + 100 * seed)
    return {
        "q": torch.randn(b, h, t, d_k, generator=gen),
        "k": torch.randn(b, g, t, d_k, generator=gen),
        "v": torch.randn(b, g, t, d_k, generator=gen),
    }


EXERCISES: dict[str, tuple[Callable[..., dict], Callable[..., dict], tuple[str, ...]]] = {
    "one_head": (_one_head_args, _one_head_stages, _ONE_HEAD),
    "split_heads": (
        _split_args,
        split_stages,
        ("heads_split_without_transpose", "heads_split_interleaved", *_wrong_head_counts()),
    ),
    "head_scores": (_head_scores_args, head_scores_stages, (*_SCALING, *CIRCUIT_MISTAKES)),
    "induction_score": (_induction_args, induction_stages, INDUCTION_MISTAKES),
    "shared_kv": (
        _shared_kv_args,
        shared_kv_stages,
        (
            *SHARED_KV_MISTAKES,
            "no_scaling",
            "scaled_by_d_k",
            "scaled_after_softmax",
            "softmax_over_queries",
            "no_softmax",
            "keys_as_values",
        ),
    ),  # fmt: skip
    "cross_attention": (
        _cross_args,
        _cross_stages,
        (
            *CONTEXT_MISTAKES,
            *_MULTI_HEAD,
            *_wrong_head_counts(),
        ),
    ),
}


# what each exercise returns, for a learner, and where to look when it differs in no known way
EXERCISE_OUT: dict[str, tuple[str, str]] = {
    "one_head": (
        "output (weights·v)",
        "look at this line: what does it compute from the weights and v?",
    ),
    "split_heads": ("heads (t cut into h blocks of d_k)", STAGE_HINTS["q_heads"]),
    "head_scores": ("scores x·W_QK·xᵀ/√d_k", STAGE_HINTS["scores"]),
    "shared_kv": (
        "output (each query head's weights · its group's values)",
        STAGE_HINTS["heads"],
    ),
    "induction_score": (
        "induction scores (one per head)",
        "look at the line that reads the weights: which queries, which key for each, and how "
        "they become one number per head?",
    ),
}


def check_exercise(
    fn: Callable, name: str, echo: bool = True, time_limit: float | None = None
) -> Diagnosis:
    """Check a notebook exercise's function against its reference (see EXERCISES). `time_limit`:
    seconds for all the calls together (TIME_LIMIT if None), as for diagnose."""
    return _checked(lambda: _check_exercise(fn, name, echo), echo, time_limit)


def _check_exercise(fn: Callable, name: str, echo: bool) -> Diagnosis:
    make_args, stages_of, candidates = EXERCISES[name]
    args = make_args()
    note = _note(fn, name)
    trace, problem = _run(fn, args, name=name)
    if problem and problem.startswith("✗ Your function raised"):  # (k, q, v): a shape error
        reordered = _reordered_parameters(fn, args, stages_of(**args)["out"], only_if_right=True)
        problem = reordered or problem
    if problem:
        return _verdict(False, problem, echo, note="" if problem[0] == "○" else note)
    out, extra = _unpack(trace.result)
    expected = stages_of(**args)["out"]
    if out is not None and _same(out, expected):
        if not isinstance(trace.result, torch.Tensor):  # right, inside a tuple or a list
            message = _returned_note(trace.result, tuple(expected.shape), right=True)
            return _verdict(False, message, echo)
        message = _side_effect_message(trace, out, expected)  # in place, a reseed, the dtype
        if message:
            return _verdict(False, message, echo)
        again = _second_call_problem(fn, make_args(), expected)
        other = make_args(seed=1)  # other values, the same sizes
        again = again or _other_values_problem(fn, other, stages_of(**other)["out"])
        if again:  # wrong again at the same sizes: not the sizes
            return _verdict(False, again, echo, note=note)
        for which in range(1, 2 + len(FURTHER_CHECK_SIZES.get(name, ()))):
            second = make_args(second=which)
            problem = _second_problem(fn, second, stages_of(**second)["out"])
            if problem:
                message = _at_second_sizes(name, fn, problem, which)
                return _verdict(False, message, echo, note=note)
        message = f"✓ Correct: equal to the reference within atol {ATOL:.0e}, {_two_sizes(name)}."
        dtype = _float64_note(fn, args)
        return _verdict(True, f"{message}\n  {dtype}" if dtype else message, echo)
    reordered = _reordered_parameters(fn, args, expected)
    if reordered:
        return _verdict(False, reordered, echo, note=note)
    if out is None and trace.result is None:
        message = (
            "✗ Your function returned None: is its last line a `return`? It should return "
            f"{EXERCISE_OUT.get(name, ('the result',))[0]}, of shape {tuple(expected.shape)}."
        )
        return _verdict(False, message, echo, note=note)
    if out is not None and not isinstance(trace.result, torch.Tensor):
        note = "\n  ".join(n for n in (_returned_note(trace.result, (), False), note) if n)
    plain_note, note = note, "\n  ".join(n for n in (note, _side_effect_note(trace)) if n)
    findings = []
    if out is not None:
        stages_of_args = functools.partial(stages_of, **args)
        second = make_args(second=True)
        swapped = (
            _swap_check(fn, second, lambda a: stages_of(**a)["out"])
            if "num_heads" in second
            else None
        )
        findings = _safe_explain(
            [(_records(trace, out, extra), stages_of_args)], candidates, fn, swapped
        )
        problem = _numeric_problem(trace.records, out, expected)
        if problem and out.shape == expected.shape and not _explains(findings, out, stages_of_args):
            return _verdict(False, problem, echo, note=note)
    explained = findings and all(f.mistake for f in findings)
    if out is None and _is_numpy(trace.result):
        what = EXERCISE_OUT.get(name, ("the result",))[0]
        message = _numpy_message(
            trace.result, expected, f"{what}, of shape {tuple(expected.shape)}"
        )
        return _verdict(False, message, echo, note=note)
    if out is None or (out.shape != expected.shape and not explained):
        got = tuple(out.shape) if out is not None else type(trace.result).__name__
        message = f"✗ Expected shape {tuple(expected.shape)}, got {got}."
        order = _permuted(out, expected) if out is not None else None
        if order is not None and _rearranges(trace.records):
            message += (
                " The same numbers with the dims in another order: check which dims your "
                "transpose swaps."
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
            message += (
                f" The same sizes in another order, but not the same numbers. {check_sizes(name)}"
            )
        if out is not None and order is None:  # where the shape first goes wrong
            message += _shape_reading(trace, out, stages_of(**args), args)
        return _verdict(False, message, echo, note=note)
    if _changed_in_place(trace) and not (len(findings) == 1 and findings[0].mistake):
        return _verdict(False, _changed_in_place(trace), echo, note=plain_note)
    words, hints = EXERCISE_OUT.get(name), _EXERCISE_HINTS.get(name)
    message = (
        _message(findings, words, hints, _EXERCISE_WORDS.get(name))
        if findings
        else _fallback(out, expected)
    )
    return _verdict(False, message, echo, findings, note)


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


_TRANSPOSES = ("transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "get", "einsum")


def _rearranges(records: list[Record]) -> bool:
    """Whether the learner's code transposes or permutes a tensor (x.T and x.mT are "__get__")."""
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


# The sizes each exercise's check calls the learner's function with, keyed by exercise: 01
# one_head, 02 loop (diagnose(per_head=True)), 03 split_heads, 05 fused (diagnose(mask=False)),
# 06 masked (diagnose()), 09 cross_attention, 12 head_scores. Notebooks can state them.
_D_K = D_MODEL // HEADS
CHECK_SIZES: dict[str, dict[str, int]] = {
    "one_head": {"B": B, "T": T, "d_model": D_MODEL, "d_k": ONE_HEAD_D_K},
    "loop": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "split_heads": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "fused": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "masked": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "cross_attention": {
        "B": B,
        "T_q": T,
        "T_k": CROSS_T_K,
        "d_model": D_MODEL,
        "num_heads": HEADS,
        "d_k": _D_K,
    },  # fmt: skip
    "head_scores": {"B": B, "T": T, "d_model": D_MODEL, "d_k": ONE_HEAD_D_K},
    "induction_score": INDUCTION_SIZES,
    "shared_kv": SHARED_KV_SIZES,
}


def _sizes_of(b: int, t: int, d_model: int, heads: int, d_k: int, t_k: int) -> dict:
    return {
        "one_head": {"B": b, "T": t, "d_model": d_model, "d_k": d_k},
        **{
            name: {"B": b, "T": t, "d_model": d_model, "num_heads": heads, "d_k": d_model // heads}
            for name in ("loop", "split_heads", "fused", "masked")
        },  # fmt: skip
        "cross_attention": {
            "B": b,
            "T_q": t,
            "T_k": t_k,
            "d_model": d_model,
            "num_heads": heads,
            "d_k": d_model // heads,
        },  # fmt: skip
        "head_scores": {"B": b, "T": t, "d_model": d_model, "d_k": d_k},
        "induction_score": INDUCTION_SIZES2,
        "shared_kv": SHARED_KV_SIZES2,
    }


# the second set of sizes, checked once the first gives the right output
SECOND_CHECK_SIZES: dict[str, dict[str, int]] = _sizes_of(*_sizes(second=True))


def _short_sizes(name: str, second: bool | int = False) -> str:
    """'B = 2, T = 5, d_model = 12, num_heads = 3, d_k = 4' (the loop: 3 heads); `second`: the
    second set (True or 1), or a further one (2, ...)."""
    sets = (CHECK_SIZES[name], SECOND_CHECK_SIZES[name], *FURTHER_CHECK_SIZES.get(name, ()))
    sizes = sets[int(second)]
    parts = [f"{key} = {value}" for key, value in sizes.items()]
    if name == "loop":
        parts = [p if not p.startswith("num_heads") else f"{sizes['num_heads']} heads"
                 for p in parts]  # fmt: skip
    return ", ".join(parts)


def _two_sizes(name: str) -> str:
    """'at two sizes (B = 2, ...; then B = 1, ...)', for a ✓."""
    count = 2 + len(FURTHER_CHECK_SIZES.get(name, ()))
    sets = "; then ".join(_short_sizes(name, which) for which in range(count))
    return f"at {_COUNTS[count]} sizes ({sets})"


_COUNTS = {2: "two", 3: "three", 4: "four"}
_ORDINALS = {1: "second", 2: "third", 3: "fourth"}


def _numbers_in(fn: Callable, name: str) -> str:
    """'2 (B, √d_k), 3 (num_heads)': the numbers written in the function's code that equal a size
    of the first check, in the order they appear; '' if none."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    sizes = dict(CHECK_SIZES[name])
    meaning: dict[float, list[str]] = {}
    for key, value in sizes.items():
        meaning.setdefault(value, []).append(key)
    if "d_k" in sizes and name != "split_heads":  # the scale's √d_k
        meaning.setdefault(sizes["d_k"] ** 0.5, []).append("√d_k")
    skip = _not_sizes(fn)
    found, todo = [], [code]
    while todo:
        current = todo.pop(0)
        for ins in dis.get_instructions(current):
            values = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
            if ins.opname.startswith(("LOAD_CONST", "LOAD_SMALL_INT", "RETURN_CONST")):
                at = ins.positions
                where = (at.lineno or 0, at.col_offset or 0) if at else (0, 0)
                found += [(where, v) for v in values if isinstance(v, int | float)
                          and not isinstance(v, bool) and v in meaning
                          and where not in skip]  # fmt: skip
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    numbers = list(dict.fromkeys(v for _, v in sorted(found, key=lambda item: item[0])))
    return ", ".join(f"{n:g} ({', '.join(meaning[n])})" for n in numbers)


# calls whose numbers are dims, not sizes: transpose(1, 2), softmax(-1), mean(dim=(0, 2))
_DIM_CALLS = {
    "transpose", "permute", "swapaxes", "swapdims", "movedim", "moveaxis", "softmax",
    "log_softmax", "sum", "mean", "amax", "max", "cat", "concat", "stack", "unsqueeze",
    "squeeze", "flatten", "diagonal", "unbind", "size", "argmax", "norm", "flip", "roll",
}  # fmt: skip


def _written_numbers(fn: Callable) -> frozenset:
    """The numbers written in fn's code (a dim given to transpose or softmax, and the 2 of 2 * n,
    left out): what 'a number written in' may mean."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return frozenset()
    skip, found, todo = _not_sizes(fn), set(), [code]
    while todo:
        current = todo.pop(0)
        for ins in dis.get_instructions(current):
            if ins.opname.startswith(("LOAD_CONST", "LOAD_SMALL_INT", "RETURN_CONST")):
                at = ins.positions
                where = (at.lineno or 0, at.col_offset or 0) if at else (0, 0)
                values = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
                found |= {v for v in values if isinstance(v, int | float)
                          and not isinstance(v, bool) and where not in skip}  # fmt: skip
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return frozenset(found)


def _swap_check(fn: Callable, second: dict, reference: Callable[[dict], torch.Tensor]):
    """A check that fn, at the second sizes, equals the reference cut into d_model / num_heads
    heads (d_k and num_heads swapped): `reference(args)` gives the reference for args."""

    def swapped() -> bool:
        d_model = next(a for a in second.values() if isinstance(a, torch.Tensor)).shape[-1]
        heads = second["num_heads"]
        if d_model % heads:
            return False
        trace = _traced(fn, [a.clone() if isinstance(a, torch.Tensor) else a
                             for a in second.values()])  # fmt: skip
        out = trace.result
        expected = reference({**second, "num_heads": d_model // heads})
        return isinstance(out, torch.Tensor) and _same(out, expected)

    return swapped


def _not_sizes(fn: Callable) -> set[tuple[int, int]]:
    """(line, column) of the numbers in fn's source that stand for no size: a dim given to
    transpose, softmax, mean, ... (or as dim=), and a factor beside a name (the 2 of 2 * n).
    Empty when the source cannot be read."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return set()
    indent = len(lines[0]) - len(lines[0].lstrip())
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return set()
    dims: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in _DIM_CALLS:
                dims += node.args[1:] if isinstance(node.func, ast.Name) else node.args
            dims += [k.value for k in node.keywords if k.arg and k.arg.startswith(("dim", "ax"))]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = (node.left, node.right)
            if any(not isinstance(side, ast.Constant) for side in sides):
                dims += [side for side in sides if isinstance(side, ast.Constant)]
    return {(node.lineno + start - 1, node.col_offset + indent) for node in dims}


def _kept_state(fn: Callable) -> str:
    """Where the function keeps something between calls: 'the list OUTS, read from outside it on
    line 8' or 'the default argument cache'; '' if none is seen."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    scope, mutable = getattr(fn, "__globals__", {}), (list, dict, set, torch.Tensor)
    todo, seen, set_outside = [code], [], []
    while todo:
        current = todo.pop(0)
        for ins in dis.get_instructions(current):
            line = ins.positions.lineno if ins.positions else None
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(
                scope.get(ins.argval), mutable
            ):
                seen.append((ins.argval, line))
            outside = ins.opname == "STORE_GLOBAL" or (  # `global scale` or `nonlocal scale`
                ins.opname == "STORE_DEREF" and current is code and ins.argval in code.co_freevars
            )
            if outside:
                set_outside.append((ins.argval, line))
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    if seen:
        name, line = seen[0]
        kind = type(scope[name]).__name__
        return f"the {kind} {name}, kept outside the function" + (f" (line {line})" if line else "")
    if set_outside:
        name, line = set_outside[0]
        return f"the name {name}, kept outside the function and set on " + (
            f"line {line}" if line else "a call"
        )
    params = list(inspect.signature(fn).parameters.values()) if callable(fn) else []
    held = [p.name for p in params if isinstance(p.default, mutable)]
    return f"the default argument {held[0]}, made once for every call" if held else ""


def _second_call_problem(fn: Callable, args: dict, expected: torch.Tensor, when: str = "") -> str:
    """For code right on its first call: the message when a second call with the same inputs is
    not right (state kept between calls, not the sizes), else ''."""
    problem = _second_problem(fn, args, expected, when)
    if not problem:
        return ""
    kept = _kept_state(fn)
    where = f": look at {kept}" if kept else " (a global list or dict, a default argument)"
    return (
        f"✗ Right on its first call, but a second call with the same inputs is not: {problem} "
        "Your function's result depends on something it keeps between calls" + where + ": "
        "make everything it uses inside the function, on each call."
    )


def _other_values_problem(fn: Callable, args: dict, expected: torch.Tensor, when: str = "") -> str:
    """For code right on its first call and on a repeat of it: the message when a call with other
    values at the same sizes is not right (what it keeps between calls, or a number that holds only
    for the first values; not the sizes), else ''."""
    problem = _second_problem(fn, args, expected, when)
    if not problem:
        return ""
    kept = _kept_state(fn)
    if kept:
        why = (
            f"Your function keeps {kept} between calls: does a later call reuse what an earlier "
            "one left there? Make everything it uses inside the function, on each call."
        )
    else:
        why = (
            "The check cannot tell why: does it keep something between calls (a global list or "
            "dict, a default argument), or use a number that holds only for the first values?"
        )
    return (
        "✗ Right on its first call, but not on a call with other values at the same sizes: "
        f"{problem} {why}"
    )


def _in_float64(args: dict) -> dict:
    """The same arguments with every floating-point tensor (in a list too) in float64."""

    def double(a):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.double()
        return [double(t) for t in a] if isinstance(a, list) else a

    return {name: double(a) for name, a in args.items()}


def _float64_note(fn: Callable, args: dict, when: str = "") -> str:
    """For code right on the check's float32 inputs: a note when the same call in float64 raises
    or returns another dtype (a tensor made in float32 where the inputs' dtype would do), else ''.
    The exercises ask nothing of dtypes, so this is said beside the ✓, not instead of it."""
    copies = list(_in_float64(args).values())
    trace = _traced(fn, copies, when=when)
    made = next(
        (r for r in trace.records if r.dtype in (torch.float32, torch.float16, torch.bfloat16)
         and r.where),
        None,
    )  # fmt: skip
    where = (
        f" The first tensor in another dtype is made on {made.where} ({made.dtype})."
        if made
        else ""
    )
    ask = (
        " torch.zeros, torch.empty, torch.full and torch.tensor of floats make torch's default "
        "dtype (float32) unless given dtype=: dtype=x.dtype, or torch.zeros_like, keeps the "
        "inputs' dtype."
    )
    err = trace.error
    if err is not None:
        what = f"it raised {type(err).__name__}{when}: {err}{_where_in_learner_code(err)}."
    else:
        out, _ = _unpack(trace.result)
        if out is None or out.dtype == torch.float64:
            return ""
        what = f"it returns {out.dtype}{when}, where the reference keeps float64."
    return (
        "Note: the check uses float32 inputs, and the exercise asks nothing more; given the same "
        f"inputs in float64, {what}{where}{ask}"
    )


def _at_second_sizes(name: str, fn: Callable, problem: str, which: int = 1) -> str:
    """The message for code right at the first sizes and not at the second (`which` 1) or a
    further set (2: the third)."""
    numbers = _numbers_in(fn, name)
    kept = _kept_state(fn)
    question = "does it hard-code a size, or compute one that holds only at these sizes?"
    if kept:
        question = (
            "does it hard-code a size, compute one that holds only at these sizes, or reuse "
            f"something from an earlier call ({kept})?"
        )
    if numbers:
        question += (
            f" Numbers written in your code that equal a size of the first check: {numbers}."
        )
    if which == 1:
        right = f"first sizes ({_short_sizes(name)})"
    else:  # right at each set before this one
        right = "; then ".join(_short_sizes(name, n) for n in range(which))
        right = f"first {_COUNTS[which]} sets of sizes ({right})"
    return (
        f"✗ Right at the check's {right}, but not at a {_ORDINALS[which]} set "
        f"({_short_sizes(name, which)}): {problem} Your function was right at "
        f"{'the first sizes' if which == 1 else 'those sizes'} only: {question}"
    )


def check_sizes(name: str) -> str:
    """The sentence that says which sizes an exercise's check uses, e.g. 'The check calls your
    function with B = 2, T = 5, d_model = 12 and num_heads = 3 (so d_k = 4).'"""
    return f"The check calls your function with {_sizes_text(name)}."


def _sizes_text(name: str) -> str:
    sizes = dict(CHECK_SIZES[name])
    if name == "induction_score":
        b, h, t = sizes["B"], sizes["h"], sizes["T"]
        return f"maps of B = {b}, h = {h} and T = {t} (so n = {t // 2})"
    if name == "shared_kv":
        b, h, g, t, d_k = (sizes[n] for n in ("B", "h", "g", "T", "d_k"))
        return (
            f"q of B = {b}, h = {h} query heads, T = {t} and d_k = {d_k}, and k and v with "
            f"g = {g} K/V heads"
        )
    d_k = sizes.pop("d_k")
    heads = sizes.pop("num_heads", None)
    parts = [f"{key} = {value}" for key, value in sizes.items()]
    if heads is None:
        parts.append(f"d_k = {d_k}")
        tail = ""
    elif name == "loop":
        parts.append(f"lists of {heads} heads' matrices")
        tail = f" (so d_k = {d_k})"
    else:
        parts.append(f"num_heads = {heads}")
        tail = f" (so d_k = {d_k})"
    text = f"{', '.join(parts[:-1])} and {parts[-1]}{tail}"
    if name == "masked":
        text += ", without and with a padding mask (B, T, T)"
    return text
