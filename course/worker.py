"""The grader's workers: `python -m course.worker`, started by `course.grade` (one per core, with
a scrubbed environment). Each imports torch and the checker once, then, for each notebook it is
sent (one JSON line on stdin), forks a fresh child that confines itself (`course.sandbox`) before
it runs anything from the submission: the notebook's kept code, then each exercise's check. A
child that runs too long is killed (its exercise: time-out; the next exercises of the notebook run
in a new child). Where there is no fork (Windows), the worker runs one notebook itself and exits.
"""

from __future__ import annotations

import ast
import json
import linecache
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from course import sandbox
from course.submissions import BY_NOTEBOOK, EXERCISES, ROOT, Exercise, _code_cells, python_source

EXERCISE_SECONDS = 20.0  # wall clock for one exercise's check
NOTEBOOK_SECONDS = 60.0  # wall clock for a whole notebook: its code, then every check
LIMITS = sandbox.Limits(memory=1 << 30, cpu=int(NOTEBOOK_SECONDS), output=1 << 20)


# --- the confined child (runs the submission) ----------------------------------------------------


def _classify(diagnosis) -> str:
    message = diagnosis.message
    if diagnosis.ok:
        return "right"
    if message.startswith("○"):
        return "not_done"
    if "raised" in message.split(".")[0]:
        low = message.lower()
        memory = ("memoryerror", "can't allocate memory", "not enough memory", "cannot allocate")
        return "memory" if any(m in low for m in memory) else "error"
    if diagnosis.findings and all(f.mistake for f in diagnosis.findings):
        return "mistake"
    if diagnosis.findings:
        return "unknown"
    return "shape" if message.startswith("✗ Expected shape") else "other"


def _check(exercise: Exercise, fn: Callable) -> dict:
    from helpers import diagnose

    checker, kwargs = exercise.call
    start = time.perf_counter()
    diagnosis = getattr(diagnose, checker)(fn, echo=False, **kwargs)
    lines = [f.record.where if f.record else "" for f in diagnosis.findings]
    status, message = _classify(diagnosis), diagnosis.message
    if status == "not_done":
        message = "the function still raises NotImplementedError: the skeleton, not filled in"
    if status == "error" and "File too large" in message:  # RLIMIT_FSIZE on the output log
        status = "output"
        message = f"printed more than the {LIMITS.output >> 20} MB of output allowed: {message}"
    return {
        "status": status,
        "message": message,
        "mistakes": [m or "" for m in diagnosis.mistakes],
        "lines": lines,
        "seconds": round(time.perf_counter() - start, 3),
    }


def run_in_child(job: dict, send: Callable[[dict], None]) -> None:
    """In the confined child: run the kept code of every cell, then check each exercise of the
    job; send one message per exercise."""
    namespace: dict = {"__name__": "__submission__"}
    failures = []
    for cell in job["cells"]:
        name = f"<cell {cell['index']}>"
        lines = cell["source"].splitlines(keepends=True)
        linecache.cache[name] = (len(cell["source"]), None, lines, name)
        tree = ast.parse(cell["source"])
        for i in cell["keep"]:  # one by one: a failed import does not stop the definitions
            try:
                statement = ast.Module(body=[tree.body[i]], type_ignores=[])
                exec(compile(statement, name, "exec"), namespace)  # noqa: S102 - confined
            except BaseException as err:  # noqa: BLE001 - their code: every problem is a message
                failures.append(f"cell {cell['index']}: {type(err).__name__}: {err}"[:300])
    for function in job["exercises"]:
        exercise = EXERCISES[function]
        fn = namespace.get(function)
        if not callable(fn):
            message = f"{function} was not defined when its notebook's code ran"
            if failures:
                message += f" ({failures[0]})"
            send({"exercise": function, "status": "not_found", "message": message})
            continue
        try:
            result = _check(exercise, fn)
        except MemoryError:
            result = {"status": "memory", "message": "ran out of memory in the check"}
        except BaseException as err:  # noqa: BLE001 - e.g. SystemExit from their code
            result = {"status": "error", "message": f"the check stopped: {type(err).__name__}: "
                      f"{str(err)[:300]}"}  # fmt: skip
        send({"exercise": function, **result})


def readable_paths() -> list[str]:
    """What a confined child may read: Python, its packages, the course's helpers, shared
    libraries."""
    import site
    import sysconfig

    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             *site.getsitepackages(), sysconfig.get_paths()["stdlib"], str(ROOT / "helpers"),
             str(ROOT / "course"),
             "/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache"]  # fmt: skip
    return list(dict.fromkeys(p for path in paths for p in (path, os.path.realpath(path))))


def _child(job: dict, workdir: str, result_fd: int, limits: sandbox.Limits) -> None:
    """The forked child: never returns."""
    code = 0
    try:
        os.setsid()
        os.chdir(workdir)
        log = os.open(os.path.join(workdir, "output.log"), os.O_WRONLY | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for fd in (log, null):
            os.close(fd)
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, 1 << 16)
        sandbox.confine(readable_paths(), limits)

        def send(message: dict) -> None:
            os.write(result_fd, (json.dumps(message) + "\n").encode())

        run_in_child(job, send)
    except BaseException:  # noqa: BLE001 - the worker reports what is missing
        code = 1
    os._exit(code)


# --- the worker (forks one child per notebook) ---------------------------------------------------


def _kill(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def _exit_reason(status: int) -> tuple[str, str]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            return "timeout", f"used its {LIMITS.cpu} s of CPU time"
        if sig == signal.SIGKILL:
            return "crashed", "killed (SIGKILL): most often out of memory"
        return "crashed", f"the process died of signal {signal.Signals(sig).name}"
    return "crashed", f"the process exited (code {os.WEXITSTATUS(status)}) before it finished"


def run_job(job: dict, limits: sandbox.Limits = LIMITS) -> list[dict]:
    """Run one notebook's exercises, each in order, in forked confined children: a new child
    after one that timed out or died. Returns one message per exercise."""
    results: dict[str, dict] = {}
    todo = list(job["exercises"])
    notebook_deadline = time.monotonic() + job.get("notebook_seconds", NOTEBOOK_SECONDS)
    while todo:
        workdir = tempfile.mkdtemp(prefix="grade-")
        if os.geteuid() == 0:
            os.chown(workdir, sandbox.NOBODY, sandbox.NOBODY)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _child({**job, "exercises": todo}, workdir, write_end, limits)
        os.close(write_end)
        buffer, current = b"", todo[0]
        deadline = min(time.monotonic() + job.get("exercise_seconds", EXERCISE_SECONDS),
                       notebook_deadline)  # fmt: skip
        timed_out = False
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while todo:
                wait = deadline - time.monotonic()
                ready = select.select([pipe], [], [], max(wait, 0))[0] if wait > 0 else []
                if not ready:
                    timed_out = True
                    break
                chunk = pipe.read(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                if len(buffer) > 1 << 20:  # more than the checker's messages ever are
                    break
                while b"\n" in buffer and todo:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        message = json.loads(line)
                        name = message["exercise"]
                    except (ValueError, KeyError, TypeError):
                        continue
                    if name == current:
                        results[name] = message
                        todo.pop(0)
                        current = todo[0] if todo else None
                        deadline = min(time.monotonic() + job.get("exercise_seconds",
                                       EXERCISE_SECONDS), notebook_deadline)  # fmt: skip
        _kill(pid)
        _, status = os.waitpid(pid, 0)
        shutil.rmtree(workdir, ignore_errors=True)
        if todo:
            name = todo.pop(0)
            if timed_out:
                seconds = job.get("exercise_seconds", EXERCISE_SECONDS)
                message = f"still running after {seconds:.0f} s: stopped"
                results[name] = {"exercise": name, "status": "timeout", "message": message}
            else:
                status_name, why = _exit_reason(status)
                results[name] = {"exercise": name, "status": status_name, "message": why}
            if time.monotonic() >= notebook_deadline:
                for name in todo:
                    results[name] = {"exercise": name, "status": "timeout",
                                     "message": "the notebook's time ran out first"}  # fmt: skip
                todo = []
    return [results[name] for name in job["exercises"]]


def course_imports(notebooks: Path = ROOT / "notebooks") -> list[str]:
    """The modules the course's own notebooks with an exercise import (the trusted originals)."""
    modules = []
    for stem in BY_NOTEBOOK:
        path = notebooks / f"{stem}.ipynb"
        if not path.exists():
            continue
        for _, source in _code_cells(json.loads(path.read_text(encoding="utf-8"))):
            try:
                tree = ast.parse(python_source(source))
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.Import):
                    modules += [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    modules.append(node.module)
    return list(dict.fromkeys(modules))


def worker() -> None:
    """`python -m course.worker`: read jobs (one JSON line each) on stdin, answer each
    with one JSON line on stdout."""
    import importlib

    import torch

    import helpers.diagnose  # noqa: F401 - imported once here, shared by every forked child

    torch.set_num_threads(1)  # one notebook per core; and no thread pool to fork
    for module in course_imports():  # what the course's notebooks import, once for every child
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a child that needs it reports the error itself
            pass
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write on the answers' line
    for line in sys.stdin:
        job = json.loads(line)
        if hasattr(os, "fork"):
            answer = run_job(job)
        else:  # Windows: this worker runs one notebook in itself, then exits
            answer = []
            run_in_child(job, answer.append)
        out.write(json.dumps(answer) + "\n")
        out.flush()
        del answer, job, line  # the next child is forked from here: nothing of this one in it
        if not hasattr(os, "fork"):
            return


if __name__ == "__main__":
    worker()
