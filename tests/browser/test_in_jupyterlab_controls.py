"""Every panel's sliders and buttons in real JupyterLab in Chromium: h steps over what cannot work
(or, switched to every h, an impossible h greys the maps and a valid one restores them), the panel
keeps its height from h = 1 to 16, a dragged slider lands on its frame, and each notebook's own
controls (12's text, 13's source length, 15's K/V heads, 02's d_k, 17's rank bars) redraw what
they change. The notebooks run once for these and test_in_jupyterlab.py's tests together."""

import re

import pytest

from tests.browser.lab import (
    SCREENSHOTS,
    panel,
    wait_for_change,
    wait_for_frame,
)
from tests.browser.notebooks import (
    drag,
    opacity,
    point,
    press,
    run,
    shot,
    this_panel,
)

# notebook: (h steps to an impossible h, steps on to a valid h, the frame key then)
IMPOSSIBLE = {
    "03_per_head_projections.ipynb": (1, 3, "d_model=64|h=8"),  # 64 / 5 cannot work
    "04_block_matrix.ipynb": (1, 3, "d_model=32|h=8"),  # 32 / 5 cannot work
    "11_why_multi_head.ipynb": (1, 1, "h=6"),  # 48 / 5 cannot work
    "13_cross_attention.ipynb": (1, 3, "t_k=7|h=8"),  # 32 / 5 cannot work
    "17_w_qk_and_w_ov.ipynb": (1, 3, "d_model=32|h=8"),  # 32 / 5 cannot work
}


def every_h(page, notebook, on):
    """Turn the panel's 'every h' switch on or off (off: h steps over what cannot work)."""
    switch = this_panel(page, notebook).locator(".widget-checkbox input")
    if switch.is_checked() != on:
        switch.click()
    assert switch.is_checked() == on


@pytest.mark.parametrize("notebook", sorted(IMPOSSIBLE))
def test_by_default_one_press_of_h_goes_to_the_next_h_that_works(lab, page, notebook):
    """The switch off (the default): from h = 4 one ArrowRight draws the next h that divides
    d_model (5 is skipped everywhere), no ✗; one ArrowLeft is back at 4. The wrong object: a
    slider that stops at 5 shows a ✗ and the key h=5."""
    key = IMPOSSIBLE[notebook][2]
    box = run(lab, page, notebook)
    every_h(page, notebook, False)
    h_slider = this_panel(page, notebook).locator(".widget-slider").first
    press(page, h_slider, "ArrowRight")
    wait_for_frame(box, key)
    assert "✗" not in box.locator(".av-message").inner_text()
    assert h_slider.locator(".widget-readout").inner_text() == key.rsplit("h=", 1)[1]
    press(page, h_slider, "ArrowLeft")
    wait_for_change(lambda: box.get_attribute("data-key").endswith("|h=4") or box.get_attribute(
        "data-key") == "h=4", False)  # fmt: skip


@pytest.mark.parametrize("notebook", sorted(IMPOSSIBLE))
def test_an_impossible_setting_greys_the_maps_and_a_valid_one_restores_them(lab, page, notebook):
    to_impossible, to_valid, key = IMPOSSIBLE[notebook]
    box = run(lab, page, notebook)
    every_h(page, notebook, True)  # every h stops, with the ✗ for the impossible ones
    h_slider = this_panel(page, notebook).locator(".widget-slider").first
    press(page, h_slider, "ArrowRight", to_impossible)
    wait_for_change(lambda: box.get_attribute("data-state"), "ok")
    assert box.get_attribute("data-state") == "error" and opacity(box) < 0.5
    message = box.locator(".av-message").inner_text()
    assert "is not divisible by h = 5" in message and "h that work here: 1, 2, " in message
    assert "(Greyed: the last setting that worked.)" in message
    box.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_impossible.png")
    d_model = this_panel(page, notebook).locator(".widget-slider", has_text="d_model")
    if d_model.count():  # jump far away: the kernel drops what it sent for the old d_model
        before = d_model.locator(".widget-readout").inner_text()
        press(page, d_model, "End")  # beyond everything sent ahead, and still impossible
        wait_for_change(lambda: box.get_attribute("data-key").startswith("d_model=" + before), True)
        wait_for_change(lambda: box.get_attribute("data-state"), "pending")
        assert box.get_attribute("data-state") == "error"
        assert point(box, "pixelOf", 0, 1, 1)[3] == 255  # the last good maps, greyed, not blank
        press(page, d_model, "Home")  # back down to the smallest d_model ...
        press(page, d_model, "ArrowRight", int(before) // 8 - 1)  # ... and up to where it was
        wait_for_change(
            lambda: box.get_attribute("data-key").startswith(f"d_model={before}|"), False
        )
    press(page, h_slider, "ArrowRight", to_valid)
    wait_for_change(lambda: box.get_attribute("data-key") == key, False)
    # settled: frames for a new d_model can still arrive, a moment "pending" between two "ok"
    settled = lambda: box.get_attribute("data-state") == "ok" and opacity(box) == 1.0  # noqa: E731
    wait_for_change(settled, False)
    assert "✗" not in box.locator(".av-message").inner_text()
    press(page, h_slider, "ArrowLeft", to_impossible + to_valid)  # back to h = 4
    every_h(page, notebook, False)


@pytest.mark.parametrize("notebook", sorted(IMPOSSIBLE))
def test_the_panel_keeps_its_height_from_h_1_to_16(lab, page, notebook):
    box = run(lab, page, notebook)
    whole, h_slider = (
        this_panel(page, notebook),
        this_panel(page, notebook).locator(".widget-slider").first,
    )
    heights, hints = {}, {}
    every_h(page, notebook, True)  # one h a press, as the presses below count
    for key, presses, h in (("ArrowLeft", 3, 1), ("ArrowRight", 15, 16), ("ArrowLeft", 12, 4)):
        press(page, h_slider, key, presses)
        wait_for_frame(box, lambda key, h=h: key.endswith(f"h={h}"))
        heights[h] = whole.bounding_box()["height"]
        hints[h] = (int(box.get_attribute("data-label-step")), box.locator(".av-hint").inner_text())
        if key == "ArrowRight":
            box.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_h16.png")
    every_h(page, notebook, False)
    assert len(set(heights.values())) == 1, heights  # the tiles shrink, the area stays
    # where the tiles are too small to label every word, the hint says so and how to see them
    for step, hint in hints.values():
        told = re.match(rf"every {step}(nd|rd|th) word labelled: hover a cell for the rest", hint)
        assert bool(told) == (step > 1), hints
    if notebook.startswith("03"):  # 16 tiles of 7 × 7 weights: too small to label all 7 words
        assert hints[16][0] > 1 and hints[1][0] == 1, hints


# the last slider of each panel, dragged with the mouse: what the panel then names
DRAGS = {
    "03_per_head_projections.ipynb": "d_model",
    "04_block_matrix.ipynb#2": "d_k",
    "17_w_qk_and_w_ov.ipynb": "d_model",
}


@pytest.mark.parametrize("notebook", sorted(DRAGS))
def test_a_dragged_slider_lands_on_its_frame(lab, page, notebook):
    box = run(lab, page, notebook)
    slider = this_panel(page, notebook).locator(".widget-slider").last
    readout = slider.locator(".widget-readout")
    before = readout.inner_text()
    drag(page, slider, 40)
    value = wait_for_change(readout.inner_text, before)
    name = DRAGS[notebook]
    # a drag may pass settings not sent ahead: the kernel sends them, the view then shows them
    wait_for_change(lambda: f"{name}={value}" in (box.get_attribute("data-key") or ""), False)
    wait_for_change(lambda: box.get_attribute("data-state") != "pending", False)
    assert f"{name} = {value}" in box.locator(".av-side").inner_text()
    box.screenshot(path=SCREENSHOTS / f"{shot(notebook)}_drag.png")


def test_the_real_model_panel_keeps_working_after_an_empty_text(lab, page):
    box = run(lab, page, "12_real_model_heads.ipynb")
    layer = panel(page).locator(".widget-slider").first
    text = panel(page).locator("input[type='text']")
    text.fill("")
    text.press("Enter")
    message = box.locator(".av-message")
    wait_for_change(lambda: "has no words to attend to" in message.inner_text(), False)
    assert "The maps still show: 'The cat sat on the mat because it was warm.'" in (
        message.inner_text()
    )
    assert "..'" not in message.inner_text() and ".'." not in message.inner_text()
    key = box.get_attribute("data-key")
    press(page, layer, "ArrowRight")
    wait_for_frame(box, lambda new: new != key)
    assert box.get_attribute("data-key").startswith("layer=1|")
    assert "layer 1, head" in box.locator(".av-side").inner_text()
    box.screenshot(path=SCREENSHOTS / "12_real_model_heads_empty.png")
    text.fill("Le chat dort.")
    text.press("Enter")
    wait_for_change(lambda: "has no words" not in message.inner_text(), False)
    press(page, layer, "ArrowLeft")


def test_the_source_slider_narrows_the_cross_attention_maps(lab, page):
    box = run(lab, page, "13_cross_attention.ipynb")
    t_k = panel(page).locator(".widget-slider", has_text="T_k")
    press(page, t_k, "ArrowLeft", 4)
    wait_for_change(lambda: box.get_attribute("data-key") == "t_k=3|h=4", False)
    # four quick presses pass what was sent ahead (two steps): the kernel then sends it
    wait_for_change(lambda: box.get_attribute("data-state") != "pending", False)
    assert box.get_attribute("data-state") == "ok"
    side = box.locator(".av-side").inner_text()
    assert "(1, 4, 4, 3)" in side and "(1, 4, 32)" in side and "✗" not in side
    assert box.locator(".av-message").inner_text() == "4 maps of 4 queries × 3 keys"
    centre = point(box, "cellCenter", 1, 3, 2)  # head 1, the last query, the last key left
    page.mouse.move(centre["x"], centre["y"])
    tooltip = box.locator(".av-tooltip")
    tooltip.wait_for(state="visible")
    assert tooltip.inner_text().startswith("head 1 · query 'assis' → key 'sat' · ")
    box.screenshot(path=SCREENSHOTS / "13_cross_attention_t_k3.png")
    page.mouse.move(0, 0)
    press(page, t_k, "ArrowRight", 4)
    wait_for_change(lambda: box.get_attribute("data-key") == "t_k=7|h=4", False)


def test_the_k_v_buttons_go_from_mha_to_mqa(lab, page):
    box = run(lab, page, "15_shared_kv.ipynb")
    buttons = panel(page).locator(".widget-toggle-button")
    assert buttons.all_inner_texts() == ["8 · MHA", "4 · GQA", "2 · GQA", "1 · MQA"]
    for index, g in enumerate([8, 4, 2, 1]):
        buttons.nth(index).click()
        wait_for_frame(box, f"kv={index}")
        side = box.locator(".av-side").inner_text()
        assert f"KV cache after 7 tokens: {2 * g * 8 * 7 * 4:,} bytes" in side and "✗" not in side
        assert box.locator(".av-side svg rect").count() == 8 + g  # the grouping picture
        box.screenshot(path=SCREENSHOTS / f"15_shared_kv_g{g}.png")
    box.locator("button.av-mode:text-is('lines (query → key)')").click()
    wait_for_change(lambda: box.get_attribute("data-mode"), "maps")
    assert point(box, "legendSize") == 1  # MQA: 8 heads, one colour, one legend entry
    box.locator("button.av-mode:text-is('maps')").click()
    buttons.first.click()
    wait_for_change(lambda: box.get_attribute("data-key") == "kv=0", False)


def test_the_d_k_slider_redraws_scaled_and_unscaled_rows(lab, page):
    from helpers.panels import D_KS, ScalingExplorer

    box = run(lab, page, "02_why_scale.ipynb")
    slider = panel(page).locator(".widget-slider", has_text="d_k")
    readout = slider.locator(".widget-readout")
    expected = ScalingExplorer(d_k=64)
    press(page, slider, "Home")  # d_k = 4, then one step at a time up to 256
    for index, d_k in enumerate(D_KS):
        if index:
            press(page, slider, "ArrowRight")
        wait_for_frame(box, f"choice={index}")
        assert readout.inner_text() == str(d_k)
        side = box.locator(".av-side").inner_text()
        assert f"d_k = {d_k}, 16 keys" in side and "✗" not in side
        expected.d_k_slider.value = index
        maps = expected.maps  # (2, 6, 16): scaled, unscaled
        centre = point(box, "cellCenter", 1, 2, 5)  # the unscaled map, query 2, key 5
        page.mouse.move(centre["x"], centre["y"])
        tooltip = box.locator(".av-tooltip")
        tooltip.wait_for(state="visible")
        assert tooltip.inner_text().endswith(f" · {float(maps[1, 2, 5]):.3f}")
        page.mouse.move(0, 0)
        if d_k in (4, 256):
            box.screenshot(path=SCREENSHOTS / f"02_why_scale_d_k{d_k}.png")
    assert box.locator(".av-message").inner_text() == expected.message
    centre = point(box, "cellCenter", 0, 1, 1)  # hover, then move the slider with the keys
    page.mouse.move(centre["x"], centre["y"])
    tooltip.wait_for(state="visible")
    press(page, slider, "ArrowLeft", 2)  # back to d_k = 64
    wait_for_change(lambda: box.get_attribute("data-key") == "choice=4", False)
    tooltip.wait_for(state="hidden")  # it named a cell of the old setting: gone with it
    page.mouse.move(0, 0)


def test_the_rank_bars_follow_h(lab, page):
    box = run(lab, page, "17_w_qk_and_w_ov.ipynb")
    h_slider = panel(page).locator(".widget-slider").first
    for key, h in (("ArrowRight", 8), ("ArrowLeft", 4)):  # 5-7 stepped over
        press(page, h_slider, key)
        wait_for_frame(box, f"d_model=32|h={h}")
        side = box.locator(".av-side").inner_text()
        d_k = 32 // h
        assert f"rank of each W_QK,i: {d_k}; of each W_OV,i: {d_k} (d_k = {d_k})" in side
        assert box.locator(".av-side svg rect").count() == h + 1 and "✗" not in side
        if h == 8:
            box.screenshot(path=SCREENSHOTS / "17_w_qk_and_w_ov_h8.png")
