"""The wrong objects of the counting checks (helpers/timing.py) and of the exercises' checks
(helpers/diagnose.py, each exercise with one of its catalogued mistakes): see wrong.py."""

from __future__ import annotations

import torch

from helpers import timing
from helpers.attention import (
    KVCache,
)
from helpers.examples import seeded_attention
from tests.ledger.wrong import _x, wrong

# --- helpers/timing.py: counts --------------------------------------------------------------


def _calls(products: int, multiply_adds: int = 100, written: int = 10_000) -> timing.Calls:
    return timing.Calls(products=products, multiply_adds=multiply_adds, written=written)


@wrong("check_fusing_counts", "a loop that runs one head fewer (5h − 4 products)")
def _fusing_missing_head():
    hs = [1, 2, 4]
    loop = [_calls(5 * h - 4) for h in hs]
    fused, kernel = [_calls(6) for _ in hs], [_calls(5, written=0) for _ in hs]
    timing.check_fusing_counts(hs, loop, fused, kernel, 1, 4)


@wrong("check_step_counts", "a cached step whose attention ignores the cache (reads stay flat)")
def _step_ignores_cache():
    sizes = [32, 64, 128]
    cached = [timing.Calls(read=1000, multiply_adds=100) for _ in sizes]
    recompute = [timing.Calls(read=t * t, multiply_adds=t * t * 10) for t in sizes]
    timing.check_step_counts(sizes, cached, recompute, kv_numbers_per_token=4)


@wrong("check_cache_bytes", "a plain cache (h = 4 K/V heads) counted as grouped (g = 2)")
def _cache_plain_as_grouped():
    cache = KVCache()
    with torch.no_grad():
        seeded_attention(16, 4)(_x(), cache=cache)
    timing.check_cache_bytes(cache, 2, 4, "the cache")


# --- helpers/diagnose.py: the exercises ------------------------------------------------------


def mistaken(exercise: str, mistake: str):
    """A learner's function for `exercise` that makes `mistake` (the checker's own catalogue)."""
    from helpers.diagnose import EXERCISES

    make_args, stages_of, _ = EXERCISES[exercise]
    names = list(make_args())

    def learner(*args, **kwargs):
        return stages_of(**dict(zip(names, args)), **kwargs, mistakes=(mistake,))["out"]

    return learner


@wrong("check_exercise", "one_head without the ÷ √d_k")
def _exercise_no_scaling():
    from helpers.diagnose import check_exercise

    return check_exercise(mistaken("one_head", "no_scaling"), "one_head", echo=False)


@wrong("diagnose", "multi-head attention with the softmax over the queries")
def _diagnose_over_queries():
    from helpers.diagnose import diagnose
    from tests.learner_code import softmax_over_queries

    return diagnose(softmax_over_queries, echo=False)


@wrong("diagnose", "the per-head loop without W^O")
def _diagnose_loop_no_w_o():
    from helpers.diagnose import diagnose
    from tests.learner_code import loop_w_o_missing

    return diagnose(loop_w_o_missing, echo=False, per_head=True)
