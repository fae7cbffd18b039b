"""Where the values a line reads were set: names assigned on other lines, sizes read from shapes,
masks and fills made elsewhere (the lines a message names beside the one it blames)."""

from __future__ import annotations

import ast
import dataclasses
import dis
import inspect
import linecache
import re
import types
from collections.abc import Callable

import torch

from helpers.checker.compare import _SCALING, ATOL, Finding, _Run, _same_in_some_form
from helpers.checker.mistakes import HOME, WRONG_NUM_HEADS
from helpers.checker.run import _loop_header
from helpers.checker.trace import Place, Record


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


# a name set to an empty container, `heads = []`, `outs: list = list()`, `cache = {}`
_EMPTY = re.compile(
    r"^[A-Za-z_]\w*(?:\s*:\s*[\w\[\], .]+)?\s*=\s*(?:\[\]|\{\}|\(\)|list\(\)|dict\(\)|"
    r"tuple\(\)|set\(\))\s*(?:#.*)?$"
)


_LOADS = ("LOAD_FAST", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR")


_MUTATORS = ("append", "extend", "insert", "add", "update", "__setitem__", "reverse", "sort")


# the findings a number that is not a tensor can cause: a scale, a position, a head's index
_NUMBER_MADE = {"scaled_by_d_model", "scaled_by_d_k", "multiplied_by_sqrt_d_k", "kv_tiled",
                "heads_split_interleaved",
                "mask_inverted", "induction_on_the_twin",
                "induction_on_the_previous_token", "induction_with_a_first_half_query"}  # fmt: skip


# a loop header that goes through the heads 0, 1, 2, … in order (`for i in range(h):`,
# `for i in range(len(w_q)):`, `for i, w in enumerate(w_q):`, `for a, b in zip(w_q, w_k):`):
# the order of what it appends is not set there
_IN_ORDER = re.compile(
    r"^for [\w, ()]+ in (?:range\((?:len\([\w.]+\)|[\w.]+)\)|enumerate\([\w.]+\)|"
    r"zip\([\w., ]+\))\s*:\s*(?:#.*)?$"
)


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
    home = HOME.get(finding.mistake or "")
    unseen_home = home is not None and home not in (
        runs[0].found if runs else {}
    )  # named where it shows, downstream: the step it is made in has no tensor the check saw
    if finding.mistake not in _NUMBER_MADE and not (
        finding.mistake is None or order or scale or unseen_home
    ):
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
    direct = {record.lineno}  # the lines whose reads are this line's own
    via: dict[int, int] = {}  # a line named -> the line that reads it
    if finding.source is not None and finding.source.lineno:  # what the line it is made from reads
        todo.append(finding.source.lineno)
        compared.add(finding.source.lineno)
        direct.add(finding.source.lineno)
    if order:  # a list a loop fills: the loop sets the order, unless it counts up plainly
        for name in loads.get(record.lineno, ()):
            for at in stores.get(name, ()):
                header = _loop_header(code.co_filename, at)
                if header is None or header >= record.lineno:
                    continue
                if not _IN_ORDER.match(linecache.getline(code.co_filename, header).strip()):
                    lines.add(header)
                    via.setdefault(header, record.lineno)
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
            if _IN_ORDER.match(text):  # a loop counting the heads up: no value to suspect
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
                    if at in mutated and ".append(" not in text:
                        lines.add(at)
                        via.setdefault(at, line)
                continue
            if _WHOLE_SHAPE.match(text):
                continue  # `B, T, d_model = x.shape`: every size as it is
            if _EMPTY.match(text):
                continue  # `heads = []`: an empty list or dict holds no value to suspect
            if not scale and _sizes_from(text, params | sizes):
                continue  # d_k = d_model // num_heads: a size, no offset: it can only scale
            lines.add(at)
            via.setdefault(at, line)
            todo.append(at)
    if not lines:
        return finding
    nearest = sorted(lines, reverse=True)
    texts = [linecache.getline(code.co_filename, n).strip() for n in nearest]
    where = [f"line {n}: `{t}`" if t else f"line {n}" for n, t in zip(nearest, texts)]
    reader = tuple(0 if via.get(n, record.lineno) in direct else via[n] for n in nearest)
    return dataclasses.replace(finding, made_elsewhere=tuple(where), made_via=reader)


def _argument_set_again(finding: Finding, fn: Callable | None, runs: list[_Run]) -> Finding:
    """A wrong number of heads in a function that sets its own num_heads argument again before
    the line that cuts (`num_heads = 4`): that line is where the number comes from, so it is
    named beside the cut (as `made_elsewhere`), and the hint says the argument is replaced."""
    record, code = finding.record, getattr(fn, "__code__", None)
    if not (finding.mistake or "").startswith(WRONG_NUM_HEADS) or record is None or code is None:
        return finding
    if record.lineno is None or "num_heads" not in inspect.signature(fn).parameters:
        return finding
    stores, _, _ = _stores_and_loads(code)
    earlier = sorted(n for n in stores.get("num_heads", ()) if n < record.lineno)
    if not earlier or finding.made_elsewhere:
        return finding
    at = earlier[-1]
    text = linecache.getline(code.co_filename, at).strip()
    count = finding.mistake.removeprefix(WRONG_NUM_HEADS)
    heads = f"{count} head{'' if count == '1' else 's'}"
    cut = runs[0].reference.get("q_heads") if runs else None  # (B, h, T, d_k)
    passed = f", where the check passes {cut.shape[1]}" if cut is not None else ""
    reads_it = re.search(r"=.*\bnum_heads\b", text) is not None  # `num_heads = num_heads * 2`
    hint = (
        f"look at where this line's number of heads comes from: the function sets num_heads "
        f"again before it, so the code cuts {heads}"
        + (passed if reads_it or not passed else " whatever the check passes")
        + ". Remove the line that sets num_heads again: use the num_heads the function is given."
    )
    where = f"line {at}: `{text}`" if text else f"line {at}"
    return dataclasses.replace(finding, hint=hint, made_elsewhere=(where,))


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
    """keys_as_values where the code names the keys `v` (`v = k.repeat_interleave(...)`, or
    `k, v = ...`): the line that assigns a v-name the keys' numbers, before the line found, is
    the slip's place."""
    record = finding.record
    if finding.mistake != "keys_as_values" or record is None or record.lineno is None:
        return finding
    run = next((r for r in runs if any(x is record for x in r.records)), runs[0])
    keys = [run.stages[n] for n in ("k_heads", "k") if n in run.stages]
    for r in run.records:
        match = _V_TARGET.match(r.code or "")
        if (r.lineno is None or r.lineno >= record.lineno or match is None
                or not r.dtype.is_floating_point):  # fmt: skip
            continue
        if not _assigns_v_from_k(r.code, match.group(1)):
            continue  # `q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T`: the keys matched are k's
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


# a line that assigns a v-name, alone or among others: `v = ...`, `k, v = ...`
_V_TARGET = re.compile(r"\s*(?:\w+\s*,\s*)*(v\w*)\s*(?:,\s*\w+\s*)*=[^=]", re.IGNORECASE)


def _assigns_v_from_k(line: str, name: str) -> bool:
    """Whether a line assigns `name` alone (`v = ...`), or in a tuple from a tuple of values whose
    own reads a k-name (`k, v = k.repeat(...), k.repeat(...)`): then a tensor the line makes that
    equals the keys may be v's. Not `q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T`, nor
    `q, k, v = (... for w in ...)`: there the keys' tensor is k's."""
    tree = _parsed(line)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return False
    target, value = tree.body[0].targets[0], tree.body[0].value
    if isinstance(target, ast.Name):
        return target.id == name
    if not (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)):
        return False
    names = [t.id if isinstance(t, ast.Name) else "" for t in target.elts]
    if name not in names or len(names) != len(value.elts):
        return False
    read = value.elts[names.index(name)]
    return any(isinstance(n, ast.Name) and n.id.lower().startswith("k") for n in ast.walk(read))


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
