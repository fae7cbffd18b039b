"""19's exercise, the reference side: the classic slips of the online softmax (ONLINE_MISTAKES,
each with what it looks like, a hint that points at the line, and the running value it shows in
first), the check's inputs (`tiled_args`) and the loop itself in float64 with any of the slips
switched on (`online_steps`). `helpers.checker.online` compares a learner's function with them.
Torch only."""

from __future__ import annotations

import math

import torch

from helpers.checker.sizes import TILED_SIZES, TILED_SIZES2, TILED_SIZES3

__all__ = ["LARGE", "NAME", "ONLINE_MISTAKES", "large_args", "online_steps", "tiled_args"]

NAME = "tiled_attention"

# name: (what it looks like, a hint that points at the line, the running value it shows in first)
ONLINE_MISTAKES: dict[str, tuple[str, str, str]] = {
    "sum_not_rescaled": (
        "the running sum is not rescaled when a block raises the maximum: the terms summed "
        "before keep their old, smaller maximum, so they count too much in the sum (the "
        "accumulator is rescaled)",
        "look at the line that updates the running sum: what must the sum so far be multiplied "
        "by when the maximum rises?",
        "total",
    ),
    "acc_not_rescaled": (
        "the accumulator (the running weighted sum of the values) is not rescaled when a block "
        "raises the maximum: the values weighted before keep their old, smaller maximum (the "
        "running sum is rescaled)",
        "look at the line that updates the accumulator: what must the weighted sum so far be "
        "multiplied by when the maximum rises?",
        "acc",
    ),
    "never_rescaled": (
        "neither the running sum nor the accumulator is rescaled when a block raises the "
        "maximum (the factor is missing, or is 1 because it is computed after the maximum is "
        "updated): the terms from earlier blocks keep their old, smaller maximum",
        "look at the lines that update the running sum and the accumulator: what must the sums "
        "so far be multiplied by when the maximum rises, and is that factor computed from the "
        "maximum before the update and the one after?",
        "total",
    ),
    "rescaled_the_wrong_way": (
        "the running sum and the accumulator are multiplied by exp(m_new − m_old) when the "
        "maximum rises, instead of exp(m_old − m_new)",
        "look at the factor the sums so far are multiplied by: when the maximum rises, should "
        "the old terms grow or shrink?",
        "factor",
    ),
    "each_block_normalised": (
        "each block's weights are divided by that block's own sum, and the blocks' outputs added "
        "up: every block gets a total weight of 1, where all the keys together should",
        "look at the line that divides a block's exponentials: one sum over all the keys must "
        "divide them, known only after the last block.",
        "weights",
    ),
    "each_block_normalised_averaged": (
        "each block's weights are divided by that block's own sum, and the blocks' outputs "
        "averaged: every block gets the same share, however large its scores",
        "look at the line that divides a block's exponentials: one sum over all the keys must "
        "divide them, known only after the last block.",
        "weights",
    ),
    "final_division_missing": (
        "the output is the accumulator itself: it is never divided by the running sum",
        "look at what you return: is the weighted sum of the values a weighted average yet, "
        "with weights that sum to 1?",
        "out",
    ),
    "last_keys_dropped": (
        "the keys after the last whole block are never read, as when the loop runs T_k // block "
        "times",
        "look at the blocks your loop visits: when T_k is not a multiple of block, the last "
        "block is shorter, and it still has to be read.",
        "loop",
    ),
    "no_scaling": (
        "the scores are not scaled",
        "look at the line that computes a block's scores: should they be scaled, and by what?",
        "scores",
    ),
    "scaled_by_d_k": (
        "the scores are divided by d_k",
        "look at your divisor: is it the right power of d_k?",
        "scores",
    ),
}

# the running values, in the order the loop makes them, and their words
_VALUES = {
    "scores": "scores",
    "max": "running maximum",
    "weights": "exponentials exp(s − m)",
    "total": "running sum",
    "acc": "accumulator (the running weighted sum of the values)",
}


def tiled_args(second: bool | int = False, seed: int = 0) -> dict:
    """q (T_q, d_k), k (T_k, d_k), v (T_k, d_v) and block, at the first sizes, the second (True or
    1) or the third (2). The keys' scores grow along the sequence, so that the maximum of most
    queries' rows rises in a later block, where a missing rescale shows."""
    sizes = (TILED_SIZES, TILED_SIZES2, TILED_SIZES3)[int(second)]
    t_q, t_k, d_k, d_v = (sizes[n] for n in ("T_q", "T_k", "d_k", "d_v"))
    gen = torch.Generator().manual_seed(19 + 100 * seed)
    q = torch.randn(t_q, d_k, generator=gen) + 1.0
    ramp = torch.linspace(0.0, 1.5, t_k).unsqueeze(-1)
    k = torch.randn(t_k, d_k, generator=gen) * 0.7 + ramp
    v = torch.randn(t_k, d_v, generator=gen)
    return {"q": q, "k": k, "v": v, "block": sizes["block"]}


LARGE = 30.0  # q scaled by this at the first sizes, its first row negated: scores −170 … 173


def large_args() -> dict:
    """The first inputs with large scores, spread apart: q × LARGE, its first query negated. In
    float32, exp overflows above about 88.7 and underflows to 0 below about −103.3: code that
    skips the maximum, or lowers every row by the tile's one largest score (173, where query 0's
    own largest is 45), makes inf or 0 / 0 there, while each row's own running maximum keeps
    every exponential at most 1 and each row's largest exactly 1."""
    args = tiled_args()
    q = args["q"] * LARGE
    q[0] = -q[0]
    return {**args, "q": q}


SHIFT, LOW = 4.0, -20.0  # every key + SHIFT in each feature, query 1 = LOW in each: see below


def underflow_args() -> dict:
    """The first inputs with every key shifted by SHIFT in each feature and query 1 set to LOW in
    each: that query's scores all lie far below 0 (−227 to −142), the others' between 8 and 18.
    Each row's own running maximum keeps its largest exponential exactly 1; a maximum that stays
    far above every score of a row (one that starts at 0, not −∞) leaves all of that row's
    exponentials below exp(−103), which is 0 in float32, and its output 0 / 0."""
    args = tiled_args()
    q = args["q"].clone()
    q[1] = LOW
    return {**args, "q": q, "k": args["k"] + SHIFT}


def online_steps(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int, mistakes=()
) -> tuple[list[dict], torch.Tensor]:
    """The loop in float64, with the named slips made: (one dict per block: its keys (start,
    stop), scores, max, factor, weights, total, acc; the output)."""
    m = set(mistakes)
    q, k, v = q.double(), k.double(), v.double()
    d_k, t_k = q.size(-1), k.size(0)
    divisor = 1.0 if "no_scaling" in m else d_k if "scaled_by_d_k" in m else math.sqrt(d_k)
    stop = t_k - t_k % block if "last_keys_dropped" in m else t_k
    normalised = bool(m & {"each_block_normalised", "each_block_normalised_averaged"})
    run_max = q.new_full((q.size(0), 1), -math.inf)
    total, acc = q.new_zeros(q.size(0), 1), q.new_zeros(q.size(0), v.size(-1))
    steps: list[dict] = []
    for start in range(0, stop, block):
        end = min(start + block, t_k)
        scores = q @ k[start:end].T / divisor
        new = torch.maximum(run_max, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new)
        if not steps:  # nothing summed yet: any factor multiplies zeros
            factor = torch.zeros_like(new)
        elif "rescaled_the_wrong_way" in m:
            factor = torch.exp(new - run_max)
        else:
            factor = torch.exp(run_max - new)
        if normalised:
            weights = weights / weights.sum(-1, keepdim=True)
            total, acc = total + 1, acc + weights @ v[start:end]
        else:
            keep_sum = "sum_not_rescaled" in m or "never_rescaled" in m
            keep_acc = "acc_not_rescaled" in m or "never_rescaled" in m
            total = total * (1.0 if keep_sum and steps else factor) + weights.sum(-1, keepdim=True)
            acc = acc * (1.0 if keep_acc and steps else factor) + weights @ v[start:end]
        steps.append({"keys": (start, end), "scores": scores, "max": new, "factor": factor,
                      "weights": weights, "total": total, "acc": acc})  # fmt: skip
        run_max = new
    if normalised and "each_block_normalised_averaged" not in m:
        return steps, acc
    return steps, acc if "final_division_missing" in m else acc / total
