"""What the JupyterLab tests share: each notebook opened and run once for all of its tests (`run`),
its panels, the panels the notebooks build made here (`expected_panel`: the kernel's numbers), and
the moves a user makes (a key pressed on a slider, a drag)."""

import functools
import json

from tests.browser.lab import (
    ROOT,
    open_and_run_all,
    panel,
    presentation_mode,
    view,
)

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def _solutions(name: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if "solution" in c["metadata"].get("tags", [])]


# notebook -> its exercises' solutions (the student copy that `lab` serves has skeletons there)
EXERCISES = {name: cells for name in NOTEBOOKS if (cells := _solutions(name))}
_opened: dict[int, str] = {}  # page -> the notebook it has run


def _which(notebook: str) -> tuple[str, int]:
    """'04_block_matrix.ipynb#2' -> the notebook and its panel (0-based): its second panel."""
    name, _, n = notebook.partition("#")
    return name, int(n or 1) - 1


def shot(notebook: str) -> str:
    """A screenshot's name for a notebook, or for one panel of it: 04_block_matrix_panel2."""
    return notebook.replace(".ipynb", "").replace("#", "_panel")


def run(lab, page, notebook):
    """Open and Run All once per notebook; the tests of one notebook share the result. A notebook
    with several panels is named with the panel's number, '04_block_matrix.ipynb#2'."""
    name, n = _which(notebook)
    if _opened.get(id(page)) != name:
        page.set_viewport_size({"width": 1500, "height": 1000})
        presentation_mode(page, False)
        open_and_run_all(page, *lab, name)
        _opened[id(page)] = name
    # the whole panel on screen, controls and maps: a hover or a drag lands anywhere in it. After
    # a long Run All (18 trains for half a minute) JupyterLab may still scroll to its active cell
    # and undo a first scroll, so scroll until the panel's top is really near the screen's top.
    target = panel(page, n)
    for _ in range(50):
        target.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(100)
        top = target.bounding_box()["y"]
        if 0 <= top < 200:
            break
    return view(page, n)


def this_panel(page, notebook):
    return panel(page, _which(notebook)[1])


def expected_panel(notebook):
    """The same panel the notebook builds, made here: its maps are the kernel's numbers."""
    from helpers import panels

    if notebook.startswith("01"):
        return panels.QueryExplorer(d_model=16, d_k=8, seed=0, gain=1.0)
    if notebook.startswith("02"):
        return panels.ScalingExplorer(d_k=64)
    if notebook.startswith("03"):
        return panels.HeadsExplorer(h=4, d_model=64)
    if notebook == "04_block_matrix.ipynb#2":
        return panels.ParameterExplorer(h=4, d_k=16, d_model=32)
    if notebook.startswith("11"):
        return panels.OneVsManyExplorer(h=4, d_model=48)
    if notebook.startswith("13"):
        return panels.CrossAttentionExplorer(h=4, d_model=32)
    if notebook.startswith("15"):
        return panels.SharedKVExplorer(h=8, d_model=64)
    if notebook.startswith("17"):
        return panels.CircuitsExplorer(h=4, d_model=32)
    if notebook.startswith("18"):
        return panels.InductionExplorer(_trained_copier())
    if notebook.startswith("19"):
        return panels.OnlineSoftmaxExplorer(d_model=32, h=4, head=1, query=3, block=2, step=4)
    from helpers.pretrained import load_minilm

    text = "The cat sat on the mat because it was warm."
    return panels.RealHeadsExplorer(load_minilm(), text, layer=0, head=2)


@functools.cache
def _trained_copier():
    """18's model, trained here as its notebook trains it (seeded: the same weights)."""
    from helpers.induction import train_copying

    return train_copying(num_layers=2, steps=1500, seed=0).model


DRAWN = [
    "01_self_attention.ipynb",
    "02_why_scale.ipynb",
    "03_per_head_projections.ipynb",
    "04_block_matrix.ipynb#2",
    "11_why_multi_head.ipynb",
    "12_real_model_heads.ipynb",
    "13_cross_attention.ipynb",
    "15_shared_kv.ipynb",
    "17_w_qk_and_w_ov.ipynb",
    "19_online_softmax.ipynb",
]


def point(box, what, *args):
    return box.evaluate(f"(el, args) => el.attentionView.{what}(...args)", list(args))


def panels_03(h):
    from helpers import panels

    panel = panels.HeadsExplorer(h=4, d_model=64)
    panel.h_slider.value = h
    return panel


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


def opacity(box) -> float:
    return float(box.locator(".av-canvas").evaluate("c => getComputedStyle(c).opacity"))
