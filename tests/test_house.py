"""The house's one-way imports: the course's tools (`course`) may import the notebooks' code
(`helpers`), never the other way; the attention math imports no figure, panel or tool. Read from
the source (every import statement, at any depth), so a lazy import inside a function counts."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATH = ("attention", "layouts", "positions")  # what every other part builds on


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def test_helpers_never_imports_the_course_tools():
    found = {
        str(path.relative_to(ROOT)): sorted(
            n for n in _imports(path) if n.split(".")[0] == "course"
        )
        for path in (ROOT / "helpers").rglob("*.py")
        if path.name != "course.py"  # the old entry point, which only forwards to the new one
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_math_imports_no_figure_panel_checker_or_tool():
    allowed = {f"helpers.{name}" for name in MATH} | {"helpers"}
    for name in MATH:
        modules = {".".join(n.split(".")[:2]) for n in _imports(ROOT / "helpers" / f"{name}.py")}
        ours = {m for m in modules if m.split(".")[0] in ("helpers", "course")}
        assert ours <= allowed, (name, sorted(ours - allowed))


def test_the_check_sees_an_import_the_wrong_way(tmp_path):
    """The wrong object: a module that imports `course` lazily, inside a function."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from course import grade\n    return grade\n")
    assert "course" in _imports(module) and "course.grade" in _imports(module)
