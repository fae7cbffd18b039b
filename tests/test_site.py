"""course.site: the static site's pages carry every notebook's cells and outputs, nothing from
elsewhere, and each panel's frames for every setting its controls reach, equal to what the live
panel computes; a training curve as its last picture; budgets that stop the build. Built here for
four notebooks (the whole site: `make site`, 82 s; the browser side: tests/browser/test_site.py)."""

import base64
import json
import re

import numpy as np
import pytest
import torch

from course import site
from helpers.panels import HeadsExplorer

PAGES = sorted(p.stem for p in (site.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def built(whole_site):
    return whole_site


def panels_of(out, name):
    text = (out / f"{name}.panels.js").read_text(encoding="utf-8")
    return json.loads(re.search(r"window\.COURSE_PANELS = (.*);\n", text).group(1))


def maps_of(panel, key):
    """The (h, T, T) weights a page holds for one setting, decoded as the browser does."""
    traits = panel["traits"]
    block = traits["blocks"][traits["frames"][key]["block"]]
    data = np.frombuffer(base64.b64decode(panel["buffer"]), dtype=np.float32)
    chunk = data[block["offset"] : block["offset"] + block["size"]]
    return torch.from_numpy(chunk.copy()).view(block["h"], len(block["rows"]), len(block["cols"]))


def test_the_index_lists_the_pages_in_course_order_and_every_page_exists(built):
    out, pages = built
    index = (out / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'href="(\d\d_\w+)\.html"', index) == PAGES
    for name in PAGES:
        page = (out / f"{name}.html").read_text(encoding="utf-8")
        assert pages[name].title and pages[name].title in page


def test_pages_load_nothing_from_elsewhere(built):
    out, _ = built
    for name in PAGES:
        page = (out / f"{name}.html").read_text(encoding="utf-8")
        loaded = re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="([^"]+)"', page)
        assert loaded and not [u for u in loaded if re.match(r"(https?:)?//", u)], loaded
        assert "require.js" not in page and "cdnjs" not in page and "unpkg" not in page
    view = (out / "_static" / "attention_view.js").read_text(encoding="utf-8")
    assert "window.CourseAttentionView = { render };" in view and "export default" not in view
    assert (out / "_static" / "tex-svg-full.js").stat().st_size > 1_000_000


def test_every_page_says_under_which_licenses_it_may_be_shared(built):
    out, _ = built
    for name in [*PAGES, "index", "glossary"]:
        page = (out / f"{name}.html").read_text(encoding="utf-8")
        footer = re.search(r'<footer class="course-site-license">(.*?)</footer>', page, re.S)
        assert footer and "CC BY 4.0" in footer[1] and "MIT" in footer[1], name


def test_a_page_shows_each_widget_as_a_host_for_its_panel(built):
    out, _ = built
    page = (out / "03_per_head_projections.html").read_text(encoding="utf-8")
    assert page.count('data-course-panel="') == 1 and "the h and d_model panel" in page
    assert re.search(r"In(&nbsp;|\s)\[8\]", page)  # the committed run's prompt, not a new one


def test_the_panels_frames_cover_every_setting_and_equal_the_live_panel(built):
    out, _ = built
    (panel,) = panels_of(out, "03_per_head_projections")
    frames = panel["traits"]["frames"]
    assert len(frames) == 16 * 64  # h = 1 .. 16, d_model = 8 .. 512 by 8
    assert "not divisible by h = 3" in frames["d_model=64|h=3"]["error"]
    assert [c["name"] for row in panel["rows"] for c in row] == ["h", "d_model", "every_h"]
    # the page steps h over what cannot work, as JupyterLab does, until the switch is ticked
    assert panel["traits"]["every_h"] is False and panel["traits"]["h_stops"]["64"] == [
        1,
        2,
        4,
        8,
        16,
    ]
    for h, d_model in [(4, 64), (8, 512), (1, 8)]:
        live = HeadsExplorer(h=4, d_model=64)
        live.h_slider.value, live.d_model_slider.value = h, d_model
        torch.testing.assert_close(maps_of(panel, f"d_model={d_model}|h={h}"), live.maps)


def test_a_control_that_needs_python_is_marked_and_buttons_keep_their_labels(built):
    out, _ = built
    (real,) = panels_of(out, "12_real_model_heads")
    kinds = {c["name"] or c["description"]: c["kind"] for row in real["rows"] for c in row}
    assert kinds == {"text": "python", "layer": "slider", "head": "slider"}
    assert len(real["traits"]["frames"]) == 6 * 12  # every layer and head of MiniLM
    texts = [p["text"] for p in real["presets"]]  # the panel's sentence, then the notebook's 3
    assert texts[0] == "The cat sat on the mat because it was warm." and len(texts) == 4
    assert all(len(p["frames"]) == 6 * 12 for p in real["presets"])
    assert real["presets"][0]["frames"] == real["traits"]["frames"]
    (shared,) = panels_of(out, "15_shared_kv")
    (buttons,) = [c for row in shared["rows"] for c in row]
    assert buttons["kind"] == "buttons" and len(buttons["options"]) == len(
        shared["traits"]["frames"]
    )
    assert shared["traits"]["name"] == "15_shared_kv"  # saved views say the notebook


def test_a_training_curve_becomes_its_last_picture():
    from helpers.induction import train_copying
    from helpers.panels.induction import TrainingView

    view = TrainingView(steps=20, every=10)
    train_copying(num_layers=1, steps=20, seed=0, on_step=view.update)
    state = site.panel_state(view)
    assert state["kind"] == "picture" and state["line"].startswith("step 20 of 20")
    assert base64.b64decode(state["png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_notebook_whose_widgets_changed_since_it_ran_is_refused(tmp_path):
    shown = {site.WIDGET: {"model_id": "m"}, "text/plain": "panel"}
    output = {"output_type": "display_data", "metadata": {}, "data": shown}
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "x = 1",
            "outputs": [output]}  # fmt: skip
    path = tmp_path / "99_stale.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))  # fmt: skip
    with pytest.raises(
        RuntimeError, match=r"99_stale.ipynb, cell 0: .* shows 1 widget.*make notebooks"
    ):
        site.run_panels(path)


def test_the_budgets_stop_a_site_that_is_too_big(built, monkeypatch, capsys):
    out, pages = built
    site.report(out, list(pages.values()), seconds=10)
    assert capsys.readouterr().out.startswith("✓ site/:")
    monkeypatch.setattr(site, "MAX_PAGE_MB", 0.5)
    with pytest.raises(SystemExit):
        site.report(out, list(pages.values()), seconds=10)
    assert "✗ site/:" in capsys.readouterr().out


def test_every_figure_keeps_its_alt_text(built):
    out, _ = built
    notebook = json.loads((site.ROOT / "notebooks" / "03_per_head_projections.ipynb").read_text())
    alts = [o["metadata"]["image/png"]["alt"] for c in notebook["cells"]
            for o in c.get("outputs", []) if "image/png" in o.get("data", {})]  # fmt: skip
    page = (out / "03_per_head_projections.html").read_text(encoding="utf-8")
    assert alts and re.findall(r'<img[^>]*\balt="([^"]*)"', page) == alts


def test_a_homework_site_leaves_the_solutions_out():
    import nbformat

    solution = (
        'def f(x):\n    """Add."""\n    # 1. one step -> (B, T)\n    # 2. another -> (B, T)\n'
        "    return x + 12345\n"
    )
    cells = [nbformat.v4.new_code_cell(solution, metadata={"tags": ["solution"]}),
             nbformat.v4.new_code_cell("check(f)")]  # fmt: skip
    for solutions, kept in ((True, 1), (False, 0)):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.from_dict(c) for c in cells])
        site._exercises(notebook, solutions=solutions)
        text = "\n".join(c.source for c in notebook.cells)
        assert text.count("x + 12345") == kept and "NotImplementedError" in text
        assert text.count("course-site-solution") == kept and len(notebook.cells) == 2 + kept


def test_an_exercise_shows_its_skeleton_with_the_solution_folded_and_the_glossary_is_a_page(built):
    out, pages = built
    page = (out / "03_per_head_projections.html").read_text(encoding="utf-8")
    assert "NotImplementedError" in page  # the student copy's skeleton ...
    assert '<details class="course-site-solution">' in page  # ... and the solution, folded
    assert "The check runs in the notebook itself" in page and "✓ Correct" not in page
    assert 'href="glossary.html"' in page and 'href="glossary.md' not in page
    linked = site._links('<code>03_a.ipynb</code>, <a href="04_b.ipynb"><code>04_b.ipynb</code></a>'
                         ", <code>05_c.ipynb</code>", {"03_a", "04_b"})  # fmt: skip
    assert linked == ('<a href="03_a.html"><code>03_a.ipynb</code></a>, <a href="04_b.html">'
                      "<code>04_b.ipynb</code></a>, <code>05_c.ipynb</code>")  # fmt: skip
    glossary = (out / "glossary.html").read_text(encoding="utf-8")
    assert '<h3 id="head,-d_k">' in glossary and 'href="01_self_attention.html"' in glossary
    assert all("$" not in p.title and "`" not in p.title for p in pages.values())
    assert (
        pages["03_per_head_projections"].title
        == "03 · h heads, each with its own W_i^Q, W_i^K, W_i^V"
    )


def test_a_homework_site_has_no_binder_link_to_the_solutions(tmp_path, capsys):
    site.build(tmp_path / "site", binder="owner/repo", only=["00_setup_check"], solutions=False)
    page = (tmp_path / "site" / "00_setup_check.html").read_text(encoding="utf-8")
    assert "mybinder.org" not in page and "github.com/owner/repo" not in page
    assert "no Binder links with --no-solutions" in capsys.readouterr().out
