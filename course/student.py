"""`make student`: a student copy of the notebooks, without the solutions.

Every cell tagged `solution` (one function, with a docstring that states the task, and its steps as
full-line comments with the shapes to expect) becomes a skeleton: the same signature and docstring,
each step comment as a `# TODO` line, and a body that raises NotImplementedError. All outputs and
execution counts are cleared. The copy goes to student/ (ignored by git), ready to hand out.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOLUTION_NOTE = (  # where the answer is: a deliberate step, never the next cell or slide
    "    # Stuck after a real try? `lab --solutions` serves a copy with the solution."
)
STUB = '    raise NotImplementedError("Exercise: write this function, then run the check below.")'


def stub(source: str) -> str:
    """The solution's def line(s) and docstring, its step comments as TODO lines, and a body that
    raises NotImplementedError."""
    tree = ast.parse(source)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if len(tree.body) != 1 or len(functions) != 1 or ast.get_docstring(functions[0]) is None:
        raise ValueError(
            "a solution cell must hold exactly one function with a docstring stating the task; "
            f"got:\n{source[:200]}"
        )
    docstring_end = functions[0].body[0].end_lineno  # the docstring is the body's first statement
    lines = source.splitlines()
    steps = [line for line in lines[docstring_end:] if line.lstrip().startswith("#")]
    if len(steps) < 2:
        raise ValueError(
            "a solution cell must give its steps as full-line comments (at least two), which the "
            f"student copy keeps as TODO lines; got:\n{source[:200]}"
        )
    todo = [re.sub(r"#\s?", "# TODO ", line, count=1) for line in steps]
    return "\n".join([*lines[:docstring_end], *todo, SOLUTION_NOTE, STUB])


def student_copy(notebook: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, int]:
    """A copy with every solution cell stubbed and every output cleared; and how many stubs."""
    copy = nbformat.from_dict(notebook)
    stubs = 0
    for cell in copy.cells:
        if cell.cell_type != "code":
            continue
        if "solution" in cell.metadata.get("tags", []):
            cell.source = stub(cell.source)
            cell.metadata["tags"] = [t for t in cell.metadata["tags"] if t != "solution"]
            # the task on a slide of its own, below the exercise's text, its check beside it: a
            # fragment under the text pushed the check below a 1280 x 720 screen (03, 09)
            cell.metadata["slideshow"] = {"slide_type": "subslide"}
            stubs += 1
        cell.outputs, cell.execution_count = [], None
    copy.metadata.pop("widgets", None)  # the saved widget state shows the teacher's run
    return copy, stubs


def build(source: Path = ROOT / "notebooks", target: Path = ROOT / "student") -> dict[str, int]:
    """Write the student copies; return {notebook: number of exercises}."""
    target.mkdir(parents=True, exist_ok=True)
    counts = {}
    for path in sorted(source.glob("*.ipynb")):
        copy, stubs = student_copy(nbformat.read(path, as_version=4))
        nbformat.validate(copy)
        nbformat.write(copy, target / path.name)
        counts[path.name] = stubs
    for path in source.iterdir():  # the slides' rise.css, the glossary the notebooks link to
        if path.is_file() and path.suffix != ".ipynb" and not path.name.startswith("."):
            shutil.copy(path, target / path.name)
    return counts


if __name__ == "__main__":
    quiet = "--quiet" in sys.argv  # `lab` builds its working copy's source silently
    paths = [a for a in sys.argv[1:] if a != "--quiet"]
    target = Path(paths[0]) if paths else ROOT / "student"
    for name, stubs in build(target=target).items():
        if not quiet:
            print(f"{target.name}/{name}: {stubs} exercise(s) to fill in")
