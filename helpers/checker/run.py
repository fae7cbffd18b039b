"""Running the learner's call: under the check's time and memory limits (`_checked`, `_traced`),
the integers read from outside the function, and what the call did besides its output (an input
changed in place, a mask leaked)."""

from __future__ import annotations

import ast
import collections
import dis
import linecache
import re
import sysconfig
import time
import traceback
import types
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from helpers.checker.compare import HEADS, TIME_LIMIT, TRACE_LIMIT_MB, Diagnosis, Finding, _verdict
from helpers.checker.sizes import _sizes_text, check_sizes
from helpers.checker.trace import Place, Record, Trace, trace_call


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


def _traced(
    fn: Callable, copies: list, watch=(), inputs=None, when: str = "", min_dim: int = 2
) -> Trace:
    """trace_call under the check's limits; raises _Halted when the call was stopped. `min_dim`:
    the fewest dims a float tensor needs to be recorded (1 records vectors too)."""
    limits = _LIMITS.get() or _Limits(TIME_LIMIT, time.monotonic() + TIME_LIMIT,
                                      int(TRACE_LIMIT_MB * 2**20))  # fmt: skip
    trace = trace_call(
        fn,
        copies,
        watch,
        deadline=limits.deadline,
        max_bytes=limits.max_bytes,
        inputs=inputs,
        min_dim=min_dim,
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


def _read_from_outside(fn: Callable) -> list[tuple[str, object]]:
    """(name, value) of each global the function (and any function inside it) reads, in order."""
    code = getattr(fn, "__code__", None)
    names, todo = [], [code] if code is not None else []
    while todo:
        current = todo.pop()
        names += [i.argval for i in dis.get_instructions(current)
                  if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]  # fmt: skip
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    scope = getattr(fn, "__globals__", {})
    return [(name, scope[name]) for name in dict.fromkeys(names) if name in scope]


def _globals_read(fn: Callable) -> list[tuple[str, int]]:
    """The integers the function reads from outside itself (a notebook's h = 4), by name."""
    return [
        (n, v) for n, v in _read_from_outside(fn) if isinstance(v, int) and not isinstance(v, bool)
    ]


def _global_tensors(fn: Callable) -> list[tuple[str, torch.Tensor]]:
    """The tensors the function reads from outside itself (a notebook's causal mask), by name."""
    return [(n, v) for n, v in _read_from_outside(fn) if isinstance(v, torch.Tensor)]


_MISMATCH = re.compile(
    r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
    r"dimension (\d+)"
)


def _mask_without_head_dim(text: str, args: dict) -> bool:
    """Whether a broadcast error is what a (B, T, T) mask meets against (B, h, T, T) scores: its
    B lined up with the heads' dim (dimension 1), B and h told apart by their sizes."""
    mask, x = args.get("mask"), args.get("x")
    found = _MISMATCH.search(text)
    if mask is None or mask.dim() != 3 or x is None or not found:
        return False
    a, b, dim = (int(g) for g in found.groups())
    return dim == 1 and {a, b} == {x.shape[0], args.get("num_heads")}


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
    fn: Callable, args: dict, when: str = "", name: str = "", min_dim: int = 2
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
    trace = _traced(fn, copies, matrices, inputs, when, min_dim)
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
        words = set(re.findall(r"[A-Za-z_]\w*", _where_in_learner_code(err)))
        outside = [(n, t) for n, t in _global_tensors(fn) if n in words]
        if outside:
            hint += "".join(
                f" The line reads {n}, a tensor of shape {tuple(t.shape)} made outside the "
                "function, not one of its arguments: its shape does not follow the sizes the "
                "check calls the function with."
                for n, t in outside
            )
        elif _mask_without_head_dim(text, args):
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
