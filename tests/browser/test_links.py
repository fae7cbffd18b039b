"""Every link in every notebook, clicked in JupyterLab where students open them: the student's
copy (what `lab` serves by default, solutions left out) and a copy of notebooks/ (what
`lab --solutions` serves). A link to a file must open it in a tab of its own with no error
dialog, and the server must serve it (not a 404). Links to other sites are only listed: the
tests run offline. No kernel is started (a link opens the same with or without one)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tests.browser.lab import ROOT, jupyter_lab, show

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LINKS = ".jp-Notebook a[href]:not(.jp-InternalAnchorLink)"


def student_copy(tmp: Path) -> Path:
    out = tmp / "student"
    subprocess.run([sys.executable, "-m", "course.student", "--quiet", str(out)],
                   cwd=ROOT, check=True)  # fmt: skip
    return out


def clicked_links(page, base: str, token: str, notebook: str) -> list[tuple[str, str]]:
    """(link text, what went wrong) for each link to this server in the notebook; [] if none."""
    show(page, base, token, notebook)
    page.wait_for_selector(".jp-Notebook .jp-RenderedMarkdown", timeout=60_000)
    page.wait_for_timeout(1500)  # every markdown cell rendered and its links resolved
    for button in page.locator(".jp-toast-button:text-is('No')").all():  # the news pop-up
        button.click()
    links = page.locator(LINKS)
    problems = []
    for i in range(links.count()):
        link = links.nth(i)
        href, text = link.get_attribute("href") or "", link.inner_text().strip()
        url = urllib.parse.urljoin(f"{base}/lab/tree/{notebook}", href)
        if not url.startswith(base):
            continue  # another site: not reachable here
        path = urllib.parse.urlparse(url).path
        target = urllib.parse.unquote(path.split("/files/", 1)[-1])
        try:
            with urllib.request.urlopen(f"{base}{path}?token={token}", timeout=10) as response:
                served = response.status
        except urllib.error.HTTPError as error:
            served = error.code
        if served != 200:
            problems.append((text, f"the server answers {served} for {path}"))
            continue
        link.scroll_into_view_if_needed()
        link.click()
        current = ".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current"
        tab = page.locator(f"{current}:has-text('{Path(target).name}')")
        try:
            tab.wait_for(timeout=10_000)
        except Exception:  # noqa: BLE001 - said below
            problems.append((text, f"clicking it opened no tab for {target}"))
        dialogs = page.locator(".jp-Dialog").all_inner_texts()
        if dialogs:
            problems.append((text, f"clicking it showed a dialog: {dialogs[0][:200]}"))
            page.keyboard.press("Escape")
        page.locator(f".lm-TabBar-tab:has-text('{notebook}')").first.click()
    return problems


def all_links(page, root: Path, notebooks: list[str]) -> dict[str, list]:
    """{notebook: its problems} for a JupyterLab serving `root`, in the session's browser page
    (one Playwright per process: the other browser tests hold it)."""
    found = {}
    page.set_viewport_size({"width": 1280, "height": 720})
    try:
        with jupyter_lab(root, kernels=False) as (base, token):
            for notebook in notebooks:
                problems = clicked_links(page, base, token, notebook)
                if problems:
                    found[notebook] = problems
    finally:
        page.set_viewport_size({"width": 1500, "height": 1000})
    return found


def test_every_link_in_the_students_copy_opens_in_jupyterlab(page, tmp_path):
    assert all_links(page, student_copy(tmp_path), NOTEBOOKS) == {}


def test_the_links_open_from_the_solutions_copy_too(page, tmp_path):
    root = Path(shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks"))
    assert all_links(page, root, NOTEBOOKS[:2]) == {}


def test_a_link_to_a_missing_file_fails_the_check(page, tmp_path):
    """The check itself: with the glossary gone and a link to a file that never was, both
    links are reported with the server's 404."""
    root = Path(shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks"))
    (root / "glossary.md").unlink()
    path = root / NOTEBOOKS[1]
    nb = json.loads(path.read_text(encoding="utf-8"))
    first = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    first["source"] = [*first["source"], "\n\nSee [nowhere](nowhere.md)."]
    path.write_text(json.dumps(nb), encoding="utf-8")
    found = all_links(page, root, NOTEBOOKS[1:2])
    texts = sorted(text for text, why in found.get(NOTEBOOKS[1], []) if "404" in why)
    assert texts == ["glossary", "nowhere"], found
