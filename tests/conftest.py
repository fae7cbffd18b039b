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


@pytest.fixture(scope="session")
def whole_site(tmp_path_factory):
    """The whole static site as `make site` builds it, once per pytest run: (folder, {name: page}).
    tests/test_site.py reads its files and tests/browser/test_site.py opens them (one build,
    most of it 18's model trained or read back, for both)."""
    from course import site

    out = tmp_path_factory.mktemp("site")
    return out, {page.name: page for page in site.build(out)}


# trained first: under `make test` (helpers.induction's $COURSE_TRAINED_CACHE) each model is then
# trained once, early, and 18's Run Alls in the other lanes read it back instead of training it
# again beside it
TRAINS_FIRST = ("test_induction.py",)


def pytest_collection_modifyitems(config, items):
    """For a pytest-xdist run (`pytest -n N --dist loadgroup tests`; `make test` runs its own lanes
    instead, docs/development.md says why): each browser test file is one group, run by one process
    in its order, and the two JupyterLab files one group together (their tests share Run Alls in
    that order). In every run, the TRAINS_FIRST files' tests come first (each file's own order
    kept)."""
    for item in items:
        if item.path.parent.name == "browser":
            group = item.path.stem
            group = "in_jupyterlab" if group.startswith("test_in_jupyterlab") else group
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.path.name not in TRAINS_FIRST)
