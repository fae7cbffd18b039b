"""The course as a static site: `python -m course site` (or `make site`) writes site/,
an index and one page per notebook, in course order, that open from any static web server or
straight from the disk (file://), with nothing fetched from elsewhere.

A page is the committed notebook as JupyterLab shows it (nbconvert's `lab` template: markdown,
maths, code, outputs and figures), with MathJax 3 from npm (fetched once, pinned). Its
panels still work: the build runs the notebook's code here, in this process, up to each panel,
asks the panel for the frames of every setting its controls can reach (the same code and checks
as in JupyterLab, `_Panel.static_state`), and the page draws them with the course's own
helpers/panels/js/ (joined, served as attention_view.js); moving a slider, hovering, clicking, the
lines mode, the keyboard and saving the view work as in the notebook. What needs Python (12's
text box) says so, with how to run the notebook for real. The build prints the size of every
page and its time, against budgets.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "site_assets"
WIDGET = "application/vnd.jupyter.widget-view+json"

# budgets the build checks (issue 26): what a course site may weigh and take
MAX_SITE_MB, MAX_PAGE_MB, MAX_BUILD_S = 60, 10, 180
# MathJax 3's TeX-to-SVG bundle: one file with its fonts inside (pinned in site_assets/package.json,
# fetched once with npm): pages typeset without loading fonts, so from file:// too
MATHJAX = ASSETS / "node_modules" / "mathjax" / "es5" / "tex-svg-full.js"


@dataclass
class Page:
    name: str  # 03_per_head_projections
    title: str  # the notebook's first heading
    panels: list[dict]  # what each widget output shows, in order
    seconds: float = 0.0


def plain(text: str) -> str:
    """A heading as plain text (a tab's title, the index): its maths and code marks dropped."""
    for latex, char in ((r"\cdot", "·"), (r"\top", "ᵀ"), (r"\times", "×"), (r"\sqrt", "√")):
        text = text.replace(latex, char)
    text = re.sub(r"\\text\{([^}]*)\}", r"\1", text)
    return re.sub(r"\s+", " ", re.sub(r"[$`{}]", "", text)).strip()


def page_mb(out: Path, name: str) -> float:
    """A page's weight: its HTML and its panels' frames."""
    return sum(f.stat().st_size for f in out.glob(f"{name}.*")) / 1e6


def title_of(notebook: dict) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return plain(line[2:])
    return ""


def widget_outputs(notebook: dict) -> list[tuple[int, int]]:
    """(cell, output) of every widget shown, in order."""
    return [
        (i, j)
        for i, cell in enumerate(notebook["cells"])
        for j, output in enumerate(cell.get("outputs", []))
        if WIDGET in output.get("data", {})
    ]


# --- running a notebook's code here, to rebuild its panels ---------------------------------------


class _Shown:
    """Collects the widgets a cell shows (display() calls, then its last value), in order."""

    def __init__(self):
        self.models: list[str] = []
        self.is_publishing = False  # what IPython's own publisher says while it publishes

    def publish(self, data, metadata=None, **kwargs):
        if WIDGET in data:
            self.models.append(data[WIDGET]["model_id"])

    def clear_output(self, wait=False):
        pass


def run_panels(path: Path) -> tuple[list[object], dict]:
    """Run a notebook's code cells in order, here, and return the widget objects its outputs
    show, in the order of its widget outputs, and the notebook's variables. Raises with the cell
    if one fails."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import ipywidgets
    from IPython.core.interactiveshell import InteractiveShell

    notebook = json.loads(path.read_text(encoding="utf-8"))
    shell = InteractiveShell.instance()
    shell.reset(new_session=True)
    shown = _Shown()
    publisher = shell.display_pub
    shell.display_pub = shown
    registry = ipywidgets.widgets.widget._instances
    os.environ["JPY_SESSION_NAME"] = path.name  # the view's name: saved files say the notebook
    here = Path.cwd()
    widgets = []
    try:
        os.chdir(path.parent)
        for i, cell in enumerate(notebook["cells"]):
            if cell["cell_type"] != "code":
                continue
            shown.models.clear()
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                result = shell.run_cell("".join(cell["source"]), store_history=False, silent=False)
            if not result.success:
                error = result.error_in_exec or result.error_before_exec
                raise RuntimeError(f"{path.name}, cell {i}: {type(error).__name__}: {error}")
            ids = list(shown.models)
            value = result.result
            if isinstance(value, ipywidgets.Widget):
                ids.append(value.model_id)
            expected = sum(WIDGET in o.get("data", {}) for o in cell.get("outputs", []))
            if len(ids) != expected:
                raise RuntimeError(
                    f"{path.name}, cell {i}: the committed notebook shows {expected} widget(s) "
                    f"here and running it showed {len(ids)}: run `make notebooks` first"
                )
            widgets += [registry[m] for m in ids]
    finally:
        os.chdir(here)
        shell.display_pub = publisher
        os.environ.pop("JPY_SESSION_NAME", None)
    return widgets, dict(shell.user_ns)


def panel_state(widget, variables: dict | None = None) -> dict:
    """What a page needs to show one widget: a panel's frames for every setting, or a training
    curve's last line and picture. MiniLM's panel (12) also carries the frames of the sentences
    the notebook measures (its `texts`), which the page offers in place of a free text."""
    from helpers.panels.base import _Panel
    from helpers.panels.induction import TrainingView
    from helpers.panels.predict import Predict
    from helpers.panels.real_heads import RealHeadsExplorer

    if isinstance(widget, RealHeadsExplorer):
        return {
            **widget.static_state(),
            "presets": _sentences(widget, (variables or {}).get("texts", [])),
        }
    if isinstance(widget, _Panel | Predict):
        return widget.static_state()
    if isinstance(widget, TrainingView):
        return {
            "kind": "picture",
            "line": widget.line.value,
            "png": base64.b64encode(widget.picture.value).decode("ascii"),
            "width": widget.picture.layout.width or "",
            "alt": "the training curve: the loss on the first copy and on the repeat, per step",
        }
    raise TypeError(f"the site cannot show a {type(widget).__name__}")


def _sentences(panel, texts: list[str]) -> list[dict]:
    """The panel's frames for its own sentence, then for each of `texts` (every layer and head);
    the panel is left on its own sentence."""
    first, presets = panel.text.value, []
    for text in [first, *texts]:
        panel.text.value = text  # the panel encodes it and computes every frame, as in class
        view = panel.static_state()
        presets.append({"text": text, "buffer": view["buffer"],
                        **{k: view["traits"][k] for k in ("frames", "blocks")}})  # fmt: skip
    panel.text.value = first
    return presets


# --- writing the pages ----------------------------------------------------------------------------


def _placeholder(n: int, text: str) -> dict:
    waiting = html.escape(f"{text} (this page draws it with JavaScript)")
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {
            "text/html": f'<div class="course-site-host" data-course-panel="{n}">'
            f'<p class="course-site-waiting">{waiting}</p></div>',
            "text/plain": text,
        },
    }


def _nav(pages: list[Page], i: int | None, live: str) -> str:
    links = ['<a href="index.html">the course</a>']
    if i is not None:
        if i > 0:
            links.append(
                f'<a href="{pages[i - 1].name}.html">← {html.escape(pages[i - 1].name)}</a>'
            )
        if i + 1 < len(pages):
            links.append(
                f'<a href="{pages[i + 1].name}.html">{html.escape(pages[i + 1].name)} →</a>'
            )
    links.append(f'<span class="course-site-live">{live}</span>')
    return "".join(links)


def live_links(name: str | None, binder: str | None) -> str:
    """How to run a notebook for real: on Binder (when the repository is known), or locally."""
    local = "locally: <code>python3 -m course lab</code> (Windows: <code>py -m course lab</code>)"
    if not binder:
        return f"Run it live {local}, in the course's folder (see its README)"
    target = f"lab/tree/notebooks/{name}.ipynb" if name else "lab/tree/notebooks"
    url = html.escape(f"https://mybinder.org/v2/gh/{binder}/HEAD?urlpath={target}")
    repo = html.escape(f"https://github.com/{binder}")
    return (
        f'Run it live <a href="{url}">on Binder</a> or {local}, from '
        f'<a href="{repo}">the course\'s repository</a>'
    )  # fmt: skip'


def fetch_mathjax() -> Path:
    """MathJax from npm, once (`npm ci` in site_assets/, as package-lock.json pins it)."""
    if not MATHJAX.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit(
                "The site needs MathJax 3.2.2 from npm once, and npm is not installed: install "
                "Node.js (https://nodejs.org, or your system's package manager), then run this "
                "again."
            )
        print("  MathJax 3.2.2 from npm (once) ...", flush=True)
        command = [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"]
        subprocess.run(command, cwd=ASSETS, check=True, stdout=subprocess.DEVNULL)
    return MATHJAX


def copy_assets(out: Path) -> None:
    static = out / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy2(fetch_mathjax(), static / "tex-svg-full.js")
    from helpers.panels.view import view_script

    view = view_script()
    # the same module as a classic script: pages opened from file:// cannot import modules
    classic = view.replace("export default { render };", "window.CourseAttentionView = { render };")
    if classic == view:
        raise RuntimeError("panels/js/events.js no longer ends with `export default { render };`")
    (static / "attention_view.js").write_text(f"(function () {{\n{classic}\n}})();\n", "utf-8")
    shutil.copy2(ROOT / "helpers" / "panels" / "view.css", static / "attention_view.css")
    for name in ("loader.js", "site.css"):
        shutil.copy2(ASSETS / name, static / name)


# Every page says under which terms it may be shared (LICENSE, LICENSE-CONTENT.md).
LICENSE_FOOTER = (
    '<footer class="course-site-license">Text and figures: '
    '<a href="https://creativecommons.org/licenses/by/4.0/">CC BY 4.0</a>; code: MIT. '
    "Credit: \u201cMulti-head attention, from one head to the fused matrix\u201d, its "
    "authors.</footer>"
)

BANNER = (
    "This page is the notebook as it ran when the site was built: its ✓ lines, numbers and "
    "times are that run's, on the machine that built it. Its panels work here; the exercises, "
    "your own text and running code need the notebook itself. {live}"
)


def _exercises(notebook, solutions: bool = True) -> None:
    """Each exercise as a learner meets it: the skeleton of the student copy, its solution folded
    away below (left out with `solutions=False`, for a site given as homework), and the check's
    output replaced by where to run it."""
    import nbformat

    from course.student import stub  # the student copy's own skeletons (make student)

    cells = []
    for n, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            solution = html.escape(cell.source)
            cell.source, cell.outputs, cell.execution_count = stub(cell.source), [], None
            cells.append(cell)
            if not solutions:
                continue
            cells.append(nbformat.v4.new_markdown_cell(
                "<details class=\"course-site-solution\"><summary>A solution (open it after "
                f"trying)</summary><pre><code>{solution}</code></pre></details>"
            ))  # fmt: skip
            continue
        previous = notebook.cells[n - 1] if n else None
        if previous is not None and "solution" in previous.metadata.get("tags", []):
            cell.outputs = [nbformat.v4.new_output(
                "stream", name="stdout",
                text="(The check runs in the notebook itself: it names your mistake and its line.)",
            )]  # fmt: skip
        cells.append(cell)
    notebook.cells = cells


def _links(body: str, names: set[str]) -> str:
    """Links between pages: a notebook named in the text goes to its page; the glossary to its."""
    body = body.replace('href="glossary.md', 'href="glossary.html')

    def page(match: re.Match) -> str:
        name = match.group(1)
        return f'<a href="{name}.html"><code>{name}.ipynb</code></a>' if name in names else match[0]

    body = re.sub(r'href="(\d\d_\w+)\.ipynb"', r'href="\1.html"', body)  # links already there
    return re.sub(r'(?<!">)<code>(\d\d_\w+)\.ipynb</code>', page, body)


def render_page(
    path: Path, page: Page, nav: str, live: str, out: Path, names=(), solutions: bool = True
) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(path, as_version=4)
    for n, (i, j) in enumerate(widget_outputs(notebook)):
        text = "".join(notebook.cells[i].outputs[j]["data"].get("text/plain", ""))
        notebook.cells[i].outputs[j] = nbformat.from_dict(_placeholder(n, text.split(":")[0]))
    _exercises(notebook, solutions)
    banner = BANNER.format(live=live)
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(
        f'<div class="course-site-banner">{banner}</div>'
    ))  # fmt: skip
    exporter = HTMLExporter(
        extra_template_basedirs=[str(ASSETS)],
        template_name="course_site",
        exclude_anchor_links=True,
    )
    panels = f"{page.name}.panels.js"
    resources = {
        "course_nav": nav,
        "course_panels": panels,
        "course_footer": LICENSE_FOOTER,
        "metadata": {"name": page.title},
    }
    body, _ = exporter.from_notebook_node(notebook, resources=resources)
    (out / f"{page.name}.html").write_text(_links(body, set(names)), encoding="utf-8")
    live_js = json.dumps(live)
    data = json.dumps(page.panels, separators=(",", ":"))
    (out / panels).write_text(
        f"window.COURSE_LIVE = {live_js};\nwindow.COURSE_PANELS = {data};\n", encoding="utf-8"
    )


def render_index(pages: list[Page], out: Path, live: str) -> None:
    items = "".join(
        f'<li><a href="{p.name}.html">{html.escape(p.name)}</a>: {html.escape(p.title)}'
        + (f" ({len(p.panels)} panel{'s' * (len(p.panels) > 1)})" if p.panels else "")
        + "</li>"
        for p in pages
    )
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Multi-head attention, from one head to the fused matrix</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="_static/site.css"></head>
<body><nav class="course-site-nav"><span class="course-site-live">{live}</span></nav>
<div class="course-site-index">
<h1>Multi-head attention, from one head to the fused matrix</h1>
<p>A course for learners who know one head of self-attention (or will, after notebook 01) and
want to see what multi-head attention adds, why real code stores the heads in one matrix, and
what heads do. Start at 00 and go in order; terms are in the
<a href="glossary.html">glossary</a>.</p>
<p>Every notebook of the course as it runs, with its outputs and figures. The panels work on
these pages without Python: their maps for every setting of their sliders were computed when the
site was built, by the same code and checks as in the notebook. Exercises and free text need the
notebook itself.</p>
<ol start="0">{items}</ol></div>{LICENSE_FOOTER}</body></html>
"""
    (out / "index.html").write_text(body, encoding="utf-8")


def render_glossary(out: Path, live: str) -> None:
    """notebooks/glossary.md as a page, its notebook names linked to their pages."""
    from nbconvert.filters.markdown import markdown2html

    text = (ROOT / "notebooks" / "glossary.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\((\d\d_\w+)\.ipynb\)", r"](\1.html)", text)
    text = re.sub(r"^explained in: (\d\d_\w+)", r"explained in: [\1](\1.html)", text, flags=re.M)
    body = markdown2html(text)
    (out / "glossary.html").write_text(
        f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0"><title>Glossary</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="_static/site.css"></head>
<body><nav class="course-site-nav"><a href="index.html">the course</a>
<span class="course-site-live">{live}</span></nav>
<div class="course-site-index">{body}</div>{LICENSE_FOOTER}</body></html>
""",
        encoding="utf-8",
    )


def build(
    out: Path = ROOT / "site",
    binder: str | None = None,
    only: list[str] | None = None,
    solutions: bool = True,
):
    """Write the site; returns the pages. `only`: notebook names (tests build a few);
    `solutions=False` leaves the exercises' solutions out."""
    import torch

    if binder and not solutions:  # Binder opens the repository's notebooks: solutions included
        print("  no Binder links with --no-solutions: Binder would open this repository's "
              "notebooks, solutions included", flush=True)  # fmt: skip
        binder = None
    start = time.monotonic()
    torch.set_num_threads(1)
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if only:
        paths = [p for p in paths if p.stem in only or p.name in only]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    copy_assets(out)
    pages = []
    for path in paths:
        began = time.monotonic()
        notebook = json.loads(path.read_text(encoding="utf-8"))
        panels = []
        if widget_outputs(notebook):
            widgets, variables = run_panels(path)
            panels = [panel_state(w, variables) for w in widgets]
        pages.append(Page(path.stem, title_of(notebook), panels, time.monotonic() - began))
    for i, (path, page) in enumerate(zip(paths, pages)):
        began = time.monotonic()
        live = live_links(page.name, binder)
        render_page(path, page, _nav(pages, i, live), live, out, [p.name for p in pages], solutions)
        page.seconds += time.monotonic() - began
        print(
            f"  {page.name:34} {page_mb(out, page.name):5.1f} MB  {page.seconds:5.1f} s", flush=True
        )
    render_index(pages, out, live_links(None, binder))
    render_glossary(out, live_links(None, binder))
    report(out, pages, time.monotonic() - start)
    return pages


def report(out: Path, pages: list[Page], seconds: float) -> None:
    """Print the sizes and the time against the budgets; stop if a size is over. The time is
    said, not enforced: it depends on the machine and on what else runs (18 trains a model)."""
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
    size, name = max((page_mb(out, p.name), p.name) for p in pages)
    line = (
        f"site/: {total:.1f} MB (budget {MAX_SITE_MB}); largest page {name} {size:.1f} MB with its "
        f"panels (budget {MAX_PAGE_MB}); built in {seconds:.0f} s (budget {MAX_BUILD_S})"
    )
    over = total > MAX_SITE_MB or size > MAX_PAGE_MB
    print(("✗ " if over else "✓ ") + line, flush=True)
    if seconds > MAX_BUILD_S:
        print("  (the build took longer than its budget: a slower or busier machine)", flush=True)
    if over:
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course.site", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "site")
    parser.add_argument("--binder", default=os.environ.get("COURSE_BINDER"),
                        help="owner/repository on GitHub, for the pages' Binder links")  # fmt: skip
    parser.add_argument(
        "--no-solutions", action="store_true", help="leave the exercises' solutions out (homework)"
    )
    parser.add_argument("only", nargs="*", help="notebook names (default: all)")
    args = parser.parse_args(argv)
    build(args.out, args.binder, args.only or None, solutions=not args.no_solutions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
