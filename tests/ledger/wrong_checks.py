"""The wrong objects of helpers/checks.py's checks (shapes, closeness, rows of weights): see
wrong.py."""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers import checks
from helpers.attention import (
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from helpers.examples import seeded_attention
from tests.ledger.wrong import _x, wrong

# --- helpers/checks.py ----------------------------------------------------------------------


@wrong("check_shape", "q not transposed after the cut: (B, T, h, d_k) where (B, h, T, d_k) is due")
def _shape_transposed():
    q = split_heads(_x(), 4).transpose(1, 2)  # (B, T, h, d_k)
    checks.check_shape(q, (1, 4, 5, 4), "q", dims="B h T d_k")


@wrong("check_shape", "the heads left merged: (B, T, h·d_k) where (B, h, T, d_k) is due")
def _shape_merged():
    checks.check_shape(_x(), (1, 4, 5, 4), "q", dims="B h T d_k")


@wrong("check_shape", "the batch dim dropped: (T, d_model) where (B, T, d_model) is due")
def _shape_no_batch():
    checks.check_shape(_x()[0], (1, 5, 16), "out", dims="B T d_model")


def _fused_and_per_head(seed_fused: int, seed_per_head: int):
    x = _x()
    with torch.no_grad():
        fused = seeded_attention(16, 4, seed=seed_fused)(x)
        per_head = seeded_attention(16, 4, seed=seed_per_head, per_head=True)(x)
    return fused, per_head


@wrong("check_close", "a per-head output and a fused output made from different weights")
def _close_other_weights():
    (out_fused, _), (out, _) = _fused_and_per_head(0, 1)
    checks.check_close(out_fused, out, "out: fused = per-head")


@wrong("check_close", "the heads merged in the wrong order (head 0 and head 1 swapped)")
def _close_heads_swapped():
    heads = split_heads(_x(), 4)  # (B, h, T, d_k)
    swapped = heads[:, [1, 0, 2, 3]]
    checks.check_close(merge_heads(swapped), merge_heads(heads), "merged heads")


@wrong("check_close", "attention without the ÷ √d_k against attention with it")
def _close_no_scale():
    q, k, v = (split_heads(_x(seed=s), 2) for s in (1, 2, 3))  # (B, h, T, d_k)
    out, _ = scaled_dot_product_attention(q, k, v)
    unscaled = (q @ k.transpose(-2, -1)).softmax(-1) @ v
    checks.check_close(unscaled, out, "out: by hand = helpers")


@wrong("check_close", "a weight used transposed (x @ W where x @ W.T is due)")
def _close_transposed_weight():
    linear = nn.Linear(16, 16, bias=False)
    x = _x()
    checks.check_close(x @ linear.weight, linear(x), "q = nn.Linear(x)")


@wrong("check_close_all", "the gradients of a module with other weights")
def _close_all_other_weights():
    grads = []
    for seed in (0, 1):
        module = seeded_attention(16, 4, seed=seed)
        module(_x())[0].square().mean().backward()
        grads.append({n: p.grad for n, p in module.named_parameters()})
    checks.check_close_all(grads[0], grads[1], "gradients")


@wrong("check_close_all", "a parameter left out (W^O's gradient missing from one side)")
def _close_all_missing():
    module = seeded_attention(16, 4)
    tensors = dict(module.named_parameters())
    fewer = {n: t for n, t in tensors.items() if not n.startswith("w_o")}
    checks.check_close_all(fewer, tensors, "parameters")


def _scores() -> torch.Tensor:
    q, k = split_heads(_x(seed=1), 2), split_heads(_x(seed=2), 2)
    return q @ k.transpose(-2, -1) / math.sqrt(8)  # (B, h, T, T)


@wrong("check_attention_rows", "the softmax over the queries (dim=-2): columns sum to 1")
def _rows_over_queries():
    checks.check_attention_rows(_scores().softmax(dim=-2))


@wrong("check_attention_rows", "the raw scores, no softmax")
def _rows_no_softmax():
    checks.check_attention_rows(_scores())


@wrong("check_attention_rows", "a causal mask applied after the softmax: rows no longer sum to 1")
def _rows_mask_after():
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    checks.check_attention_rows(_scores().softmax(-1).masked_fill(~causal, 0.0), mask=causal)


@wrong("check_attention_rows", "the mask ignored: weight on the keys it forbids")
def _rows_mask_ignored():
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    checks.check_attention_rows(_scores().softmax(-1), mask=causal)


@wrong("check_attention_rows", "a fully masked row filled with -inf: NaN")
def _rows_nan():
    scores = _scores()
    scores[..., 0, :] = float("-inf")
    checks.check_attention_rows(scores.softmax(-1))
