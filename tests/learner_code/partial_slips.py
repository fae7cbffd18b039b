"""Issue 37, a checker that invents nothing: a mistake in only some of q, k and v, a K/V head
read as i % g, slips in integer positions (arange, idx % g, a diagonal's offset) and 03's
per-head W^O slices summed.
"""

import math

import torch

# --- issue 37: a checker that invents nothing -------------------------------------------------
# A mistake made in only some of q, k and v (the others right), a K/V head read as i % g, slips in
# integer positions (arange, idx % g, diagonal offsets) and 03's per-head W^O slices summed.


def fused_only_k_cut_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_k.T).view(B, num_heads, T, d_k)  # <-
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def fused_only_q_cut_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, num_heads, T, d_k)  # <-
    k = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def masked_k_and_v_cut_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_k.T).view(B, num_heads, T, d_k)  # <-
    v = (x @ w_v.T).view(B, num_heads, T, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def shared_kv_only_k_tiled(q, k, v):
    h, g = q.size(1), k.size(1)
    k = k.repeat(1, h // g, 1, 1)  # <-
    v = v.repeat_interleave(h // g, dim=1)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    return scores.softmax(dim=-1) @ v


def shared_kv_loop_i_mod_g(q, k, v):
    h, g = q.size(1), k.size(1)
    outs = []
    for i in range(h):
        kk, vv = k[:, i % g], v[:, i % g]  # <-
        w = (q[:, i] @ kk.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(-1)
        outs.append(w @ vv)
    return torch.stack(outs, dim=1)


def shared_kv_index_mod_g(q, k, v):
    h, g = q.size(1), k.size(1)
    idx = torch.arange(h) % g  # <-
    k, v = k[:, idx], v[:, idx]
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    return scores.softmax(dim=-1) @ v


def induction_arange_twin(maps):
    T = maps.size(-1)
    n = T // 2
    t = torch.arange(n, 2 * n)
    keys = t - n  # <-
    return maps[:, :, t, keys].mean(dim=(0, 2))


def induction_arange_start(maps):
    T = maps.size(-1)
    n = T // 2
    t = torch.arange(n - 1, 2 * n)  # <-
    return maps[:, :, t, t - n + 1].mean(dim=(0, 2))


def induction_diagonal(maps):
    T = maps.size(-1)
    n = T // 2
    stripe = maps.diagonal(offset=-n, dim1=-2, dim2=-1)  # <-
    return stripe.mean(dim=(0, 2))


def loop_sum_w_o_rows(x, w_q, w_k, w_v, w_o):
    d_k = w_q[0].shape[0]
    out = 0
    for i in range(len(w_q)):
        q, k, v = x @ w_q[i].T, x @ w_k[i].T, x @ w_v[i].T
        weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
        out = out + (weights @ v) @ w_o[i * d_k : (i + 1) * d_k]  # <-
    return out


def fused_only_v_interleaved(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, D = x.shape
    d_k = D // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, d_k, num_heads).permute(0, 3, 1, 2)  # <-
    w = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(B, T, D) @ w_o.T


def fused_only_k_w_not_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, D = x.shape
    d_k = D // num_heads
    q = (x @ w_q.T).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ w_k).view(B, T, num_heads, d_k).transpose(1, 2)  # <-
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    w = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(B, T, D) @ w_o.T


def shared_kv_only_v_tiled(q, k, v):
    h, g = q.size(1), k.size(1)
    k = k.repeat_interleave(h // g, dim=1)
    v = torch.cat([v] * (h // g), dim=1)  # <-
    return (q @ k.mT / q.size(-1) ** 0.5).softmax(-1) @ v


def induction_loop_twin(maps):
    T = maps.shape[-1]
    n = T // 2
    total = 0
    for t in range(n, 2 * n):
        total = total + maps[:, :, t, t - n]  # <-
    return total.mean(0) / n


def induction_keys_offset_2(maps):
    n = maps.shape[-1] // 2
    qs = torch.arange(n, 2 * n)
    ks = qs - n + 2  # <-
    return maps[:, :, qs, ks].mean(dim=(0, 2))


def masked_only_q_cut_wrong(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, D = x.shape
    d_k = D // num_heads
    q = (x @ w_q.T).view(B, num_heads, T, d_k)  # <-
    k = (x @ w_k.T).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T, num_heads, d_k).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        s = s.masked_fill(~mask.unsqueeze(1), float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D) @ w_o.T


def cross_k_cut_without_transpose(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T, D = x.shape
    S = context.shape[1]
    q = (x @ w_q.T).view(B, T, num_heads, -1).transpose(1, 2)
    k = (context @ w_k.T).view(B, num_heads, S, -1)  # <-
    v = (context @ w_v.T).view(B, S, num_heads, -1).transpose(1, 2)
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(B, T, D) @ w_o.T


def induction_diagonal_prev(maps):
    return maps.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))  # <-


def induction_arange_prev(maps):
    T = maps.shape[-1]
    t = torch.arange(1, T)
    return maps[:, :, t, t - 1].mean(dim=(0, 2))  # <-
