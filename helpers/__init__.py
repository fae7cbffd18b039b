"""Shared code of the multi-head attention course.

- `helpers.attention`: the attention math (one head, per-head, fused).
- `helpers.layouts`: exact weight conversions between those layouts and PyTorch's.
- `helpers.checks`: the ✓ checks the notebooks print.
- `helpers.tiles`: attention a tile of keys at a time with the online softmax, as FlashAttention's
  kernels compute it (in plain torch, for the arithmetic, not the speed).

`import helpers` imports nothing else: the course's commands (the `course` package) run with the
system's Python before the course's packages are installed. `helpers.attention` and the others
load on first use.
"""

import importlib

__all__ = ["attention", "checks", "layouts"]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f"helpers.{name}")
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")
