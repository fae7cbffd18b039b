"""`make report SUBMISSIONS=folder`: which mistakes a class made, from its submitted notebooks.

    python -m course.report SUBMISSIONS [--out report] [--pseudonymise] [--workers N]

grades every submitted notebook with the course's checker (`course.grade`, each notebook in its
own confined process) and writes, into --out (default report/):

- report.html: per exercise, how many students are right, each named mistake with its count and
  one example line, then what the checker could not name, errors and time-outs, with a bar chart;
  per student, a row of ✓/✗ with the finding, and every message in full below. One file, no
  scripts, nothing fetched: it opens offline and projects at 1280×720.
- report.csv: one row per student and exercise (status, mistakes, line, message); cells that a
  spreadsheet would read as a formula (=, +, -, @) get a leading apostrophe.
- report.json: the same, with the protections the grader enforced, for an LMS or a script.

--pseudonymise replaces every student's name with a stable pseudonym (the same student gets the
same one in every report made with the same key, kept in .report-key in the course folder, which
git ignores): for showing the report in class. Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import hmac
import html
import io
import json
import os
import re
import secrets
import sys
import time
from collections import Counter
from pathlib import Path

from course import grade, sandbox, worker
from course.grade import STATUSES, Result
from course.submissions import EXERCISES

ROOT = Path(__file__).resolve().parents[1]
KEY_FILE = ROOT / ".report-key"
RIGHT, MISTAKE = "#1a7f37", "#b4460f"  # on white: 5.1:1 and 5.5:1
OTHER = "#57606a"  # 6.4:1
_FAILED = tuple(s for s in STATUSES if s not in ("right", "mistake"))  # in STATUSES' order


# --- pseudonyms ----------------------------------------------------------------------------------


def load_key(path: Path = KEY_FILE) -> bytes:
    """The pseudonyms' key: made once (32 random bytes), then read, so that a student keeps the
    same pseudonym from one report to the next."""
    if not path.exists():
        path.write_text(secrets.token_hex(32), encoding="ascii")
        try:
            path.chmod(0o600)
        except OSError:
            pass
    return bytes.fromhex(path.read_text(encoding="ascii").strip())


def pseudonyms(names: list[str], key: bytes) -> dict[str, str]:
    """{name: "student-xxxxxx"}: a keyed hash (HMAC-SHA256), so that nobody without the key can
    tell whose it is by hashing the class list; longer where two would collide."""
    for length in range(6, 65, 2):
        made = {
            n: "student-" + hmac.new(key, n.encode(), hashlib.sha256).hexdigest()[:length]
            for n in names
        }
        if len(set(made.values())) == len(made):
            return made
    raise AssertionError("unreachable: SHA-256 prefixes of 64 hex digits collide")


def pseudonymised(results: list[Result], key: bytes) -> list[Result]:
    names = pseudonyms(sorted({r.student for r in results}), key)
    hidden = [
        Result(
            **{
                **vars(r),
                "student": names[r.student],
                "file": "",  # a path names the student
                "message": re.sub(
                    r"\(also handed in, not graded: [^)]*\)",
                    "(another copy was handed in, not graded)",
                    r.message,
                ),
            }
        )  # fmt: skip
        for r in results
    ]
    order = {name: i for i, name in enumerate(EXERCISES)}
    return sorted(hidden, key=lambda r: (r.student, order[r.exercise]))  # not the names' order


# --- what the report says ------------------------------------------------------------------------


def mistake_words(name: str) -> str:
    """A named mistake as a teacher reads it: 'the scores are not scaled (no_scaling)'."""
    from helpers.checker.mistakes import describe

    try:
        words = describe(name)[0]
    except KeyError:
        return name or "a difference the checker cannot name"
    return f"{words} ({name})"


SHORT = {
    "unknown": "unnamed difference", "shape": "wrong shape", "other": "other", "error": "error",
    "output": "too much output", "not_done": "not done", "timeout": "time-out",
    "memory": "out of memory", "crashed": "died", "not_found": "not found",
    "syntax": "syntax error", "invalid": "unreadable", "missing": "not submitted",
}  # fmt: skip


def finding(result: Result) -> str:
    """The short finding for a student's cell: the mistakes' names, or the status."""
    if result.status == "right":
        return "right"
    if result.status == "mistake":
        return ", ".join(m for m in result.mistakes if m)
    named = [m for m in result.mistakes if m]
    return ", ".join([SHORT[result.status], *named])


_NOT_GRADED = ("missing", "invalid")  # nothing of the student's ran: not counted for "who"


def summary(results: list[Result], assigned: list[str]) -> list[dict]:
    """Per exercise: the counts of each outcome, with one example line per mistake."""
    out = []
    for name in assigned:
        mine = [r for r in results if r.exercise == name]
        rows: Counter = Counter()
        examples: dict[str, str] = {}
        for r in mine:
            if r.status in ("mistake", "unknown"):  # named ones count beside an unnamed one
                for mistake, line in zip(r.mistakes, r.lines or [""] * len(r.mistakes)):
                    if mistake:
                        rows[("mistake", mistake)] += 1
                        examples.setdefault(mistake, line)
            if r.status != "mistake":
                rows[(r.status, "")] += 1
                if r.lines and r.lines[0]:
                    examples.setdefault(f"status:{r.status}", r.lines[0])
        out.append({
            "exercise": name,
            "notebook": EXERCISES[name].notebook,
            "check": EXERCISES[name].check,
            "students": len(mine),
            "handed_in": sum(r.status != "missing" for r in mine),
            "right": rows[("right", "")],
            "mistakes": [
                {"name": m, "words": mistake_words(m), "count": c, "example": examples[m]}
                for (kind, m), c in rows.most_common() if kind == "mistake"
            ],
            "other": {s: rows[(s, "")] for s in _FAILED if rows[(s, "")]},
            "other_examples": {s: examples[f"status:{s}"] for s in _FAILED
                               if f"status:{s}" in examples},  # fmt: skip
        })  # fmt: skip
    return out


def figure(entry: dict) -> str:
    """A bar per outcome of one exercise (right, each mistake, the rest), as inline SVG, its text
    at least 16 px where the SVG is shown at its own width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [("right", entry["right"], RIGHT)]
    bars += [(m["name"], m["count"], MISTAKE) for m in entry["mistakes"]]
    bars += [(STATUSES[s], n, OTHER) for s, n in entry["other"].items()]
    with plt.rc_context({"svg.fonttype": "none", "font.size": 16, "text.parse_math": False}):
        fig, ax = plt.subplots(figsize=(9, 0.55 * len(bars) + 1.0), dpi=100)
        labels = [b[0] for b in bars]
        ax.barh(range(len(bars)), [b[1] for b in bars], color=[b[2] for b in bars])
        ax.set_yticks(range(len(bars)), labels)
        ax.invert_yaxis()
        for i, (_, count, _) in enumerate(bars):
            ax.text(count, i, f" {count}", va="center")
        ax.set_xlabel("students")
        ax.set_title(
            f"{entry['notebook'][:2]} {entry['exercise']}: students per outcome", loc="left"
        )
        ax.set_xlim(0, max(entry["students"], 1) * 1.12)
        ax.spines[["top", "right"]].set_visible(False)
        ax.xaxis.get_major_locator().set_params(integer=True)
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
        plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    start, end = svg.find("<metadata>"), svg.find("</metadata>")
    return svg[:start] + svg[end + len("</metadata>") :] if start >= 0 else svg


_CSS = """
body { font: 20px/1.45 system-ui, sans-serif; color: #1f2328; margin: 1.5em auto; max-width: 74em;
       padding: 0 1em; }
h1 { font-size: 1.8em; } h2 { font-size: 1.45em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 18px; margin: .6em 0; }
th, td { border: 1px solid #8c959f; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #eaeef2; }
table.students { width: 100%; table-layout: fixed; overflow-wrap: anywhere; }
table.students th:first-child { width: 9em; } table.students th:nth-child(2) { width: 3.5em; }
td.right { color: #1a7f37; } td.wrong { color: #b4460f; } td.other { color: #57606a; }
code { font: 17px/1.3 ui-monospace, monospace; background: #f6f8fa; padding: 0 .2em; }
.figure svg { max-width: 100%; height: auto; }
details { margin: .2em 0; } summary { cursor: pointer; }
pre { white-space: pre-wrap; font: 15px/1.35 ui-monospace, monospace; background: #f6f8fa;
      padding: .5em; }
.note { color: #57606a; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _example(line: str) -> str:
    """'cell 9, line 5: `code`' as the place, then the code."""
    if not line:
        return "<span class='note'>(line not known)</span>"
    place, _, code = line.partition(": `")
    if not code:
        return _e(line)
    return f"{_e(place)}: <code>{_e(code.removesuffix('`'))}</code>"


def render_html(results: list[Result], assigned: list[str], meta: dict) -> str:
    entries = summary(results, assigned)
    students = sorted({r.student for r in results})
    by = {(r.student, r.exercise): r for r in results}
    made = f"{meta['notebooks']} graded notebook(s)"
    if meta.get("unreadable"):
        made += f" and {meta['unreadable']} file(s) the grader could not read"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Class report: {len(students)} students</title><style>{_CSS}</style></head><body>",
        f"<h1>Class report: {len(students)} students, {len(assigned)} exercise(s)</h1>",
        f"<p class='note'>Made {_e(meta['created'])} from {made} in {meta['seconds']:.0f} s. "
        "A ✓ is the course's checker on the student's function, run on fixed inputs at two "
        "sizes.</p>",
        "<h2>The exercises</h2>",
    ]
    for entry in entries:
        exercise = EXERCISES[entry["exercise"]]
        parts.append(
            f"<h3>{_e(exercise.notebook)}: <code>{_e(exercise.function)}</code></h3>"
            f"<p><strong>{entry['right']} of {entry['students']}</strong> right "
            f"({entry['handed_in']} handed it in). The notebook's "
            f"check: <code>{_e(entry['check'])}</code>.</p>"
        )
        if entry["mistakes"] or entry["other"]:
            parts.append("<table><tr><th>outcome</th><th>students</th><th>one example</th></tr>")
            for m in entry["mistakes"]:
                parts.append(
                    f"<tr><td>{_e(m['words'])}</td><td>{m['count']}</td>"
                    f"<td>{_example(m['example'])}</td></tr>"
                )
            for status, count in entry["other"].items():
                example = entry["other_examples"].get(status)
                parts.append(
                    f"<tr><td>{_e(STATUSES[status])}</td><td>{count}</td>"
                    f"<td>{_example(example) if example else ''}</td></tr>"
                )
            parts.append("</table>")
        parts.append(
            f"<div class='figure' role='img' aria-label='{_e(_figure_words(entry))}'>"
            f"{figure(entry)}</div>"
        )
    rights = {
        s: sum(by[(s, n)].status == "right" for n in assigned if (s, n) in by) for s in students
    }
    graded = {s: sum(by[(s, n)].status not in _NOT_GRADED for n in assigned if (s, n) in by)
              for s in students}  # fmt: skip
    unreadable = {s: sorted({by[(s, n)].file for n in assigned if (s, n) in by
                             and by[(s, n)].status == "invalid"})
                  for s in students}  # fmt: skip
    behind = sorted((s for s in students if 2 * rights[s] < graded[s]), key=rights.get)
    parts.append(
        "<h2>Who may need help</h2><p>"
        + (
            f"{len(behind)} of {len(students)} students are right on fewer than half of the "
            "exercises the grader could run for them, fewest right first: "
            + ", ".join(f"{_e(s)} ({rights[s]} right of {graded[s]})" for s in behind)
            if behind
            else "Every student is right on at least half of the exercises the grader could run "
            "for them."
        )
        + "</p>"
    )
    lost = [s for s in students if unreadable[s]]
    if lost:
        parts.append(
            "<p>Handed in something the grader could not read (ask them for the notebook): "
            + ", ".join(f"{_e(s)} ({_e(', '.join(unreadable[s]))})" for s in lost)
            + ".</p>"
        )
    numbers = {name: EXERCISES[name].notebook[:2] for name in assigned}
    parts.append(
        "<h2>The students</h2><p>Columns by notebook: "
        + " · ".join(f"{numbers[n]} <code>{_e(n)}</code>" for n in assigned)
        + ". ✓ right, ✗ the finding, – not submitted.</p>"
        "<table class='students'><tr><th>student</th><th>right</th>"
        + "".join(f"<th title='{_e(n)}'>{numbers[n]}</th>" for n in assigned)
        + "</tr>"
    )
    for student in students:
        row = [by.get((student, name)) for name in assigned]
        right = sum(1 for r in row if r and r.status == "right")
        cells = []
        for r in row:
            if r is None or r.status == "missing":
                cells.append("<td class='other'>–</td>")
            elif r.status == "right":
                cells.append("<td class='right'>✓</td>")
            else:
                kind = "wrong" if r.status == "mistake" else "other"
                words = _e(finding(r)).replace("_", "_<wbr>")  # long names break at a _
                cells.append(f"<td class='{kind}'>✗ {words}</td>")
        parts.append(
            f"<tr><td>{_e(student)}</td><td>{right}/{len(assigned)}</td>{''.join(cells)}</tr>"
        )
    parts.append("</table><h2>Every message in full</h2>")
    for student in students:
        parts.append(f"<details><summary>{_e(student)}</summary>")
        for name in assigned:
            r = by.get((student, name))
            if r is not None:
                where = f" <span class='note'>({_e(r.file)})</span>" if r.file else ""
                parts.append(f"<p><code>{_e(name)}</code>{where}</p><pre>{_e(r.message)}</pre>")
        parts.append("</details>")
    parts.append("<h2>What the grader enforced on this machine</h2><ul>")
    for what, held in meta["protections"].items():
        parts.append(f"<li>{'yes' if held else '<strong>no</strong>'}: {_e(what)}</li>")
    parts.append("</ul></body></html>\n")
    return "\n".join(parts)


def _figure_words(entry: dict) -> str:
    words = [f"{entry['right']} right"]
    words += [f"{m['count']} {m['name']}" for m in entry["mistakes"]]
    words += [f"{n} {STATUSES[s]}" for s, n in entry["other"].items()]
    return ", ".join(words)


def _cell(value: object) -> str:
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def render_csv(results: list[Result]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "exercise", "notebook", "status", "mistakes", "line", "message",
                     "file"])  # fmt: skip
    for r in results:
        writer.writerow([_cell(v) for v in (
            r.student, r.exercise, EXERCISES[r.exercise].notebook, r.status,
            ";".join(m or "unnamed" for m in r.mistakes), r.lines[0] if r.lines else "",
            r.message, r.file,
        )])  # fmt: skip
    return buffer.getvalue()


def write_report(
    results: list[Result], assigned: list[str], out: Path, meta: dict
) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {kind: out / f"report.{kind}" for kind in ("html", "csv", "json")}
    paths["html"].write_text(
        render_html(results, assigned, meta), encoding="utf-8", errors="backslashreplace"
    )
    paths["csv"].write_text(render_csv(results), encoding="utf-8-sig", errors="backslashreplace")
    document = {
        **meta,
        "exercises": summary(results, assigned),
        "results": list(grade.as_dicts(results)),
    }
    paths["json"].write_text(json.dumps(document, indent=1), encoding="utf-8")
    return paths


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def problem_with(submissions: Path, out: Path) -> str | None:
    """Why these folders cannot be used, or None."""
    if submissions.is_file():
        return f"{submissions} is a file: give the folder that holds the submitted notebooks"
    if not submissions.is_dir():
        return f"{submissions}: no such folder"
    refusal = sandbox.refusal(worker.readable_paths())
    if refusal:
        return refusal
    if _inside(out, submissions):
        return (
            f"--out {out} is inside the submissions folder, where the grader never writes: give "
            "a folder outside it (the default is report/ where you run the command)"
        )
    for readable in worker.readable_paths():
        if readable.startswith("/") and len(Path(readable).parts) > 2:
            if _inside(submissions, Path(readable)):
                return (
                    f"{submissions} is inside {readable}, which the graded code may read: move "
                    "the submissions elsewhere"
                )
    return None


def exercise_names(text: str) -> list[str] | None:
    """'01,03' or 'one_head, my_attention' as function names; None if one is not an exercise."""
    names = []
    for word in filter(None, (w.strip() for w in text.split(","))):
        match = [e.function for e in EXERCISES.values() if word in (e.function, e.notebook[:2])]
        if not match:
            return None
        names += match
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.report", description=__doc__.split(
        "\n\n")[0])  # fmt: skip
    parser.add_argument("submissions", type=Path, help="the folder of submitted notebooks")
    parser.add_argument("--out", type=Path, default=Path("report"), help="default: report/")
    parser.add_argument("--pseudonymise", action="store_true",
                        help="stable pseudonyms in place of the students' names")  # fmt: skip
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    parser.add_argument(
        "--exercises", default="", metavar="01,03",
        help="the exercises set, by notebook number or function name (default: those at least "
        "half the class handed in)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    problem = problem_with(args.submissions, args.out)
    if problem:
        print(f"✗ {problem}", file=sys.stderr)
        return 2
    start = time.monotonic()
    shown = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - shown[0] >= 5:
            shown[0] = now
            print(f"  graded {done}/{total} notebooks ({now - start:.0f} s)", flush=True)

    print(f"Grading {args.submissions}: each notebook in its own confined process.", flush=True)
    chosen = exercise_names(args.exercises)
    if chosen is None:
        choices = ", ".join(f"{e.notebook[:2]} ({e.function})" for e in EXERCISES.values())
        print(f"✗ --exercises {args.exercises}: choose from {choices}", file=sys.stderr)
        return 2
    results, assigned = grade.grade(
        args.submissions, workers=args.workers, progress=progress, exercises=chosen
    )
    if not results:
        print(f"✗ no notebooks in {args.submissions}", file=sys.stderr)
        return 2
    notebooks = len({(r.student, r.file) for r in results if r.status not in _NOT_GRADED})
    unreadable = len({(r.student, r.file) for r in results if r.status == "invalid"})
    if args.pseudonymise:
        results = pseudonymised(results, load_key())
    meta = {
        "created": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M"),
        "notebooks": notebooks,
        "unreadable": unreadable,
        "seconds": time.monotonic() - start,
        "protections": sandbox.protections(),
        "pseudonymised": args.pseudonymise,
    }
    paths = write_report(results, assigned, args.out, meta)
    students = len({r.student for r in results})
    right = sum(r.status == "right" for r in results)
    print(f"✓ {students} students, {len(results)} results ({right} right) in "
          f"{meta['seconds']:.0f} s: {paths['html']} (and .csv, .json)")  # fmt: skip
    missing = [what for what, held in meta["protections"].items() if not held]
    if missing:
        print("  not enforced on this machine: " + "; ".join(missing))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
