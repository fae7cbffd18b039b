"""Timing for the notebook on speed and for `make bench`: medians of interleaved runs.

Interleaving (A, B, C, A, B, C, ...) exposes every candidate to the same background load, so their
ratio is fairer than timing one after the other. Torch only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

__all__ = ["interleaved_medians"]


@torch.no_grad()
def interleaved_medians(
    candidates: dict[str, Callable[[], object]], repeats: int = 30, warmup: int = 3
) -> dict[str, float]:
    """Run each candidate `warmup` times, then `repeats` rounds in turn; median seconds of each."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}
