"""The house's one-way imports: the course's tools (`course`) may import the notebooks' code
(`helpers`), never the other way; the attention math imports no figure, panel or tool. Read from
the source (every import statement, at any depth), so a lazy import inside a function counts."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATH = ("attention", "layouts", "positions", "tiles")  # what every other part builds on


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


def test_neither_the_tools_nor_the_notebooks_code_imports_the_tests():
    """tests/ imports the course; nothing the course runs (the student copy, the bench, a class's
    report) needs tests/ (which a course installed from a wheel does not have)."""
    found = {
        str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if n.split(".")[0] == "tests")
        for package in ("course", "helpers")
        for path in (ROOT / package).rglob("*.py")
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


def test_the_checker_s_modules_import_one_another_without_a_circle():
    """Each module of helpers/checker/ may use those below it; a circle would mean two modules that
    are one. The wrong object: the same graph with one edge turned back makes a circle."""
    folder = ROOT / "helpers" / "checker"
    graph = {
        path.stem: {n.split(".")[2] for n in _imports(path) if n.startswith("helpers.checker.")}
        for path in folder.glob("*.py")
        if path.stem != "__init__"
    }
    assert len(graph) >= 8 and _circle(graph) is None, _circle(graph)
    first, second = next((a, b) for a, bs in graph.items() for b in bs)
    assert _circle({**graph, second: graph[second] | {first}}) is not None


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in `graph` (module -> the modules it imports), or None."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for other in sorted(graph.get(node, ())):
            if state.get(other) == 1:
                return [*path, node, other]
            if other not in state and (found := walk(other, [*path, node])):
                return found
        state[node] = 2
        return None

    return next((c for node in sorted(graph) if node not in state for c in [walk(node, [])] if c),
                None)  # fmt: skip
