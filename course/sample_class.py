"""Generated submissions, for `make bench`'s class report and tests/test_report.py: right ones, the
checker's catalogued mistakes, and the bad inputs a grader must survive (each names what it tries).

A submission is the course's own notebook with its exercise cell replaced, as a student who
filled in the student copy would hand it in.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOP = "03_per_head_projections"  # the exercise most cases replace: my_attention, 03's loop

_LOOP_HEAD = "def my_attention(x, w_q, w_k, w_v, w_o):\n"
_LOOP_BODY = """\
    heads = []
    for w_qi, w_ki, w_vi in zip(w_q, w_k, w_v):
        q, k, v = x @ w_qi.T, x @ w_ki.T, x @ w_vi.T
        weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
        heads.append(weights @ v)
    return torch.cat(heads, dim=-1) @ w_o.T
"""

# my_attention with one catalogued mistake each: (the mistake the checker should name, code)
MISTAKEN = {
    "no_scaling": _LOOP_HEAD + _LOOP_BODY.replace(" / q.shape[-1] ** 0.5", ""),
    "w_o_missing": _LOOP_HEAD + _LOOP_BODY.replace(" @ w_o.T", ""),
    "no_softmax": _LOOP_HEAD + _LOOP_BODY.replace(".softmax(dim=-1)", ""),
    "values_from_w_k": _LOOP_HEAD + _LOOP_BODY.replace("x @ w_vi.T", "x @ w_ki.T"),
}


def _prelude(body: str) -> str:
    return _LOOP_HEAD + body


# bad inputs, as the function's code (a {path} is filled in by the test); each must cost only its
# own grade. "what the report must say" is a piece of the message.
BAD_CODE = {
    "infinite loop": ("timeout", _prelude("    while True:\n        pass\n")),
    "fork bomb": ("error", _prelude("    import os\n    while True:\n        os.fork()\n")),
    "2-GB allocation": ("memory", _prelude("    big = torch.ones(2**29)\n    return big\n")),
    "100 MB of output": (
        "error",
        _prelude("    for _ in range(100):\n        print('x' * 1_000_000)\n" + _LOOP_BODY),
    ),
    "reads another student's file": (
        "error",
        _prelude("    open({path!r}).read()\n" + _LOOP_BODY),
    ),
    "opens a socket": (
        "error",
        _prelude(
            "    import socket\n    socket.create_connection(('127.0.0.1', 9))\n" + _LOOP_BODY
        ),
    ),
    "writes outside its folder": (
        "error",
        _prelude("    open({path!r}, 'w').write('written by a submission')\n" + _LOOP_BODY),
    ),
    "deletes a file": ("error", _prelude("    import os\n    os.remove({path!r})\n" + _LOOP_BODY)),
    "kills the grader": (
        "error",
        _prelude("    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n" + _LOOP_BODY),
    ),
    "reads the environment": (
        "error",
        _prelude("    import os\n    raise RuntimeError(' '.join(sorted(os.environ)))\n"),
    ),
    "changes a file's mode": (
        "error",
        _prelude("    import os\n    os.chmod({path!r}, 0o4777)\n" + _LOOP_BODY),
    ),
    "lowers the grader's limits": (
        "error",
        _prelude(
            "    import os, resource\n"
            "    resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (0, 0))\n" + _LOOP_BODY
        ),
    ),
    "sends a malformed answer": (
        "crashed",
        _prelude(
            "    import json, os\n"
            "    forged = {'exercise': 'my_attention', 'status': 'mistake', 'mistakes': ['$x$']}\n"
            "    for fd in range(3, 64):\n"
            "        try:\n"
            "            os.write(fd, (json.dumps(forged) + '\\n').encode())\n"
            "        except OSError:\n"
            "            pass\n" + _LOOP_BODY
        ),
    ),
    "renamed function": ("not_found", _prelude(_LOOP_BODY).replace("my_attention", "my_attn")),
    "syntax error": ("syntax", _prelude("    heads = [\n" + _LOOP_BODY)),
}


def course_notebook(stem: str) -> dict:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))


def with_exercise(stem: str, source: str | None) -> dict:
    """The course's notebook `stem` with its exercise cell's source replaced (None: the course's
    solution kept) and every output cleared, as a student hands it in."""
    notebook = course_notebook(stem)
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        if source is not None and "solution" in cell["metadata"].get("tags", []):
            cell["source"] = source
    return notebook


def write(path: Path, notebook: dict | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = notebook if isinstance(notebook, str) else json.dumps(notebook, indent=1)
    path.write_text(text, encoding="utf-8")
    return path


# one slip that applies to most solutions, for a generated class: (what it replaces, with what)
SLIPS = (
    ("softmax(dim=-1)", "softmax(dim=-2)"),
    ("** 0.5", "** 1"),
    (".transpose(1, 2)", ""),
    (" @ w_o.T", ""),
    ("repeat_interleave(group, dim=1)", "repeat(1, group, 1, 1)"),  # 15: kv_tiled
)


def solution(stem: str) -> str:
    """The course's solution of the exercise in notebook `stem`."""
    for cell in course_notebook(stem)["cells"]:
        if "solution" in cell["metadata"].get("tags", []):
            return "".join(cell["source"])
    raise KeyError(f"{stem} has no exercise")


def skeleton(stem: str) -> str:
    """The student copy's skeleton of that exercise (raises NotImplementedError)."""
    from course.student import stub

    return stub(solution(stem))


def make_class(folder: Path, students: int, seed: int = 0) -> dict[str, int]:
    """`students` students, each handing in every notebook with an exercise: about half right,
    a fifth not done (the skeleton), the rest with one slip (03: a catalogued mistake). Returns
    how many notebooks of each kind were written."""
    import random

    from course.submissions import EXERCISES

    rng = random.Random(seed)
    kinds: dict[str, int] = {}
    for n in range(students):
        for exercise in EXERCISES.values():
            stem, roll = exercise.notebook, rng.random()
            source, kind = None, "right"
            if roll > 0.7:
                source, kind = skeleton(stem), "not done"
            elif roll > 0.5:
                if stem == LOOP:
                    source = rng.choice(list(MISTAKEN.values()))
                else:
                    text = solution(stem)
                    slips = [(a, b) for a, b in SLIPS if a in text]
                    source = text.replace(*rng.choice(slips), 1) if slips else text
                kind = "slip"
            write(folder / f"student{n:03d}" / f"{stem}.ipynb", with_exercise(stem, source))
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds
