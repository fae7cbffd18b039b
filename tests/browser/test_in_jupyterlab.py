"""Every notebook in real JupyterLab in Chromium: Run All gives no error; in every panel drawn in
the browser a hovered cell shows the kernel's number (and so does the keyboard's cell, by keys
alone, in 01, 02, 03, 12, 13 and 18), a clicked query is followed through every head, text and
numbers stand out, the lines mode and the saved SVG and PNG show what the maps show, and the panel
fits a 1280x720 projector in Presentation Mode. Its sliders and buttons:
test_in_jupyterlab_controls.py. Screenshots go to .screenshots/."""

import pytest

from tests.browser.lab import (
    SCREENSHOTS,
    file_browser,
    open_and_run_all,
    presentation_mode,
    wait_for_change,
)
from tests.browser.notebooks import (
    DRAWN,
    EXERCISES,
    NOTEBOOKS,
    _opened,
    expected_panel,
    panels_03,
    point,
    press,
    run,
    shot,
    this_panel,
)


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_run_all_shows_no_error(lab, page, notebook):
    """The student copy (`lab`): no error anywhere, and each exercise's check says it is not
    done yet (its skeleton raises NotImplementedError, which the check catches)."""
    open_and_run_all(page, *lab, notebook)
    _opened[id(page)] = notebook
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = page.locator(".jp-OutputArea-output:has-text('Traceback')")
    page.screenshot(path=SCREENSHOTS / f"{shot(notebook)}.png", full_page=True)
    assert errors.count() == 0, errors.first.inner_text()
    assert tracebacks.count() == 0
    assert page.locator(".jp-OutputArea-output").count() > 0  # it did show something
    not_done = page.locator(".jp-OutputArea-output:has-text('○ Not done yet')")
    assert not_done.count() == len(EXERCISES.get(notebook, [])), notebook


def test_18_the_induction_panel_hovers_keys_clicks_and_fits_as_the_others(lab, page):
    """18's panel through the same tests as the panels in DRAWN and KEYBOARD, on one Run All: it
    trains two models (about half a minute), so it runs right after 18's Run All above (the last
    notebook there) and every test below reuses that run."""
    notebook = "18_induction_heads.ipynb"
    test_hover_shows_the_weight_the_kernel_computed(lab, page, notebook)
    test_the_keyboard_alone_reads_weights_and_follows_a_query(lab, page, notebook)
    test_clicking_a_query_follows_its_row_in_every_head(lab, page, notebook)
    test_the_panel_fits_a_1280x720_projector_in_presentation_mode(lab, page, notebook)


@pytest.mark.parametrize("notebook", DRAWN)
def test_hover_shows_the_weight_the_kernel_computed(lab, page, notebook):
    box = run(lab, page, notebook)
    maps = expected_panel(notebook).maps  # (h, T, T)
    h, T, _ = maps.shape
    tooltip = box.locator(".av-tooltip")
    for head, q, k in [(0, 1, 2), (h - 1, T - 1, 0), (h // 2, T // 2, T - 1)]:
        centre = point(box, "cellCenter", head, q, k)
        page.mouse.move(centre["x"], centre["y"])
        tooltip.wait_for(state="visible")
        text = tooltip.inner_text()
        assert text.endswith(f" · {float(maps[head, q, k]):.3f}"), (head, q, k, text)
        assert (tooltip.get_attribute("data-head"), tooltip.get_attribute("data-query")) == (
            str(head), str(q),
        )  # fmt: skip
    box.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_hover.png")
    page.mouse.move(0, 0)


KEYBOARD = ["01_self_attention.ipynb", "02_why_scale.ipynb", "03_per_head_projections.ipynb",
            "12_real_model_heads.ipynb", "13_cross_attention.ipynb"]  # fmt: skip


def active_cell(page) -> int:
    return page.evaluate(
        "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]"
        ".findIndex(c => c.classList.contains('jp-mod-active'))"
    )


@pytest.mark.parametrize("notebook", KEYBOARD)
def test_the_keyboard_alone_reads_weights_and_follows_a_query(lab, page, notebook):
    """Tab from the panel's last button reaches the maps; arrow keys and Page Down move a cell
    whose text (shown, and in the aria-live line) is the kernel's weight; Enter follows its query;
    Escape leaves; no key moves the notebook to another cell."""
    box = run(lab, page, notebook)
    maps = expected_panel(notebook).maps  # (h, T, T)
    h, T, _ = maps.shape
    this_panel(page, notebook).locator("button").first.focus()  # 01: its first query button
    cell = active_cell(page)  # the panel's cell
    page.keyboard.press("ArrowDown")
    assert active_cell(page) == cell  # the panel keeps its arrow keys from JupyterLab
    box.locator("button.av-mode").last.focus()  # the last control before the maps
    page.keyboard.press("Tab")
    assert box.evaluate("el => document.activeElement === el.querySelector('.av-canvas')")
    tooltip, ring, live = (box.locator(s) for s in (".av-tooltip", ".av-ring", ".av-live"))
    assert tooltip.is_visible() and ring.is_visible()

    def place():
        return [int(tooltip.get_attribute(f"data-{d}")) for d in ("head", "query", "key")]

    head, q, k = place()
    moves = [("ArrowDown", 0, 1, 0), ("ArrowRight", 0, 0, 1), ("ArrowUp", 0, -1, 0)]
    if h > 1:
        moves.append(("PageDown", 1, 0, 0))
    for key, dh, dq, dk in moves:
        page.keyboard.press(key)
        head, q, k = min(head + dh, h - 1), min(max(q + dq, 0), T - 1), min(k + dk, T - 1)
        assert place() == [head, q, k], key
        text = tooltip.inner_text()
        assert text.endswith(f" · {float(maps[head, q, k]):.3f}"), (key, text)
        assert live.inner_text() == text  # what a screen reader says
    box.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_keyboard.png")
    if box.get_attribute("data-query") == str(q):  # followed already: Enter would let it go
        page.keyboard.press("ArrowDown" if q < T - 1 else "ArrowUp")
        q = place()[1]
    drawn = box.get_attribute("data-drawn")
    page.keyboard.press("Enter")  # as a click on the row: follow it
    wait_for_change(lambda: box.get_attribute("data-drawn"), drawn)
    assert box.get_attribute("data-query") == str(q)
    page.keyboard.press("Escape")
    assert not box.evaluate("el => document.activeElement === el.querySelector('.av-canvas')")
    assert not ring.is_visible() and not tooltip.is_visible()
    assert active_cell(page) == cell  # no key moved the notebook


def blend(colour: str, white: float = 0.0) -> list[int]:
    """'#rrggbb' -> [r, g, b], mixed with `white` parts of white (the view's dimming)."""
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return [round(c * (1 - white) + 255 * white) for c in rgb]


def near(a, b, tol=3) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a[:3], b[:3]))


@pytest.mark.parametrize("notebook", DRAWN)
def test_clicking_a_query_follows_its_row_in_every_head(lab, page, notebook):
    from helpers.figures.plots import colormap_table

    box = run(lab, page, notebook)
    maps, table = expected_panel(notebook).maps, colormap_table()
    h, T, _ = maps.shape
    was = box.get_attribute("data-query")
    q = 4 if was == "3" else 3
    drawn = box.get_attribute("data-drawn")
    centre = point(box, "labelCenter", q)
    page.mouse.click(centre["x"], centre["y"])
    wait_for_change(lambda: box.get_attribute("data-query") == str(q), False)
    wait_for_change(lambda: box.get_attribute("data-drawn"), drawn)
    for head in (0, h - 1):  # the followed row keeps its colours; every other row fades
        for row, white in ((q, 0.0), (q - 2, 0.55)):
            colour = table[round(float(maps[head, row, 1]) * 255)]
            assert near(point(box, "pixelOf", head, row, 1), blend(colour, white)), (head, row)
    box.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_query.png")
    # the query as it was before (the next test of this notebook starts from it): a second
    # click lets a followed query go; where the query is a control (01), its earlier one clicked
    drawn = box.get_attribute("data-drawn")
    back = centre if was == "-1" else point(box, "labelCenter", int(was))
    page.mouse.click(back["x"], back["y"])
    wait_for_change(lambda: box.get_attribute("data-query") == was, False)
    wait_for_change(lambda: box.get_attribute("data-drawn"), drawn)


def rgb(hex_colour: str) -> list[int]:
    return [int(hex_colour[j : j + 2], 16) for j in (1, 3, 5)]


def test_the_contrast_measure_fails_the_palettes_lightest_colours():
    """The 3:1 asked of lines is not met by every palette colour as it is (so the lines test can
    fail): the lines darken those."""
    from helpers.figures.palette import HEAD_COLOURS

    below = [c for c in HEAD_COLOURS[:8] if contrast(rgb(c), [255, 255, 255]) < 3.0]
    assert below == ["#e9a300", "#bbaea3", "#bda7dc"]


def contrast(a, b) -> float:
    """WCAG 2.2 contrast ratio of two sRGB colours [r, g, b] (1 to 21)."""

    def luminance(rgb):
        lin = [
            c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4
            for c in rgb
        ]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a[:3]), luminance(b[:3])), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# every element of the panel with text of its own: its colour and the first opaque colour behind it
TEXT_COLOURS = """(root) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const opaque = (c) => c.length === 3 || (c.length === 4 && c[3] > 0.99);
  const found = [];
  for (const e of root.querySelectorAll('*')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !e.getClientRects().length || getComputedStyle(e).visibility === 'hidden') continue;
    let b = e, bg = [255, 255, 255];
    for (; b; b = b.parentElement) {
      const c = rgb(getComputedStyle(b).backgroundColor);
      if (opaque(c)) { bg = c.slice(0, 3); break; }
    }
    found.push({ text: e.textContent.trim().slice(0, 40), fg: rgb(getComputedStyle(e).color), bg });
  }
  return found;
}"""

# every weight printed in a cell: its text colour, the cell colour the view means to draw, and
# the colour the canvas holds there
NUMBER_COLOURS = """(el, [h, T]) => {
  const found = [];
  for (let head = 0; head < h; head++)
    for (let q = 0; q < T; q++)
      for (let k = 0; k < T; k++) {
        const colours = el.attentionView.numberColours(head, q, k);
        if (colours) found.push([head, q, k, ...colours, el.attentionView.pixelOf(head, q, k)]);
      }
  return found;
}"""


@pytest.mark.parametrize("notebook", ["01_self_attention.ipynb", "15_shared_kv.ipynb"])
def test_text_numbers_and_the_selected_button_stand_out(lab, page, notebook):
    """Text at >= 4.5:1 against what it sits on (the weights in the cells too, with a query
    followed and the other rows faded), and the selected button >= 4.5:1 against the others."""
    assert contrast([189] * 3, [238] * 3) < 3  # ipywidgets' grey selection: the measure fails it
    assert contrast([255] * 3, [167, 175, 202]) < 4.5  # and white on a faded 0.24, as 01 had it
    box = run(lab, page, notebook)
    panel = this_panel(page, notebook)
    texts = panel.evaluate(TEXT_COLOURS)
    assert len(texts) > 10  # labels, buttons, messages and the table were found
    low = [(t["text"], round(contrast(t["fg"], t["bg"]), 2)) for t in texts]
    assert [t for t in low if t[1] < 4.5] == []
    background = "e => getComputedStyle(e).backgroundColor.match(/[\\d.]+/g).map(Number)"
    on = panel.locator(".widget-toggle-button.mod-active").first.evaluate(background)
    off = panel.locator(".widget-toggle-button:not(.mod-active)").first.evaluate(background)
    assert contrast(on, off) >= 4.5
    h, T, _ = expected_panel(notebook).maps.shape
    numbers = box.evaluate(NUMBER_COLOURS, [h, T])
    if notebook.startswith("01"):  # its cells are large enough to print their weight
        assert len(numbers) == h * T * T and int(box.get_attribute("data-query")) >= 0
    for head, q, k, text, cell, drawn in numbers:
        assert near(drawn, cell), (head, q, k)  # the colour meant is the colour on the canvas
        assert contrast(text, cell) >= 4.5, (head, q, k)


def test_lines_mode_shows_every_head_and_one_alone(lab, page):
    """03's lines at h = 4, 8 and 16: one line per (head, query, key) above 0.01, every head's
    colour on screen (its arcs bend apart from the others') and at least 3:1 against the page
    (the palette's lighter colours darkened: some of them are below 3:1), one legend entry per
    head; a click on an entry shows that head alone (only its lines), a second click all again."""
    notebook = "03_per_head_projections.ipynb"
    box = run(lab, page, notebook)
    box.locator("button.av-mode:text-is('lines (query → key)')").click()
    wait_for_change(lambda: box.get_attribute("data-mode"), "maps")
    h_slider = this_panel(page, notebook).locator(".widget-slider").first
    for h, presses in ((4, 0), (8, 1), (16, 1)):  # h steps over 5-7 and 9-15; 16: two legend rows
        drawn = box.get_attribute("data-drawn")
        press(page, h_slider, "ArrowRight", presses)
        if presses:
            at_h = f"h={h}"
            wait_for_change(lambda: box.get_attribute("data-key").endswith(at_h), False)  # noqa: B023
            wait_for_change(lambda: box.get_attribute("data-drawn"), drawn)
        box.screenshot(path=SCREENSHOTS / f"03_per_head_projections_lines_h{h}.png")
        maps = panels_03(h).maps
        q = int(box.get_attribute("data-query"))
        rows = maps[:, q] if q >= 0 else maps
        assert point(box, "linesDrawn") == int((rows > 0.01).sum()) > 0
        pixels = point(box, "headPixels")
        assert sorted(int(i) for i in pixels) == list(range(h))
        assert min(pixels.values()) >= 30, pixels  # every head's colour can be seen
        drawn = [rgb(point(box, "lineColour", i)) for i in range(h)]
        assert min(contrast(c, [255, 255, 255]) for c in drawn) >= 3.0, drawn
        assert point(box, "legendSize") == h
    centre = point(box, "legendCenter", 15)  # on the legend's second row
    page.mouse.click(centre["x"], centre["y"])  # head 15 alone
    assert list(point(box, "headPixels")) == ["15"]
    assert point(box, "linesDrawn") == int((rows[15] > 0.01).sum())
    box.screenshot(path=SCREENSHOTS / "03_per_head_projections_lines_alone.png")
    page.mouse.click(centre["x"], centre["y"])  # all again
    assert len(point(box, "headPixels")) == 16
    press(page, h_slider, "ArrowLeft", 2)  # back to h = 4 (16 → 8 → 4), and to the maps
    box.locator("button.av-mode:text-is('maps')").click()
    wait_for_change(lambda: box.get_attribute("data-mode"), "lines")


def test_a_view_saves_as_svg_and_png(lab, page):
    """03's panel, maps then lines: 'save SVG' downloads an SVG that parses, with one group per
    head (its title), the words and the colour bar's labels; 'save PNG' a PNG twice the drawn
    size; both named after the notebook, the setting and the mode."""
    import io
    import xml.etree.ElementTree as ET

    from PIL import Image

    notebook = "03_per_head_projections.ipynb"
    box = run(lab, page, notebook)
    words = ["the", "cat", "sat", "on", "a", "warm", "mat"]
    svg_ns = "{http://www.w3.org/2000/svg}"
    for mode, before in (("maps", "lines"), ("lines", "maps")):
        if box.get_attribute("data-mode") != mode:
            label = "maps" if mode == "maps" else "lines (query → key)"
            box.locator(f"button.av-mode:text-is('{label}')").click()
            wait_for_change(lambda: box.get_attribute("data-mode"), before)  # noqa: B023
        h = 4  # the notebook's setting: d_model = 64, h = 4
        with page.expect_download() as saved:
            box.locator("button:text-is('save SVG')").click()
        name = saved.value.suggested_filename
        saved.value.save_as(SCREENSHOTS / name)
        q = box.get_attribute("data-query")  # a followed query (an earlier test's) is named too
        followed = f"_query{q}" if q != "-1" else ""
        assert name == f"03_per_head_projections_d_model64_h4{followed}_{mode}.svg"
        tree = ET.parse(saved.value.path())
        groups = tree.getroot().findall(f".//{svg_ns}g[@class='head']")
        assert [g.get("data-head") for g in groups] == [str(i) for i in range(h)]
        assert [g.find(f"{svg_ns}title").text for g in groups] == [f"head {i}" for i in range(h)]
        texts = [t.text for t in tree.getroot().iter(f"{svg_ns}text")]
        assert all(w in texts for w in words), texts
        if mode == "maps":
            assert {"0", "0.5", "1", "weight"} <= set(texts)
            cells = groups[0].findall(f"{svg_ns}rect")
            assert len(cells) >= len(words) ** 2  # one rectangle per weight, and the title's bar
        else:
            assert len(tree.getroot().findall(f".//{svg_ns}path")) == point(box, "linesDrawn")
        with page.expect_download() as saved:
            box.locator("button:text-is('save PNG')").click()
        assert saved.value.suggested_filename == name.replace(".svg", ".png")
        saved.value.save_as(SCREENSHOTS / saved.value.suggested_filename)
        image = Image.open(io.BytesIO(saved.value.path().read_bytes()))
        size = box.locator("canvas").evaluate("c => [c.clientWidth, parseFloat(c.style.height)]")
        assert image.size == (2 * size[0], 2 * size[1])
    box.locator("button.av-mode:text-is('maps')").click()


def test_hover_on_the_block_matrix_names_the_entry_and_its_head(lab, page):
    from helpers.panels import BlockMatrixExplorer

    box = run(lab, page, "04_block_matrix.ipynb")
    w_q = BlockMatrixExplorer(h=4, d_model=32).maps  # (d_model, d_model), x·W layout
    tooltip = box.locator(".av-tooltip")
    for row, col in [(0, 0), (5, 9), (31, 30)]:
        centre = point(box, "cellCenter", 0, row, col)
        page.mouse.move(centre["x"], centre["y"])
        tooltip.wait_for(state="visible")
        expected = f"W^Q[{row}, {col}] = {float(w_q[row, col]):.3f} · head {col // 8} (its column"
        assert tooltip.inner_text().startswith(expected), tooltip.inner_text()
    box.screenshot(path=SCREENSHOTS / "04_block_matrix_hover.png")
    page.mouse.move(0, 0)


@pytest.mark.parametrize("notebook", ["04_block_matrix.ipynb", *DRAWN])
def test_the_panel_fits_a_1280x720_projector_in_presentation_mode(lab, page, notebook):
    """With the file browser open (JupyterLab's default) and closed: the whole panel on screen at
    once, its table beside the maps, and its text at Presentation Mode's size (the notebook's
    text goes from 14 to 17 px; the panel's 14 px text, on the canvas too, goes with it)."""
    box = run(lab, page, notebook)
    page.set_viewport_size({"width": 1280, "height": 720})
    presentation_mode(page)  # ... which closes the file browser
    try:
        for browser in ("closed", "open"):
            if browser == "open":
                file_browser(page)
            whole = this_panel(page, notebook)
            area = page.locator(".jp-NotebookPanel:visible .jp-WindowedPanel-outer").bounding_box()
            page.wait_for_timeout(300)  # the view redraws for its new width and height
            assert whole.bounding_box()["height"] <= area["height"], browser  # it can fit ...
            whole.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(300)
            below = whole.bounding_box()["y"] + whole.bounding_box()["height"]
            if below > area["y"] + area["height"]:  # the notebook's last cell
                whole.evaluate("el => el.scrollIntoView({block: 'end'})")
                page.wait_for_timeout(300)
            outer, canvas = whole.bounding_box(), box.locator(".av-canvas").bounding_box()
            assert outer["y"] >= area["y"] - 1, browser  # ... and does: all of it on screen at once
            side = box.locator(".av-side").bounding_box()
            page.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_720_presentation_{browser}.png")
            bottom = area["y"] + area["height"]
            assert outer["y"] + outer["height"] <= bottom + 1, (browser, outer)  # no scrolling
            assert side["x"] >= canvas["x"] + canvas["width"] - 1, browser  # table beside the maps
            assert side["x"] + side["width"] <= 1280 and side["y"] + side["height"] <= bottom + 1
            notebook_text = page.evaluate(
                "() => parseFloat(getComputedStyle(document.querySelector("
                "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown p')).fontSize)"
            )
            assert notebook_text == pytest.approx(17, abs=0.5)  # Presentation Mode's text
            sizes = whole.evaluate(
                "el => [...el.querySelectorAll('.av-side td, .av-side div, .av-message, "
                ".widget-label, .widget-label-basic span, .widget-readout, "
                ".widget-toggle-button, input')]"
                ".map(e => parseFloat(getComputedStyle(e).fontSize))"
            )
            assert min(sizes) >= notebook_text - 0.5, (browser, min(sizes))
            assert int(box.get_attribute("data-font")) >= notebook_text - 0.5  # the canvas's text
    finally:
        file_browser(page, False)
        presentation_mode(page, False)
        page.set_viewport_size({"width": 1500, "height": 1000})
    # out of Presentation Mode the panel's text is back at 14 px, the canvas's too
    page.wait_for_timeout(300)
    assert int(box.get_attribute("data-font")) == 14
