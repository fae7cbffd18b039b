"""A new learner's 183 attempts: those whose messages said false things (P1–P9, m1–m6), among
them heads merged in the wrong order, a scale applied twice, code right only at the check's
sizes and numpy arrays returned; `d_k` stands for a notebook's d_k = 16 from another cell.
"""

import numpy as np
import torch

# --- a new learner's 183 attempts: the messages that said false things (P1–P9, m1–m6) -------

d_k = 16  # a notebook's d_k from another cell (d_model = 64, 4 heads), read by the loop below


def fused_06_merge_order_one_line(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    w = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(-1)
    heads = w @ v  # (B, h, T, d_k)
    merged = heads.transpose(1, 2).transpose(2, 3).reshape(B, T, d_model)  # <-
    out = merged @ w_o.T
    return out


def fused_06_merge_order_two_lines(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    w = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(-1)
    heads = w @ v  # (B, h, T, d_k)
    merged = heads.transpose(1, 2).transpose(2, 3)  # <- (B, T, d_k, h)
    merged = merged.reshape(B, T, d_model)
    out = merged @ w_o.T
    return out


def fused_06_merge_permute(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    w = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(-1)
    out = (w @ v).permute(0, 2, 3, 1).reshape(B, T, d_model)  # <-
    return out @ w_o.T


def cross_13_merge_permute(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k = context.shape[1]
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (context @ w_v.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    a = (q @ k.transpose(-1, -2) / d_k**0.5).softmax(-1)
    return (a @ v).permute(0, 2, 3, 1).reshape(B, T_q, d_model) @ w_o.T  # <-


def loop_03_cat_on_the_batch_then_view(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        heads.append((q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v)
    return torch.cat(heads, dim=0).view(x.shape) @ w_o.T  # <-


def masked_09_extra_causal_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))  # <-
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def masked_09_masked_fill_result_dropped(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    if mask is not None:
        scores.masked_fill(~mask.unsqueeze(1), float("-inf"))  # <-
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def masked_09_multiplied_by_the_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    if mask is not None:
        scores = scores * mask.unsqueeze(1)  # <-
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def one_head_01_weights_mT(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = scores.softmax(dim=-1)
    out = weights.mT @ v  # <-
    return out


def one_head_01_weights_transposed_on_return(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
    return weights.transpose(-2, -1) @ v  # <-


def loop_03_global_d_k(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        scores = q @ k.transpose(-2, -1) / d_k**0.5  # <- the notebook's d_k = 16
        heads.append(scores.softmax(-1) @ v)
    return torch.cat(heads, -1) @ w_o.T


def head_scores_17_scores_transposed(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k
    return (x @ w_qk @ x.transpose(-2, -1)).transpose(-2, -1) / d_k**0.5  # <-


def fused_06_q_and_k_both_scaled(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    q = q / d_k**0.5  # <-
    k = k / d_k**0.5
    w = (q @ k.transpose(-2, -1)).softmax(-1)
    out = (w @ v).transpose(1, 2).reshape(B, T, d_model)
    return out @ w_o.T


def loop_03_q_and_k_scaled_in_the_projection(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        d = wq.shape[0] ** 0.5
        q, k, v = x @ wq.T / d, x @ wk.T / d, x @ wv.T  # <-
        heads.append((q @ k.transpose(-2, -1)).softmax(-1) @ v)
    return torch.cat(heads, -1) @ w_o.T


def head_scores_17_w_qk_scaled_and_scores_scaled(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = (w_q.T / d_k**0.5) @ w_k  # <-
    return x @ w_qk @ x.transpose(-2, -1) / d_k**0.5


def split_05_split_takes_a_size(t, num_heads):
    return torch.stack(t.split(num_heads, dim=-1), dim=1)  # <-


def one_head_01_divided_by_2(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    return (q @ k.transpose(-2, -1) / 2).softmax(-1) @ v


def split_05_hard_coded_sizes(t, num_heads):
    return t.view(2, 5, 3, 4).transpose(1, 2)


def fused_06_three_heads_and_2_written_in(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    q, k, v = ((x @ w.T).view(B, T, 3, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    w = (q @ k.transpose(-2, -1) / 2).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def one_head_01_numpy(x, w_q, w_k, w_v):
    xn, wq, wk, wv = (t.numpy() for t in (x, w_q, w_k, w_v))
    q, k, v = xn @ wq.T, xn @ wk.T, xn @ wv.T
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def split_05_numpy(t, num_heads):
    B, T, d_model = t.shape
    return t.numpy().reshape(B, T, num_heads, -1).transpose(0, 2, 1, 3)


def head_scores_17_numpy(x, w_q, w_k):
    W = w_q.numpy().T @ w_k.numpy()
    xn = x.numpy()
    return xn @ W @ xn.transpose(0, 2, 1) / np.sqrt(w_q.shape[0])


def split_05_no_transpose(t, num_heads):
    B, T, d_model = t.shape
    return t.view(B, T, num_heads, d_model // num_heads)


def cross_13_residual(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k = context.shape[1]
    d_k = d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (context @ w_v.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    a = (q @ k.transpose(-1, -2) / d_k**0.5).softmax(-1)
    return x + (a @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T  # <-


def masked_09_mask_without_head_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # <- (B, T, T) against (B, h, T, T)
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, d_model) @ w_o.T
