"""The class report (issue 27): each exercise found and checked as its notebook checks it, every
bad submission costing only its own grade, nothing outside the run changed, and a report that
says what happened without trusting what the students wrote."""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
import os
import sys
from pathlib import Path

import pytest

from course import grade, report, sandbox, submissions
from course.sample_class import (
    BAD_CODE,
    LOOP,
    MISTAKEN,
    course_notebook,
    skeleton,
    with_exercise,
    write,
)
from course.submissions import EXERCISES

ROOT = Path(__file__).resolve().parents[1]
SET = ("one_head", "my_attention")  # the homework: 01's and 03's exercises
CONFINED = sys.platform == "linux" and sandbox.landlock_abi() >= 6 and hasattr(os, "fork")
needs_confinement = pytest.mark.skipif(
    not CONFINED, reason="the full confinement needs Linux with Landlock ABI 6 (Linux 6.12+)"
)


def _snapshot(*folders: Path) -> dict[str, tuple[str, int]]:
    """Every file under the folders: its content's hash and its mode."""
    files = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                files[str(path)] = (
                    hashlib.sha256(path.read_bytes()).hexdigest(),
                    path.stat().st_mode,
                )
    return files


# --- the exercises are the notebooks' ------------------------------------------------------------


def test_every_exercise_is_its_notebook_s_solution_and_check() -> None:
    """EXERCISES names each notebook's solution function and the check cell's own call."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            if "solution" not in cell["metadata"].get("tags", []):
                continue
            name = ast.parse("".join(cell["source"])).body[0].name
            check = "".join(cells[i + 1]["source"])
            found[name] = path.stem
            assert EXERCISES[name].check in check, (path.stem, EXERCISES[name].check)
    assert found == {name: e.notebook for name, e in EXERCISES.items()}


def test_identify_by_title_then_file_name_then_function() -> None:
    titles = submissions.course_titles()
    notebook = course_notebook(LOOP)
    assert submissions.identify("homework.ipynb", notebook, titles) == LOOP  # the title
    untitled = {"cells": [c for c in notebook["cells"] if c["cell_type"] == "code"]}
    assert submissions.identify(f"{LOOP}-Copy1.ipynb", untitled, titles) == LOOP  # the file name
    assert submissions.identify("mine.ipynb", untitled, titles) == LOOP  # defines my_attention only
    empty = {"cells": [{"cell_type": "markdown", "source": "# my notes", "metadata": {}}]}
    assert submissions.identify("mine.ipynb", empty, titles) is None


def test_extract_keeps_imports_definitions_and_constants_only() -> None:
    cells = [
        "import torch\nh = 4\nx = torch.ones(3)\nprint(x)\n%time y = 1",
        "def my_attention(x, w_q, w_k, w_v, w_o):\n    return x\n\nwhile True:\n    pass",
        "def helper(t):\n    return t\nclass Thing:\n    pass\nsizes = (2, 5)\nsizes = list(x)",
    ]
    notebook = {"cells": [{"cell_type": "code", "source": s, "metadata": {}} for s in cells]}
    found = submissions.extract(notebook, EXERCISES["my_attention"])
    assert found.problem == ""
    assert [c["keep"] for c in found.cells] == [[0, 1], [0], [0, 2]]  # no class body, no list(x)
    assert found.cell_of == {"my_attention": 2, "helper": 3}


def test_extract_names_a_syntax_error_and_a_renamed_function() -> None:
    def one_cell(source: str) -> dict:
        return {"cells": [{"cell_type": "code", "metadata": {}, "source": source}]}

    broken = one_cell("def my_attention(x, w_q, w_k, w_v, w_o):\n    return (x")
    found = submissions.extract(broken, EXERCISES["my_attention"])
    assert (
        found.status == "syntax" and "cell 1" in found.problem and "never closed" in found.problem
    )
    renamed = one_cell("def my_attn(x, w_q, w_k, w_v, w_o):\n    return x")
    found = submissions.extract(renamed, EXERCISES["my_attention"])
    assert found.status == "not_found"
    assert found.problem == (
        "no function named my_attention in this notebook; it defines my_attn with the same number "
        "of arguments: renamed? The report checks only the exercise's own name"
    )


def test_read_notebook_refuses_what_is_not_one(tmp_path: Path) -> None:
    assert submissions.read_notebook(write(tmp_path / "a.ipynb", '{"cells": ['))[1].startswith(
        "not a notebook: invalid JSON (line 1"
    )
    assert submissions.read_notebook(write(tmp_path / "b.ipynb", "[1, 2]"))[1] == (
        "not a notebook: JSON without a list of cells"
    )
    (tmp_path / "c.ipynb").write_bytes(b"\xff\xfe\x00")
    assert submissions.read_notebook(tmp_path / "c.ipynb")[1] == "not a notebook: not UTF-8 text"
    (tmp_path / "d.ipynb").symlink_to(tmp_path / "a.ipynb")
    read = submissions.read_notebook
    assert read(tmp_path / "d.ipynb") == (None, "a symbolic link: not followed")
    with (tmp_path / "e.ipynb").open("wb") as big:
        big.truncate(submissions.MAX_BYTES + 1)
    assert read(tmp_path / "e.ipynb")[1] == "21 MB, over the 20 MB a notebook may be"


def test_layouts_flat_per_student_and_nbgrader(tmp_path: Path) -> None:
    write(tmp_path / "flat" / "ann.ipynb", "{}")
    write(tmp_path / "flat" / "ben" / "week1" / "x.ipynb", "{}")
    write(tmp_path / "flat" / "ben" / ".ipynb_checkpoints" / "x-checkpoint.ipynb", "{}")
    found = submissions.find_submissions(tmp_path / "flat")
    assert [(s.student, s.relative) for s in found] == [
        ("ann", "ann.ipynb"), ("ben", "ben/week1/x.ipynb")
    ]  # fmt: skip
    write(tmp_path / "course" / "submitted" / "cat" / "ps1" / "03.ipynb", "{}")
    found = submissions.find_submissions(tmp_path / "course")
    assert [(s.student, s.relative) for s in found] == [("cat", "submitted/cat/ps1/03.ipynb")]


# --- a class, with every bad case, graded confined -----------------------------------------------


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """A class: two right students, four with catalogued mistakes, one not done, and one student
    per bad case; plus a canary folder that no submission may touch. Graded twice: all of it, and
    the good ones alone."""
    base = tmp_path_factory.mktemp("class")
    good, canary = base / "good", base / "canary"
    write(canary / "secret.txt", "another course's data")
    for student in ("ann", "ben"):
        write(good / student / f"{LOOP}.ipynb", with_exercise(LOOP, None))
        write(good / student / "01_self_attention.ipynb", with_exercise("01_self_attention", None))
    for mistake, code in MISTAKEN.items():
        write(good / f"m-{mistake}" / f"{LOOP}.ipynb", with_exercise(LOOP, code))
    write(good / "nat" / f"{LOOP}.ipynb", with_exercise(LOOP, skeleton(LOOP)))
    everyone = base / "everyone"
    for path in good.rglob("*.ipynb"):
        write(everyone / path.relative_to(good), path.read_text(encoding="utf-8"))
    other = everyone / "ann" / f"{LOOP}.ipynb"
    paths = {"reads another student's file": other, "deletes a file": other,
             "changes a file's mode": other,
             "writes outside its folder": canary / "written.txt"}  # fmt: skip
    cases = {}
    for n, (case, (_, code)) in enumerate(BAD_CODE.items()):
        student = f"bad-{n:02d}"
        code = code.replace("{path!r}", repr(str(paths.get(case, canary / "secret.txt"))))
        write(everyone / student / f"{LOOP}.ipynb", with_exercise(LOOP, code))
        cases[student] = case
    write(everyone / "bad-json" / f"{LOOP}.ipynb", '{"cells": [')
    cases["bad-json"] = "invalid JSON"
    write(everyone / "bad-empty" / "notes.ipynb", {"cells": [], "metadata": {}})
    cases["bad-empty"] = "no exercise"
    os.environ["COURSE_REPORT_SECRET"] = "hunter2"  # the teacher's environment
    before = _snapshot(everyone, canary, ROOT / "helpers", ROOT / "notebooks")
    try:
        results, assigned = grade.grade(everyone, exercise_seconds=3, exercises=SET)
    finally:
        del os.environ["COURSE_REPORT_SECRET"]
    after = _snapshot(everyone, canary, ROOT / "helpers", ROOT / "notebooks")
    alone, _ = grade.grade(good, exercise_seconds=3, exercises=SET)
    return {"results": results, "assigned": assigned, "alone": alone, "cases": cases,
            "before": before, "after": after}  # fmt: skip


def _of(results, student: str, exercise: str = "my_attention"):
    (result,) = [r for r in results if r.student == student and r.exercise == exercise]
    return result


def test_right_and_mistaken_submissions_are_named_with_their_line(graded_class) -> None:
    results = graded_class["results"]
    assert graded_class["assigned"] == ["one_head", "my_attention"]
    for student in ("ann", "ben"):
        assert _of(results, student).status == "right"
        assert _of(results, student, "one_head").status == "right"
    for mistake in MISTAKEN:
        result = _of(results, f"m-{mistake}")
        assert (result.status, result.mistakes) == ("mistake", [mistake])
        assert result.lines[0].startswith("code cell 9, line ")
    assert _of(results, "m-no_scaling").lines == [
        "code cell 9, line 5: `weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)`"
    ]
    assert _of(results, "nat").status == "not_done"
    assert _of(results, "nat", "one_head").status == "missing"


def test_good_submissions_are_graded_exactly_as_alone(graded_class) -> None:
    def key(r):
        return (
            r.student,
            r.exercise,
            r.status,
            r.message,
            tuple(r.mistakes),
            tuple(r.lines),
            r.file,
        )

    alone = {key(r) for r in graded_class["alone"]}
    together = {key(r) for r in graded_class["results"] if not r.student.startswith("bad-")}
    assert together == alone
    assert len(alone) == 2 * 7  # seven students, two exercises each


EXPECTED = {
    "infinite loop": "still running after 3 s: stopped",
    "fork bomb": "PermissionError: [Errno 1] Operation not permitted (line 4: `os.fork()`)",
    "2-GB allocation": "can't allocate memory",
    "100 MB of output": "printed more than the 1 MB of output allowed",
    "reads another student's file": "PermissionError: [Errno 13] Permission denied",
    "opens a socket": "PermissionError: [Errno 1] Operation not permitted",
    "writes outside its folder": "PermissionError: [Errno 13] Permission denied",
    "deletes a file": "PermissionError: [Errno 13] Permission denied",
    "kills the grader": "PermissionError: [Errno 1] Operation not permitted",
    "reads the environment": "RuntimeError: HOME LANG",
    "changes a file's mode": "PermissionError: [Errno 1] Operation not permitted",
    "lowers the grader's limits": "PermissionError: [Errno 1] Operation not permitted",
    "sends a malformed answer": "the answer from the submission's process was malformed",
    "renamed function": "no function named my_attention in this notebook; it defines my_attn",
    "syntax error": "a syntax error in the exercise's cell (code cell 9), line 2",
    "invalid JSON": "not a notebook: invalid JSON (line 1",
    "no exercise": "no exercise of the course in it",
}


@needs_confinement
def test_each_bad_submission_gets_its_own_clear_line(graded_class) -> None:
    results, statuses = graded_class["results"], dict(BAD_CODE)
    for student, case in graded_class["cases"].items():
        result = _of(results, student)
        assert EXPECTED[case] in result.message, (case, result.message)
        want = statuses[case][0] if case in statuses else "invalid"
        assert result.status == ("output" if case == "100 MB of output" else want), case
    (environment,) = [_of(results, s).message for s, c in graded_class["cases"].items()
                      if c == "reads the environment"]  # fmt: skip
    assert "COURSE_REPORT_SECRET" not in environment and "hunter2" not in environment


@needs_confinement
def test_no_file_outside_the_run_changed(graded_class) -> None:
    assert graded_class["after"] == graded_class["before"]
    assert not any(path.endswith("written.txt") for path in graded_class["after"])


@needs_confinement
def test_this_machine_enforces_every_protection() -> None:
    assert all(sandbox.protections().values()), sandbox.protections()


def test_the_seccomp_filter_denies_a_process_and_allows_a_thread() -> None:
    """The BPF program's clone rule, read as the kernel runs it: flags with CLONE_THREAD pass."""
    program = sandbox._seccomp_program("x86_64", pid=1234)

    def run(nr: int, arg0: int, arch: int = 0xC000003E) -> int:
        data = {0: nr, 4: arch, 16: arg0}
        acc, pc = 0, 0
        while True:
            code, jt, jf, k = program[pc]
            if code == 0x20:
                acc = data[k]
            elif code == 0x06:
                return k
            elif code == 0x15:
                pc += jt if acc == k else jf
            elif code == 0x35:
                pc += jt if acc >= k else jf
            elif code == 0x45:
                pc += jt if acc & k else jf
            pc += 1

    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    assert run(56, 0x3D0F00) == allow  # pthread_create's clone flags (CLONE_THREAD among them)
    assert run(56, 0x11) == eperm  # fork's: SIGCHLD only
    assert run(57, 0) == eperm and run(41, 2) == eperm  # fork, socket
    assert run(62, 1234) == allow and run(62, 0) == allow and run(62, 1) == eperm  # kill
    assert run(0, 0) == allow  # read
    assert run(0, 0, arch=0x40000003) == eperm  # another architecture's table: nothing passes
    assert run(0x40000000, 0) == eperm  # x32's numbers
    assert run(90, 0) == eperm and run(280, 0) == eperm  # chmod, utimensat
    assert run(302, 0) == allow and run(302, 1234) == allow and run(302, 1) == eperm  # prlimit64


def test_a_child_s_answer_is_checked_before_it_is_believed() -> None:
    job = {"student": "ann", "file": "ann/03.ipynb", "cell": 9}
    good = {"exercise": "my_attention", "status": "mistake", "mistakes": ["no_scaling"],
            "lines": ["line 5: `x`"], "message": "✗", "seconds": 0.1}  # fmt: skip
    result = grade._result(job, good, 1.0, "my_attention")
    assert (result.status, result.mistakes, result.lines) == (
        "mistake", ["no_scaling"], ["code cell 9, line 5: `x`"]
    )  # fmt: skip
    for bad in ({**good, "mistakes": ["$\\frac{$"]}, {**good, "status": "fine"},
                {**good, "exercise": "one_head"}, "right", None):  # fmt: skip
        assert grade._result(job, bad, 1.0, "my_attention").status == "crashed", bad
    assert grade._result(job, {**good, "seconds": "soon", "lines": 7}, 1.0, "my_attention") == (
        grade.Result("ann", "my_attention", "mistake", "✗", ["no_scaling"], [], "ann/03.ipynb", 1.0)
    )
    assert grade.known_mistake("num_heads_4") and not grade.known_mistake("num_heads_x")


def test_a_notebook_the_grader_cannot_parse_costs_only_itself(tmp_path: Path) -> None:
    write(tmp_path / "deep" / "a.ipynb", "[" * 100_000 + "]" * 100_000)
    assert submissions.read_notebook(tmp_path / "deep" / "a.ipynb")[1] in (
        "not a notebook: JSON nested too deeply", "not a notebook: JSON without a list of cells"
    )  # fmt: skip
    huge = with_exercise(LOOP, "x = 1\n" * 100_000)
    write(tmp_path / "huge" / f"{LOOP}.ipynb", huge)
    deep = "def my_attention(x, w_q, w_k, w_v, w_o):\n    return " + "(" * 5000 + ")" * 5000
    nested = with_exercise(LOOP, deep)
    write(tmp_path / "nested" / f"{LOOP}.ipynb", nested)
    write(tmp_path / "ok" / f"{LOOP}.ipynb", with_exercise(LOOP, None))
    jobs, results, _ = grade.plan(tmp_path)
    assert [job["student"] for job in jobs] == ["ok"]
    said = {r.student: r.message for r in results}
    assert said["huge"] == "over 512 KB of code: not read"
    statuses = {r.student: r.status for r in results}
    assert statuses["nested"] in ("syntax", "invalid"), said["nested"]


# --- the report ----------------------------------------------------------------------------------


def _results() -> list[grade.Result]:
    R = grade.Result
    return [
        R("annika-lindqvist", "my_attention", "right", "✓ Correct"),
        R("=HYPERLINK(\"x\")", "my_attention", "mistake", "✗ no scaling", ["no_scaling"],
          ["cell 9, line 5: `weights = (q @ k.T).softmax(-1)`"]),
        R("<script>alert(1)</script>", "my_attention", "mistake", "✗ both",
          ["no_scaling", "w_o_missing"], ["cell 9, line 5: `a`", "cell 9, line 7: `b`"]),
        R("dan-okafor", "my_attention", "timeout", "still running after 20 s: stopped"),
    ]  # fmt: skip


def test_summary_counts_each_outcome_with_one_example() -> None:
    (entry,) = report.summary(_results(), ["my_attention"])
    assert (entry["students"], entry["right"]) == (4, 1)
    assert [(m["name"], m["count"]) for m in entry["mistakes"]] == [
        ("no_scaling", 2), ("w_o_missing", 1)
    ]  # fmt: skip
    assert entry["mistakes"][0]["example"] == "cell 9, line 5: `weights = (q @ k.T).softmax(-1)`"
    assert entry["mistakes"][0]["words"] == "the scores are not scaled (no_scaling)"
    assert entry["other"] == {"timeout": 1}


def test_the_html_escapes_what_students_wrote_and_fetches_nothing() -> None:
    meta = {"created": "2026-11-25 09:00", "notebooks": 4, "seconds": 3.0,
            "protections": {"no network": True, "Landlock": False}}  # fmt: skip
    page = report.render_html(_results(), ["my_attention"], meta)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for loads in ("src=", 'href="http', "url(http", "@import", "<link", "<script", "<iframe"):
        assert loads not in page, loads
    assert "<strong>1 of 4</strong> right" in page
    assert "<li><strong>no</strong>: Landlock</li>" in page
    assert page.count("<svg") == 1 and "font-size: 16px" in page  # labels: 16 units = 21 px


def test_who_may_need_help_counts_only_what_ran_and_names_unreadable_files_apart() -> None:
    R = grade.Result
    results = [
        R("ana", "one_head", "right"), R("ana", "my_attention", "mistake", mistakes=["no_scaling"]),
        R("ana", "split_into_heads", "missing"),
        R("ben", "one_head", "mistake", mistakes=["no_scaling"]), R("ben", "my_attention", "right"),
        R("ben", "split_into_heads", "mistake", mistakes=["heads_split_interleaved"]),
        *(R("cy", name, "invalid", "not a notebook", file="cy.zip")
          for name in ("one_head", "my_attention", "split_into_heads")),
    ]  # fmt: skip
    meta = {"created": "", "notebooks": 5, "unreadable": 1, "seconds": 1.0, "protections": {}}
    page = report.render_html(results, ["one_head", "my_attention", "split_into_heads"], meta)
    help_ = page[page.index("<h2>Who may need help</h2>") : page.index("<h2>The students</h2>")]
    assert "1 of 3 students" in help_ and "ben (1 right of 3)" in help_
    assert "ana" not in help_  # 1 right of the 2 that ran: half, not fewer
    assert "could not read (ask them for the notebook): cy (cy.zip)." in help_
    assert "cy (0 right" not in help_  # a .zip is not a student who got everything wrong
    assert "from 5 graded notebook(s) and 1 file(s) the grader could not read in 1 s" in page


def test_the_csv_disarms_formulas() -> None:
    rows = list(csv.reader(io.StringIO(report.render_csv(_results()))))
    assert rows[0] == ["student", "exercise", "notebook", "status", "mistakes", "line", "message",
                       "file"]  # fmt: skip
    assert rows[2][0] == '\'=HYPERLINK("x")'
    assert rows[3][4] == "no_scaling;w_o_missing"


def test_pseudonyms_are_stable_keyed_and_replace_every_name(tmp_path: Path) -> None:
    key = report.load_key(tmp_path / "key")
    assert report.load_key(tmp_path / "key") == key and len(key) == 32
    names = ["annika-lindqvist", "ben", "<script>alert(1)</script>"]
    first, again = report.pseudonyms(names, key), report.pseudonyms(list(reversed(names)), key)
    assert first == again and len(set(first.values())) == 3
    assert all(p.startswith("student-") and len(p) == 14 for p in first.values())
    assert report.pseudonyms(names, bytes(32)) != first  # another key, other pseudonyms
    hidden = report.pseudonymised(_results(), key)
    meta = {"created": "", "notebooks": 4, "seconds": 1.0, "protections": {}}
    text = report.render_html(hidden, ["my_attention"], meta) + report.render_csv(hidden)
    assert "annika" not in text and "okafor" not in text and "HYPERLINK" not in text


def test_the_command_refuses_folders_it_must_not_use(tmp_path: Path) -> None:
    assert (
        report.problem_with(tmp_path / "none", tmp_path) == f"{tmp_path / 'none'}: no such folder"
    )
    assert "inside the submissions folder" in report.problem_with(tmp_path, tmp_path / "report")
    assert "which the graded code may read" in report.problem_with(ROOT / "helpers", tmp_path / "r")
    assert report.problem_with(tmp_path, tmp_path.parent / "r") is None


def test_the_command_writes_three_files(graded_class, tmp_path: Path) -> None:
    meta = {"created": "", "notebooks": 9, "seconds": 1.0, "protections": sandbox.protections()}
    paths = report.write_report(graded_class["alone"], ["one_head", "my_attention"], tmp_path, meta)
    document = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert len(document["results"]) == 14
    assert [e["exercise"] for e in document["exercises"]] == ["one_head", "my_attention"]
    rows = list(csv.reader(io.StringIO(paths["csv"].read_text(encoding="utf-8"))))
    assert len(rows) == 15 and all(len(row) == 8 for row in rows)
    assert "<h2>The students</h2>" in paths["html"].read_text(encoding="utf-8")


def test_as_root_without_landlock_or_seccomp_it_refuses(monkeypatch) -> None:
    """A child that cannot become nobody stays uid 0: only with both confinements."""
    monkeypatch.setattr(sandbox.sys, "platform", "linux")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox, "_python_readable_by_others", lambda readable: False)
    monkeypatch.setattr(sandbox, "_machine", lambda: "x86_64")
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    assert "the graded code would run as root" in sandbox.refusal(["/opt/python"])
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 6)
    assert sandbox.refusal(["/opt/python"]) is None
    monkeypatch.setattr(sandbox, "_python_readable_by_others", lambda readable: True)
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    assert sandbox.refusal(["/opt/python"]) is None  # it becomes nobody


def test_what_was_assigned_who_handed_what_and_copies(tmp_path: Path) -> None:
    """Exercises count when half the class handed them in; an LMS's flat names; a .zip gets its
    line; of two copies the newer is graded and the other named; a name made by a statement the
    grader does not run is pointed at."""
    write(tmp_path / "smithann_123_456_03_per_head_projections.ipynb", with_exercise(LOOP, None))
    write(tmp_path / "smithann_123_457_01_self_attention.ipynb",
          with_exercise("01_self_attention", None))  # fmt: skip
    write(tmp_path / "leeben_LATE_124_456_03_per_head_projections.ipynb",
          with_exercise(LOOP, None))  # fmt: skip
    (tmp_path / "cho_03_per_head_projections.zip").write_bytes(b"PK")
    jobs, results, assigned = grade.plan(tmp_path)
    assert assigned == ["my_attention"]  # one of three handed in 01
    assert sorted(j["student"] for j in jobs) == ["leeben", "smithann"]
    (zipped,) = [r for r in results if r.student == "cho"]
    assert zipped.status == "invalid" and zipped.message.startswith("not a notebook (a .zip file)")
    assert grade.plan(tmp_path, ["one_head", "my_attention"])[2] == ["one_head", "my_attention"]
    (tmp_path / "leeben_LATE_124_456_03_per_head_projections.ipynb").unlink()
    (tmp_path / "smithann_123_456_03_per_head_projections.ipynb").unlink()
    assert grade.plan(tmp_path)[2] == ["one_head"]  # none reaches half: every one handed in

    copies = tmp_path / "copies" / "ann"
    code = "softmax = torch.nn.Softmax(dim=-1)\n\n" + MISTAKEN["no_scaling"].replace(
        ".softmax(dim=-1)", ""
    ).replace("heads.append(weights @ v)", "heads.append(softmax(weights) @ v)")
    write(copies / f"{LOOP}.ipynb", with_exercise(LOOP, None))
    newer = write(copies / f"{LOOP}-Copy1.ipynb", with_exercise(LOOP, code))
    os.utime(newer, (2e9, 2e9))
    results, _ = grade.grade(tmp_path / "copies", exercise_seconds=5)
    (result,) = results
    assert result.file == f"ann/{LOOP}-Copy1.ipynb" and result.status == "error"
    assert "The notebook makes softmax in code cell 9: `softmax = torch.nn.Softmax(dim=-1)`" in (
        result.message
    )
    assert result.message.endswith(
        f"(also handed in, not graded: ann/{LOOP}.ipynb; the newest counts)"
    )
    (hidden,) = report.pseudonymised(results, bytes(32))
    assert "ann" not in hidden.message.replace("Softmax", "")
    assert hidden.message.endswith("(another copy was handed in, not graded)")
