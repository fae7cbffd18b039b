"""JupyterLab from the project's own .venv, driven in Debian's Chromium with Playwright: a server
on a free port, a page, a notebook opened and run, its panels. For the bench (`course.bench`) and
the browser tests (tests/browser/). Never runs `playwright install`: it launches /usr/bin/chromium
(apt-get install chromium).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")  # override: tests of the skip
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / ".screenshots"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_lab(root_dir: Path | None = None, timeout: float = 90, kernels: bool = True):
    """Start JupyterLab on a free loopback port with a token; yield (base_url, token); stop it
    (the whole process group) whatever happens. By default it serves a copy of notebooks/, so
    JupyterLab's autosave can never change the committed notebooks that nbval then checks.
    kernels=False: a notebook opened starts no kernel (JupyterLab's notebook_starts_kernel), for
    tests that only read what the notebook shows."""
    made = []  # the temporary folders made here, removed at the end
    if root_dir is None:
        made.append(Path(tempfile.mkdtemp(prefix="course-notebooks-")))
        root_dir = Path(shutil.copytree(ROOT / "notebooks", made[-1] / "notebooks"))
    port, token = free_port(), secrets.token_hex(16)
    SCREENSHOTS.mkdir(exist_ok=True)
    log = open(SCREENSHOTS / "jupyterlab.log", "w")  # noqa: SIM115 - closed below
    command = [
        str(ROOT / ".venv" / "bin" / "jupyter"), "lab", "--no-browser", "--allow-root",
        "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
        "--LabApp.news_url=None", f"--LabApp.notebook_starts_kernel={kernels}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: `show` opens files with it
    ]  # fmt: skip
    # fresh settings and workspaces each time: nothing a test (or a teacher) left on this machine,
    # such as a slideshow left running, changes what the next test sees
    state = Path(tempfile.mkdtemp(prefix="course-lab-state-"))
    made.append(state)
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(state / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"),
    )
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {log.name}") from None
                time.sleep(0.3)
        yield base, token
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def static_server(directory: Path):
    """A plain static web server of a folder (the site), quiet, on a free port: yields its URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 64  # a page asks for many files at once (default: 5)

    handler = functools.partial(Quiet, directory=str(directory))
    httpd = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@contextlib.contextmanager
def chromium_page(width: int = 1500, height: int = 1000):
    """A Playwright page in Debian's Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def menu(page, top: str, item: str) -> None:
    """Click a JupyterLab menu item by its exact label."""
    page.click(f".lm-MenuBar-itemLabel:text-is('{top}')")
    page.click(f".lm-Menu-itemLabel:text-is('{item}')")


def shut_down_kernels(base: str, token: str) -> None:
    """End every session of the server, and so its kernel."""
    import json

    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as answer:
        sessions = json.load(answer)
    for session in sessions:
        request = urllib.request.Request(
            f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE"
        )
        with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=30):
            pass


def leave(page, base: str, token: str) -> None:
    """Before a page opens another notebook: leave the one it shows and end its kernel, which
    JupyterLab would keep running (dozens of idle kernels over a test run)."""
    if page.url.startswith(base):
        page.goto("about:blank")
        shut_down_kernels(base, token)


# Every document closed as if it had been saved (a notebook that ran is changed, and closing it
# would ask "Save your work?"), then JupyterLab's default layout, as a page opened with ?reset has.
_CLOSE_ALL = """async () => {
    const app = window.jupyterapp;
    for (const widget of [...app.shell.widgets('main')]) {
        if (widget.context) widget.context.model.dirty = false;
        widget.close();
    }
    await app.commands.execute('application:reset-layout');
}"""


def show(page, base: str, token: str, notebook: str) -> None:
    """Show `notebook` (a path under the server's root) alone in JupyterLab, in the default
    layout, with no kernel left from the notebooks before. The first time, by loading JupyterLab
    with ?reset; after that, in the JupyterLab the page already shows, through its own commands:
    every tab closed, every kernel ended, the file opened as the file browser opens it. A page
    load costs the browser about three times the CPU (3.3 s against 1.2 s a notebook, measured on
    the 2-core test machine), and the browser tests open notebooks about 50 times."""
    loaded = page.url.startswith(base) and page.evaluate("() => !!window.jupyterapp")
    if not loaded:
        leave(page, base, token)
        page.goto(f"{base}/lab/tree/{notebook}?reset&token={token}")
        return
    page.evaluate(_CLOSE_ALL)
    shut_down_kernels(base, token)
    # not awaited: the command's promise waits for more than the tab (the kernel's session; with
    # no kernel, seconds more on a busy machine), and the callers wait for what they need
    page.evaluate("path => { window.jupyterapp.commands.execute('docmanager:open', {path}); }",
                  notebook)  # fmt: skip
    name = notebook.rsplit("/", 1)[-1]
    current = ".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current"
    page.locator(f"{current}:has-text('{name}')").wait_for()


def open_and_run_all(page, base: str, token: str, notebook: str, timeout_ms: int = 600_000):
    """Open a notebook, clear its stored outputs, Run All, and wait until every code cell has run
    (or one printed an error) and the kernel is idle. The time limit is a guard, not a measure:
    18 trains two models live, and beside other test processes (a parallel run, torch on one
    thread) its Run All took over 300 s on the 2-core test machine."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    show(page, base, token, notebook)
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout_ms
    )
    for button in page.locator("button:text-is('No')").all():  # the news pop-up, if it shows
        button.click()
    menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
        ".every(p => !/\\[\\d+\\]/.test(p.textContent))",
        polling=100,
    )
    # every cell is queued ([*]) at once when Run All is taken; on a busy machine a menu click
    # was seen to go nowhere (the Run All then waited its whole limit), so it is tried again
    queued = (
        "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
        ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"
    )
    for _ in range(3):
        menu(page, "Run", "Run All Cells")
        try:
            page.wait_for_function(queued, timeout=30_000, polling=100)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")  # a menu left open
    else:
        raise AssertionError(f"Run All did not start in {notebook} after three tries")
    # done when every cell has run, or when one printed an error (Run All stops there, and the
    # cells after it would never get a number)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
        ".every(p => /\\[\\d+\\]/.test(p.textContent)) || [...document.querySelectorAll("
        "'.jp-OutputArea-output[data-mime-type=\"application/vnd.jupyter.stderr\"]')]"
        ".some(o => /Traceback|Error/.test(o.textContent))",
        timeout=timeout_ms,
        polling=250,  # not every frame: a page polled 60 times a second keeps a core busy
    )
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout_ms
    )


def panel(page, n: int = 0):
    """The n-th widget panel (controls and what they change) in the notebook's outputs."""
    return (
        page.locator(".jp-OutputArea-output .widget-vbox:visible:not(.course-training)")
        .filter(has=page.locator(".attention-view, img"))
        .nth(n)
    )
