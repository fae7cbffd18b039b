"""The browser tests' helpers: JupyterLab in Debian's Chromium (from course.browser, which the bench
shares), and what the tests wait for and switch: a drawn frame, Presentation Mode, the file
browser."""

from __future__ import annotations

import time

from course.browser import (  # noqa: F401 - the tests import them from here
    CHROMIUM,
    CHROMIUM_FLAGS,
    ROOT,
    SCREENSHOTS,
    chromium_page,
    free_port,
    jupyter_lab,
    leave,
    menu,
    open_and_run_all,
    panel,
    show,
    shut_down_kernels,
    static_server,
)


def wait_for_change(read, before, timeout: float = 10.0):
    """Poll read() until it differs from `before`; return the new value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if value != before:
            return value
        time.sleep(0.02)
    raise AssertionError(f"nothing changed within {timeout} s (still {before!r:.80})")


def wait_for_frame(box, key, timeout: float = 10.0) -> None:
    """Wait until the view draws its own frame for a setting: data-key `key` (or `key(data_key)`
    true) and data-state "ok". Not the key alone: while a setting's frame is on its way the view
    already carries the new key and shows the last frame it had, greyed ("pending")."""
    matches = key if callable(key) else key.__eq__

    def drawn():
        state = box.get_attribute("data-state")
        return state == "ok" and matches(box.get_attribute("data-key") or "")

    wait_for_change(drawn, False, timeout)


def presentation_mode(page, on: bool = True) -> None:
    """JupyterLab's View ▸ Presentation Mode, as a teacher projects a notebook."""
    state = "() => document.querySelector('.jp-LabShell.jp-mod-presentationMode') !== null"
    is_on = page.evaluate(state)
    if is_on != on:
        page.click(".lm-MenuBar-itemLabel:text-is('View')")
        page.click(".lm-Menu-itemLabel:text-is('Appearance')")
        page.click(".lm-Menu-itemLabel:text-is('Presentation Mode')")
        page.wait_for_function(f"() => ({state})() === {str(on).lower()}")
    if on:  # a teacher projects the notebook alone: the file browser closed
        current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if current.count():
            current.first.click()
            page.wait_for_function(
                "() => !document.querySelector('.jp-SideBar.jp-mod-left .lm-mod-current')"
            )


def file_browser(page, on: bool = True) -> None:
    """Open (or close) JupyterLab's file browser in the left side bar."""
    tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id='filebrowser']")
    if ("lm-mod-current" in (tab.get_attribute("class") or "")) != on:
        tab.click()
    page.wait_for_selector(".jp-FileBrowser", state="visible" if on else "hidden")


def view(page, n: int = 0):
    """The n-th AttentionView (maps drawn in the browser) in the notebook's outputs."""
    return page.locator(".jp-OutputArea-output .attention-view:visible").nth(n)
