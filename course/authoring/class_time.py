"""How long each notebook takes in class, by one stated rule, and the course's budget per slot.

    python -m course.authoring.class_time [NOTEBOOK ...]    a table (every notebook by default)

The rule (minutes), counted on the committed notebook:
- prose: the markdown's words / 150 (read aloud or silently, with a pause to look at a formula);
- code: its non-blank lines that are not only a comment / 5 (a line read and explained);
- figures: 1 per image a cell shows (looked at, one question asked);
- panels: 3 per interactive panel (a cell that builds a helpers.panels explorer: move each
  control once, read the table);
- exercises: 8 per «✏️ Exercise» heading (write a few lines, run the checker, fix once);
- predictions: 1 per «predict, then run» question (a cell that builds a `Predict(`: the class
  thinks, types an answer and checks it).

Checked against a cold read of the former 13-notebook course, as a student new to it would take
it (minutes per notebook in the issue that asked for this rule): the rule was within 6 minutes of
that read for 10 of the 13 notebooks, and longer for the other 3 (by 7 to 10 minutes); 381
minutes in all against the read's 335. It errs on the long side, so a plan built on it has slack.
SLOT is the longest a notebook may take: one idea per class slot of about half an hour.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SLOT = 30  # minutes: the longest a notebook may take by the rule
WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 5
MINUTES_PER_FIGURE = 1
MINUTES_PER_PANEL = 3
MINUTES_PER_EXERCISE = 8
MINUTES_PER_PREDICTION = 1
PREDICT = re.compile(r"\bPredict\(")
PANEL = re.compile(r"\b[A-Z]\w*Explorer\(")
EXERCISE = re.compile(r"^#+ ✏️ Exercise", re.MULTILINE)


@dataclass(frozen=True)
class ClassTime:
    name: str
    words: int
    code_lines: int
    figures: int
    panels: int
    exercises: int
    predictions: int = 0

    @property
    def minutes(self) -> float:
        return (
            self.words / WORDS_PER_MINUTE
            + self.code_lines / CODE_LINES_PER_MINUTE
            + self.figures * MINUTES_PER_FIGURE
            + self.panels * MINUTES_PER_PANEL
            + self.exercises * MINUTES_PER_EXERCISE
            + self.predictions * MINUTES_PER_PREDICTION
        )


def _code_lines(source: str) -> int:
    lines = (line.strip() for line in source.splitlines())
    return sum(1 for line in lines if line and not line.startswith("#"))


def _figures(cell: dict) -> int:
    return sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def class_time(path: Path) -> ClassTime:
    """The rule's counts for one notebook (see the module docstring)."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    code = [c for c in cells if c["cell_type"] == "code"]
    return ClassTime(
        name=Path(path).name,
        words=sum(len(text.split()) for text in markdown),
        code_lines=sum(_code_lines("".join(c["source"])) for c in code),
        figures=sum(_figures(c) for c in code),
        panels=sum(bool(PANEL.search("".join(c["source"]))) for c in code),
        exercises=sum(len(EXERCISE.findall(text)) for text in markdown),
        predictions=sum(bool(PREDICT.search("".join(c["source"]))) for c in code),
    )


def course_times(folder: Path = NOTEBOOKS) -> list[ClassTime]:
    return [class_time(path) for path in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))]


def table(times: list[ClassTime]) -> str:
    columns = (
        ("words", 5), ("code", 4), ("figs", 4), ("panels", 6), ("ex", 2), ("pred", 4), ("min", 4)
    )  # fmt: skip
    head = f"{'notebook':36} " + " ".join(f"{name:>{width}}" for name, width in columns)
    rows = [
        f"{t.name:36} {t.words:5d} {t.code_lines:4d} {t.figures:4d} {t.panels:6d} "
        f"{t.exercises:2d} {t.predictions:4d} {t.minutes:4.0f}"
        for t in times
    ]
    total = sum(t.minutes for t in times)
    return "\n".join([head, *rows, f"{'total':36} {'':31} {total:4.0f}"])


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]]
    print(table([class_time(p) for p in paths] if paths else course_times()))
