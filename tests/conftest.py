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
