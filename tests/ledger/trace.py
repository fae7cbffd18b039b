"""Trace every committed ✓ line back to the code that printed it, without running a notebook.

Statically, from source text only:
1. `printers()` reads every function in helpers/ (its AST) and collects the ✓ lines it can print,
   each as a template: the f-string with its literal text kept and each {…} a wildcard (a local
   string such as `claim = f"…"` is substituted first). A helpers function that calls a printer is
   a relay: a call to it may print the printer's lines.
2. `call_sites(cell)` finds, in a notebook cell's source, the calls to printers and relays (not
   those passed echo=False, which print nothing) and the cell's own `print(f"✓ …")`. A call's
   template is specialised with its arguments: `check_close(a, b, "out: fused = per-head")`
   gives "✓ out: fused = per-head: equal within atol …".
3. `trace()` matches each ✓ line of the cell's committed outputs to the call site whose template
   matches it with the most literal text. A ✓ line no site matches is untraced.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "helpers"
NOTEBOOKS = ROOT / "notebooks"
TICK = "✓"


@dataclass(frozen=True)
class Template:
    """One ✓ line a function can print: literal pieces and wildcards (None), first line only."""

    parts: tuple[str | None, ...]
    params: tuple[str | None, ...]  # for each wildcard, the parameter it shows (if one)

    def regex(self, fill: dict[str, str] | None = None) -> tuple[str, int]:
        """The pattern and how many literal characters it pins down; `fill` maps a parameter
        to a pattern for the argument passed."""
        fill = fill or {}
        out, literal, k = [], 0, 0
        for part in self.parts:
            if part is None:
                param = self.params[k]
                k += 1
                if param in fill:
                    pattern, n = fill[param]
                    out.append(pattern)
                    literal += n
                else:
                    out.append("(?:.*?)")
            else:
                out.append(re.escape(part))
                literal += len(part)
        return "".join(out), literal


@dataclass
class Printer:
    """A helpers function that prints ✓ lines itself (templates) or through others (calls)."""

    name: str
    module: str  # e.g. "helpers/checks.py"
    params: list[str]
    templates: list[Template] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)


def _pieces(node: ast.AST, local: dict[str, ast.AST], depth: int = 0) -> list[tuple]:
    """A string expression as [("lit", text) | ("var", param-or-None)]."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [("lit", node.value)]
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            out += _pieces(value, local, depth)
        return out
    if isinstance(node, ast.FormattedValue):
        inner = node.value
        if (
            isinstance(inner, ast.Name)
            and inner.id in local
            and node.format_spec is None
            and depth < 4
        ):
            return _pieces(local[inner.id], local, depth + 1)
        return [("var", inner.id if isinstance(inner, ast.Name) else None)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pieces(node.left, local, depth) + _pieces(node.right, local, depth)
    return [("var", None)]


def _template(pieces: list[tuple]) -> Template | None:
    """The first line of a string that starts with ✓ (after spaces), else None."""
    parts: list[str | None] = []
    params: list[str | None] = []
    for kind, value in pieces:
        if kind == "lit":
            if "\n" in value:
                head = value.split("\n")[0]
                if head:
                    parts.append(head)
                break
            parts.append(value)
        else:
            parts.append(None)
            params.append(value)
    if not parts or parts[0] is None or not parts[0].lstrip().startswith(TICK):
        return None
    parts[0] = parts[0].lstrip()
    merged: list[str | None] = []
    for part in parts:  # adjacent literals into one
        if part is not None and merged and merged[-1] is not None:
            merged[-1] += part
        else:
            merged.append(part)
    return Template(tuple(merged), tuple(params))


def _string_locals(fn: ast.FunctionDef) -> dict[str, ast.AST]:
    """Names `fn` assigns one string expression (claim = f"…"), perhaps extended by `+=`."""
    seen: dict[str, list[ast.AST]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        value = node.value if target is name else None
                        seen.setdefault(name.id, []).append(value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            values = seen.setdefault(node.target.id, [])
            if len(values) == 1 and values[0] is not None and isinstance(node.op, ast.Add):
                values[0] = ast.BinOp(values[0], ast.Add(), node.value)
            else:
                values.append(None)
    strings = (ast.JoinedStr, ast.Constant, ast.BinOp)
    return {
        name: values[0]
        for name, values in seen.items()
        if len(values) == 1 and isinstance(values[0], strings)
    }


def _outer_strings(fn: ast.AST) -> list[ast.AST]:
    """The string expressions in `fn` that are not part of a larger one."""
    found, inside = [], set()
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp | ast.JoinedStr):
            for child in ast.walk(node):
                if child is not node:
                    inside.add(id(child))
    for node in ast.walk(fn):
        if id(node) in inside:
            continue
        if isinstance(node, ast.JoinedStr | ast.BinOp) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            found.append(node)
    return found


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _templates_in(fn: ast.AST, local: dict[str, ast.AST]) -> list[Template]:
    out = []
    for node in _outer_strings(fn):
        template = _template(_pieces(node, local))
        if template and template not in out:
            out.append(template)
    return out


@cache
def printers() -> dict[str, Printer]:
    """Every top-level function or method in helpers/ that prints a ✓ line or calls one that
    does, by name. Functions whose ✓ strings are not printed lines (docstrings aside) are kept:
    the matching decides."""
    found: dict[str, Printer] = {}
    for path in sorted(HELPERS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            body = fn.body[1:] if ast.get_docstring(fn) else fn.body
            module = ast.Module(body=body, type_ignores=[])
            params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
            printer = Printer(fn.name, str(path.relative_to(ROOT)), params)
            printer.templates = _templates_in(module, _string_locals(fn))
            printer.calls = {
                name for c in ast.walk(module) if isinstance(c, ast.Call) and (name := _callee(c))
            }
            if fn.name in found and not printer.templates:
                continue  # a same-named function elsewhere that prints nothing
            found[fn.name] = printer
    # keep the printers and the functions that reach one
    printing = {n for n, p in found.items() if p.templates}
    changed = True
    while changed:
        changed = False
        for name, p in found.items():
            if name not in printing and p.calls & printing:
                printing.add(name)
                changed = True
    return {n: p for n, p in found.items() if n in printing}


def reachable(name: str, table: dict[str, Printer]) -> list[str]:
    """`name` and every printer it can reach through calls, `name` first."""
    order, todo = [], [name]
    while todo:
        n = todo.pop(0)
        if n in order or n not in table:
            continue
        order.append(n)
        todo += sorted(table[n].calls & set(table))
    return order


# --- notebooks ------------------------------------------------------------------------------


@dataclass
class Site:
    """A place in a cell that may print ✓ lines: a call to a check (or a relay), or the cell's
    own print."""

    notebook: str
    cell: int
    check: str  # the printer's name, or "the cell" for the cell's own print
    via: str | None  # the function the cell called, when the printer is reached through it
    expression: str  # the call as written in the cell
    patterns: list[tuple[re.Pattern, int]]  # (first ✓ line, literal characters), one a template
    line: int  # the call's line in the cell
    hits: int = 0


@dataclass
class Tick:
    """One committed ✓ line and where it came from."""

    notebook: str
    cell: int
    text: str
    site: Site | None


def _argument_fill(call: ast.Call, printer: Printer) -> dict[str, tuple[str, int]]:
    """For each parameter passed a string literal or f-string, its pattern and literal size."""
    given: dict[str, ast.AST] = {}
    params = [p for p in printer.params if p != "self"]
    for param, arg in zip(params, call.args):
        given[param] = arg
    for kw in call.keywords:
        if kw.arg:
            given[kw.arg] = kw.value
    fill = {}
    for param, arg in given.items():
        if isinstance(arg, ast.Constant | ast.JoinedStr) and isinstance(
            getattr(arg, "value", ""), str
        ):
            pieces = _pieces(arg, {})
            pattern = "".join(re.escape(v) if kind == "lit" else "(?:.*?)" for kind, v in pieces)
            fill[param] = (pattern, sum(len(v) for kind, v in pieces if kind == "lit"))
    return fill


def _silent(call: ast.Call) -> bool:
    return any(
        kw.arg == "echo" and isinstance(kw.value, ast.Constant) and kw.value.value is False
        for kw in call.keywords
    )


def _source(node: ast.AST, text: str) -> str:
    segment = ast.get_source_segment(text, node) or ""
    return re.sub(r"\s*\n\s*", " ", segment).replace("( ", "(").replace(" )", ")")


def cell_sites(notebook: str, cell: int, source: str, local: dict[str, ast.AST]) -> list[Site]:
    """The sites in one cell's source. `local`: functions defined in the notebook's cells, which
    relay the calls inside them."""
    table = printers()
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics: no sites
        return []
    sites = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _callee(node)
        if name == "print" and node.args:
            template = _template(_pieces(node.args[0], {}))
            if template:
                pattern, n = template.regex()
                sites.append(Site(notebook, cell, "the cell", None, _source(node, source),
                                  [(re.compile(pattern), n)], node.lineno))  # fmt: skip
            continue
        if name in local and name not in table:  # a function the notebook defined
            inner = [c for c in ast.walk(local[name]) if isinstance(c, ast.Call)]
            for c in inner:
                callee = _callee(c)
                if callee in table and not _silent(c):
                    sites += _printer_sites(notebook, cell, c, callee, name, source, local[name])
            continue
        if name in table and not _silent(node):
            sites += _printer_sites(notebook, cell, node, name, None, source, None)
    return sorted(sites, key=lambda s: s.line)


def _printer_sites(notebook, cell, call, name, via, source, defined) -> list[Site]:
    table = printers()
    out = []
    expression = _source(call, source) if defined is None else f"{via}(…) → {call.func.id}(…)"
    for owner in reachable(name, table):
        direct = owner == name
        patterns = []
        for template in table[owner].templates:
            pattern, n = template.regex(_argument_fill(call, table[owner]) if direct else None)
            patterns.append((re.compile(pattern), n + (1000 if direct else 0)))
        if patterns:
            out.append(Site(notebook, cell, owner, None if direct else name, expression,
                            patterns, call.lineno))  # fmt: skip
    return out


def _outputs(cell: dict) -> list[str]:
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            text = "".join(output.get("text", ""))
        elif "data" in output:
            text = "".join(output["data"].get("text/plain", ""))
        else:
            text = "\n".join(output.get("traceback", []))
        lines += text.splitlines()
    return lines


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _read(path: Path, rev: str | None) -> str:
    if rev is None:
        return path.read_text(encoding="utf-8")
    name = path.relative_to(ROOT).as_posix()
    return subprocess.run(["git", "show", f"{rev}:{name}"], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", check=True).stdout  # fmt: skip


def trace(path: Path, rev: str | None = None) -> list[Tick]:
    """Every ✓ line in a notebook's saved outputs, each with the site that printed it; with
    `rev` (e.g. "HEAD"), the notebook as committed there rather than the file on disk."""
    cells = json.loads(_read(path, rev))["cells"]
    local: dict[str, ast.AST] = {}
    ticks = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        try:
            tree = ast.parse(source)
            local |= {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
        except SyntaxError:
            pass
        lines = [line.rstrip() for line in _outputs(cell) if TICK in line]
        if not lines:
            continue
        sites = cell_sites(path.stem, i, source, local)
        for line in lines:
            text = line.strip()
            best = None
            for site in sites:
                for pattern, n in site.patterns:
                    if pattern.fullmatch(text):
                        key = (n, -site.hits, -site.line)
                        if best is None or key > best[0]:
                            best = (key, site)
            site = best[1] if best else None
            if site:
                site.hits += 1
            ticks.append(Tick(path.stem, i, text, site))
    return ticks


def trace_all(rev: str | None = None) -> list[Tick]:
    return [tick for path in notebook_paths() for tick in trace(path, rev)]
