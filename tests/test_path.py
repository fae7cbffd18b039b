"""The path through the course: every notebook fits a class slot by the stated rule
(course/authoring/class_time.py), and no notebook uses a term before the notebook that explains it
(notebooks/glossary.md)."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from course.authoring.class_time import SLOT, ClassTime, class_time, course_times

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "notebooks" / "glossary.md"
NOTEBOOKS = ROOT / "notebooks"
ENTRY = re.compile(r"^explained in: (\d\d_\w+) · matches: `(.+)`$", re.MULTILINE)


@dataclass(frozen=True)
class Term:
    name: str
    notebook: str  # the stem of the notebook that explains it, "09_masks"
    pattern: re.Pattern


def glossary(text: str) -> list[Term]:
    """The terms of a glossary in notebooks/glossary.md's format."""
    terms = []
    for block in text.split("\n### ")[1:]:
        name = block.splitlines()[0].strip()
        found = ENTRY.search(block)
        if not found:
            raise ValueError(f"glossary entry {name!r} has no 'explained in: … · matches: …' line")
        terms.append(Term(name, found[1], re.compile(found[2], re.IGNORECASE)))
    return terms


def _points_to(text: str, notebook: str) -> bool:
    """Does a cell name the notebook that explains a term ("notebook 09", "09_masks.ipynb",
    "09's", "notebooks 07–09")?"""
    number = int(notebook[:2])
    if notebook in text or re.search(rf"\b{notebook[:2]}'s\b", text):
        return True
    for low, high in re.findall(r"[Nn]otebooks? (\d\d)(?:\s*(?:[–-]|to)\s*(\d\d))?", text):
        if int(low) <= number <= int(high or low):
            return True
    return False


def early_uses(terms: list[Term], notebooks: dict[str, list[str]]) -> list[str]:
    """Every use of a term in a notebook before the one that explains it, where the cell does not
    point to that notebook. notebooks: {stem: [cell text, ...]} in course order."""
    found = []
    for term in terms:
        for stem, cells in notebooks.items():
            if stem[:2] >= term.notebook[:2]:
                continue
            for i, text in enumerate(cells):
                match = term.pattern.search(text)
                if match and not _points_to(text, term.notebook):
                    start = max(0, match.start() - 40)
                    excerpt = text[start : match.end() + 40].replace("\n", " ")
                    where = f"{stem} c{i}: {term.name!r} (explained in {term.notebook})"
                    found.append(f"{where}: …{excerpt}…")
    return found


def _cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def _course() -> dict[str, list[str]]:
    return {p.stem: _cells(p) for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}


def test_every_notebook_fits_a_class_slot():
    times = course_times()
    assert len(times) >= 17
    too_long = [f"{t.name}: {t.minutes:.0f} min" for t in times if t.minutes > SLOT]
    assert not too_long, f"longer than {SLOT} minutes by the rule: {too_long}"


def test_the_rule_counts_what_it_says(tmp_path):
    cells = [
        {"cell_type": "markdown", "source": "## ✏️ Exercise: x\n" + "word " * 296},  # 300 words
        {
            "cell_type": "code",
            "source": "a = 1\n\n# only a comment\nb = 2\nExplorer(c)\n",
            "outputs": [{"data": {"image/png": "…"}}],
        },  # fmt: skip
        {"cell_type": "code", "source": "QueryExplorer(words)\n", "outputs": []},
    ]
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    counted = class_time(path)
    assert counted == ClassTime("99_x.ipynb", words=300, code_lines=4, figures=1, panels=1,
                                exercises=1)  # fmt: skip
    assert counted.minutes == pytest.approx(300 / 150 + 4 / 5 + 1 + 3 + 8)


def test_the_glossary_names_real_notebooks_that_use_their_terms():
    terms = glossary(GLOSSARY.read_text(encoding="utf-8"))
    assert len(terms) >= 15
    course = _course()
    for term in terms:
        assert term.notebook in course, f"{term.name}: no notebook {term.notebook}"
        cells = course[term.notebook]
        assert any(term.pattern.search(text) for text in cells), (
            f"{term.name}: {term.notebook} never uses it, so it cannot explain it"
        )


def test_no_notebook_uses_a_term_before_it_is_explained():
    uses = early_uses(glossary(GLOSSARY.read_text(encoding="utf-8")), _course())
    assert not uses, "terms used before they are explained:\n" + "\n".join(uses)


def test_the_path_check_catches_an_early_use_and_accepts_a_pointer():
    terms = [Term("causal mask", "09_masks", re.compile(r"\bcausal\b", re.IGNORECASE))]
    early = {"03_a": ["a **causal** layer"], "09_masks": ["the causal mask"]}
    assert early_uses(terms, early) == [
        "03_a c0: 'causal mask' (explained in 09_masks): …a **causal** layer…"
    ]
    for pointer in ("a causal layer (notebook 09)", "causal, see `09_masks.ipynb`",
                    "causal (notebooks 07–09)", "causal, as 09's mask"):  # fmt: skip
        assert early_uses(terms, {"03_a": [pointer]}) == [], pointer
    assert len(early_uses(terms, {"03_a": ["causal (notebook 11)"]})) == 1  # the wrong pointer


def test_every_notebook_links_the_glossary():
    missing = [stem for stem, cells in _course().items() if "glossary.md" not in cells[0]]
    assert not missing, f"no link to glossary.md in the first cell of {missing}"


def _table_minutes(text: str, heading: str) -> dict[str, int]:
    """{notebook stem: minutes} from a markdown table whose rows start `| \\`NN_name.ipynb\\` | N |`
    (the README) or `| NN | N |` (the guide), in the section under `heading`."""
    section = text[text.index(heading) :]
    rows = re.findall(r"^\| `?(\d\d)(_\w+)?(?:\.ipynb`)? \| (\d+) \|", section, re.MULTILINE)
    return {number: int(minutes) for number, _, minutes in rows}


def test_the_readme_lists_every_notebook_with_the_rules_minutes():
    listed = _table_minutes((ROOT / "README.md").read_text(encoding="utf-8"), "## The notebooks")
    expected = {t.name[:2]: round(t.minutes) for t in course_times()}
    assert listed == expected


def test_a_table_with_a_wrong_minute_is_caught():
    text = "## The notebooks\n\n| `00_a.ipynb` | 5 | x |\n| `01_b.ipynb` | 99 | y |\n"
    assert _table_minutes(text, "## The notebooks") == {"00": 5, "01": 99}


def test_the_guide_lists_every_notebook_with_the_rules_minutes():
    guide = (ROOT / "docs" / "teaching-guide.md").read_text(encoding="utf-8")
    listed = _table_minutes(guide, "## Overview")
    assert listed == {t.name[:2]: round(t.minutes) for t in course_times()}
    for number, minutes in listed.items():  # each notebook's own section says the same
        assert re.search(rf"^### {number} · .*\({minutes} minutes", guide, re.MULTILINE), number


def test_the_guides_totals_and_session_plans_add_up_to_the_rules_minutes():
    guide = (ROOT / "docs" / "teaching-guide.md").read_text(encoding="utf-8")
    rule = {t.name[:2]: round(t.minutes) for t in course_times()}
    totals = re.findall(
        r"(?:take about |seven sessions of 90 minutes \()(\d+) minutes by the rule", guide
    )
    assert len(totals) == 2 and {int(n) for n in totals} == {sum(rule.values())}
    sessions = re.findall(
        r"^- \*\*Session \d.*?:\*\* ((?:\d\d \(\d+\), )*\d\d \(\d+\)): (\d+)", guide, re.M
    )
    assert len(sessions) == 7
    planned = []
    for parts, stated in sessions:
        minutes = {n: int(m) for n, m in re.findall(r"(\d\d) \((\d+)\)", parts)}
        assert all(rule[n] == m for n, m in minutes.items()), parts
        assert sum(minutes.values()) == int(stated), parts
        planned += minutes
    assert planned == sorted(rule)  # every notebook once, in order


def _relative_links(text: str) -> list[str]:
    """The targets of markdown and HTML links that are not web addresses or in-page anchors."""
    found = re.findall(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"", text)
    targets = [a or b for a, b in found]
    return [t for t in targets if not re.match(r"[a-z]+:|#", t)]


def test_every_link_in_a_notebook_stays_in_the_notebooks_folder():
    """JupyterLab serves the notebooks' folder (the working copy, the student copy or notebooks/):
    a link out of it (../docs/…) is a 404 there. Every relative link in every notebook and in the
    glossary names a file beside them, and the student copy holds the same files."""
    from course.student import build

    folder = ROOT / "notebooks"
    texts = {p.name: "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"]
                               if c["cell_type"] == "markdown")
             for p in folder.glob("*.ipynb")}  # fmt: skip
    texts["glossary.md"] = GLOSSARY.read_text(encoding="utf-8")
    broken = [(name, t) for name, text in texts.items() for t in _relative_links(text)
              if not (folder / t.split("#")[0]).is_file()]  # fmt: skip
    assert not broken, broken
    assert sum("glossary.md" in text for text in texts.values()) >= len(texts) - 1
    with tempfile.TemporaryDirectory() as student:
        build(target=Path(student))
        assert {p.name for p in Path(student).iterdir()} == {
            p.name for p in folder.iterdir() if not p.name.startswith(".")
        }
