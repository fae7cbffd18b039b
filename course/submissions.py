"""Reading a class's submissions, never running them: which course notebook holds which exercise
(`EXERCISES`), where the submitted notebooks are (`find_submissions`), which course notebook each
one is (`identify`), and the code an exercise needs from it (`extract`: its imports, functions,
classes and constant assignments, never its other statements). `course.grade` runs what this
takes, confined.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 20 << 20  # a submitted notebook larger than this is not read


@dataclass(frozen=True)
class Exercise:
    function: str  # the name the student copy defines
    notebook: str  # the course notebook that holds it (file stem)
    check: str  # the call its check cell makes, as the report shows it
    call: tuple[str, dict] = ("check_exercise", {})  # (checker, keyword arguments) to call it


EXERCISES: dict[str, Exercise] = {
    e.function: e
    for e in (
        Exercise("one_head", "01_self_attention", 'check_exercise(one_head, "one_head")',
                 ("check_exercise", {"name": "one_head"})),
        Exercise("my_attention", "03_per_head_projections",
                 "diagnose(my_attention, per_head=True)", ("diagnose", {"per_head": True})),
        Exercise("split_into_heads", "05_cut_into_heads",
                 'check_exercise(split_into_heads, "split_heads")',
                 ("check_exercise", {"name": "split_heads"})),
        Exercise("my_fused_attention", "06_one_model_two_layouts",
                 "diagnose(my_fused_attention, mask=False)", ("diagnose", {"mask": False})),
        Exercise("my_masked_attention", "09_masks", "diagnose(my_masked_attention)",
                 ("diagnose", {})),
        Exercise("my_cross_attention", "13_cross_attention",
                 'check_exercise(my_cross_attention, "cross_attention")',
                 ("check_exercise", {"name": "cross_attention"})),
        Exercise("my_shared_kv_attention", "15_shared_kv",
                 'check_exercise(my_shared_kv_attention, "shared_kv")',
                 ("check_exercise", {"name": "shared_kv"})),
        Exercise("my_head_scores", "17_w_qk_and_w_ov",
                 'check_exercise(my_head_scores, "head_scores")',
                 ("check_exercise", {"name": "head_scores"})),
        Exercise("my_induction_score", "18_induction_heads",
                 'check_exercise(my_induction_score, "induction_score")',
                 ("check_exercise", {"name": "induction_score"})),
        Exercise("my_tiled_attention", "19_online_softmax",
                 'check_exercise(my_tiled_attention, "tiled_attention")',
                 ("check_exercise", {"name": "tiled_attention"})),
    )
}  # fmt: skip
BY_NOTEBOOK = {e.notebook: e for e in EXERCISES.values()}


@dataclass
class Submission:
    student: str
    path: Path
    relative: str


def find_submissions(folder: Path) -> list[Submission]:
    """Every submitted notebook: nbgrader's submitted/<student>/<assignment>/<name>.ipynb, or a
    folder per student (<student>/…/<name>.ipynb), or flat (<student>.ipynb). Checkpoints and
    hidden folders are skipped; symbolic links are listed (and refused when read)."""
    base = folder / "submitted" if (folder / "submitted").is_dir() else folder
    found = []
    for dirpath, dirnames, filenames in os.walk(base):  # never follows a linked folder
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith("-checkpoint.ipynb"):
                continue
            path = Path(dirpath) / name
            parts = path.relative_to(base).parts
            student = parts[0] if len(parts) > 1 else flat_student(path.stem)
            relative = _printable(str(path.relative_to(folder)))
            found.append(Submission(_printable(student), path, relative))
    return found


def flat_student(stem: str) -> str:
    """Whose a file of a flat folder is: an LMS export's name (Canvas: smithann_12345_67890_…, or
    smithann_LATE_…) or the part before a course notebook's name (ann_03_per_head_projections),
    else the whole name (ann)."""
    canvas = re.match(r"^(.+?)(?:_LATE)?_\d+_\d+_", stem)
    if canvas:
        return canvas.group(1)
    for course in BY_NOTEBOOK:
        before = stem.partition(course)[0].rstrip("_-. ")
        if course in stem and before:
            return before
    return stem


MAX_CODE = 512 << 10  # the code cells of a notebook, together: more is not parsed


def _code_bytes(notebook: dict) -> int:
    return sum(len(source) for _, source in _code_cells(notebook))


def _printable(text: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by os.walk as surrogates) shown as
    U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_notebook(path: Path) -> tuple[dict | None, str]:
    """(the notebook's JSON, "") or (None, why it cannot be read)."""
    if path.is_symlink():
        return None, "a symbolic link: not followed"
    if path.suffix.lower() != ".ipynb":
        kind = f"a {path.suffix} file" if path.suffix else "a file without .ipynb"
        return None, f"not a notebook ({kind}): ask for the .ipynb (unzip an archive first)"
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return None, f"{size / 1e6:.0f} MB, over the {MAX_BYTES >> 20} MB a notebook may be"
        with path.open("rb") as handle:
            notebook = json.loads(handle.read(MAX_BYTES + 1).decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not a notebook: not UTF-8 text"
    except json.JSONDecodeError as err:
        return None, f"not a notebook: invalid JSON (line {err.lineno}: {err.msg})"
    except RecursionError:
        return None, "not a notebook: JSON nested too deeply"
    except OSError as err:
        return None, f"could not be read: {err.strerror}"
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None, "not a notebook: JSON without a list of cells"
    return notebook, ""


def _source(cell: object) -> str:
    if not isinstance(cell, dict):
        return ""
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _code_cells(notebook: dict) -> list[tuple[int, str]]:
    return [
        (i, _source(c)) for i, c in enumerate(notebook["cells"])
        if isinstance(c, dict) and c.get("cell_type") == "code"
    ]  # fmt: skip


def _title(notebook: dict) -> str:
    for cell in notebook["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            first = _source(cell).strip().splitlines()
            return first[0].strip() if first else ""
    return ""


def course_titles(notebooks: Path = ROOT / "notebooks") -> dict[str, str]:
    """{first markdown line: notebook stem} for the course's notebooks that hold an exercise."""
    titles = {}
    for stem in BY_NOTEBOOK:
        path = notebooks / f"{stem}.ipynb"
        if path.exists():
            titles[_title(json.loads(path.read_text(encoding="utf-8")))] = stem
    return titles


def identify(name: str, notebook: dict, titles: dict[str, str]) -> str | None:
    """Which course notebook with an exercise this is: by its title (its first markdown line), by
    its file name (03_per_head_projections-Copy1.ipynb), or by the exercise function it defines."""
    stem = titles.get(_title(notebook))
    if stem:
        return stem
    for stem in BY_NOTEBOOK:
        if stem in name:
            return stem
    defined = set()
    for _, source in _code_cells(notebook):
        defined |= _defined_functions(source)
    matches = [e.notebook for e in EXERCISES.values() if e.function in defined]
    return matches[0] if len(matches) == 1 else None


def python_source(source: str) -> str:
    """A cell's source as plain Python: IPython's magics (%time, !ls) become calls, as in the
    notebook (they are statements, so extract never keeps them)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # a cell IPython cannot read is left as it is: ast reports it
        return source


def _defined_functions(source: str) -> set[str]:
    try:
        tree = ast.parse(python_source(source))
    except (SyntaxError, ValueError):
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _kept(node: ast.stmt) -> bool:
    """Whether a top-level statement is one the grader runs: imports, function definitions (their
    decorators and default values run with them) and assignments of a literal constant to a name
    (h = 4); no class body, nothing else that does work."""
    if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef):
        return True
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True
    return False


@dataclass
class Extract:
    cells: list[dict]  # {"index", "source", "keep": [top-level statement numbers]}
    cell_of: dict[str, int]  # exercise function -> the cell that defines it
    problem: str = ""  # why the exercise cannot be graded (syntax error, not found)
    status: str = ""  # its status then: syntax or not_found
    skipped: dict[str, str] = field(default_factory=dict)  # name -> where a statement not run
    # makes it ("code cell 3: `softmax = nn.Softmax(dim=-1)`")


def extract(notebook: dict, exercise: Exercise) -> Extract:
    """The code to run for an exercise: every code cell's imports, function and class definitions
    and constant assignments, in order (a cell with a syntax error is skipped, unless it is the
    exercise's own)."""
    cells, cell_of, arity, skipped, problem, status = [], {}, {}, {}, "", ""
    code_cells = _code_cells(notebook)
    for number, (_, source) in enumerate(code_cells):
        text = python_source(source)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError) as err:
            if f"def {exercise.function}" in source and not problem:
                where = f"line {err.lineno}" if getattr(err, "lineno", None) else "a line"
                problem = (
                    f"a syntax error in the exercise's cell (code cell {number + 1}), {where}: "
                    f"{getattr(err, 'msg', err)}"
                )
                status = "syntax"
            continue
        keep = [i for i, node in enumerate(tree.body) if _kept(node)]
        for i, node in enumerate(tree.body):  # names the notebook makes in statements not run
            if i not in keep:
                for name in ast.walk(node):
                    if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                        line = text.splitlines()[node.lineno - 1].strip()[:120]
                        skipped.setdefault(name.id, f"code cell {number + 1}: `{line}`")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                cell_of[node.name] = number + 1  # the last definition is the one that runs
                arity[node.name] = len(node.args.args)
        if keep:
            cells.append({"index": number + 1, "source": text, "keep": keep})
    if not problem and exercise.function not in cell_of:
        status = "not_found"
        problem = f"no function named {exercise.function} in this notebook"
        wanted = _course_arity(exercise.function)
        alike = [name for name in cell_of
                 if name not in EXERCISES and wanted in (None, arity[name])]  # fmt: skip
        if alike:
            problem += (
                f"; it defines {', '.join(alike[:3])} with the same number of arguments: renamed? "
                "The report checks only the exercise's own name"
            )
    return Extract(cells, cell_of, problem, status, skipped)


@functools.cache
def _course_arity(function: str) -> int | None:
    """How many arguments the course's notebook gives the exercise's function."""
    exercise = EXERCISES[function]
    path = ROOT / "notebooks" / f"{exercise.notebook}.ipynb"
    if not path.exists():
        return None
    for _, source in _code_cells(json.loads(path.read_text(encoding="utf-8"))):
        for node in ast.parse(python_source(source)).body:
            if isinstance(node, ast.FunctionDef) and node.name == exercise.function:
                return len(node.args.args)
    return None
