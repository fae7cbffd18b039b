"""Grade a class's submitted notebooks with the course's checker, each notebook confined.

`grade(folder)` finds the submitted notebooks, recognises which course notebook each one is and
takes from it the code the exercise needs (`course.submissions`: `find_submissions`, `identify`,
`extract`, `EXERCISES`), then runs the notebook's own check on the exercise's function in a
separate process confined by `course.sandbox`. It returns one `Result` per student and exercise.

Processes: the grader starts a few workers (`course.worker`, one per core, with a scrubbed
environment), each of which forks a fresh confined child per notebook. A worker that dies is
replaced. Where there is no fork (Windows), each notebook gets a fresh worker.

Nothing in a submission is trusted: the grader reads it as JSON (a symbolic link or a file over
MAX_BYTES is not read), and only the confined child executes any of it. A ✓ is what the course's
checker said inside that child. Like any checker that runs in the same process as the code it
checks, code written on purpose to fool it can; the confinement protects the machine, the other
submissions and the report, not a grade from a student set on cheating. Read the code of a
surprising ✓.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course.submissions import (
    BY_NOTEBOOK,
    EXERCISES,
    MAX_CODE,
    ROOT,
    Submission,
    _code_bytes,
    course_titles,
    extract,
    find_submissions,
    identify,
    read_notebook,
)
from course.worker import EXERCISE_SECONDS, NOTEBOOK_SECONDS

# a Result's status, and what the report calls it
STATUSES = {
    "right": "right",
    "mistake": "a named mistake",
    "unknown": "a difference the checker cannot name",
    "shape": "the wrong shape",
    "other": "another problem (see its message)",
    "error": "raised an error",
    "not_done": "not done (still the skeleton)",
    "timeout": "ran out of time",
    "memory": "ran out of memory",
    "output": "printed too much",
    "crashed": "the process died",
    "not_found": "function not found",
    "syntax": "a syntax error in the exercise's cell",
    "invalid": "not a readable notebook",
    "missing": "not submitted",
}


@dataclass
class Result:
    student: str
    exercise: str  # the function's name (a key of EXERCISES)
    status: str  # a key of STATUSES
    message: str = ""  # the checker's words, or the grader's for what went wrong
    mistakes: list[str] = field(default_factory=list)  # named mistakes (None: unnamed), in order
    lines: list[str] = field(default_factory=list)  # "cell 18, line 7: `...`" for each finding
    file: str = ""  # the submitted file, relative to the folder
    seconds: float = 0.0


# --- the grader ----------------------------------------------------------------------------------


def _environment(home: str) -> dict[str, str]:
    """The workers' environment: nothing of the teacher's (no tokens, no keys) but what Python
    needs."""
    env = {"PATH": os.defpath, "HOME": home, "TMPDIR": home, "TEMP": home, "TMP": home,
           "LANG": "C.UTF-8", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MPLBACKEND": "Agg", "PYTHONIOENCODING": "utf-8"}  # fmt: skip
    for name in ("SYSTEMROOT", "WINDIR"):  # Windows cannot start Python without them
        if name in os.environ:
            env[name] = os.environ[name]
    return env


class _Worker:
    def __init__(self, home: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "course.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=home, env=_environment(home), text=True, encoding="utf-8",
        )  # fmt: skip
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.answers.put(line)
        self.answers.put(None)

    def ask(self, job: dict, seconds: float) -> list[dict] | None:
        try:
            self.process.stdin.write(json.dumps(job) + "\n")
            self.process.stdin.flush()
            line = self.answers.get(timeout=seconds)
        except (OSError, queue.Empty):
            line = None
        if line is None:
            return None
        try:
            return json.loads(line)
        except ValueError:
            return None

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


def plan(folder: Path, exercises: Iterable[str] = ()) -> tuple[list[dict], list[Result], list[str]]:
    """(jobs to run, results known without running anything, the exercises assigned). The
    exercises assigned are `exercises` (function names) if given, else those whose notebook at
    least half of the students handed in (a student who hands in every notebook does not make
    the rest of the class miss them)."""
    titles = course_titles()
    jobs, results = [], []
    seen: dict[tuple[str, str], Submission] = {}
    unread: list[tuple[Submission, str]] = []
    duplicates: dict[tuple[str, str], list[str]] = {}
    for submission in find_submissions(folder):
        notebook, problem = read_notebook(submission.path)
        if notebook is not None and _code_bytes(notebook) > MAX_CODE:
            notebook, problem = None, f"over {MAX_CODE >> 10} KB of code: not read"
        if notebook is None:
            unread.append((submission, problem))
            continue
        try:
            stem = identify(submission.path.name, notebook, titles)
            found = extract(notebook, BY_NOTEBOOK[stem]) if stem else None
        except (RecursionError, MemoryError, ValueError, TypeError) as err:
            unread.append((submission, f"could not be read ({type(err).__name__})"))
            continue
        if stem is None:
            unread.append((submission, "no exercise of the course in it (" + ", ".join(
                EXERCISES) + ")"))  # fmt: skip
            continue
        exercise = BY_NOTEBOOK[stem]
        key = (submission.student, exercise.function)
        if key in seen:  # two copies of one notebook: the newer counts, and the report says so
            older = seen[key]
            if older.path.stat().st_mtime > submission.path.stat().st_mtime:
                duplicates[key] = duplicates.get(key, []) + [submission.relative]
                continue
            duplicates[key] = duplicates.get(key, []) + [older.relative]
            jobs = [j for j in jobs if (j["student"], j["exercises"][0]) != key]
            results = [r for r in results if (r.student, r.exercise) != key]
        seen[key] = submission
        if found.problem:
            results.append(Result(submission.student, exercise.function, found.status,
                                  found.problem, file=submission.relative))  # fmt: skip
            continue
        jobs.append({"student": submission.student, "file": submission.relative,
                     "exercises": [exercise.function], "cells": found.cells,
                     "cell": found.cell_of[exercise.function], "skipped": found.skipped,
                     "also": ""})  # fmt: skip
    for job in jobs:
        others = duplicates.get((job["student"], job["exercises"][0]))
        if others:
            job["also"] = f" (also handed in, not graded: {', '.join(others)}; the newest counts)"
    for result in results:
        others = duplicates.get((result.student, result.exercise))
        if others:
            result.message += f" (also handed in, not graded: {', '.join(others)})"
    handed = {name: {k[0] for k in seen if k[1] == name} for name in EXERCISES}
    students_in = {s.student for s in seen.values()} | {s.student for s, _ in unread}
    if exercises:
        assigned = [name for name in EXERCISES if name in exercises]
    else:  # what at least half the class handed in
        assigned = [name for name in EXERCISES if handed[name] and
                    2 * len(handed[name]) >= len(students_in)]  # fmt: skip
        assigned = assigned or [name for name in EXERCISES if handed[name]]  # none reaches half
    jobs = [job for job in jobs if job["exercises"][0] in assigned]
    results = [r for r in results if r.exercise in assigned]
    students = sorted({s.student for s in seen.values()} | {s.student for s, _ in unread})
    for submission, problem in unread:  # under its exercise if its name says which
        named = [e.function for e in EXERCISES.values() if e.notebook in submission.path.name]
        for name in named or assigned or list(EXERCISES)[:1]:
            if (submission.student, name) not in seen and not any(
                r.student == submission.student and r.exercise == name for r in results
            ):
                results.append(Result(submission.student, name, "invalid", problem,
                                      file=submission.relative))  # fmt: skip
    for student in students:
        for name in assigned:
            if (student, name) not in seen and not any(
                r.student == student and r.exercise == name for r in results
            ):
                results.append(Result(student, name, "missing", "no notebook with this exercise"))
    return jobs, results, assigned


def grade(
    folder: Path,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    exercise_seconds: float = EXERCISE_SECONDS,
    notebook_seconds: float = NOTEBOOK_SECONDS,
    exercises: Iterable[str] = (),
) -> tuple[list[Result], list[str]]:
    """Grade every submission in `folder`; (results sorted by student and exercise, the exercises
    assigned). The time limits are wall-clock seconds."""
    jobs, results, assigned = plan(folder, exercises)
    for job in jobs:
        job.update(exercise_seconds=exercise_seconds, notebook_seconds=notebook_seconds)
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    todo: queue.Queue = queue.Queue()
    for job in jobs:
        todo.put(job)
    done, lock = [0], threading.Lock()
    home = tempfile.mkdtemp(prefix="grader-")

    def serve() -> None:
        current = _Worker(home)
        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                break
            start = time.monotonic()
            try:
                answer = current.ask(job, notebook_seconds + 60)
            except Exception:  # noqa: BLE001 - never lose the jobs after this one
                answer = None
            if answer is None or not hasattr(os, "fork"):
                current.close()
                current = _Worker(home)
            if answer is None:
                answer = [{"exercise": name, "status": "crashed",
                           "message": "the grading process stopped answering"}
                          for name in job["exercises"]]  # fmt: skip
            answer = answer if isinstance(answer, list) else []
            answer += [None] * (len(job["exercises"]) - len(answer))
            with lock:
                for name, message in zip(job["exercises"], answer):
                    results.append(_result(job, message, time.monotonic() - start, name))
                done[0] += 1
                if progress:
                    progress(done[0], len(jobs))
        current.close()

    threads = [threading.Thread(target=serve) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    shutil.rmtree(home, ignore_errors=True)
    order = {name: i for i, name in enumerate(EXERCISES)}
    results.sort(key=lambda r: (r.student, order.get(r.exercise, 99)))
    return results, assigned


def known_mistake(name: object) -> bool:
    """Whether `name` is one the checker can report (a message is the submission's process's
    word: anything else in it was not written by the checker)."""
    from helpers.checker.mistakes import MISTAKES, SLIPS, WRONG_NUM_HEADS

    if not isinstance(name, str):
        return False
    count = name.removeprefix(WRONG_NUM_HEADS)
    return name in MISTAKES or name in SLIPS or (count != name and count.isdigit())


def _strings(value: object, most: int = 8) -> list[str]:
    return [str(v)[:500] for v in value[:most]] if isinstance(value, list) else []


def _result(job: dict, message: object, seconds: float, exercise: str) -> Result:
    """A Result from a child's message, which is untrusted: every field is checked, and what does
    not fit makes it 'crashed'."""
    if not isinstance(message, dict) or message.get("exercise") != exercise:
        message = {"status": "crashed", "message": "no answer the grader could read"}
    status = message.get("status")
    mistakes = _strings(message.get("mistakes"))
    named = [m for m in mistakes if m or status == "mistake"]
    if status not in STATUSES or not all(map(known_mistake, named)):
        status, mistakes = "crashed", []
        message = {"message": "the answer from the submission's process was malformed"}
    lines = [f"code cell {job['cell']}, {line}" if line else ""
             for line in _strings(message.get("lines"))]  # fmt: skip
    text = str(message.get("message", ""))[:2000]
    missing = re.search(r"NameError: name '(\w+)' is not defined", text)
    if missing and missing.group(1) in job.get("skipped", {}):
        text += (
            f" The notebook makes {missing.group(1)} in {job['skipped'][missing.group(1)]}, a "
            "statement the grader does not run (it runs only imports, functions and constants): "
            "in the notebook the function works if that cell ran first."
        )
    text += job.get("also", "")
    elapsed = message.get("seconds")
    return Result(
        job["student"], exercise, status, text, mistakes,
        lines, job["file"], float(elapsed) if isinstance(elapsed, int | float) else seconds,
    )  # fmt: skip


def as_dicts(results: Iterable[Result]) -> Iterator[dict]:
    for result in results:
        yield asdict(result)


if __name__ == "__main__":
    raise SystemExit("usage: python -m course.report SUBMISSIONS (it grades with this module)")
