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
    """For a pytest-xdist run (`pytest -n N --dist loadgroup tests`; `make test` runs its own lanes
    instead, docs/development.md says why): each browser test file is one group, run by one process
    in its order (the JupyterLab tests share Run Alls in that order)."""
    for item in items:
        if item.path.parent.name == "browser":
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
