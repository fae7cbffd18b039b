"""Exact conversions between the layouts of the same multi-head attention.

Every function copies weights (biases included) into a new module, so the result computes the
same outputs and attention maps as its input, and the two can be trained apart afterwards.

The one fact behind all of them: `nn.Linear` keeps its matrix as (out_features, in_features).
Head i's W_i^Q, a `Linear(d_model, d_k)`, has a (d_k, d_model) weight; stacking the h of them
along dim 0 gives the (d_model, d_model) weight of the fused `Linear(d_model, d_model)`, whose
output features i*d_k .. (i+1)*d_k are exactly head i's q. In the paper's row-vector layout
(x W with W of shape d_model x d_k) the same stacking puts the blocks side by side:
x [W_0 ... W_{h-1}] = [x W_0 ... x W_{h-1}].
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.attention import FusedMultiHeadAttention, PerHeadMultiHeadAttention

__all__ = [
    "fuse",
    "split",
    "from_torch",
    "to_torch",
    "to_qkv",
    "from_qkv",
    "expand_kv",
    "share_kv",
    "w_o_blocks",
    "head_circuits",
    "head_ranks",
    "head_singular_values",
    "fold_w_o",
]

_PROJECTIONS = ("w_q", "w_k", "w_v")


def _has_bias(module: nn.Module) -> bool:
    return module.w_o.bias is not None


def _heads_of(module: PerHeadMultiHeadAttention, name: str) -> list[nn.Linear]:
    """The distinct per-head Linear modules of a projection: h for w_q, one per K/V head for w_k
    and w_v."""
    heads = module.heads if name == "w_q" else module.kv_owners
    return [getattr(head, name) for head in heads]


def _no_shared_kv(module: nn.Module, what: str) -> None:
    if module.num_kv_heads < module.num_heads:
        raise ValueError(
            f"{what} needs one K and one V per head, and this module shares them: num_kv_heads = "
            f"{module.num_kv_heads} < num_heads = {module.num_heads}. Call it on "
            "expand_kv(module), the plain multi-head attention that computes the same."
        )


def _empty_like(template: nn.Module, cls, *args, **kwargs) -> nn.Module:
    """A new `cls(*args, **kwargs)` on the dtype and device of `template`, left uninitialised:
    every conversion overwrites all its parameters, so random initialisation would be wasted
    work (most of a slider's redraw at d_model = 512)."""
    p = next(template.parameters())
    with torch.device("meta"):
        module = cls(*args, **kwargs)
    return module.to_empty(device=p.device).to(p.dtype)


@torch.no_grad()
def fuse(per_head: PerHeadMultiHeadAttention) -> FusedMultiHeadAttention:
    """Stack the h per-head (d_k, d_model) weights into one (d_model, d_model) weight each."""
    if not isinstance(per_head, PerHeadMultiHeadAttention):
        raise ValueError(
            f"fuse() takes a PerHeadMultiHeadAttention; got {type(per_head).__name__}."
        )
    if per_head.num_heads * per_head.d_k != per_head.d_model:
        raise ValueError(
            f"fuse() needs h·d_k = d_model to stack the heads into d_model x d_model matrices; got "
            f"h·d_k = {per_head.num_heads}·{per_head.d_k} = {per_head.num_heads * per_head.d_k} "
            f"and d_model = {per_head.d_model}."
        )
    fused = _empty_like(
        per_head,
        FusedMultiHeadAttention,
        per_head.d_model,
        per_head.num_heads,
        bias=_has_bias(per_head),
        num_kv_heads=per_head.num_kv_heads,
        dropout=per_head.dropout,
        rope=per_head.rope,
    )
    for name in _PROJECTIONS:
        linears = _heads_of(per_head, name)  # h for W^Q; one per K/V head for W^K, W^V
        target = getattr(fused, name)
        target.weight.copy_(torch.cat([lin.weight for lin in linears], dim=0))  # (d_model, d_model)
        if target.bias is not None:
            target.bias.copy_(torch.cat([lin.bias for lin in linears], dim=0))  # (d_model,)
    fused.w_o.load_state_dict(per_head.w_o.state_dict())
    return fused


@torch.no_grad()
def split(fused: FusedMultiHeadAttention) -> PerHeadMultiHeadAttention:
    """Cut each (d_model, d_model) weight into h per-head (d_k, d_model) weights: fuse() undone."""
    if not isinstance(fused, FusedMultiHeadAttention):
        raise ValueError(f"split() takes a FusedMultiHeadAttention; got {type(fused).__name__}.")
    h, d_k, d_model = fused.num_heads, fused.d_k, fused.d_model
    per_head = _empty_like(
        fused,
        PerHeadMultiHeadAttention,
        d_model,
        h,
        bias=_has_bias(fused),
        num_kv_heads=fused.num_kv_heads,
        dropout=fused.dropout,
        rope=fused.rope,
    )
    for name in _PROJECTIONS:
        source = getattr(fused, name)
        targets = _heads_of(per_head, name)  # h for W^Q; one per K/V head for W^K, W^V
        weights = source.weight.view(len(targets), d_k, d_model)  # block i is [i]
        biases = source.bias.view(len(targets), d_k) if source.bias is not None else None
        for i, linear in enumerate(targets):
            linear.weight.copy_(weights[i])
            if biases is not None:
                linear.bias.copy_(biases[i])
    per_head.w_o.load_state_dict(fused.w_o.state_dict())
    return per_head


@torch.no_grad()
def from_torch(mha: nn.MultiheadAttention) -> FusedMultiHeadAttention:
    """Copy PyTorch's `nn.MultiheadAttention` into a `FusedMultiHeadAttention`.

    PyTorch packs W^Q, W^K, W^V into one (3 d_model, d_model) `in_proj_weight`, in that order,
    and keeps W^O in `out_proj`. Its dropout probability is kept (the two agree in eval mode;
    in training each draws its own random zeros).
    """
    if not isinstance(mha, nn.MultiheadAttention):
        raise ValueError(f"from_torch() takes an nn.MultiheadAttention; got {type(mha).__name__}.")
    if mha.in_proj_weight is None or mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError(
            "from_torch() supports nn.MultiheadAttention with kdim = vdim = embed_dim, "
            "add_bias_kv=False and add_zero_attn=False: those extras have no place in the course's "
            "modules."
        )
    bias = mha.in_proj_bias is not None
    fused = _empty_like(
        mha, FusedMultiHeadAttention, mha.embed_dim, mha.num_heads, bias=bias, dropout=mha.dropout
    )
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3, dim=0)  # 3 x (d_model, d_model)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3, dim=0) if bias else (None, None, None)
    for name, weight, b in zip(_PROJECTIONS, (w_q, w_k, w_v), (b_q, b_k, b_v)):
        getattr(fused, name).weight.copy_(weight)
        if b is not None:
            getattr(fused, name).bias.copy_(b)
    fused.w_o.weight.copy_(mha.out_proj.weight)
    if bias:
        fused.w_o.bias.copy_(mha.out_proj.bias)
    return fused


@torch.no_grad()
def to_torch(fused: FusedMultiHeadAttention) -> nn.MultiheadAttention:
    """Copy a `FusedMultiHeadAttention` into PyTorch's `nn.MultiheadAttention(batch_first=True)`.

    Remember its mask polarity: there a boolean `attn_mask` is True where attention is NOT
    allowed, the opposite of the course's masks; pass `~mask`.
    """
    if not isinstance(fused, FusedMultiHeadAttention):
        raise ValueError(f"to_torch() takes a FusedMultiHeadAttention; got {type(fused).__name__}.")
    _no_shared_kv(fused, "to_torch() (nn.MultiheadAttention)")
    if fused.rope:
        raise ValueError(
            "to_torch(): nn.MultiheadAttention has no rotary positions, so a module with rope=True "
            "would lose them; RoPE lives in the model's own attention code (Llama's, for example)."
        )
    bias = _has_bias(fused)
    mha = _empty_like(
        fused, nn.MultiheadAttention, fused.d_model, fused.num_heads, bias=bias, batch_first=True,
        dropout=fused.dropout,
    )  # fmt: skip
    weights = [getattr(fused, name).weight for name in _PROJECTIONS]
    mha.in_proj_weight.copy_(torch.cat(weights, dim=0))  # (3 d_model, d_model)
    mha.out_proj.weight.copy_(fused.w_o.weight)
    if bias:
        mha.in_proj_bias.copy_(torch.cat([getattr(fused, n).bias for n in _PROJECTIONS], dim=0))
        mha.out_proj.bias.copy_(fused.w_o.bias)
    return mha


@torch.no_grad()
def to_qkv(fused: FusedMultiHeadAttention) -> nn.Linear:
    """The GPT-style single projection: one `Linear(d_model, 3 d_model)` whose output splits into
    q, k, v (`qkv(x).split(d_model, dim=-1)`). Its (3 d_model, d_model) weight is W^Q, W^K, W^V
    stacked as rows, so head i's W_i^Q is rows i*d_k .. (i+1)*d_k. W^O stays separate."""
    if not isinstance(fused, FusedMultiHeadAttention):
        raise ValueError(f"to_qkv() takes a FusedMultiHeadAttention; got {type(fused).__name__}.")
    _no_shared_kv(fused, "to_qkv() (a Linear(d_model, 3·d_model))")
    d_model = fused.d_model
    qkv = _empty_like(fused, nn.Linear, d_model, 3 * d_model, bias=_has_bias(fused))
    qkv.weight.copy_(torch.cat([getattr(fused, n).weight for n in _PROJECTIONS]))  # (3 d, d)
    if qkv.bias is not None:
        qkv.bias.copy_(torch.cat([getattr(fused, n).bias for n in _PROJECTIONS]))  # (3 d,)
    return qkv


@torch.no_grad()
def from_qkv(qkv: nn.Linear, w_o: nn.Linear, num_heads: int) -> FusedMultiHeadAttention:
    """A `FusedMultiHeadAttention` from a GPT-style `Linear(d_model, 3 d_model)` and its W^O."""
    d_model = qkv.in_features
    if qkv.out_features != 3 * d_model:
        raise ValueError(
            f"qkv must be Linear(d_model, 3·d_model); got Linear({qkv.in_features}, "
            f"{qkv.out_features}). Its output is split into q, k, v of d_model = "
            f"{d_model} features each."
        )
    if (w_o.in_features, w_o.out_features) != (d_model, d_model):
        raise ValueError(
            f"w_o must be Linear(d_model, d_model) = Linear({d_model}, {d_model}); got "
            f"Linear({w_o.in_features}, {w_o.out_features})."
        )
    bias = qkv.bias is not None
    if (w_o.bias is not None) != bias:
        raise ValueError("qkv and w_o must both have biases or both have none.")
    fused = _empty_like(qkv, FusedMultiHeadAttention, d_model, num_heads, bias=bias)
    for name, weight in zip(_PROJECTIONS, qkv.weight.split(d_model, dim=0)):
        getattr(fused, name).weight.copy_(weight)
    if bias:
        for name, b in zip(_PROJECTIONS, qkv.bias.split(d_model)):
            getattr(fused, name).bias.copy_(b)
    fused.w_o.load_state_dict(w_o.state_dict())
    return fused


@torch.no_grad()
def expand_kv(module: FusedMultiHeadAttention | PerHeadMultiHeadAttention):
    """The plain multi-head attention (one K and V per head) that equals a grouped-query one: each
    K/V block is repeated for the h / g query heads of its group. Same outputs, same h maps; more
    parameters, since the copies can then be trained apart. Returns the same kind of module."""
    if isinstance(module, PerHeadMultiHeadAttention):
        return split(expand_kv(fuse(module)))
    if not isinstance(module, FusedMultiHeadAttention):
        raise ValueError(
            "expand_kv() takes a FusedMultiHeadAttention or a PerHeadMultiHeadAttention; got "
            f"{type(module).__name__}."
        )
    h, g, d_k, d_model = module.num_heads, module.num_kv_heads, module.d_k, module.d_model
    plain = _empty_like(
        module, FusedMultiHeadAttention, d_model, h, bias=_has_bias(module), dropout=module.dropout
    )
    for name in ("w_q", "w_o"):
        getattr(plain, name).load_state_dict(getattr(module, name).state_dict())
    for name in ("w_k", "w_v"):
        source, target = getattr(module, name), getattr(plain, name)
        blocks = source.weight.view(g, d_k, d_model).repeat_interleave(h // g, dim=0)
        target.weight.copy_(blocks.reshape(d_model, d_model))  # head i gets its group's block
        if source.bias is not None:
            target.bias.copy_(source.bias.view(g, d_k).repeat_interleave(h // g, dim=0).flatten())
    return plain


@torch.no_grad()
def share_kv(module: FusedMultiHeadAttention, num_kv_heads: int) -> FusedMultiHeadAttention:
    """A grouped-query attention made from a plain one, as the GQA paper converts a trained model:
    the h K and V blocks are cut into num_kv_heads groups of h / num_kv_heads neighbouring heads,
    and each group's blocks are replaced by their mean. W^Q and W^O are kept. Not exact (the heads
    of a group lose their own keys), except when num_kv_heads = h; `expand_kv` is its exact
    inverse on a module whose heads already share K and V."""
    if not isinstance(module, FusedMultiHeadAttention):
        raise ValueError(
            f"share_kv() takes a FusedMultiHeadAttention; got {type(module).__name__}."
        )
    _no_shared_kv(module, "share_kv()")
    h, d_k, d_model = module.num_heads, module.d_k, module.d_model
    grouped = _empty_like(
        module, FusedMultiHeadAttention, d_model, h, bias=_has_bias(module),
        num_kv_heads=num_kv_heads, dropout=module.dropout,
    )  # fmt: skip
    g = grouped.num_kv_heads  # checked: a divisor of h
    for name in ("w_q", "w_o"):
        getattr(grouped, name).load_state_dict(getattr(module, name).state_dict())
    for name in ("w_k", "w_v"):
        source, target = getattr(module, name), getattr(grouped, name)
        blocks = source.weight.view(g, h // g, d_k, d_model).mean(dim=1)  # (g, d_k, d_model)
        target.weight.copy_(blocks.reshape(g * d_k, d_model))
        if source.bias is not None:
            target.bias.copy_(source.bias.view(g, h // g, d_k).mean(dim=1).flatten())
    return grouped


def _fused_plain(module: FusedMultiHeadAttention | PerHeadMultiHeadAttention):
    """The module as a fused one with one K and V per head (fused and expanded if needed)."""
    if isinstance(module, PerHeadMultiHeadAttention):
        module = fuse(module)
    if not isinstance(module, FusedMultiHeadAttention):
        raise ValueError(
            "takes a FusedMultiHeadAttention or a PerHeadMultiHeadAttention; got "
            f"{type(module).__name__}."
        )
    return expand_kv(module) if module.num_kv_heads < module.num_heads else module


@torch.no_grad()
def w_o_blocks(module: FusedMultiHeadAttention | PerHeadMultiHeadAttention) -> torch.Tensor:
    """W^O cut per head, in the x·W layout: (h, d_k, d_model), block i the d_k rows that head i's
    output meets. concat(head_0 … head_{h−1}) · W^O = Σ_i head_i · W^O_i (bias aside)."""
    fused = _fused_plain(module)
    return fused.w_o.weight.T.reshape(fused.num_heads, fused.d_k, fused.d_model).clone()


@torch.no_grad()
def head_circuits(
    module: FusedMultiHeadAttention | PerHeadMultiHeadAttention,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head as two d_model x d_model matrices in the x·W layout, each of rank at most d_k:
    W_QK[i] = W_i^Q W_i^Kᵀ, where head i looks (its score of token a for token b is
    x_a W_QK[i] x_bᵀ / √d_k), and W_OV[i] = W_i^V W^O_i, what it writes (the output is
    Σ_i weights_i · x · W_OV[i]). Biases are left out. Returns W_QK, W_OV, each
    (h, d_model, d_model).
    """
    fused = _fused_plain(module)
    h, d_k, d_model = fused.num_heads, fused.d_k, fused.d_model
    w_q, w_k, w_v = (getattr(fused, n).weight.view(h, d_k, d_model) for n in _PROJECTIONS)
    w_o = fused.w_o.weight.T.reshape(h, d_k, d_model)  # W^O_i, (d_k, d_model) each
    # nn.Linear's (out, in) rows are the x·W layout's columns: W_i^Q = w_q[i]ᵀ (d_model, d_k)
    return w_q.transpose(1, 2) @ w_k, w_v.transpose(1, 2) @ w_o  # (h, d_model, d_model) each


@torch.no_grad()
def head_singular_values(
    module: FusedMultiHeadAttention | PerHeadMultiHeadAttention,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The d_k largest singular values of each head's W_QK and W_OV (see head_circuits), largest
    first, in float64: two (h, d_k) tensors. The other d_model − d_k are 0.

    Computed from each product's two (d_model, d_k) factors: with A = Q_a R_a and B = Q_b R_b
    (QR), A·Bᵀ = Q_a (R_a R_bᵀ) Q_bᵀ has the singular values of the d_k x d_k core R_a R_bᵀ."""
    fused = _fused_plain(module)
    h, d_k, d_model = fused.num_heads, fused.d_k, fused.d_model
    w_q, w_k, w_v = (
        getattr(fused, n).weight.double().view(h, d_k, d_model).transpose(1, 2)
        for n in _PROJECTIONS
    )  # W_i^Q, W_i^K, W_i^V in the x·W layout: (h, d_model, d_k) each
    w_o = fused.w_o.weight.double().T.reshape(h, d_k, d_model)  # W^O_i: (h, d_k, d_model)

    def singular(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # of a·bᵀ, (h, d, d_k) each
        core = torch.linalg.qr(a).R @ torch.linalg.qr(b).R.transpose(1, 2)  # (h, d_k, d_k)
        return torch.linalg.svdvals(core)  # (h, d_k), largest first

    return singular(w_q, w_k), singular(w_v, w_o.transpose(1, 2))


@torch.no_grad()
def head_ranks(
    module: FusedMultiHeadAttention | PerHeadMultiHeadAttention,
) -> tuple[list[int], list[int]]:
    """The rank of each head's W_QK and W_OV (see head_circuits), as two lists of h ints.

    Computed in float64 from each product's two (d_model, d_k) factors: with A = Q_a R_a and
    B = Q_b R_b (QR), A·Bᵀ = Q_a (R_a R_bᵀ) Q_bᵀ has the singular values of the d_k x d_k core
    R_a R_bᵀ. That is fast, and exact where `torch.linalg.matrix_rank` on a float32
    d_model x d_model product is not: one head as wide as a 128-wide model has singular values
    down to ~2e-6 of the largest, under float32's tolerance, and comes out one short.
    """
    d_model = _fused_plain(module).d_model

    def ranks(singular: torch.Tensor) -> list[int]:  # (h, d_k), largest first
        tol = singular[:, :1] * d_model * torch.finfo(torch.float64).eps  # matrix_rank's default
        return (singular > tol).sum(-1).tolist()

    singular_qk, singular_ov = head_singular_values(module)
    return ranks(singular_qk), ranks(singular_ov)


@torch.no_grad()
def fold_w_o(
    module: FusedMultiHeadAttention | PerHeadMultiHeadAttention,
) -> FusedMultiHeadAttention:
    """A one-head module with W^O folded into W^V: its w_v is W^V·W^O (in nn.Linear's layout
    w_o.weight @ w_v.weight, biases carried through) and its w_o the identity. It computes the
    same output and map: with one head, W^O adds nothing that W^V cannot hold.

    Only for h = 1. With h heads, head i's W^V_i·W^O_i is a d_model x d_model matrix of its own,
    so folding would give each head a d_model-wide value instead of d_k."""
    fused = _fused_plain(module)
    if fused.num_heads != 1:
        raise ValueError(
            f"fold_w_o folds W^O into the W^V of one head; this module has {fused.num_heads} "
            f"heads, each with its own W^V_i·W^O_i, and folding those would make each head's "
            "value d_model wide instead of d_k. It takes a module with num_heads=1."
        )
    bias = _has_bias(fused)
    folded = _empty_like(fused, FusedMultiHeadAttention, fused.d_model, 1, bias=bias,
                         dropout=fused.dropout)  # fmt: skip
    folded.load_state_dict(fused.state_dict())
    w_o = fused.w_o.weight  # (d_model, d_model), nn.Linear's (out, in)
    folded.w_v.weight.copy_(w_o @ fused.w_v.weight)  # x·W^V·W^O = x @ (w_o @ w_v).T
    folded.w_o.weight.copy_(torch.eye(fused.d_model, dtype=w_o.dtype, device=w_o.device))
    if bias:
        folded.w_v.bias.copy_(w_o @ fused.w_v.bias)  # (x W^V + b_v) W^O = x W^V W^O + b_v W^O
    return folded
