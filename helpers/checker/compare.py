"""What the checker compares and how: the check's tolerances and sizes, a learner's tensor held
to a reference stage in each of its layouts (`_same`, `_forms`, `_match`), findings, the verdict."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from helpers.checker.mistakes import DEPENDS, KINDS
from helpers.checker.stages import attention_stages
from helpers.checker.trace import Record

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
    made_via: tuple[int, ...] = ()  # for each: the line that reads it (0: this line or its source)


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


@functools.lru_cache(maxsize=512)
def _dropped_line(code: str) -> bool:
    """Whether a line is an expression statement whose value nothing keeps: `scores / d`, whose
    result is dropped (not `x.masked_fill_(...)`, which changes x, nor `heads.append(...)`)."""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return False
    # an arithmetic statement alone (a call or an index may be one line of a longer statement,
    # a generator's, and a call may keep or change what it is given)
    return isinstance(tree.body[0].value, ast.BinOp | ast.UnaryOp) and not code.lstrip().startswith(
        ("(", "[", "+", "-", "*", "/", "@")
    )


class _Hits:
    """Which records equal a stage's value in one of its forms, remembered per value: most of the
    stages are the same in every trial of a mistake, so each is compared with the records once."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_shape: dict[tuple, list[int]] = {}  # (index?, shape) -> records
        for i, record in enumerate(records[:-1]):
            if record.code and record.caller is None and _dropped_line(record.code):
                continue  # a value the code drops stands for no step of its computation
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


def _op(record: Record) -> str:
    """The op's name without underscores: div_, __truediv__ and div are all "div"-like."""
    return record.op.strip("_")


def _same_in_some_form(t: torch.Tensor, stage: str, value: torch.Tensor) -> bool:
    return any(_same(t, form) for form in _forms(value, KINDS[stage]) if form.shape == t.shape)


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


_BOUNDARY = ("softmax", "masked_fill", "where")


_PRODUCT_OPS = ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "einsum", "linear")


_CUTS = ("view", "reshape", "unflatten", "split", "chunk", "tensor_split", "unbind")


def _ratio(mine: torch.Tensor, form: torch.Tensor) -> float | None:
    """c if mine = c · form (c ≠ 1, c ≠ 0, both finite), else None. All zeros is no scale of
    anything: c = 0 is not reported."""
    a, b = mine.detach().double().flatten(), form.detach().double().flatten()
    if not (a.isfinite().all() and b.isfinite().all()) or float(b @ b) == 0:
        return None
    c = float(a @ b / (b @ b))
    close = torch.allclose(a, c * b, atol=ATOL, rtol=1e-4)
    return c if close and abs(c - 1) > 1e-3 and abs(c) > 1e-3 else None


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
        self.borrowed = False  # stages taken from a departure that another call showed first

    def trial(self, mistakes: tuple[str, ...], keep: dict | None = None) -> tuple[dict, _Found]:
        """The stages with `mistakes` made, and the learner's records matched to them; `keep`:
        stages held at their current value (where the learner's code is right)."""
        stages = self.stages_of(mistakes=mistakes, given={**self.given, **(keep or {})})
        return stages, _match(stages, self.records, self.hits_of)


# ops that take some of a tensor's numbers, or the same numbers in another layout (and
# _REARRANGE's, defined below)
_SELECTS = {"getitem", "diagonal", "narrow", "select", "index_select", "gather",
            "take_along_dim", "masked_select", "unbind", "split", "chunk", "view", "reshape",
            "transpose", "permute", "contiguous", "flatten", "t", "movedim", "swapaxes",
            "swapdims", "mT", "get", "unflatten"}  # fmt: skip


_REARRANGE = {"view", "reshape", "transpose", "permute", "contiguous", "flatten", "t",
              "movedim", "swapaxes", "swapdims", "mT", "get"}  # fmt: skip


_JOINS = ("cat", "concat", "concatenate", "stack", "hstack", "dstack", "vstack")


# ops that fold a dim away: what they make from a stage is the next step, not the stage changed
_REDUCTIONS = ("sum", "mean", "nansum", "nanmean", "prod", "amax", "amin", "logsumexp", "norm")


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


_SCALING = ("no_scaling", "scaled_by_d_model", "scaled_by_d_k", "multiplied_by_sqrt_d_k")
