"""Right attention in five styles (CORRECT): view/transpose, an in-place −1e9 fill, einsum,
scaled_dot_product_attention and a loop over the heads; each must get the ✓, with and without
a mask.
"""

import math

import torch
import torch.nn.functional as F

# --- correct, in five styles -------------------------------------------------------------------


def view_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
    k = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, h, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    weights = scores.softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def minus_1e9_in_place(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).reshape(B, T, num_heads, d_k).permute(0, 2, 1, 3) for w in (w_q, w_k, w_v))
    scores = torch.matmul(q, k.permute(0, 1, 3, 2))
    scores /= d_k**0.5
    if mask is not None:
        scores.masked_fill_(mask[:, None] == 0, -1e9)
    out = torch.matmul(F.softmax(scores, dim=-1), v)
    return out.permute(0, 2, 1, 3).contiguous().view(B, T, d_model) @ w_o.T


def einsum_heads(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = (torch.einsum("btd,ed->bte", x, w).view(B, T, num_heads, -1) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    out = torch.einsum("bhqk,bkhe->bqhe", scores.softmax(-1), v).reshape(B, T, d_model)
    return torch.einsum("bte,de->btd", out, w_o)


def sdpa(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    attn_mask = None if mask is None else mask.unsqueeze(1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, h, T, d_k)
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def loop(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    d_k = x.shape[-1] // num_heads
    heads = []
    for i in range(num_heads):
        rows = slice(i * d_k, (i + 1) * d_k)  # head i's rows of each (out, in) weight
        q, k, v = x @ w_q[rows].T, x @ w_k[rows].T, x @ w_v[rows].T
        scores = q @ k.transpose(1, 2) / d_k**0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        heads.append(scores.softmax(-1) @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


CORRECT = [view_transpose, minus_1e9_in_place, einsum_heads, sdpa, loop]
