"""The reference computed stage by stage (q, k, v, heads, scores, masked scores, weights, the heads'
outputs, merged, out), with any of the catalogue's mistakes switched on: `attention_stages` for
the attention exercises, and the stages of 05's cut, 17's head scores, 18's induction score and
15's shared K/V."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from helpers.attention import attention_scores, merge_heads, split_heads
from helpers.checker.mistakes import WRONG_NUM_HEADS

__all__ = ["attention_stages", "head_scores_stages", "split_stages", "induction_stages",
           "shared_kv_stages"]  # fmt: skip

_SPLITS = ("heads_split_without_transpose", "heads_split_interleaved")


_DIVISORS = ("no_scaling", "scaled_by_d_model", "scaled_by_d_k", "multiplied_by_sqrt_d_k",
             "scaled_after_softmax")  # fmt: skip


def _divisor(mistakes: set, d_k: int, d_model: int) -> float:
    """What the scores are divided by, under the scaling mistakes (√d_k when none)."""
    if mistakes & {"no_scaling", "scaled_after_softmax"}:
        return 1.0
    if "scaled_by_d_model" in mistakes:
        return math.sqrt(d_model)
    if "scaled_by_d_k" in mistakes:
        return float(d_k)
    if "multiplied_by_sqrt_d_k" in mistakes:
        return 1.0 / math.sqrt(d_k)
    return math.sqrt(d_k)


def _split(t: torch.Tensor, num_heads: int, mistakes: Iterable[str] = ()) -> torch.Tensor:
    """(B, T, h·d_k) -> (B, h, T, d_k), or the same cut with one of the split mistakes."""
    Bt, Tt, inner = t.shape
    d_k = inner // num_heads
    if "heads_split_without_transpose" in mistakes:
        return t.reshape(Bt, num_heads, Tt, d_k)
    if "heads_split_interleaved" in mistakes:
        return t.reshape(Bt, Tt, d_k, num_heads).permute(0, 3, 1, 2)
    return split_heads(t, num_heads)


class _Stages(dict):
    """Stages in order; a stage the learner made (`given`) replaces the reference's."""

    def __init__(self, given: dict | None) -> None:
        super().__init__()
        self.given = given or {}

    def put(self, name: str, make) -> torch.Tensor:
        self[name] = self.given[name] if name in self.given else make()
        return self[name]


def attention_stages(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor | None,
    num_heads: int,
    mask: torch.Tensor | None = None,
    context: torch.Tensor | None = None,
    mistakes: Iterable[str] = (),
    given: dict | None = None,
) -> dict[str, torch.Tensor]:
    """Every stage of multi-head attention, in order, with `mistakes` made (see the module doc).

    x (B, T, d_model); weights (h·d_k, d_model), w_o (d_model, h·d_k) or None (one-head
    exercises: out = merged); mask (B, T_q, T_k) or None ("masked" is then left out); context
    (B, T_k, d_model) gives the keys and values (cross-attention).
    """
    m = set(mistakes)
    s = _Stages(given)
    for name in m:  # "num_heads_4": cut into 4 heads, whatever num_heads says
        if name.startswith(WRONG_NUM_HEADS):
            num_heads = int(name.removeprefix(WRONG_NUM_HEADS))
    source = x if context is None or "keys_values_from_x" in m else context
    if "queries_from_context" in m:
        x = source
    d_model = x.shape[-1]
    d_k = w_q.shape[0] // num_heads

    def project(t: torch.Tensor, w: torch.Tensor, is_w_o: bool = False) -> torch.Tensor:
        backwards = "w_o_transposed" in m if is_w_o else "weights_transposed" in m
        return t @ w if backwards else t @ w.T

    w_k_used = w_q if "keys_from_w_q" in m else w_v if "keys_values_swapped" in m else w_k
    w_v_used = w_k if m & {"values_from_w_k", "keys_values_swapped"} else w_v
    s.put("q", lambda: project(x, w_q))  # (B, T_q, h·d_k)
    s.put("k", lambda: project(source, w_k_used))  # (B, T_k, h·d_k)
    s.put("v", lambda: project(source, w_v_used))
    for name in ("q", "k", "v"):  # (B, h, T, d_k)
        s.put(f"{name}_heads", lambda name=name: _split(s[name], num_heads, m & set(_SPLITS)))
    q, k = s["q_heads"], s["k_heads"]
    if not m & {*_DIVISORS, "queries_keys_swapped"}:
        s.put("scores", lambda: attention_scores(q, k))  # (B, h, T_q, T_k), the course's own
    elif "queries_keys_swapped" in m:
        s.put("scores", lambda: k @ q.transpose(-2, -1) / _divisor(m, d_k, d_model))
    else:
        s.put("scores", lambda: q @ k.transpose(-2, -1) / _divisor(m, d_k, d_model))
    allowed = None if mask is None else mask.unsqueeze(-3)  # (B, 1, T_q, T_k)
    if allowed is not None and "mask_inverted" in m:
        allowed = ~allowed
    if allowed is not None:
        s.put("masked", lambda: _masked(s["scores"], allowed, m))
    before_softmax = s["masked"] if allowed is not None else s["scores"]

    def weights() -> torch.Tensor:
        if "no_softmax" in m:
            return before_softmax
        dim = 1 if "softmax_over_heads" in m else 0 if "softmax_over_batch" in m else -1
        w = before_softmax.softmax(dim=-2 if "softmax_over_queries" in m else dim)
        if "scaled_after_softmax" in m:
            w = w / math.sqrt(d_k)
        if allowed is not None and "mask_after_softmax" in m:
            w = w.masked_fill(~allowed, 0.0)
        return w

    s.put("weights", weights)
    values = s["k_heads"] if "keys_as_values" in m else s["v_heads"]
    s.put("heads", lambda: s["weights"] @ values)  # (B, h, T_q, d_k)

    def merged() -> torch.Tensor:
        if "heads_merged_without_transpose" in m:
            Bh, h, Th, dh = s["heads"].shape
            return s["heads"].reshape(Bh, Th, h * dh)
        return merge_heads(s["heads"])  # (B, T_q, h·d_k)

    s.put("merged", merged)

    def out() -> torch.Tensor:
        if w_o is None or "w_o_missing" in m:
            result = s["merged"]
        else:
            result = project(s["merged"], w_o, is_w_o=True)  # (B, T_q, d_model)
        return result + x if "residual_added" in m else result

    s.put("out", out)
    return dict(s)


def _masked(scores: torch.Tensor, allowed: torch.Tensor, m: set) -> torch.Tensor:
    if m & {"mask_ignored", "mask_after_softmax"}:
        return scores
    fill = 0.0 if "mask_filled_with_zero" in m else float("-inf")
    return scores.masked_fill(~allowed, fill)


def head_scores_stages(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    mistakes: Iterable[str] = (),
    given: dict | None = None,
) -> dict[str, torch.Tensor]:
    """17's exercise, stage by stage: one head's W_QK = W^Q·W^Kᵀ (x·W layout, d_model x d_model),
    x·W_QK (B, T, d_model), the scores x·W_QK·xᵀ / √d_k (B, T, T); out = the scores."""
    m = set(mistakes)
    s = _Stages(given)
    d_k, d_model = w_q.shape
    s.put("q", lambda: x @ w_q.T)  # (B, T, d_k): some learners go through q and k instead
    s.put("k", lambda: x @ w_k.T)
    s.put("w_qk", lambda: w_k.T @ w_q if "w_qk_reversed" in m else w_q.T @ w_k)
    s.put("xw", lambda: x @ s["w_qk"])  # (B, T, d_model)
    s.put("scores", lambda: s["xw"] @ x.transpose(-2, -1) / _divisor(m, d_k, d_model))
    s.put("out", lambda: s["scores"].softmax(-1) if "softmax_applied" in m else s["scores"])
    return dict(s)


def split_stages(
    t: torch.Tensor, num_heads: int, mistakes: Iterable[str] = (), given: dict | None = None
) -> dict[str, torch.Tensor]:
    """05's exercise: (B, T, d_model) cut into (B, h, T, d_k), the only stage."""
    s = _Stages(given)
    for name in mistakes:  # "num_heads_4": cut into 4 heads, whatever num_heads says
        if name.startswith(WRONG_NUM_HEADS):
            num_heads = int(name.removeprefix(WRONG_NUM_HEADS))
    s.put("out", lambda: _split(t, num_heads, mistakes))
    return dict(s)


def induction_stages(
    maps: torch.Tensor, mistakes: Iterable[str] = (), given: dict | None = None
) -> dict[str, torch.Tensor]:
    """18's exercise: maps (B, h, T, T) of sequences whose first n = T // 2 tokens repeat right
    after them. Each query t = n … 2n − 1 of the second half has an earlier occurrence of its
    token at t − n; an induction head puts its weight on the token after it, key t − n + 1.
    out (h,): each head's weight there, averaged over the queries and the sequences."""
    m = set(mistakes)
    s = _Stages(given)
    T = maps.size(-1)
    n = T // 2
    if "induction_on_the_previous_token" in m:  # the previous-token score, every query
        start, end, back = 1, T, 1
    else:
        start = n - 1 if "induction_with_a_first_half_query" in m else n
        end, back = 2 * n, n if "induction_on_the_twin" in m else n - 1
    # the positions read, as code that indexes the maps makes them (torch.arange(n, 2 * n))
    queries = s.put("query_index", lambda: torch.arange(start, end))
    keys = s.put("key_index", lambda: queries - back)
    stripe = s.put("stripe", lambda: maps[:, :, queries.long(), keys.long()])  # (B, h, queries)

    def out() -> torch.Tensor:
        return stripe.sum(dim=(0, 2)) if "induction_summed" in m else stripe.mean(dim=(0, 2))

    s.put("out", out)
    return dict(s)


def shared_kv_stages(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mistakes: Iterable[str] = (),
    given: dict | None = None,
) -> dict[str, torch.Tensor]:
    """15's exercise: q (B, h, T, d_k) and k, v (B, g, T, d_k), h a multiple of g. Query head i
    reads K/V head i // (h / g). k_heads, v_heads (B, h, T, d_k): one key and one value block per
    query head; scores, weights (B, h, T, T); out (B, h, T, d_k) = weights · v_heads."""
    m = set(mistakes)
    s = _Stages(given)
    h, g, d_k = q.size(1), k.size(1), q.size(-1)

    # query head i reads K/V head i // (h / g) (i mod g when tiled), as an index tensor
    heads = s.put("kv_index", lambda: torch.arange(h) % g if "kv_tiled" in m else
                  torch.arange(h) // (h // g))  # fmt: skip

    def expand(t: torch.Tensor) -> torch.Tensor:
        return t[:, heads.long()]

    k_heads = s.put("k_heads", lambda: expand(k))
    v_heads = s.put("v_heads", lambda: expand(v))
    scores = s.put("scores", lambda: q @ k_heads.transpose(-2, -1) / _divisor(m, d_k, d_k))

    masked = scores
    if "causal_mask_added" in m:  # a stage of its own only when a mask is (wrongly) applied
        t = scores.size(-1)
        causal = torch.ones(t, t, dtype=torch.bool, device=scores.device).tril()
        masked = s.put("masked", lambda: scores.masked_fill(~causal, float("-inf")))

    def weights() -> torch.Tensor:
        if "no_softmax" in m:
            return masked
        w = masked.softmax(dim=-2 if "softmax_over_queries" in m else -1)
        return w / math.sqrt(d_k) if "scaled_after_softmax" in m else w

    w = s.put("weights", weights)
    s.put("out", lambda: w @ (k_heads if "keys_as_values" in m else v_heads))
    return dict(s)
