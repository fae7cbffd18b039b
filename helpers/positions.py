"""Where attention gets word order from: position embeddings added to x, or rotary positions (RoPE)
applied to each head's q and k.

Attention alone is blind to order: permute the tokens and the outputs and maps permute the same
way (`helpers.claims.check_order_blind`). Two ways in:

- `sinusoidal_positions(T, d_model)`: a fixed vector per position, added to each token's embedding
  before the first layer (Vaswani et al., 2017, section 3.5); learned ones are an `nn.Embedding`.
- `apply_rope(t)`: RoPE (Su et al., 2021, "RoFormer"), used by Llama, Mistral, Qwen and most recent
  models. Inside each head, the d_k features are taken as d_k / 2 pairs, and pair i of the vector
  at position m is turned by the angle m·θ_i, with θ_i = base^(−2i / d_k): fast turns for the
  first pairs, slow ones for the last. A turn keeps lengths, and turning q by m·θ and k by n·θ
  changes their dot product only through (m − n)·θ: the scores see relative positions. d_k must
  be even, since the features go in pairs; each head turns its own pairs, because the rotation
  acts after the cut into heads, on each head's q and k.

Pairs here are (i, i + d_k / 2), the layout of Hugging Face's Llama (`rotate_half`); RoFormer pairs
neighbours (2i, 2i + 1). The two are the same rotation on features listed in another order, which
a trained W^Q and W^K absorb, so a checkpoint must be read with the layout it was trained in.
`apply_rope_complex` computes the same rotation as a product of complex numbers, independently,
for the tests.
"""

from __future__ import annotations

import math

import torch

ROPE_BASE = 10_000.0  # RoFormer's and Llama 2's; Llama 3 uses 500,000


def check_rope_width(d_k: int) -> None:
    """RoPE turns pairs of features: d_k must be even."""
    if d_k % 2:
        raise ValueError(
            f"RoPE turns each head's features in pairs, so d_k must be even; d_k = {d_k} is odd. "
            "Choose h so that d_model / h is even."
        )


def rope_angles(positions: torch.Tensor, d_k: int, base: float = ROPE_BASE) -> torch.Tensor:
    """The angle of pair i at each position, m·θ_i with θ_i = base^(−2i / d_k): (T, d_k / 2),
    in float64."""
    check_rope_width(d_k)
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k / 2,)
    return positions.to(torch.float64)[:, None] * theta[None, :]


def _positions(t: torch.Tensor, positions: torch.Tensor | None, offset: int) -> torch.Tensor:
    T = t.size(-2)
    if positions is None:
        return torch.arange(offset, offset + T)
    if positions.shape != (T,):
        raise ValueError(f"positions must be one per token, ({T},); got {tuple(positions.shape)}.")
    return positions


def rotate_half(t: torch.Tensor) -> torch.Tensor:
    """(a, b) -> (−b, a) on the two halves of the last dim: a quarter turn of every pair."""
    a, b = t.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def apply_rope(
    t: torch.Tensor,
    positions: torch.Tensor | None = None,
    offset: int = 0,
    base: float = ROPE_BASE,
) -> torch.Tensor:
    """Turn each pair of a head's features by its angle at the token's position.

    t is (..., T, d_k): one head's q or k, or all heads' (B, h, T, d_k). Positions are
    offset .. offset + T − 1 unless given (a (T,) tensor). Returns the same shape and dtype."""
    cos, sin = rope_cos_sin(_positions(t, positions, offset), t.size(-1), base)
    return turn(t, cos.to(t.dtype), sin.to(t.dtype))


def rope_cos_sin(positions: torch.Tensor, d_k: int, base: float = ROPE_BASE):
    """cos and sin of every pair's angle, each (T, d_k) with pair i's value at i and i + d_k / 2
    (the layout of Hugging Face's `LlamaRotaryEmbedding`), in float64."""
    angles = rope_angles(positions, d_k, base)  # (T, d_k / 2)
    return torch.cat([angles.cos()] * 2, dim=-1), torch.cat([angles.sin()] * 2, dim=-1)


def turn(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn pair (t_i, t_{i + d_k/2}) by the angle whose cos and sin are at i: (a, b) ->
    (a·cos − b·sin, b·cos + a·sin)."""
    return t * cos + rotate_half(t) * sin


def apply_rope_complex(
    t: torch.Tensor, positions: torch.Tensor | None = None, base: float = ROPE_BASE
) -> torch.Tensor:
    """The same rotation computed another way, for tests: pair i as the complex number
    t_i + j·t_{i + d_k/2}, multiplied by e^{j·m·θ_i}."""
    d_k = t.size(-1)
    angles = rope_angles(_positions(t, positions, 0), d_k, base)  # (T, d_k / 2)
    half = d_k // 2
    z = torch.complex(t[..., :half].double(), t[..., half:].double()) * torch.polar(
        torch.ones_like(angles), angles
    )
    return torch.cat([z.real, z.imag], dim=-1).to(t.dtype)


def sinusoidal_positions(T: int, d_model: int) -> torch.Tensor:
    """Vaswani et al.'s fixed position embeddings, (T, d_model): feature 2i of position p is
    sin(p / 10000^(2i / d_model)), feature 2i + 1 its cos. Added to the token embeddings."""
    if d_model % 2:
        raise ValueError(
            f"sinusoidal positions pair sin and cos: d_model must be even, not {d_model}."
        )
    position = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    rate = torch.exp(
        -math.log(10_000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    )
    table = torch.empty(T, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)
    return table.float()
