"""`make student`: every solution cell gets a stub, the copies are valid notebooks without outputs,
and their check cells, with the stubs left as they are, say "not done yet" instead of failing."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.student.build import ROOT, build, stub

WITH_EXERCISES = ["01_self_attention.ipynb", "02_per_head_projections.ipynb",
                  "03_block_matrix.ipynb", "05_learner_questions.ipynb"]  # fmt: skip


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    target = tmp_path_factory.mktemp("student")
    return target, build(target=target)


def solutions(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return [
        "".join(c["source"]) for c in nb["cells"] if "solution" in c["metadata"].get("tags", [])
    ]


def test_every_solution_cell_has_a_stub(student):
    target, counts = student
    for name in WITH_EXERCISES:
        originals = solutions(ROOT / "notebooks" / name)
        assert counts[name] == len(originals) >= 1
        cells = [c.source for c in nbformat.read(target / name, as_version=4).cells]
        for original in originals:
            assert stub(original) in cells  # the stub: signature, docstring, NotImplementedError
            body = original.split('"""')[-1].strip()
            assert not any(body in cell for cell in cells)  # the solution's body is gone
    assert sum(counts.values()) == len(WITH_EXERCISES)


def test_student_copies_are_valid_and_have_no_outputs(student):
    target, counts = student
    assert sorted(counts) == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    for name in counts:
        nb = nbformat.read(target / name, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code)


def test_a_stub_keeps_the_task_and_raises():
    source = 'def f(x):\n    """Exercise: double x."""\n    return 2 * x'
    lines = stub(source).splitlines()
    assert lines[:2] == ["def f(x):", '    """Exercise: double x."""']
    assert lines[2].startswith("    raise NotImplementedError(") and len(lines) == 3
    with pytest.raises(ValueError, match="exactly one function with a docstring"):
        stub("def f(x):\n    return x")


@pytest.mark.parametrize("name", WITH_EXERCISES)
def test_student_notebooks_run_and_say_not_done_yet(student, name):
    target, _ = student
    nb = nbformat.read(target / name, as_version=4)
    NotebookClient(
        nb, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]  # no traceback anywhere
    texts = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "⏳ Not done yet" in texts
