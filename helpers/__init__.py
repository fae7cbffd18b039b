"""Shared code of the multi-head attention course.

- `helpers.attention`: the attention math (one head, per-head, fused).
- `helpers.layouts`: exact weight conversions between those layouts and PyTorch's.
- `helpers.checks`: the ✓ checks the notebooks print.

These three are torch only and imported here; plotting and widgets live in their own modules.
"""

from helpers import attention, checks, layouts

__all__ = ["attention", "checks", "layouts"]
