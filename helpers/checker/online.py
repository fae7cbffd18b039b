"""19's exercise: one head's attention a block of keys at a time (the online softmax).

The learner writes `my_tiled_attention(q, k, v, block)`: q (T_q, d_k), k (T_k, d_k), v (T_k, d_v),
keys taken `block` at a time (the last block may be shorter); it returns softmax(q·kᵀ/√d_k)·v,
(T_q, d_v), without ever holding a T_q × T_k tensor.

The check runs the same loop in float64 (`online_steps`), with each classic slip switched on in
turn (ONLINE_MISTAKES), and compares the learner's output with each. A slip is named only when the
output equals what that slip gives. Its line is the first of the learner's tensors that holds the
slip's own running value (its running sum, its accumulator, its scores...) at the first block where
it differs from the right one; when no tensor does, the message says the check could not find the
line. Any other difference is followed block by block: the check looks, among the learner's
tensors in the order they are made, for the reference's running values after each block, and says
after which block the first one it was finding stops appearing, and on which line, or that it
cannot follow them. Code whose output is right is also asked never to make a tensor with as many
numbers as the T_q × T_k map (the point of the exercise), and is run at two further sets of sizes.

Imports the checker's run, again, compare and sizes modules; torch only.
"""

from __future__ import annotations

import ast
import linecache
import math
from collections.abc import Callable

import torch

from helpers.checker.again import (
    _at_second_sizes,
    _float64_note,
    _other_values_problem,
    _second_call_problem,
    _second_problem,
)
from helpers.checker.compare import ATOL, Diagnosis, Finding, _ratio, _same, _verdict
from helpers.checker.run import (
    _loop_header,
    _note,
    _returned_note,
    _run,
    _side_effect_message,
    _side_effect_note,
    _traced,
    _unpack,
)
from helpers.checker.sizes import _two_sizes
from helpers.checker.trace import Record, Trace

__all__ = ["ONLINE_MISTAKES", "check_tiled", "online_steps", "tiled_args"]

from helpers.checker.online_steps import (
    _VALUES,
    LARGE,
    LOW,
    NAME,
    ONLINE_MISTAKES,
    SHIFT,
    large_args,
    online_steps,
    tiled_args,
    underflow_args,
)


def _layouts(t: torch.Tensor) -> list[torch.Tensor]:
    """A running value as a learner may hold it: as is, without its last dim of 1, transposed."""
    forms = [t]
    if t.dim() == 2 and t.size(-1) == 1:
        forms.append(t.squeeze(-1))
    if t.dim() == 2:
        forms.append(t.T)
    return forms


def _holds(record: Record, value: torch.Tensor) -> bool:
    return any(_same(record.tensor, form) for form in _layouts(value))


def _first_holding(
    records: list[Record], value: torch.Tensor, after: int = -1, op: str = ""
) -> int | None:
    """The first float tensor after `after` (made by `op`, if given) that holds value."""
    return next((i for i, r in enumerate(records) if i > after and r.dtype.is_floating_point
                 and (not op or r.op == op) and _holds(r, value)), None)  # fmt: skip


def _keys(step: dict) -> str:
    start, end = step["keys"]
    return f"key {start}" if end - start == 1 else f"keys {start}–{end - 1}"


def _block(j: int, step: dict) -> str:
    return f"block {j} ({_keys(step)})"


def _map_record(trace: Trace, t_q: int, t_k: int) -> Record | None:
    """The first tensor the learner made with at least as many numbers as the T_q × T_k map."""
    return next((r for r in trace.records if r.tensor.numel() >= t_q * t_k), None)


_VIEWS = {"__getitem__", "__get__", "t", "transpose", "permute", "view", "reshape", "contiguous",
          "clone", "detach", "to", "float", "double", "split", "chunk", "unbind", "narrow",
          "select", "expand", "unsqueeze", "squeeze", "flatten", "mT", "movedim"}  # fmt: skip


def _whole_row(trace: Trace, t_k: int) -> Record | None:
    """The first tensor computed (not a view of k or v) whose last dim holds all T_k keys: one
    query's scores, or weights, over every key at once."""
    return next((r for r in trace.records if r.dtype.is_floating_point and r.tensor.dim()
                 and r.tensor.shape[-1] == t_k and r.op not in _VIEWS), None)  # fmt: skip


def _largest(trace: Trace) -> Record | None:
    floats = [r for r in trace.records if r.dtype.is_floating_point]
    return max(floats, key=lambda r: r.tensor.numel(), default=None)


def _max_over_queries(trace: Trace, t_q: int) -> Record | None:
    """A maximum taken over a block's queries: an amax or max whose input is (T_q, n) scores and
    whose result has n numbers, one per key (with or without the dim of 1)."""
    for r in trace.records:
        if "max" not in r.op or not r.parents:
            continue
        parent = trace.records[r.parents[0]].tensor if r.parents[0] < len(trace.records) else None
        if parent is None or parent.dim() != 2 or parent.size(0) != t_q or parent.size(1) == t_q:
            continue
        if tuple(r.tensor.shape) in ((parent.size(1),), (1, parent.size(1))):
            return r
    return None


def _with_hint(message: str, headline: str, record: Record | None, hint: str) -> str:
    where = f"\n  Where: {record.where}" if record is not None and record.where else ""
    return f"{message}{headline}{where}\n  Hint: {hint}"


_AXIS_WORDS = (
    "the maximum over dim 0 of a block's scores, that is over the queries: it has one number "
    "per key, where each query's row needs its own maximum",
    "look at the dim this line takes the maximum over: which dim of a block's scores holds a "
    "query's keys?",
)


def _axis_message(record: Record) -> str:
    what, hint = _AXIS_WORDS
    return _with_hint("✗ ", f"max_over_queries: {what}.", record, hint)


def _axis_note(record: Record) -> str:
    """The same, after a message that says what went wrong later (an error, a shape)."""
    return (
        f"\n  Earlier, {record.where} takes the maximum over dim 0 of a block's scores, that is "
        "over the queries: one number per key, where each query's row needs its own maximum, "
        "over its keys."
    )


def _return_line(trace: Trace) -> Record | None:
    if not trace.returned_at:
        return None
    line, code = trace.returned_at
    return Record(torch.zeros(0), "return", line, code)


def _locate(
    name: str, fn: Callable, trace: Trace, right: list[dict], wrong: list[dict]
) -> list[Record]:
    """The learner's lines that make the slip's own value (see ONLINE_MISTAKES), or []."""
    home = ONLINE_MISTAKES[name][2]
    records = trace.records
    if home == "out":
        found = _return_line(trace)
        return [found] if found else []
    if home == "loop":  # the loop around the line that makes a block's scores
        at = _first_holding(records, wrong[0]["scores"])
        if at is None or records[at].lineno is None or records[at].caller is not None:
            return []
        code = getattr(fn, "__code__", None)
        filename = code.co_filename if code else None
        header = _loop_header(filename, records[at].lineno) if filename else None
        if header is None:
            return []
        return [Record(torch.zeros(0), "loop", header, linecache.getline(filename, header).strip())]
    homes = ("total", "acc") if name == "never_rescaled" else (home,)
    found = []
    if name == "never_rescaled":  # a factor made, but of 1 where the maximum rose
        j = next((j for j, step in enumerate(right) if j and (step["factor"] < 1).any()), None)
        ones = torch.ones_like(right[j]["factor"]) if j is not None else None
        at = _first_holding(records, ones, op="exp") if ones is not None else None
        if at is not None:
            found.append(records[at])
    for value in homes:
        j = next((j for j, (a, b) in enumerate(zip(right, wrong, strict=False))
                  if a[value].shape != b[value].shape or not torch.allclose(a[value], b[value])),
                 None)  # fmt: skip
        if j is None:
            continue
        at = _first_holding(records, wrong[j][value])
        if at is not None and not _holds(records[at], right[j][value]):
            found.append(records[at])
    return found


def _named(name: str, fn: Callable, trace: Trace, right: list[dict], wrong: list[dict]) -> str:
    what, hint, home = ONLINE_MISTAKES[name]
    lines = _locate(name, fn, trace, right, wrong)
    head = f"✗ This looks like a known mistake ({name}): {what}."
    if not lines:
        looked = {"out": "your `return` line", "loop": "the loop around your scores"}.get(
            home, f"the slip's {_VALUES.get(home, home)} among the tensors your function makes"
        )
        return (
            f"{head}\n  Where: the check could not find the line (it looked for {looked}).\n"
            f"  Hint: {hint}"
        )
    where = " and ".join(r.where for r in lines)
    if len(lines) == 3:  # the factor of 1, then the sums it multiplies
        where = (f"{lines[0].where}, which makes a factor of 1 where the maximum rose; it "
                 f"multiplies the sums on {lines[1].where} and {lines[2].where}")  # fmt: skip
    return f"{head}\n  Where: {where}\n  Hint: {hint}"


def _followed(trace: Trace, right: list[dict], fn: Callable | None = None) -> str:
    """Where the learner's running values stop equalling the reference's: the Where and Hint of
    a difference no known slip explains."""
    records = trace.records
    tracked: dict[str, tuple[int, int]] = {}  # value -> (last block found, its record)
    for value in _VALUES:
        at = -1
        for j, step in enumerate(right):
            found = _first_holding(records, step[value], after=at)
            if found is None:
                break
            tracked[value] = (j, found)
            at = found
    scaled = _scaled_scores(records, right[0]["scores"]) if "scores" not in tracked else None
    if scaled is not None:  # the first block's scores at another scale
        record, factor = scaled
        return (
            f"\n  Where: {record.where} makes the first block's scores as the reference's × "
            f"{factor:.4g} in every entry: the same products at another scale. The check does not "
            "know which slip this is."
            "\n  Hint: look at what this line divides the scores by: which size, and which "
            "power of it?"
        )
    wide = _wider_block(records, right[0]["scores"]) if "scores" not in tracked else None
    if wide is not None:  # the first block read with more keys than `block`
        n, m = wide.tensor.shape[-1], right[0]["scores"].shape[-1]
        return (
            f"\n  Where: {wide.where} makes the first block's scores over {n} keys, where the "
            f"block holds {m}: its first {m} columns are the reference's. The check does not know "
            "which slip this is."
            "\n  Hint: look at which keys this line takes for a block: where does a block start "
            "and stop?"
        )
    if not tracked:
        return (
            "\n  Where: the check cannot follow your running values: it looks among your tensors "
            "for the reference's, block by block, in the layouts (T_q, 1), (T_q,) and (T_q, d_v), "
            "and finds none at the first block, so it cannot tell where the difference starts."
            "\n  Hint: print your scores, running maximum, running sum and accumulator after each "
            "block, and compare them with one row worked out by hand as at the top of the "
            "notebook."
        )
    order = list(_VALUES)
    last = len(right) - 1
    stops = [(j, order.index(v), v, i) for v, (j, i) in tracked.items() if j < last]
    missing = [v for v in ("total", "acc") if v not in tracked]  # never found, at any block
    if not stops and missing:
        found = [_VALUES[v] for v in order if v in tracked]
        return (
            f"\n  Where: the check follows the reference's running values among your tensors. It "
            f"finds its {_listed(found)} after every block, but none of your tensors equals its "
            f"{_listed([_VALUES[v] for v in missing])}, after any block (if your code keeps "
            "it in another layout, the check cannot see it). The check does not know which slip "
            "this is."
            f"\n  Hint: look at the line that updates your "
            f"{' and '.join(_SHORT[v] for v in missing)}: what does it add at each block, and "
            "what does it multiply the sum so far by?"
        )
    if not stops:  # every value followed to the last block: the step after the loop
        found = _return_line(trace)
        where = f" {found.where}" if found else " the lines after your loop"
        return (
            "\n  Where: your tensors hold the reference's running values after every block, up "
            f"to the last; the difference comes after the loop:{where}"
            "\n  Hint: look at how the output is made from the running sum and the accumulator."
        )
    j, _, value, i = min(stops)
    record = records[i]
    early = _return_in_loop(fn, trace, record.lineno) if record.caller is None else None
    if early is not None:  # the function ended while its loop still had blocks to read
        line, loop = early
        return (
            f"\n  Where: {_line_text(trace, line)} is inside the loop that starts on line {loop} "
            "(indented under it), so your function returns while that loop is still running: "
            f"the check finds the reference's {_VALUES[value]} after {_block(j, right[j])}, and "
            f"none after {_block(j + 1, right[j + 1])}."
            "\n  Hint: a `return` inside the loop ends the function there; the output can be "
            "made only once every block has been read, after the loop (one indent to the left)."
        )
    following = [r for r in records[i + 1 :] if r.lineno == record.lineno
                 and r.tensor.shape == record.tensor.shape]  # fmt: skip
    after = (
        "; what that line makes next, in the same shape, differs"
        if following and record.lineno is not None and not _holds(following[0], right[j + 1][value])
        else ""
    )
    done = f"block {j}" if j == 0 else f"blocks 0–{j}"
    return (
        f"\n  Where: the check follows the reference's running values among your tensors. It "
        f"finds its {_VALUES[value]} after {done}, made on {record.where}, but not after "
        f"{_block(j + 1, right[j + 1])}{after}. The check does not know which slip this is."
        f"\n  Hint: look at what this line computes at {_block(j + 1, right[j + 1])}, and at the "
        "values it reads there."
    )


_SHORT = {"total": "running sum", "acc": "accumulator"}


def _row_scores(args: dict, i: int) -> str:
    """'−227 and −142': the least and the largest of query i's scores q·kᵀ/√d_k, rounded."""
    s = args["q"][i].double() @ args["k"].double().T / math.sqrt(args["q"].shape[-1])
    return f"{float(s.min()):.0f} and {float(s.max()):.0f}".replace("-", "−")


def _return_in_loop(fn: Callable | None, trace: Trace, line: int | None) -> tuple[int, int] | None:
    """(the return's line, the loop's line) when the `return` that ended the call is a statement
    of the loop's own body around `line` (not under an `if` in it): the loop's first pass that
    gets there ends the function. None otherwise, or when the source cannot be read."""
    code = getattr(fn, "__code__", None)
    if code is None or line is None or not trace.returned_at:
        return None
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        return None
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For | ast.While)
             and node.lineno < line <= (node.end_lineno or 0)]  # fmt: skip
    if not loops:
        return None
    loop = max(loops, key=lambda node: node.lineno)  # the innermost
    returned = trace.returned_at[0]
    if any(isinstance(statement, ast.Return) and statement.lineno == returned
           for statement in loop.body):  # fmt: skip
        return returned, loop.lineno
    return None


def _line_text(trace: Trace, line: int) -> str:
    found = _return_line(trace)
    return found.where if found is not None and found.lineno == line else f"line {line}"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _scaled_scores(records: list[Record], scores: torch.Tensor) -> tuple[Record, float] | None:
    """The first tensor of the first block's scores' shape that is them times one number."""
    found = []
    for r in records:
        for form in _layouts(scores):
            if r.tensor.shape == form.shape:
                factor = _ratio(r.tensor, form.float())
                if factor is not None and abs(factor - 1) > 1e-3:
                    found.append((r, factor))
                    break
    if not found:
        return None
    line = found[0][0].lineno  # the line's own result: its last such tensor (after a division)
    return [pair for pair in found if pair[0].lineno == line][-1]


def _wider_block(records: list[Record], scores: torch.Tensor) -> Record | None:
    """The first (T_q, n) tensor, n wider than the first block, whose first columns are it."""
    t_q, m = scores.shape
    return next((r for r in records if r.dtype.is_floating_point and r.tensor.dim() == 2
                 and r.tensor.shape[0] == t_q and r.tensor.shape[1] > m
                 and _same(r.tensor[:, :m], scores.float())), None)  # fmt: skip


def _odd_square(trace: Trace, t_q: int, others: set[int]) -> Record | None:
    """The first tensor of shape (T_q, T_q), which no step of the exercise makes at the check's
    first sizes: a (T_q, 1) column and a (T_q,) vector broadcast against each other make one."""
    if t_q in others:
        return None
    return next((r for r in trace.records if tuple(r.tensor.shape) == (t_q, t_q)), None)


def _other_sizes(args: dict) -> set[int]:
    """The check's sizes other than T_q: T_k, d_k, d_v and block."""
    return {args["k"].size(0), args["q"].size(1), args["v"].size(1), args["block"]}


def _earlier(trace: Trace, args: dict) -> str:
    """For an error or a wrong shape: the maximum over the queries, or a (T_q, T_q) broadcast,
    made before it, where one was; else ''."""
    t_q = args["q"].size(0)
    axis = _max_over_queries(trace, t_q)
    if axis is not None:
        return _axis_note(axis)
    square = _odd_square(trace, t_q, _other_sizes(args))
    return _square_note(square) if square is not None else ""


def _square_note(record: Record) -> str:
    return (
        f"\n  Earlier, {record.where} makes a tensor of shape {tuple(record.tensor.shape)}, "
        "T_q × T_q, which no step of this computation has: a (T_q, 1) column and a (T_q,) "
        "vector broadcast against each other make one (a maximum or a sum that drops the dim "
        "it reduces, say)."
    )


def _nan_message(trace: Trace, out: torch.Tensor) -> str | None:
    if out.isfinite().all():
        return None
    first = next((r for r in trace.records if r.dtype.is_floating_point
                  and (r.tensor.isnan().any() or r.tensor.isposinf().any())), None)  # fmt: skip
    what = "NaN" if out.isnan().any() else "inf"
    where = f"\n  Where: the first tensor with a NaN or a +inf is made on {first.where}" if (
        first is not None and first.where) else ""  # fmt: skip
    return (
        f"✗ Your output holds {what}, where the reference's numbers are all finite.{where}"
        "\n  Hint: here a +inf usually comes from exp of a positive number (a score not lowered "
        "by the maximum, or exp(m_new − m_old) while m_old is still −inf), and a NaN from "
        "inf − inf or 0 · inf: look at what that line computes, and from what."
    )


def check_tiled(fn: Callable, echo: bool = True) -> Diagnosis:
    """The check of 19's exercise (called through check_exercise, under its time limit)."""
    args = tiled_args()
    t_q = args["q"].size(0)
    note = _note(fn, NAME)
    right, expected = online_steps(**args)
    expected = expected.float()
    trace, problem = _run(fn, args, name=NAME, min_dim=1)
    if problem:
        if problem[0] == "○":
            return _verdict(False, problem, echo)
        again = _traced(fn, [a.clone() if isinstance(a, torch.Tensor) else a
                             for a in args.values()], min_dim=1)  # fmt: skip
        return _verdict(False, problem + _earlier(again, args), echo, note=note)
    out, _ = _unpack(trace.result)
    shape = tuple(expected.shape)
    if out is None:
        if trace.result is None:
            message = ("✗ Your function returned None: is its last line a `return`? It should "
                       f"return the output, of shape {shape} (T_q, d_v).")  # fmt: skip
        else:
            message = (f"✗ Your function returned {type(trace.result).__name__}; the check "
                       f"expects a tensor of shape {shape} (T_q, d_v).")  # fmt: skip
        return _verdict(False, message, echo, note=note)
    if not isinstance(trace.result, torch.Tensor):
        if _same(out, expected):
            return _verdict(False, _returned_note(trace.result, shape, right=True), echo)
        note = "\n  ".join(n for n in (_returned_note(trace.result, (), False), note) if n)
    if _same(out, expected):
        return _right(fn, trace, out, expected, args, echo, note)
    note = "\n  ".join(n for n in (note, _side_effect_note(trace)) if n)
    axis = _max_over_queries(trace, t_q)
    if out.shape != expected.shape:
        message = f"✗ Expected shape {shape} (T_q, d_v), got {tuple(out.shape)}."
        return _verdict(False, message + _earlier(trace, args), echo, note=note)
    nan = _nan_message(trace, out)
    if nan:
        return _verdict(False, nan, echo, note=note)
    named = []
    for name in ONLINE_MISTAKES:
        wrong, theirs = online_steps(**args, mistakes=(name,))
        if theirs.isfinite().all() and _same(out, theirs.float()):
            named.append((name, wrong))
    if len(named) == 1:
        name, wrong = named[0]
        finding = Finding(name, ONLINE_MISTAKES[name][2], None)
        return _verdict(False, _named(name, fn, trace, right, wrong), echo, [finding], note)
    if axis is not None:
        finding = Finding("max_over_queries", "max", axis)
        return _verdict(False, _axis_message(axis), echo, [finding], note)
    diff = (out.detach().float() - expected).abs()
    where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    factor = _ratio(out, expected)
    scaled = f"; yours are the reference's × {factor:.3g} in every entry" if factor else ""
    message = (
        f"✗ Your output differs from the reference's (largest difference "
        f"{float(diff.max()):.3g}, at query {where[0]}, feature {where[1]}{scaled}), in a way "
        "that matches no known mistake."
    )
    return _verdict(False, message + _followed(trace, right, fn), echo,
                    [Finding(None, "out", None)], note)  # fmt: skip


def _right(
    fn: Callable,
    trace: Trace,
    out: torch.Tensor,
    expected: torch.Tensor,
    args: dict,
    echo: bool,
    note: str,
) -> Diagnosis:
    t_q, t_k = args["q"].size(0), args["k"].size(0)
    message = _side_effect_message(trace, out, expected)
    if message:
        return _verdict(False, message, echo)
    whole = _map_record(trace, t_q, t_k)
    if whole is not None:
        shape, n = tuple(whole.tensor.shape), whole.tensor.numel()
        if t_k in shape:  # the map itself, or the keys' whole length in it
            what = f"as many numbers as the whole map of scores or weights ({t_q} × {t_k})"
            hint = (
                "make each block's scores inside the loop, from that block's keys, and keep "
                "only the running maximum, sum and accumulator from one block to the next."
            )
        else:
            what = (
                f"{n} numbers, at least as many as the whole T_q × T_k map ({t_q} × {t_k} = "
                f"{t_q * t_k})"
            )
            hint = (
                "a block's scores need only T_q × block numbers: look at what this line "
                "makes on the way to them, and whether a product over d_k would make fewer."
            )
        message = (
            f"✗ Your output is right, but {whole.where or 'your function'} makes a tensor of "
            f"shape {shape}: {what}; the exercise asks for no tensor that large (a block at a "
            f"time is there to hold less than the whole map).\n  Hint: {hint}"
        )
        return _verdict(False, message, echo)
    row = _whole_row(trace, t_k)
    if row is not None:
        message = (
            f"✗ Your output is right, but {row.where or 'your function'} computes a tensor of "
            f"shape {tuple(row.tensor.shape)} whose last dim holds all T_k = {t_k} keys at once: "
            "the exercise takes the keys a block at a time, every query's row included."
            "\n  Hint: look at which keys this line reads: a block of them, or all of them?"
        )
        return _verdict(False, message, echo)
    again = _second_call_problem(fn, tiled_args(), expected)
    other = tiled_args(seed=1)
    again = again or _other_values_problem(fn, other, online_steps(**other)[1].float())
    if again:
        return _verdict(False, again, echo, note=note)
    for which in (1, 2):
        second = tiled_args(second=which)
        problem = _second_problem(fn, second, online_steps(**second)[1].float())
        if problem:
            return _verdict(False, _at_second_sizes(NAME, fn, problem, which), echo, note=note)
    large = large_args()
    problem = _second_problem(fn, large, online_steps(**large)[1].float(), " with large scores")
    if problem:
        message = (
            f"✗ Right at the check's three sets of sizes, whose scores are small, but not at the "
            f"first sizes with q × {LARGE:g} and its first query negated (scores from −170 to "
            f"173; query 0's largest is 45): {problem} In float32, exp overflows above about "
            "88.7 and underflows to 0 below about −103.\n  Hint: look at what you subtract "
            "from the scores before exp: does each query's row get its own running maximum?"
        )
        return _verdict(False, message, echo, note=note)
    low = underflow_args()
    problem = _second_problem(fn, low, online_steps(**low)[1].float(), " with one row's scores low")
    row = _row_scores(low, 1)
    if problem:
        message = (
            "✗ Right at the check's three sets of sizes and with large scores, but not at the "
            f"first sizes with every key + {SHIFT:g} in each feature and query 1 = "
            f"{f'{LOW:g}'.replace('-', '−')} in "
            f"each, whose scores all lie between {row}: {problem} In float32, exp underflows to "
            "0 below about −103, so a row's exponentials exp(s − m) all become 0 when m stays "
            "far above every score of the row.\n  Hint: look at what your running maximum "
            "starts from and how it grows: each row's should be the largest score that row has "
            "seen so far (starting from −∞), so that its largest exponential is exactly 1."
        )
        return _verdict(False, message, echo, note=note)
    largest = _largest(trace)
    held = (
        f" (its largest: shape {tuple(largest.tensor.shape)}, line {largest.lineno})"
        if largest is not None and largest.lineno is not None
        else ""
    )
    message = (
        f"✓ Correct: equal to softmax(q·kᵀ/√d_k)·v within atol {ATOL:.0e}, {_two_sizes(NAME)}, "
        f"and at the first with q × {LARGE:g} and its first query negated (scores from −170 to "
        f"173), and with one query's scores all between {row}; and, at the first sizes, no "
        "float tensor your function made holds as many "
        f"numbers as the T_q × T_k = {t_q} × {t_k} map{held}, nor is computed over all {t_k} "
        "keys at once."
    )
    dtype = _float64_note(fn, args)
    return _verdict(True, f"{message}\n  {dtype}" if dtype else message, echo)
