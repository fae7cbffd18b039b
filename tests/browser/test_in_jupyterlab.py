"""Every notebook in real JupyterLab in Chromium: Run All gives no error; the sliders, moved with
the keyboard and with the mouse, redraw the picture and the shape table; an impossible setting
shows its message. Screenshots go to .screenshots/ (ignored by git)."""

from pathlib import Path

import pytest

from tests.browser.lab import ROOT, SCREENSHOTS, open_and_run_all, panel, wait_for_change

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_run_all_shows_no_error(lab, page, notebook):
    open_and_run_all(page, *lab, notebook)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = page.locator(".jp-OutputArea-output:has-text('Traceback')")
    page.screenshot(path=SCREENSHOTS / f"{Path(notebook).stem}.png", full_page=True)
    assert errors.count() == 0, errors.first.inner_text()
    assert tracebacks.count() == 0
    assert page.locator(".jp-OutputArea-output").count() > 0  # it did show something


def state(box):
    """What the panel shows: (picture source, table and message text)."""
    picture = box.locator("img").first.get_attribute("src")
    return picture, " ".join(box.locator(".widget-html").all_inner_texts())


def press(page, slider, key, times=1):
    slider.locator(".noUi-handle").focus()
    for _ in range(times):
        page.keyboard.press(key)


def drag(page, slider, dx):
    box = slider.locator(".noUi-handle").bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx, y, steps=5)
    page.mouse.up()


# notebook: (h keyboard steps to an impossible h, steps on to a valid h, text that then shows)
SLIDERS = {
    "02_per_head_projections.ipynb": (1, 3, "(64, 8)"),  # h 4 -> 5 (64/5) -> 8: W_i (64, 8)
    "03_block_matrix.ipynb": (1, 3, "(32, 4)"),  # h 4 -> 5 (32/5) -> 8: W_i (32, 4)
    "04_why_multi_head.ipynb": (1, 1, "(1, 6, 7, 7)"),  # h 4 -> 5 (48/5) -> 6
    "05_learner_questions.ipynb": (None, 1, "(1, 7, 80)"),  # any d_k works: h 4 -> 5, 5·16
}


# how a panel names a slider's value: in its table caption, or in its message
SAYS = {
    "h (heads)": ["h = {}, ", "num_heads={}:"],
    "d_model": ["d_model = {}, ", "d_model = {}\n", "d_model={} "],
    "d_k": ["d_k = {}, "],
}


@pytest.mark.parametrize("notebook", sorted(SLIDERS))
def test_sliders_redraw_picture_and_shapes(lab, page, notebook):
    to_impossible, to_valid, shown = SLIDERS[notebook]
    open_and_run_all(page, *lab, notebook)
    box = panel(page)
    box.scroll_into_view_if_needed()
    h_slider, *others = box.locator(".widget-slider").all()
    picture, text = state(box)
    if to_impossible is not None:  # keyboard to an h that does not divide d_model
        press(page, h_slider, "ArrowRight", to_impossible)
        message = wait_for_change(lambda: state(box)[1], text)
        assert "is not divisible by" in message and "Head counts that work" in message
        box.screenshot(path=SCREENSHOTS / f"{Path(notebook).stem}_impossible.png")
    press(page, h_slider, "ArrowRight", to_valid)
    new_picture = wait_for_change(lambda: state(box)[0], picture)
    wait_for_change(lambda: shown in state(box)[1], False)
    assert "✗" not in state(box)[1]
    box.screenshot(path=SCREENSHOTS / f"{Path(notebook).stem}_keyboard.png")
    # the mouse: drag the last slider (d_model or d_k; in 04 the h slider) to the right
    slider = others[-1] if others else h_slider
    label = slider.locator(".widget-label").inner_text()
    readout = slider.locator(".widget-readout")
    before = readout.inner_text()
    drag(page, slider, 40)
    wait_for_change(readout.inner_text, before)

    # a drag sends the values it passes through: wait until the panel speaks of where it stopped,
    # in its table (a setting that works) or in its message (one that cannot)
    def names_value():
        value, text = readout.inner_text(), state(box)[1]
        return any(form.format(value) in text for form in SAYS[label])

    wait_for_change(names_value, False)
    picture, text = state(box)
    assert picture != new_picture or "is not divisible by" in text
    box.screenshot(path=SCREENSHOTS / f"{Path(notebook).stem}_mouse.png")


def test_real_model_panel_follows_layer_head_and_text(lab, page):
    open_and_run_all(page, *lab, "07_real_model_heads.ipynb")
    box = panel(page)
    box.scroll_into_view_if_needed()
    layer, head = box.locator(".widget-slider").all()
    pictures = box.locator("img")
    mosaic, enlarged = pictures.nth(0).get_attribute("src"), pictures.nth(1).get_attribute("src")
    press(page, head, "ArrowRight")
    wait_for_change(lambda: pictures.nth(1).get_attribute("src"), enlarged)
    press(page, layer, "ArrowRight")
    wait_for_change(lambda: pictures.nth(0).get_attribute("src"), mosaic)
    assert "layer 1, head 3" in state(box)[1]
    text = box.locator("input[type='text']")
    text.fill("")
    text.press("Enter")
    wait_for_change(lambda: "has no words to attend to" in state(box)[1], False)
    box.screenshot(path=SCREENSHOTS / "07_real_model_heads_empty.png")
