"""The committed notebooks are what strict nbval compares: executed top to bottom, no errors."""

import json
from pathlib import Path

import pytest

from helpers.panels.base import WHERE

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed_in_order(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), (
        "not a clean Restart & Run All: run `make notebooks`"
    )
    for cell in code:
        tags = cell.get("metadata", {}).get("tags", [])
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors or "raises-exception" in tags, f"cell {cell['execution_count']} failed"
    assert nb["cells"][0]["cell_type"] == "markdown", (
        "the first cell says what the notebook answers"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_ends_on_a_bare_value(path):
    """A cell's last expression is shown as its value: a check's returned float printed after its
    ✓ line means nothing to a learner, and its last digits may differ from run to run (10's did,
    and strict nbval failed). Only a panel is shown that way."""
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        for output in cell.get("outputs", []):
            if output["output_type"] == "execute_result":
                data = output["data"]
                assert "application/vnd.jupyter.widget-view+json" in data, (i, data)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_panel_shows_one_friendly_line_before_the_notebook_runs(path):
    """No saved widget state (JupyterLab does not draw from it), so before Run All every panel
    shows its text/plain line, and that line is the friendly one, not a widget repr."""
    nb = json.loads(path.read_text())
    assert "widgets" not in nb["metadata"], "run `make notebooks` (it strips widget state)"
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            if "application/vnd.jupyter.widget-view+json" in output.get("data", {}):
                text = "".join(output["data"]["text/plain"])
                assert text.startswith("▶ ") and text.endswith(WHERE), text


def test_strip_widget_state_removes_only_the_widget_state(tmp_path):
    from course.authoring.strip_widget_state import main

    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {"widgets": {"x": 1}, "kernelspec": {}}}))
    main([str(path)])
    assert json.loads(path.read_text()) == {"cells": [], "metadata": {"kernelspec": {}}}
