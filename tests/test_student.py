"""`make student`: every solution cell gets a stub, the copies are valid notebooks without outputs,
and the committed notebooks' checks pass with the solutions. That the copies run top to bottom and
their checks, with the stubs left as they are, say "not done yet" instead of failing is tested
where students meet them: the Run Alls of tests/browser/test_in_jupyterlab.py run the student copy
in JupyterLab."""

import json
from pathlib import Path

import nbformat
import pytest

from course.student import ROOT, build, stub

WITH_EXERCISES = ["01_self_attention.ipynb", "03_per_head_projections.ipynb",
                  "05_cut_into_heads.ipynb", "06_one_model_two_layouts.ipynb",
                  "09_masks.ipynb", "13_cross_attention.ipynb", "15_shared_kv.ipynb",
                  "17_w_qk_and_w_ov.ipynb", "18_induction_heads.ipynb",
                  "19_online_softmax.ipynb"]  # fmt: skip


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


def test_a_stub_keeps_the_task_and_its_steps_as_todo_lines_and_raises():
    source = (
        'def f(x):\n    """Exercise: double x, then add 1."""\n'
        "    # 1. double -> (B, T)\n    y = 2 * x\n    # 2. add one -> (B, T)\n    return y + 1"
    )
    lines = stub(source).splitlines()
    assert lines[:4] == [
        "def f(x):",
        '    """Exercise: double x, then add 1."""',
        "    # TODO 1. double -> (B, T)",
        "    # TODO 2. add one -> (B, T)",
    ]
    assert "lab --solutions" in lines[4]  # where the answer is, one deliberate command away
    assert lines[5].startswith("    raise NotImplementedError(") and len(lines) == 6
    with pytest.raises(ValueError, match="exactly one function with a docstring"):
        stub("def f(x):\n    return x")
    with pytest.raises(ValueError, match="its steps as full-line comments"):
        stub('def f(x):\n    """Exercise."""\n    return x')


@pytest.mark.parametrize("name", WITH_EXERCISES)
def test_every_stub_is_a_skeleton_with_the_shapes_to_expect(student, name):
    target, _ = student
    for original in solutions(ROOT / "notebooks" / name):
        todo = [line for line in stub(original).splitlines() if "# TODO" in line]
        assert len(todo) >= 3, todo
        assert sum("-> (" in line for line in todo) >= 2, todo  # shapes at the steps


@pytest.mark.parametrize("name", WITH_EXERCISES)
def test_with_the_solutions_every_check_passes(name):
    """The committed notebooks hold the solutions: the cell after each one prints a ✓."""
    cells = json.loads((ROOT / "notebooks" / name).read_text())["cells"]
    for i, cell in enumerate(cells):
        if "solution" in cell["metadata"].get("tags", []):
            check = cells[i + 1]
            text = "".join("".join(o.get("text", "")) for o in check["outputs"])
            assert text.startswith("✓"), (name, text)
