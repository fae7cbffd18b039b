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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX_STAND_IN = Path("/opt/wheels")  # holds torch-2.13.0+cpu-cp311-...-linux wheel here
CUDA = re.compile(r"^(nvidia-.*|cuda-.*|triton)$")


def resolve(tmp_path: Path, *args: str) -> dict[str, str]:
    """{name: version} that a student's pip would install for `args`, nothing installed."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
               "--quiet", "--disable-pip-version-check", "--retries", "1",
               "--report", str(report), *args]  # fmt: skip
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


def test_a_students_linux_install_is_cpu_only(tmp_path):
    stand_in = ["--find-links", str(CPU_INDEX_STAND_IN)] if CPU_INDEX_STAND_IN.is_dir() else []
    resolved = resolve(
        tmp_path, *stand_in, "-c", "constraints.txt", "-r", "requirements-torch.txt",
        "-r", "requirements.txt",
    )  # fmt: skip
    assert resolved["torch"] == "2.13.0+cpu"
    assert cpu_only_problems(resolved, linux=True) == []
    assert {"jupyterlab", "ipywidgets", "matplotlib", "anywidget"} <= resolved.keys()


def test_the_check_fails_for_pypis_torch_on_linux(tmp_path):
    """The same check on what the course installed before (`torch==2.13.0`, PyPI only)."""
    problems = cpu_only_problems(resolve(tmp_path, "torch==2.13.0"), linux=True)
    assert "torch==2.13.0 (not the +cpu build)" in problems
    assert any(p.startswith("nvidia-cublas") for p in problems)
    assert any(p.startswith("triton") for p in problems)


@pytest.mark.parametrize("version", ["3.12", "3.13", "3.14"])
def test_every_pin_has_wheels_for_newer_pythons(tmp_path, version):
    """Every pin, test tools included, and everything they pull has a wheel for this Python.
    torch is resolved on its own, without its dependencies (on Linux those are PyPI's CUDA
    packages, which the course does not install): that PyTorch's CPU index has torch 2.13.0+cpu
    for this Python is not checked here, where that index cannot be reached."""
    lines = [line for name in ("requirements.txt", "requirements-test.txt")
             for line in (ROOT / name).read_text().splitlines()
             if line and not line.startswith(("#", "-r", "torch"))]  # fmt: skip
    without_torch = tmp_path / "requirements.txt"
    without_torch.write_text("\n".join(lines))
    target = ["--python-version", version, "--only-binary=:all:", "--target", str(tmp_path / "t")]
    resolved = resolve(tmp_path, *target, "-r", str(without_torch))
    assert {"jupyterlab", "nbval", "matplotlib", "transformers"} <= resolved.keys()
    assert "torch" not in resolved  # nothing else pulls torch in
    assert resolve(tmp_path, *target, "--no-deps", "torch==2.13.0") == {"torch": "2.13.0"}


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
