"""course.commands, the entry point (python -m course): its paths on each OS, its install steps,
and the working copy that lets a student run and edit notebooks while `git pull` still brings
course updates."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course import commands as course

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, *sources: str, outputs: bool = False) -> Path:
    cells = [
        {"cell_type": "code", "execution_count": 1 if outputs else None, "metadata": {},
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
         if outputs else [], "source": source}
        for source in sources
    ]  # fmt: skip
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    return path


def test_the_venvs_python_is_where_each_os_puts_it():
    assert course.venv_python(Path("v"), "posix") == Path("v") / "bin" / "python"
    assert course.venv_python(Path("v"), "nt") == Path("v") / "Scripts" / "python.exe"


@pytest.mark.parametrize(("version", "ok"), [((3, 10), False), ((3, 11), True), ((3, 14), True),
                                              ((3, 15), False)])  # fmt: skip
def test_python_311_to_314_are_accepted_and_others_told_what_to_do(version, ok):
    problem = course.check_python(version)
    assert (problem is None) == ok
    if not ok:
        assert "Python 3.11 to 3.14" in problem and "py -3.13 -m course lab" in problem


def test_the_fingerprint_follows_the_pins_content_not_their_dates(tmp_path):
    (tmp_path / "a.txt").write_text("torch==2.13.0\n")
    before = course.fingerprint(["a.txt"], tmp_path)
    (tmp_path / "a.txt").touch()
    assert course.fingerprint(["a.txt"], tmp_path) == before
    (tmp_path / "a.txt").write_text("torch==2.14.0\n")
    assert course.fingerprint(["a.txt"], tmp_path) != before


def test_setup_prints_each_step_with_the_time_it_took_and_skips_when_installed(
    tmp_path, monkeypatch, capsys
):
    for name in course.COURSE_PINS:
        (tmp_path / name).write_text(name)
    python = course.venv_python(tmp_path / ".venv")
    python.parent.mkdir(parents=True)
    python.touch()  # the venv exists: no venv step
    steps = [("step one", [sys.executable, "-c", "pass"]), ("step two", [sys.executable, "-c", ""])]
    monkeypatch.setattr(course, "install_steps", lambda test_tools=False: steps)
    course.setup(root=tmp_path)
    out = capsys.readouterr().out
    # the seconds are whatever the machine took (a busy one: 1 s for `python -c pass`)
    printed = r"\[1/2\] step one\n      done in \d+ s\n\[2/2\] step two\n      done in \d+ s\n"
    assert re.search(printed, out), out
    assert "✓ the course is installed in .venv/" in out
    course.setup(root=tmp_path)  # installed, pins unchanged: nothing to do
    assert capsys.readouterr().out == ""
    (tmp_path / "requirements.txt").write_text("changed")
    course.setup(root=tmp_path)
    assert "[1/2] step one" in capsys.readouterr().out


def test_setup_byte_compiles_what_each_step_added_and_nothing_else(tmp_path, monkeypatch):
    """pip installs with --no-compile; setup compiles each step's new files in the background."""
    assert all("--no-compile" in command for _, command in course.install_steps(test_tools=True))
    for name in course.COURSE_PINS:
        (tmp_path / name).write_text(name)
    python = course.venv_python(tmp_path / ".venv")
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "before.py").write_text("x = 1\n")  # there before setup: left to Python
    added = site / "added" / "__init__.py"
    write = (
        f"import pathlib; p = pathlib.Path({str(added)!r}); p.parent.mkdir(); p.write_text('y = 2')"
    )
    monkeypatch.setattr(
        course, "install_steps", lambda test_tools=False: [("adds", [sys.executable, "-c", write])]
    )
    course.setup(root=tmp_path)
    assert list((added.parent / "__pycache__").glob("__init__.*.pyc"))
    assert not (site / "__pycache__").exists()


def test_a_failing_step_stops_setup_with_its_exit_code(tmp_path, monkeypatch):
    for name in course.COURSE_PINS:
        (tmp_path / name).write_text(name)
    python = course.venv_python(tmp_path / ".venv")
    python.parent.mkdir(parents=True)
    python.touch()
    steps = [("fails", [sys.executable, "-c", "raise SystemExit(3)"])]
    monkeypatch.setattr(course, "install_steps", lambda test_tools=False: steps)
    with pytest.raises(SystemExit) as stop:
        course.setup(root=tmp_path)
    assert stop.value.code == 3
    assert not (tmp_path / ".venv" / ".course").exists()  # not marked installed


def test_a_failing_torch_step_says_where_torch_comes_from(tmp_path, monkeypatch, capsys):
    for name in course.COURSE_PINS:
        (tmp_path / name).write_text(name)
    python = course.venv_python(tmp_path / ".venv")
    python.parent.mkdir(parents=True)
    python.touch()
    assert any("requirements-torch.txt" in command for _, command in course.install_steps())
    failing = [sys.executable, "-c", "raise SystemExit(1)", "requirements-torch.txt"]
    monkeypatch.setattr(course, "install_steps", lambda test_tools=False: [("torch", failing)])
    with pytest.raises(SystemExit):
        course.setup(root=tmp_path)
    err = capsys.readouterr().err
    assert "https://download.pytorch.org/whl/cpu" in err and "HTTPS_PROXY" in err
    other = [("not torch", [sys.executable, "-c", "raise SystemExit(1)"])]
    monkeypatch.setattr(course, "install_steps", lambda test_tools=False: other)
    with pytest.raises(SystemExit):
        course.setup(root=tmp_path)
    assert "download.pytorch.org" not in capsys.readouterr().err  # only torch's step says it


def test_the_working_copy_gets_new_notebooks_and_keeps_a_students_edits(tmp_path):
    source, copy = tmp_path / "notebooks", tmp_path / "my-notebooks"
    source.mkdir()
    _notebook(source / "01_a.ipynb", "x = 1")
    _notebook(source / "02_b.ipynb", "y = 2")
    (source / "rise.css").write_text("p {}")
    assert course.sync_working_copy(source, copy) == ["new: 01_a.ipynb", "new: 02_b.ipynb",
                                                      "new: rise.css"]  # fmt: skip
    assert course.sync_working_copy(source, copy) == []  # nothing changed
    _notebook(copy / "01_a.ipynb", "x = 1", outputs=True)  # the student ran 01
    _notebook(copy / "02_b.ipynb", "y = 2  # my note")  # and edited 02
    _notebook(copy / "mine.ipynb", "z = 3")  # and made a notebook of their own
    # the course changes both notebooks and adds one
    _notebook(source / "01_a.ipynb", "x = 10")
    _notebook(source / "02_b.ipynb", "y = 20")
    _notebook(source / "03_c.ipynb", "w = 4")
    said = course.sync_working_copy(source, copy)
    assert said == [
        "updated: 01_a.ipynb",
        "kept your edits in 02_b.ipynb; the course's new version: 02_b.updated.ipynb",
        "new: 03_c.ipynb",
    ]
    assert course.notebook_text(copy / "01_a.ipynb") == course.notebook_text(source / "01_a.ipynb")
    assert "my note" in course.notebook_text(copy / "02_b.ipynb")
    assert "y = 20" in course.notebook_text(copy / "02_b.updated.ipynb")
    assert "z = 3" in course.notebook_text(copy / "mine.ipynb")
    assert course.sync_working_copy(source, copy) == []  # said once per course version
    (copy / "03_c.ipynb").unlink()  # a student who deletes a notebook gets it back
    assert course.sync_working_copy(source, copy) == ["new: 03_c.ipynb"]


def test_a_renumbered_course_removes_only_run_copies_and_keeps_edited_ones(tmp_path):
    source, copy = tmp_path / "notebooks", tmp_path / "my-notebooks"
    source.mkdir()
    _notebook(source / "02_b.ipynb", "y = 2")
    _notebook(source / "03_c.ipynb", "w = 4")
    course.sync_working_copy(source, copy)
    _notebook(copy / "02_b.ipynb", "y = 2", outputs=True)  # only run
    _notebook(copy / "03_c.ipynb", "w = 4  # my note")  # edited
    (source / "02_b.ipynb").rename(source / "04_b.ipynb")  # the course renumbers both
    (source / "03_c.ipynb").rename(source / "05_c.ipynb")
    said = course.sync_working_copy(source, copy)
    assert said == [
        "new: 04_b.ipynb",
        "new: 05_c.ipynb",
        "removed: 02_b.ipynb (no longer in the course; see the README's notebooks)",
        "kept your edits in 03_c.ipynb, which the course no longer has",
    ]
    assert not (copy / "02_b.ipynb").exists()
    assert "my note" in course.notebook_text(copy / "03_c.ipynb")
    assert course.sync_working_copy(source, copy) == []  # said once


def test_what_run_all_changes_is_not_an_edit(tmp_path):
    ran = course.notebook_text(_notebook(tmp_path / "a.ipynb", "x = 1", outputs=True))
    assert ran == course.notebook_text(_notebook(tmp_path / "b.ipynb", "x = 1"))
    assert ran != course.notebook_text(_notebook(tmp_path / "c.ipynb", "x = 2"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_pull_brings_an_update_into_a_clone_where_a_student_ran_and_edited(tmp_path):
    def git(cwd, *args):
        run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return run.stdout

    origin, student = tmp_path / "course", tmp_path / "student"
    (origin / "notebooks").mkdir(parents=True)
    (origin / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    _notebook(origin / "notebooks" / "01_a.ipynb", "x = 1")
    git(tmp_path, "init", "-q", str(origin))
    git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "course")
    git(tmp_path, "clone", "-q", str(origin), str(student))
    copy = student / "my-notebooks"
    course.sync_working_copy(student / "notebooks", copy)  # what `lab` does before serving
    _notebook(copy / "01_a.ipynb", "x = 1  # mine", outputs=True)  # the student runs and edits
    assert git(student, "status", "--porcelain") == ""  # notebooks/ untouched, the copy ignored
    _notebook(origin / "notebooks" / "01_a.ipynb", "x = 100")  # the course updates 01
    _notebook(origin / "notebooks" / "02_b.ipynb", "y = 2")  # and adds 02
    git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "update")
    git(student, "pull", "-q")  # no conflict
    said = course.sync_working_copy(student / "notebooks", copy)
    assert said == [
        "kept your edits in 01_a.ipynb; the course's new version: 01_a.updated.ipynb",
        "new: 02_b.ipynb",
    ]
    assert "# mine" in course.notebook_text(copy / "01_a.ipynb")


def test_lab_serves_the_working_copy_unless_told_a_folder():
    assert course.WORKING_COPY == ROOT / "my-notebooks"
    assert "/my-notebooks/" in (ROOT / ".gitignore").read_text()
    help_text = subprocess.run(
        [sys.executable, "-m", "course", "lab", "--help"],
        capture_output=True, text=True, cwd=ROOT,
    ).stdout  # fmt: skip
    assert "--serve DIR" in help_text


def test_the_entry_point_runs_with_a_bare_python(tmp_path):
    """No course package is needed to start it: `import helpers` imports nothing else."""
    run = subprocess.run(
        [sys.executable, "-S", "-c", "import course, course.commands, sys; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_second_update_never_overwrites_a_students_edits_in_the_updated_copy(tmp_path):
    source, copy = tmp_path / "notebooks", tmp_path / "my-notebooks"
    source.mkdir()
    _notebook(source / "01_a.ipynb", "x = 1")
    course.sync_working_copy(source, copy)
    _notebook(copy / "01_a.ipynb", "x = 1  # mine")
    _notebook(source / "01_a.ipynb", "x = 2")
    course.sync_working_copy(source, copy)  # 01_a.updated.ipynb holds x = 2
    _notebook(source / "01_a.ipynb", "x = 3")  # a second update, nothing edited in .updated
    assert course.sync_working_copy(source, copy) == [
        "kept your edits in 01_a.ipynb; the course's new version: 01_a.updated.ipynb"
    ]
    assert "x = 3" in course.notebook_text(copy / "01_a.updated.ipynb")
    _notebook(copy / "01_a.updated.ipynb", "x = 3  # my work moved here")
    _notebook(source / "01_a.ipynb", "x = 4")  # a third update: the edited .updated stays
    assert course.sync_working_copy(source, copy) == [
        "kept your edits in 01_a.ipynb; the course's new version: 01_a.updated-2.ipynb"
    ]
    assert "my work moved here" in course.notebook_text(copy / "01_a.updated.ipynb")
    assert "x = 4" in course.notebook_text(copy / "01_a.updated-2.ipynb")


def test_jupyterlab_is_told_never_to_ask_about_news_and_other_overrides_stay(tmp_path):
    overrides = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    overrides.parent.mkdir(parents=True)
    overrides.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "dark"}}))
    assert course.quiet_news(tmp_path) == overrides
    settings = json.loads(overrides.read_text())
    assert settings["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false"}
    assert settings["@jupyterlab/apputils-extension:themes"] == {"theme": "dark"}
    schemas = ROOT / ".venv" / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab"
    schema = schemas / "apputils-extension" / "notification.json"
    choices = json.loads(schema.read_text())["properties"]["fetchNews"]["oneOf"]
    assert {"const": "false", "title": "Never"} in choices  # the installed JupyterLab's own schema


def test_lab_serves_the_exercises_as_skeletons_unless_asked_for_the_solutions():
    """A student's default working copy holds no solution: each solution cell's code is gone,
    its skeleton there; `lab --solutions` syncs from notebooks/ into a folder of its own."""
    assert course.lab_source(solutions=True) == (ROOT / "notebooks", course.WORKING_COPY_SOLUTIONS)
    assert "/my-notebooks-solutions/" in (ROOT / ".gitignore").read_text()
    source, copy = course.lab_source()
    assert copy == course.WORKING_COPY and source == course.STUDENT_SOURCE
    assert sorted(p.name for p in source.glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.ipynb")
    )
    solved = 0
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        served = json.loads((source / path.name).read_text(encoding="utf-8"))["cells"]
        assert len(served) == len(cells)
        for cell, mine in zip(cells, served):
            if "solution" in cell["metadata"].get("tags", []):
                body = "".join(mine["source"]).split('"""')[-1]  # after the docstring
                code = [line.strip() for line in body.splitlines() if line.strip()]
                assert [line for line in code if not line.startswith("#")] == [
                    'raise NotImplementedError("Exercise: write this function, then run the check '
                    'below.")'
                ]
                assert any("lab --solutions" in line for line in code)
                assert not mine["outputs"] and "solution" not in mine["metadata"].get("tags", [])
                solved += 1
    assert solved >= 9  # every exercise of the course
    help_text = subprocess.run(
        [sys.executable, "-m", "course", "lab", "--help"],
        capture_output=True, text=True, cwd=ROOT,
    ).stdout  # fmt: skip
    assert "--solutions" in help_text


def test_the_old_entry_point_still_runs_and_says_the_new_command():
    run = subprocess.run(
        [sys.executable, "-m", "helpers.course", "lab", "--help"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0 and "--serve DIR" in run.stdout
    assert "the command is now: python -m course lab --help" in run.stderr
