"""Slips no catalogue names, reported at their stage and line with how they differ, and what the
first cold trial found: slips that looked like catalogued ones, odd numbers, NaN, float16.
"""

import math

import torch
import torch.nn.functional as F

# --- slips no catalogue names: reported at their stage and line, with how they differ ----------


def values_from_x(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = x.view(B, T, num_heads, d_k).transpose(1, 2)  # <-
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def mask_on_first_head_only(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores[:, 0] = scores[:, 0].masked_fill(~mask, float("-inf"))  # <-
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


# --- what the cold trial found: slips that looked like catalogued ones, and odd numbers ---------


def divided_by_a_wrong_number(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**1 / 2  # <- (d_k ** 1) / 2: precedence
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def four_heads_whatever_num_heads_says(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    h = 4  # copied from another cell
    q = (x @ w_q.T).view(B, T, h, d_model // h).transpose(1, 2)  # <-
    k = (x @ w_k.T).view(B, T, h, d_model // h).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, h, d_model // h).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def loop_stacked_then_reshaped(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        heads.append((q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])).softmax(-1) @ v)
    B, T, d_model = x.shape
    return torch.stack(heads, dim=1).reshape(B, T, d_model) @ w_o.T  # <-


def noise_on_the_output(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    attn_mask = None if mask is None else mask.unsqueeze(1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    out = out.transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T + 1e-3 * torch.ones(B, T, d_model)  # <-


def nan_from_a_square_root(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.sqrt(scores.softmax(-1) - 0.2)  # <-
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def softmax_in_half_precision(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.half().softmax(dim=-1).float()  # <-
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T
