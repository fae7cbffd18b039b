"""Shared test settings: hypothesis runs the same examples every time, with no deadline
(the first call into torch can be slow)."""

import pytest
import torch
from hypothesis import settings

settings.register_profile("course", deadline=None, derandomize=True, max_examples=40)
settings.load_profile("course")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_collection_modifyitems(config, items):
    """For a parallel run (pytest-xdist, `--dist loadgroup`): each browser test file is one group,
    run by one worker in its order, and test_in_jupyterlab's tests one group per notebook, so the
    tests of a notebook share its Run All on one worker's page (test_18… shares 18's)."""
    for item in items:
        if item.path.parent.name != "browser":
            continue
        group = item.path.stem
        if item.path.name == "test_in_jupyterlab.py":
            callspec = getattr(item, "callspec", None)
            notebook = callspec.params.get("notebook", "") if callspec else ""
            if item.originalname.startswith("test_18"):
                notebook = "18_induction_heads.ipynb"
            group += "-" + (notebook.partition("#")[0] or "others")
        item.add_marker(pytest.mark.xdist_group(group))
