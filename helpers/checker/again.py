"""Calling again: a second call with the same inputs, other values at the same sizes, a second and
third set of sizes, float64 (code right only at the first sizes, or only once, is told so)."""

from __future__ import annotations

import ast
import dis
import inspect
import linecache
import re
import textwrap
import types
from collections.abc import Callable

import torch

from helpers.checker.compare import _ratio, _same
from helpers.checker.run import _traced, _unpack, _where_in_learner_code
from helpers.checker.sizes import _COUNTS, _ORDINALS, CHECK_SIZES, _short_sizes


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
        if not out.isfinite().all() and expected.isfinite().all():
            what = "NaN" if out.isnan().any() else "inf"
            rows = sorted({int(i[0]) for i in (~out.isfinite()).nonzero().tolist()})
            where = f" (in row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:6]))})"
            return f"its output holds {what}{when}{where}, where the reference's is finite."
        diff = (out.detach().float() - expected).abs().nan_to_num(float("inf"))
        factor = _ratio(out, expected)
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


def _written_numbers(fn: Callable) -> dict[float, tuple[tuple[int, str], ...]]:
    """The numbers written in fn's code (a dim given to transpose or softmax, and the 2 of 2 * n,
    left out): what 'a number written in' may mean; each with the lines it is written on
    ((line, code), in order)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    skip, found, todo = _not_sizes(fn), {}, [code]
    while todo:
        current = todo.pop(0)
        for ins in dis.get_instructions(current):
            if ins.opname.startswith(("LOAD_CONST", "LOAD_SMALL_INT", "RETURN_CONST")):
                at = ins.positions
                where = (at.lineno or 0, at.col_offset or 0) if at else (0, 0)
                values = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
                for v in values:
                    if isinstance(v, int | float) and not isinstance(v, bool) and where not in skip:
                        found.setdefault(v, set()).add(where[0])
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return {
        v: tuple((n, linecache.getline(code.co_filename, n).strip()) for n in sorted(lines) if n)
        for v, lines in found.items()
    }


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


_FACTORY = re.compile(  # torch.tensor only of a float (torch.tensor(0) is an int64 index)
    r"\btorch\.(zeros|ones|empty|full|rand|randn)\(|\btorch\.tensor\([^)]*(\d\.|\.\d|float|inf)"
)


def _default_dtype_factory(fn: Callable, before: int | None) -> tuple[int, str] | None:
    """(line, code) of the first line of fn, before line `before` (or anywhere without one), that
    calls torch.zeros, ones, empty, full, rand, randn, or torch.tensor of a float, without
    dtype=: such a tensor is float32 whatever the inputs' dtype, and the trace may not see it (a
    0-dim running maximum, say) before the first float32 tensor it records. None if there is no
    such line."""
    try:
        lines, start = inspect.getsourcelines(inspect.unwrap(fn))
    except (OSError, TypeError):
        return None
    for offset, line in enumerate(lines):
        number, code = start + offset, line.split("#", 1)[0]
        if before is not None and number >= before:
            return None
        if _FACTORY.search(code) and "dtype" not in code:
            return number, line.strip()
    return None


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
    factory = _default_dtype_factory(fn, made.lineno if made else None)
    where = (
        f" The first tensor in another dtype is made on line {factory[0]}: `{factory[1]}`, which "
        "makes torch's default dtype."
        if factory
        else f" The first tensor in another dtype is made on {made.where} ({made.dtype})."
        if made
        else ""
    )  # fmt: skip
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
