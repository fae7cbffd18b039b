"""Issue 22: cold student attempts where the checker used to say something false, each exercise
as its notebook asks for it (01 one head, 03 loop, 05 split, 06 fused, 13 cross, 17 head
scores); `h` stands for a notebook's own h = 4.
"""

import torch

# --- issue 22: cold student attempts where the checker used to say something false -----------
# (each exercise as its notebook asks for it; `h` stands for a notebook's own h = 4)

h = 4


def fused_06_projections_without_T(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // num_heads
    q = (x @ w_q).view(B, T, num_heads, d_k).transpose(1, 2)  # <-
    k = (x @ w_k).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v).view(B, T, num_heads, d_k).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    merged = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
    return merged @ w_o.T


def head_scores_17_divided_by_d_k_squared(x, w_q, w_k):
    d_k = w_q.shape[0]
    w_qk = w_q.T @ w_k
    return x @ w_qk @ x.transpose(-2, -1) / d_k**2  # <-


def head_scores_17_divided_by_3(x, w_q, w_k):
    w_qk = w_q.T @ w_k
    return x @ w_qk @ x.transpose(-2, -1) / 3  # <-


def head_scores_17_w_q_twice(x, w_q, w_k):
    d_k = w_q.shape[0]
    W_QK = w_q.T @ w_q  # <-
    return x @ W_QK @ x.transpose(-2, -1) / d_k**0.5


def loop_03_head_0_for_every_head(x, w_q, w_k, w_v, w_o):
    heads = []
    for i in range(len(w_q)):  # noqa: B007 - i is the slip: it is never used
        q, k, v = x @ w_q[0].T, x @ w_k[0].T, x @ w_v[0].T  # <-
        weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
        heads.append(weights @ v)
    concat = torch.cat(heads, dim=-1)
    return concat @ w_o.T


def cross_13_w_k_and_w_v_swapped(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_v.T).view(B, T_k, num_heads, d_k).transpose(1, 2)  # <-1
    v = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)  # <-2
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    weights = scores.softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def split_05_notebook_h(t, num_heads):
    B, T, d_model = t.shape
    d_k = d_model // h
    blocks = t.view(B, T, h, d_k)  # <-
    return blocks.transpose(1, 2)


def loop_03_notebook_h(x, w_q, w_k, w_v, w_o):
    heads = []
    for i in range(h):
        q, k, v = x @ w_q[i].T, x @ w_k[i].T, x @ w_v[i].T  # <-
        weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
        heads.append(weights @ v)
    return torch.cat(heads, dim=-1) @ w_o.T


def fused_06_notebook_h(x, w_q, w_k, w_v, w_o, num_heads):
    B, T, d_model = x.shape
    d_k = d_model // h
    q, k, v = ((x @ w.T).view(B, T, h, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))  # <-
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o.T


def one_head_01_sigmoid(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = torch.sigmoid(scores)  # <-
    return weights @ v


def one_head_01_plus_v(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    w = scores.softmax(dim=-1)
    return w @ v + v  # <-


def loop_03_cat_on_dim_0(x, w_q, w_k, w_v, w_o):
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
        heads.append(weights @ v)
    concat = torch.cat(heads, dim=0)
    return concat @ w_o.T  # <-


def cross_13_values_from_x(x, context, w_q, w_k, w_v, w_o, num_heads):
    B, T_q, d_model = x.shape
    T_k, d_k = context.shape[1], d_model // num_heads
    q = (x @ w_q.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    k = (context @ w_k.T).view(B, T_k, num_heads, d_k).transpose(1, 2)
    v = (x @ w_v.T).view(B, T_q, num_heads, d_k).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / d_k**0.5).softmax(dim=-1)
    out = weights @ v  # <-
    return out.transpose(1, 2).reshape(B, T_q, d_model) @ w_o.T


def head_scores_17_layout_read_as_x_w(x, w_q, w_k):
    w_qk = w_q @ w_k.T  # (d_k, d_k): nn.Linear's layout read as x·W
    return x @ w_qk @ x.transpose(-2, -1) / 2  # <-
