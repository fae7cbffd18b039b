"""One slip a name covers each (the catalogue's MISTAKES and the further SLIPS), in the fused,
einsum and 02-loop styles, and pairs of them; ONE_SLIP and TWO_SLIPS say what diagnose should
name for each, with its keyword arguments.
"""

import math

import torch
import torch.nn.functional as F

# --- one catalogued mistake each (diagnose with a mask) ------------------------------------------


def no_scaling(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1)  # <-
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def scaled_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = (torch.einsum("btd,ed->bte", x, w).view(B, T, num_heads, -1) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(d_model)  # <-
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    out = torch.einsum("bhqk,bkhe->bqhe", scores.softmax(-1), v).reshape(B, T, d_model)
    return torch.einsum("bte,de->btd", out, w_o)


def scaled_by_d_k(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1)
    scores = scores / d_k  # <-
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    weights = scores.softmax(dim=-2)  # <-
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def no_softmax(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = scores @ v  # <-
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def weights_transposed(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q).view(B, T, num_heads, d_k).transpose(1, 2)  # <-
    k = (x @ w_k).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v).view(B, T, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    merged = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return merged @ w_o.T  # W^O the right way round


def all_four_transposed(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))  # <-1
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o  # <-2


def heads_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, num_heads, T, d_k)  # <-
    k = (x @ w_k.T).view(B, num_heads, T, d_k)
    v = (x @ w_v.T).view(B, num_heads, T, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def heads_split_interleaved(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads

    def split(t):  # (B, T, d_model) -> (B, h, T, d_k)
        return t.view(B, T, d_k, num_heads).permute(0, 3, 1, 2)  # <-

    q, k, v = split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def heads_merged_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = scores.softmax(dim=-1) @ v  # (B, h, T, d_k)
    out = out.reshape(B, T, d_model)  # <-
    return out @ w_o.T


def keys_as_values(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = (torch.einsum("btd,ed->bte", x, w).view(B, T, num_heads, -1) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    out = torch.einsum("bhqk,bkhe->bqhe", scores.softmax(-1), k)  # <-
    return torch.einsum("bte,de->btd", out.reshape(B, T, d_model), w_o)


def mask_ignored(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    weights = scores.softmax(dim=-1)  # <-
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))  # <-
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def mask_after_softmax(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)
    if mask is not None:
        weights = weights * mask.unsqueeze(1)  # <-
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def mask_filled_with_zero(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), 0)  # <-
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


# --- the 02 loop: per-head lists of (d_k, d_model) weights, no mask ------------------------------


def loop_w_o_missing(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)
        heads.append(weights @ v)
    return torch.cat(heads, dim=-1)  # <-


def loop_no_softmax(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
        heads.append(scores @ v)  # <-
    return torch.cat(heads, dim=-1) @ w_o.T


def loop_values_from_w_k(x, w_q, w_k, w_v, w_o):
    heads = []
    for i in range(len(w_q)):
        q = x @ w_q[i].T
        k = x @ w_k[i].T
        v = x @ w_k[i].T  # <-
        weights = (q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])).softmax(-1)
        heads.append(weights @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def loop_softmax_over_batch(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=0)  # <-
        heads.append(weights @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


# --- slips outside the catalogue -----------------------------------------------------------------


def keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)  # <-
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def scaled_after_softmax(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    weights = scores.softmax(dim=-1) / math.sqrt(d_k)  # <-
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def multiplied_by_sqrt_d_k(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = (torch.einsum("btd,ed->bte", x, w).view(B, T, num_heads, -1) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) * math.sqrt(q.shape[-1])  # <-
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    out = torch.einsum("bhqk,bkhe->bqhe", scores.softmax(-1), v).reshape(B, T, d_model)
    return torch.einsum("bte,de->btd", out, w_o)


def softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    weights = F.softmax(scores, dim=1)  # <-
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def queries_keys_swapped(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = k @ q.transpose(-2, -1) / math.sqrt(d_k)  # <-
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    merged = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return merged @ w_o  # <-


def residual_added(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    attn_mask = None if mask is None else mask.unsqueeze(1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    out = out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T
    return x + out  # <-


# --- two mistakes at once ----------------------------------------------------------------------


def loop_no_scaling_and_w_o_missing(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        scores = q @ k.transpose(1, 2)  # <-1
        heads.append(scores.softmax(-1) @ v)
    return torch.cat(heads, dim=-1)  # <-2


def interleaved_and_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = (
        (x @ w.T).view(B, T, d_k, num_heads).permute(0, 3, 1, 2)  # <-1
        for w in (w_q, w_k, w_v)
    )
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    weights = scores.softmax(dim=2)  # <-2
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def keys_from_w_q_and_zero_fill(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q = torch.einsum("btd,ed->bte", x, w_q).view(B, T, num_heads, -1)
    k = torch.einsum("btd,ed->bte", x, w_q).view(B, T, num_heads, -1)  # <-1
    v = torch.einsum("btd,ed->bte", x, w_v).view(B, T, num_heads, -1)
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], 0.0)  # <-2
    out = torch.einsum("bhqk,bkhe->bqhe", scores.softmax(-1), v).reshape(B, T, d_model)
    return torch.einsum("bte,de->btd", out, w_o)


def scaled_by_d_k_and_merged_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k  # <-1
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), -1e9)
    out = scores.softmax(dim=-1) @ v
    return out.reshape(B, T, d_model) @ w_o.T  # <-2


def weights_transposed_and_mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))  # <-1
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))  # <-2
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


# (function, what diagnose should name, diagnose's keyword arguments)
ONE_SLIP = [
    (no_scaling, ("no_scaling",), {}),
    (scaled_by_d_model, ("scaled_by_d_model",), {}),
    (scaled_by_d_k, ("scaled_by_d_k",), {}),
    (softmax_over_queries, ("softmax_over_queries",), {}),
    (no_softmax, ("no_softmax",), {}),
    (weights_transposed, ("weights_transposed",), {}),
    (heads_split_without_transpose, ("heads_split_without_transpose",), {}),
    (heads_split_interleaved, ("heads_split_interleaved",), {}),
    (heads_merged_without_transpose, ("heads_merged_without_transpose",), {}),
    (keys_as_values, ("keys_as_values",), {}),
    (mask_ignored, ("mask_ignored",), {}),
    (mask_inverted, ("mask_inverted",), {}),
    (mask_after_softmax, ("mask_after_softmax",), {}),
    (mask_filled_with_zero, ("mask_filled_with_zero",), {}),
    (loop_w_o_missing, ("w_o_missing",), {"per_head": True}),
    (loop_no_softmax, ("no_softmax",), {"per_head": True}),
    (loop_values_from_w_k, ("values_from_w_k",), {"per_head": True}),
    (loop_softmax_over_batch, ("softmax_over_batch",), {"per_head": True}),
    (keys_from_w_q, ("keys_from_w_q",), {}),
    (scaled_after_softmax, ("scaled_after_softmax",), {}),
    (multiplied_by_sqrt_d_k, ("multiplied_by_sqrt_d_k",), {}),
    (softmax_over_heads, ("softmax_over_heads",), {}),
    (queries_keys_swapped, ("queries_keys_swapped",), {}),
    (w_o_transposed, ("w_o_transposed",), {}),
    (residual_added, ("residual_added",), {}),
]

TWO_SLIPS = [
    (loop_no_scaling_and_w_o_missing, ("no_scaling", "w_o_missing"), {"per_head": True}),
    (interleaved_and_softmax_over_queries, ("heads_split_interleaved", "softmax_over_queries"), {}),
    (keys_from_w_q_and_zero_fill, ("keys_from_w_q", "mask_filled_with_zero"), {}),
    (
        scaled_by_d_k_and_merged_without_transpose,
        ("scaled_by_d_k", "heads_merged_without_transpose"),
        {},
    ),
    (weights_transposed_and_mask_inverted, ("weights_transposed", "mask_inverted"), {}),
    (all_four_transposed, ("weights_transposed", "w_o_transposed"), {}),
]


def mask_inverted_and_w_o_missing(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask[:, None], float("-inf"))  # <-1
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out  # <-2


TWO_SLIPS.append((mask_inverted_and_w_o_missing, ("mask_inverted", "w_o_missing"), {}))
