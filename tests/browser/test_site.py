"""The static site in Chromium, with no kernel anywhere: every page loads with no console error
and no request beyond its own folder, from a plain static server and from file://; maths are
typeset; a panel's controls move through their range, and the weights a hovered cell shows equal
what helpers computes for that setting; buttons, the lines mode and saving work as in JupyterLab;
what needs Python says so."""

import pytest

from course import site
from helpers.panels import HeadsExplorer, SharedKVExplorer
from tests.browser.lab import SCREENSHOTS, static_server


@pytest.fixture(scope="module")
def built(whole_site):
    """The whole site, as `make site` builds it (conftest's whole_site, shared with
    tests/test_site.py)."""
    return whole_site[0]


def every_page(built) -> list[str]:
    names = sorted(p.stem for p in built.glob("*.html"))
    assert len(names) == len(list((site.ROOT / "notebooks").glob("*.ipynb"))) + 2  # index, glossary
    return names


@pytest.fixture(scope="module")
def server(built):
    with static_server(built) as url:
        yield url


@pytest.fixture
def browser(page):
    """The session's Chromium page (Playwright's sync API allows one at a time) at 1280x720,
    recording console errors and every request outside the site."""
    from tests.browser import test_in_jupyterlab

    page.set_viewport_size({"width": 1280, "height": 720})
    page.errors, page.outside, page.home = [], [], ""

    def outside(request):
        if not request.url.startswith((page.home, "data:", "blob:")):
            page.outside.append(request.url)

    handlers = {
        "console": lambda m: page.errors.append(m.text) if m.type == "error" else None,
        "pageerror": lambda e: page.errors.append(str(e)),
        "request": outside,
    }
    for event, handler in handlers.items():
        page.on(event, handler)
    yield page
    for event, handler in handlers.items():
        page.remove_listener(event, handler)
    test_in_jupyterlab._opened.pop(id(page), None)  # the page shows the site now, not a notebook


def open_page(page, base: str, name: str):
    page.home = base
    page.goto(f"{base}/{name}.html")
    if name not in ("index", "glossary"):
        page.wait_for_function("window.COURSE_PANELS_READY !== undefined", timeout=20_000)
    page.wait_for_function("!window.MathJax || (MathJax.startup && MathJax.startup.promise)")
    page.evaluate("() => window.MathJax ? MathJax.startup.promise.then(() => true) : true")
    return page.locator(".course-site-view")


@pytest.mark.parametrize("where", ["server", "file"])
def test_every_page_loads_with_no_error_and_nothing_from_elsewhere(browser, server, built, where):
    base = server if where == "server" else built.as_uri()
    for name in every_page(built):
        views = open_page(browser, base, name)
        for i in range(views.count()):
            assert views.nth(i).get_attribute("data-state") == "ok", (name, i)
        assert browser.locator(".course-site-waiting").count() == 0, name
    assert browser.errors == [] and browser.outside == []
    browser.goto(f"{base}/03_per_head_projections.html")
    browser.wait_for_function("document.querySelectorAll('mjx-container').length > 30")
    assert "$W" not in browser.inner_text("body")  # typeset, not left as TeX


def hover_weight(page, view, head, q, k) -> str:
    centre = view.evaluate(f"el => el.attentionView.cellCenter({head}, {q}, {k})")
    page.mouse.move(centre["x"], centre["y"])
    tooltip = view.locator(".av-tooltip")
    tooltip.wait_for(state="visible")
    return tooltip.inner_text().rsplit(" · ", 1)[1]


def test_sliders_move_through_their_range_and_show_what_helpers_computes(browser, server):
    view = open_page(browser, server, "03_per_head_projections")
    view.scroll_into_view_if_needed()
    h, d_model = (browser.locator(f"input[data-control='{n}']") for n in ("h", "d_model"))
    live = HeadsExplorer(h=4, d_model=64)
    for key, setting in [("End", (16, 64)), ("Home", (1, 64)), ("ArrowRight", (2, 64))]:
        h.focus()
        h.press(key)
        assert view.get_attribute("data-key") == f"d_model={setting[1]}|h={setting[0]}"
        live.h_slider.value = setting[0]
        maps = live.maps
        assert view.get_attribute("data-state") == "ok"
        for head, q, k in [(0, 1, 2), (setting[0] - 1, 6, 0)]:
            assert hover_weight(browser, view, head, q, k) == f"{float(maps[head, q, k]):.3f}"
    h.focus()
    h.press("ArrowRight")  # h = 3 at d_model = 64 cannot work: by default h steps on to 4
    browser.wait_for_function(
        "() => document.querySelector(\"input[data-control='h']\").value === '4'"
    )
    assert view.get_attribute("data-key") == "d_model=64|h=4"
    browser.locator("input[data-control='every_h']").check()  # every h: 3 stops, with its ✗
    h.focus()
    h.press("ArrowLeft")  # h = 3 at d_model = 64: impossible, said so, the last maps greyed
    assert view.get_attribute("data-state") == "error"
    assert "not divisible by h = 3" in view.locator(".av-message").inner_text()
    d_model.focus()
    d_model.press("End")
    assert view.get_attribute("data-key") == "d_model=512|h=3"
    assert browser.locator("output.widget-readout").nth(1).inner_text() == "512"
    view.screenshot(path=SCREENSHOTS / "site_03_panel.png")
    assert browser.errors == []


def test_every_panel_s_controls_reach_both_ends_of_their_range(browser, server, built):
    """On every page, each slider to its end and back to its start, each button clicked: every
    view shows maps or says why it cannot (an impossible h, in its message), never nothing."""
    moved = {}
    for name in every_page(built):
        views = open_page(browser, server, name)
        if not views.count():
            continue
        moved[name] = 0
        for control in browser.locator("input[data-control]").all():
            for key in ("End", "Home"):
                control.focus()
                control.press(key)
                moved[name] += 1
                _every_view_drawn_or_says_why(views, (name, control.get_attribute("data-control")))
        for button in browser.locator("button.widget-toggle-button").all():
            button.click()
            moved[name] += 1
            _every_view_drawn_or_says_why(views, (name, button.inner_text()))
    assert len(moved) >= 10 and min(moved.values()) >= 2, moved  # every panel's controls found
    assert browser.errors == [] and browser.outside == []


def _every_view_drawn_or_says_why(views, where) -> None:
    for i in range(views.count()):
        state = views.nth(i).get_attribute("data-state")
        assert state in ("ok", "error"), (where, i, state)
        if state == "error":
            assert views.nth(i).locator(".av-message").inner_text().strip(), (where, i)


def test_buttons_lines_and_saving_work_as_in_jupyterlab(browser, server):
    view = open_page(browser, server, "15_shared_kv")
    view.scroll_into_view_if_needed()
    buttons = browser.locator("button.widget-toggle-button")
    live = SharedKVExplorer(h=8, d_model=64)
    last = buttons.count() - 1
    buttons.nth(last).click()  # one K/V head for all (MQA)
    assert view.get_attribute("data-key") == f"kv={last}"
    assert buttons.nth(last).get_attribute("aria-pressed") == "true"
    live.kv_buttons.index = last
    assert hover_weight(browser, view, 7, 2, 1) == f"{float(live.maps[7, 2, 1]):.3f}"
    view.locator("button.av-mode:text-is('lines (query → key)')").click()
    assert view.get_attribute("data-mode") == "lines"
    assert view.evaluate("el => el.attentionView.legendSize()") == 1  # the 8 heads share K and V
    svg = view.evaluate("el => el.attentionView.exportSvg()")
    assert svg.count('<g class="head"') == 8
    assert (
        view.evaluate("el => el.attentionView.exportName('svg')")
        == f"15_shared_kv_kv{last}_lines.svg"
    )
    assert browser.errors == []


def test_what_needs_python_says_so(browser, server):
    view = open_page(browser, server, "12_real_model_heads")
    text = browser.locator("input.course-site-frozen")
    assert (
        text.is_disabled() and text.input_value() == "The cat sat on the mat because it was warm."
    )
    assert "needs the live notebook" in browser.locator(".course-site-note").inner_text()
    from helpers.pretrained import load_minilm

    second = browser.locator("button[data-preset='2']")  # one of the notebook's sentences
    second.click()
    assert text.input_value() == second.get_attribute("title")
    encoded = load_minilm()(second.get_attribute("title"))
    T = len(encoded.tokens[0])
    assert view.locator(".av-message").inner_text().startswith(f"{T} tokens; layer 0, head 2")
    maps = encoded.attentions[0, 0]  # layer 0: (h, T, T)
    assert hover_weight(browser, view, 2, T - 1, 0) == f"{float(maps[2, T - 1, 0]):.3f}"
    layer = browser.locator("input[data-control='layer']")
    layer.focus()
    layer.press("ArrowRight")
    assert view.get_attribute("data-key") == "layer=1|head=2"
    assert view.get_attribute("data-state") == "ok"
    canvas = view.locator("canvas")
    canvas.focus()
    canvas.press("PageDown")  # the next head, picked on the map: the head slider follows
    assert view.get_attribute("data-key") == "layer=1|head=3"
    head = browser.locator("input[data-control='head']")
    assert head.input_value() == "3" and head.get_attribute("aria-valuetext") == "3"


def test_a_prediction_is_judged_on_the_page_as_in_the_notebook(browser, server):
    """01's "predict, then run" box with no kernel: a wrong shape is told what it was and the hint
    (never the answer), text that is no shape is asked again, the right shape gets ✓, and "show
    the answer" shows it; each message equals what helpers.panels.predict.judge says."""
    from helpers.panels.predict import judge

    open_page(browser, server, "01_self_attention")
    box = browser.locator(".course-predict").first
    box.scroll_into_view_if_needed()
    typed, feedback = (
        box.locator("input.course-predict-input"),
        box.locator(".course-predict-feedback"),
    )
    hint = "One score for each (query, key) pair."
    for text in ["(1, 7, 8)", "(1, 7)", "(B, T, T)", "1 x 7 x 7"]:
        typed.fill(text)
        typed.press("Enter")
        assert feedback.inner_text() == judge("shape", (1, 7, 7), text, hint)[1], text
    assert feedback.inner_text() == "✓ Right: (1, 7, 7)."
    box.locator("button", has_text="show the answer").click()
    assert feedback.inner_text() == "The answer: (1, 7, 7)."
    assert browser.errors == []
