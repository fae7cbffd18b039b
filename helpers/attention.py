"""The attention math of the course, in three layouts that compute the same thing.

- `scaled_dot_product_attention`: softmax(q kᵀ / √d_k) v, the one formula everything uses.
- `SelfAttention`: one head, with its own w_q, w_k, w_v of shape d_model -> d_k.
- `PerHeadMultiHeadAttention`: h such heads side by side, concatenated, then w_o.
- `FusedMultiHeadAttention`: the same h heads as one d_model x d_model matrix per projection,
  split into heads by a view and a transpose. This is the layout real code uses.

Conventions (the same in every notebook): `nn.Linear` stores its matrix as
(out_features, in_features) and computes `x @ W.T`; x is (B, T, d_model); masks are boolean with
True = may attend (the convention of `torch.nn.functional.scaled_dot_product_attention`).
`rope=True` turns each head's q and k by position (RoPE, `helpers.positions`) in all three.
This module is torch only: no plotting, no widgets.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from helpers.positions import apply_rope, check_rope_width

__all__ = [
    "KVCache",
    "kv_cache_bytes",
    "MASK_SHAPES",
    "check_num_kv_heads",
    "check_dropout",
    "heads_mask",
    "scaled_dot_product_attention",
    "attention_scores",
    "SelfAttention",
    "PerHeadMultiHeadAttention",
    "FusedMultiHeadAttention",
    "split_heads",
    "merge_heads",
    "valid_head_counts",
    "check_num_heads",
    "count_parameters",
]


def _fmt(shape) -> str:
    """A shape as the learner writes it: (2, 6, 8)."""
    return str(tuple(int(n) for n in shape))


def valid_head_counts(d_model: int) -> list[int]:
    """The numbers of heads h for which d_k = d_model / h is a whole number."""
    return [h for h in range(1, d_model + 1) if d_model % h == 0]


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number; got {value!r}.")


def check_num_kv_heads(num_heads: int, num_kv_heads: int | None) -> int:
    """How many K/V heads the query heads share (None = one per query head, plain multi-head
    attention); raise ValueError unless it divides num_heads into equal groups."""
    if num_kv_heads is None:
        return num_heads
    _check_positive("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        works = ", ".join(str(g) for g in range(1, num_heads + 1) if num_heads % g == 0)
        raise ValueError(
            f"num_kv_heads = {num_kv_heads} does not divide num_heads = {num_heads}: each K/V head "
            f"serves an equal group of query heads. num_kv_heads that work here: {works} "
            f"(1 = multi-query, {num_heads} = plain multi-head)."
        )
    return num_kv_heads


def check_num_heads(d_model: int, num_heads: int) -> int:
    """Return d_k = d_model // num_heads, or raise ValueError saying why it cannot work."""
    _check_positive("d_model", d_model)
    _check_positive("num_heads", num_heads)
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: each head gets "
            f"d_k = d_model / num_heads = {d_model}/{num_heads} = {d_model / num_heads:.2f} "
            f"features, which must be a whole number. Head counts that work for d_model={d_model}: "
            f"{', '.join(map(str, valid_head_counts(d_model)))}."
        )
    return d_model // num_heads


def check_dropout(dropout: float) -> float:
    """A dropout probability, 0 <= p < 1, or a ValueError that says what it is."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(
            f"dropout is the probability of zeroing each attention weight in training, "
            f"0 <= dropout < 1; got {dropout!r}. 0.0 (the default) turns it off. BERT and the "
            "first GPT trained with 0.1; many recent LLMs set 0.0 (notebook 07)."
        )
    return float(dropout)


def _check_x(x: torch.Tensor, d_model: int) -> None:
    """Raise ValueError unless x is (B, T, d_model)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(
            f"x must be a torch.Tensor of shape (B, T, d_model); got {type(x).__name__}."
        )
    if x.dim() != 3:
        hint = " Add a batch dim with x.unsqueeze(0)." if x.dim() == 2 else ""
        raise ValueError(
            f"x must have 3 dims (B, T, d_model) = (B, T, {d_model}); got shape {_fmt(x.shape)} "
            f"with {x.dim()} dims.{hint}"
        )
    if x.size(-1) != d_model:
        raise ValueError(
            f"x must have shape (B, T, d_model) with d_model={d_model}; got shape "
            f"{_fmt(x.shape)}, whose last dim is {x.size(-1)}. Build the module with "
            f"d_model={x.size(-1)}, or project x to {d_model} features first."
        )


def _keys_from(x: torch.Tensor, context: torch.Tensor | None, d_model: int) -> torch.Tensor:
    """What keys and values are made from: `context` (B, T_k, d_model), or x itself."""
    if context is None:
        return x  # self-attention: the layer's three inputs are all x
    if not isinstance(context, torch.Tensor) or context.dim() != 3:
        got = _fmt(context.shape) if isinstance(context, torch.Tensor) else type(context).__name__
        raise ValueError(
            f"context must be a tensor of shape (B, T_k, d_model): the sequence the keys and "
            f"values come from; got {got}. Leave it out (None) for self-attention."
        )
    if context.size(0) != x.size(0) or context.size(-1) != d_model:
        raise ValueError(
            f"context must be (B, T_k, d_model) = ({x.size(0)}, T_k, {d_model}), with the batch of "
            f"x {_fmt(x.shape)} and the module's d_model; got {_fmt(context.shape)}. T_k may "
            "differ from x's T."
        )
    return context


def _check_rope(rope: bool, d_k: int, context: torch.Tensor | None = None) -> None:
    if rope and context is not None:
        raise ValueError(
            "rope=True turns q and k by their positions in one sequence (self-attention); "
            "cross-attention's queries and keys come from two sequences, so it is not defined here."
        )
    if rope:
        check_rope_width(d_k)


def _check_bool(mask: torch.Tensor) -> None:
    """Raise ValueError unless mask is a boolean tensor."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(
            f"mask must be a boolean tensor (True = may attend); got {got}. "
            "Turn a 0/1 mask into one with mask.bool(); a mask with True = blocked "
            "(nn.MultiheadAttention's convention) with ~mask."
        )


def _check_mask(mask: torch.Tensor, target: tuple[int, ...], names: str) -> None:
    """Raise ValueError unless mask is boolean and broadcasts to `target` (named by `names`)."""
    _check_bool(mask)
    try:
        fits = torch.broadcast_shapes(mask.shape, target) == torch.Size(target)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {_fmt(mask.shape)} does not broadcast to {names} = {_fmt(target)}. "
            "Use (T, T) for one mask shared by the batch (e.g. causal), (B, 1, T) to hide padded "
            "keys, or the full (B, T, T)."
        )


MASK_SHAPES = (
    "(T_q, T_k) for one mask shared by the batch (e.g. causal), (B, 1, T_k) to hide padded keys, "
    "(B, T_q, T_k), or with a head dim (B, 1, T_q, T_k) or (B, h, T_q, T_k), as "
    "F.scaled_dot_product_attention takes them"
)


def heads_mask(mask: torch.Tensor, B: int, h: int, T_q: int, T_k: int) -> torch.Tensor:
    """A boolean mask (True = may attend) in any of the shapes of MASK_SHAPES, as a 4-dim tensor
    that broadcasts to (B, h, T_q, T_k). A mask of 3 dims or fewer has no head dim: it is the same
    for every head, so it gets one (mask.unsqueeze(-3)); a 4-dim mask already has one."""
    _check_bool(mask)
    target = (B, h, T_q, T_k)
    m = mask.unsqueeze(-3) if mask.dim() == 3 else mask  # (B, 1, T_q, T_k): one mask for all heads
    try:
        fits = m.dim() <= 4 and torch.broadcast_shapes(m.shape, target) == torch.Size(target)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {_fmt(mask.shape)} does not broadcast to (B, h, T_q, T_k) = "
            f"{_fmt(target)}. Use {MASK_SHAPES}."
        )
    return m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))  # 4 dims, for head slices


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The scores before softmax, q kᵀ / √d_k: q (..., T_q, d_k), k (..., T_k, d_k).

    Returns (..., T_q, T_k): row t holds how well query t matches each key.
    """
    if q.size(-1) != k.size(-1):
        raise ValueError(
            f"q and k must have the same last dim d_k to be compared by a dot product; got q "
            f"{_fmt(q.shape)} and k {_fmt(k.shape)}."
        )
    # scaling q rather than the scores: T·d_k multiplications per head instead of T·T
    return (q * (1.0 / math.sqrt(q.size(-1)))) @ k.transpose(-2, -1)  # (..., T_q, T_k)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v over the last two dims, with any leading dims.

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); mask boolean, True = may attend,
    broadcastable to (..., T_q, T_k). Returns out (..., T_q, d_v) and weights (..., T_q, T_k),
    each row of weights summing to 1. A query row that may attend to no key gets zero weights and
    a zero output (never NaN, in the forward pass or in gradients).

    With dropout = p > 0, each weight is zeroed with probability p and the others are scaled by
    1 / (1 − p), as in training (the modules pass p only in training mode): a row then sums to 1
    only on average. The weights returned are the ones applied to v, as nn.MultiheadAttention's.
    """
    if k.size(-2) != v.size(-2):
        raise ValueError(
            f"k and v must have one row per key (the same T_k); got k {_fmt(k.shape)} and v "
            f"{_fmt(v.shape)}."
        )
    scores = attention_scores(q, k)  # (..., T_q, T_k)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        _check_mask(mask, tuple(scores.shape), "the scores' shape (..., T_q, T_k)")
        # A query with no allowed key would take a softmax over only -inf, which is NaN: give such
        # rows finite scores first, then zero weights.
        has_key = mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
        scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~has_key, 0.0)
        weights = scores.softmax(dim=-1).masked_fill(~has_key, 0.0)
    if dropout > 0:  # training: zero some weights, scale the rest by 1 / (1 - p)
        weights = F.dropout(weights, p=dropout)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def split_heads(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, d_model) -> (B, h, T, d_k): cut the features into h blocks of d_k, head first."""
    B, T, d_model = t.shape
    d_k = check_num_heads(d_model, num_heads)
    return t.view(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k): put the heads' outputs side by side again."""
    B, h, T, d_k = t.shape
    return t.transpose(1, 2).reshape(B, T, h * d_k)  # (B, T, h * d_k)


def count_parameters(module: nn.Module) -> int:
    """The number of learnable numbers in a module."""
    return sum(p.numel() for p in module.parameters())


class SelfAttention(nn.Module):
    """One attention head: q = x W_qᵀ, k = x W_kᵀ, v = x W_vᵀ, each d_model -> d_k."""

    def __init__(
        self, d_model: int, d_k: int, bias: bool = False, dropout: float = 0.0, rope: bool = False
    ):
        super().__init__()
        _check_positive("d_model", d_model)
        _check_positive("d_k", d_k)
        _check_rope(rope, d_k)
        self.d_model, self.d_k, self.rope = d_model, d_k, rope
        self.dropout = check_dropout(dropout)  # on the weights, in training mode only
        self.w_q = nn.Linear(d_model, d_k, bias=bias)
        self.w_k = nn.Linear(d_model, d_k, bias=bias)
        self.w_v = nn.Linear(d_model, d_k, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        context: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries from x (B, T_q, d_model); keys and values from context (B, T_k, d_model),
        which is x itself unless given (cross-attention); mask broadcastable to (B, T_q, T_k).
        With rope, q and k are turned by their positions 0 .. T − 1 first.

        Returns out (B, T_q, d_k) and weights (B, T_q, T_k).
        """
        _check_x(x, self.d_model)
        _check_rope(self.rope, self.d_k, context)
        source = _keys_from(x, context, self.d_model)
        B, T_q, _ = x.shape
        T_k = source.size(1)
        if mask is not None:
            _check_mask(mask, (B, T_q, T_k), "(B, T_q, T_k)")
        q = self.w_q(x)  # (B, T_q, d_k)
        k, v = self.w_k(source), self.w_v(source)  # each (B, T_k, d_k)
        if self.rope:
            q, k = apply_rope(q), apply_rope(k)  # pair i of token m turned by m·θ_i
        return scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0)


class PerHeadMultiHeadAttention(nn.Module):
    """h heads, each a `SelfAttention` with its own W_i^Q, W_i^K, W_i^V (d_model -> d_k), then w_o.

    This is the paper's picture written literally: a Python loop over heads. `d_k` defaults to
    d_model / num_heads; another d_k also works, with w_o mapping h·d_k features back to d_model.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = False,
        d_k: int | None = None,
        num_kv_heads: int | None = None,
        dropout: float = 0.0,
        rope: bool = False,
    ):
        super().__init__()
        if d_k is None:
            d_k = check_num_heads(d_model, num_heads)
        _check_positive("d_model", d_model)
        _check_positive("num_heads", num_heads)
        _check_positive("d_k", d_k)
        self.d_model, self.num_heads, self.d_k, self.rope = d_model, num_heads, d_k, rope
        self.num_kv_heads = check_num_kv_heads(num_heads, num_kv_heads)
        self.dropout = check_dropout(dropout)  # each head drops its own weights in training
        self.heads = nn.ModuleList(
            SelfAttention(d_model, d_k, bias=bias, dropout=dropout, rope=rope)
            for _ in range(num_heads)
        )
        # grouped-query: the heads of a group use their first head's K and V (the same modules)
        for i, head in enumerate(self.heads):
            owner = self.kv_owners[i // (num_heads // self.num_kv_heads)]
            head.w_k, head.w_v = owner.w_k, owner.w_v
        self.w_o = nn.Linear(num_heads * d_k, d_model, bias=bias)  # (h·d_k) -> d_model

    @property
    def kv_owners(self) -> list[SelfAttention]:
        """The heads whose w_k, w_v the others share: the first head of each of the g groups (all
        h heads when nothing is shared)."""
        group = self.num_heads // self.num_kv_heads
        return [self.heads[g * group] for g in range(self.num_kv_heads)]

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        context: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries from x (B, T_q, d_model); keys and values from context (B, T_k, d_model), x
        itself unless given. mask boolean, True = may attend, in any shape of MASK_SHAPES: one
        for all heads, or (B, h, T_q, T_k) with one mask per head (head i gets its own slice).

        Returns out (B, T_q, d_model) and weights (B, h, T_q, T_k), one map per head.
        """
        _check_x(x, self.d_model)
        source = _keys_from(x, context, self.d_model)
        B, T_q, _ = x.shape
        h = self.num_heads
        masks = [None] * h
        if mask is not None:
            m = heads_mask(mask, B, h, T_q, source.size(1))  # 4 dims, each full or 1
            masks = [m[:, i if m.size(1) > 1 else 0] for i in range(h)]  # head i's (B, T_q, T_k)
        # (1) each head projects x (and the context) and attends on its own
        outs, weights = zip(
            *(head(x, m_i, context) for head, m_i in zip(self.heads, masks))
        )  # h x (B, T_q, d_k), (B, T_q, T_k)
        # (2) concatenate the heads' outputs, (3) mix them with w_o
        concat = torch.cat(outs, dim=-1)  # (B, T_q, h * d_k), usually (B, T_q, d_model)
        return self.w_o(concat), torch.stack(weights, dim=1)  # (B, T_q, d_model), (B, h, T_q, T_k)


class KVCache:
    """The keys and values a layer has made so far, for step-by-step causal decoding (one cache
    per layer and batch of sequences). Pass it to `FusedMultiHeadAttention(..., cache=cache)` with
    only the new tokens: their k and v are appended, and each new query attends to every key up to
    its own position, exactly as in the full causal forward. It stores the g K/V heads, not h:
    that is what grouped-query attention saves."""

    def __init__(self):
        self.k: torch.Tensor | None = None  # (B, g, T, d_k)
        self.v: torch.Tensor | None = None  # (B, g, T, d_k)

    def __len__(self) -> int:
        """T, the number of tokens cached so far."""
        return 0 if self.k is None else self.k.size(2)

    @property
    def seen(self) -> int:
        """How many tokens the cache has been given: the position of the next one (here every
        token is kept, so len(cache); a cache that drops tokens keeps counting)."""
        return len(self)

    def mask(self, T_new: int) -> torch.Tensor:
        """Which keys that `append` just returned each of the T_new new queries may attend, as
        (T_new, T_keys), True = may attend: causal, new query t at position seen - T_new + t."""
        keys = len(self)
        return torch.ones(T_new, keys, dtype=torch.bool).tril(diagonal=keys - T_new)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' k, v (B, g, T_new, d_k); return all of them (B, g, T, d_k)."""
        if self.k is not None and (self.k.shape[:2], self.k.size(3)) != (k.shape[:2], k.size(3)):
            raise ValueError(
                f"this cache holds k of shape (B, g, T, d_k) = {_fmt(self.k.shape)}; the new k is "
                f"{_fmt(k.shape)}. Use one cache per layer and batch of sequences."
            )
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v

    @property
    def nbytes(self) -> int:
        """Its memory: 2 (k and v) · B · g · d_k · T · bytes per number."""
        return 0 if self.k is None else 2 * self.k.numel() * self.k.element_size()


def kv_cache_bytes(
    T: int, num_kv_heads: int, d_k: int, num_layers: int = 1, bytes_per_number: int = 4, B: int = 1
) -> int:
    """What a `KVCache` of T tokens holds, in every layer: 2 (k and v) · B · num_kv_heads · d_k ·
    T · bytes_per_number, times num_layers. float32 is 4 bytes, float16 and bfloat16 are 2."""
    for name, value in dict(T=T, num_kv_heads=num_kv_heads, d_k=d_k, num_layers=num_layers,
                            bytes_per_number=bytes_per_number, B=B).items():  # fmt: skip
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number ≥ 0, got {value!r}.")
    return 2 * B * num_kv_heads * d_k * T * bytes_per_number * num_layers


class FusedMultiHeadAttention(nn.Module):
    """The same h heads with one d_model x d_model matrix per projection, as real code does it.

    Head i's W_i^Q is rows i*d_k .. (i+1)*d_k of `w_q.weight` (nn.Linear's (out, in) layout).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = False,
        num_kv_heads: int | None = None,
        dropout: float = 0.0,
        rope: bool = False,
    ):
        super().__init__()
        self.d_k = check_num_heads(d_model, num_heads)
        _check_rope(rope, self.d_k)
        self.rope = rope  # RoPE: each head's q and k turned by position, after the cut
        self.dropout = check_dropout(dropout)  # on the weights, in training mode only
        self.d_model, self.num_heads = d_model, num_heads
        # grouped-query (1 = multi-query): K and V have num_kv_heads heads, each shared by a group
        self.num_kv_heads = check_num_kv_heads(num_heads, num_kv_heads)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, self.num_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, self.num_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        context: torch.Tensor | None = None,
        need_weights: bool = True,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries from x (B, T_q, d_model); keys and values from context (B, T_k, d_model), x
        itself unless given (cross-attention). mask boolean, True = may attend, in any shape of
        MASK_SHAPES: one for all heads, or (B, h, T_q, T_k) with one mask per head.

        Returns out (B, T_q, d_model) and weights (B, h, T_q, T_k), one map per head. With
        need_weights=False the weights are not formed (None) and attention runs in PyTorch's fused
        kernel, as `nn.MultiheadAttention(need_weights=False)` does: the same out, faster.

        With a `KVCache`, x holds only the new tokens of a causal decoding: their k and v join the
        cache, and without a mask each new query sees every key up to its own position; the
        weights are then (B, h, T_new, T_cached). With rope, each head's q and k are turned by
        their positions (after the cache's tokens, when there is one) before k is cached.
        """
        _check_x(x, self.d_model)
        _check_rope(self.rope, self.d_k, context)
        if cache is not None and context is not None:
            raise ValueError(
                "a KVCache is for self-attention decoding, where keys and values come from the "
                "tokens so far; for cross-attention compute the context's k and v once instead."
            )
        source = _keys_from(x, context, self.d_model)
        B, T_q, _ = x.shape
        # (1) project once with the whole matrix, then cut the features into heads
        q = split_heads(self.w_q(x), self.num_heads)  # (B, h, T_q, d_k)
        k = split_heads(self.w_k(source), self.num_kv_heads)  # (B, g, T_k, d_k), g K/V heads
        v = split_heads(self.w_v(source), self.num_kv_heads)  # (B, g, T_k, d_k)
        past = cache.seen if cache is not None else 0  # the new tokens' first position
        if self.rope:  # each head turns its own pairs: the rotation acts on (B, h, T, d_k)
            q, k = apply_rope(q, offset=past), apply_rope(k, offset=past)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, g, T_k, d_k): every token so far the cache keeps
            if mask is None:  # causal (within the cache's window, if it has one)
                mask = cache.mask(T_q).to(x.device)  # (T_q, T_k)
        if mask is not None:
            mask = heads_mask(mask, B, self.num_heads, T_q, k.size(2))  # to (B, h, T_q, T_k)
        if self.num_kv_heads < self.num_heads:  # each K/V head serves h / g query heads in a row
            group = self.num_heads // self.num_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, h, …)
        # (2) attend: the head dim rides along as a batch dim, so there are h softmaxes
        p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, p)  # (B,h,T,d_k), (B,h,T,T)
        else:  # the same formula in one kernel; a fully masked row gives zeros there too
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            weights = None
        # (3) put the heads side by side again and mix them with w_o
        return self.w_o(merge_heads(out)), weights  # (B, T, d_model), (B, h, T, T) or None
