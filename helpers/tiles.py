"""Attention a block of keys at a time, as FlashAttention's kernels compute it (Dao et al., 2022;
Dao, 2023), written in plain torch so that every step can be printed and checked.

- `online_softmax_steps` runs the online softmax along one query's row: a running maximum `m`,
  a running sum `total` of exp(score − m) and a running weighted sum `acc` of the values, both
  rescaled by exp(m_old − m_new) whenever a block raises the maximum. After the last block,
  acc / total is the row's output, equal to softmax(scores) @ values, without the row's weights
  ever being held together.
- `tiled_attention` does the same for every query of every head at once, a block of queries
  against a block of keys: apart from the output it fills, (..., T_q, d_v), no tensor it makes is
  larger than one tile of scores per head, (..., block_q, block_k), where the plain computation
  makes (..., T_q, T_k) weights.

These are the kernels' arithmetic, not their speed: in Python the loop over blocks is slow, and
every tile passes through memory. What a real kernel saves, reads and writes of a GPU's main
memory (Dao et al., 2022), is neither timed nor counted here; helpers.timing counts the largest
tensor each way makes. Torch only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["RowStep", "online_softmax_steps", "tiled_attention"]


@dataclass
class RowStep:
    """The online softmax's state after one block of keys, for one query's row.

    `keys`: the block's key positions (start, stop); `scores`: its scores; `m`: the largest score
    so far; `rescale`: exp(m_before − m), what the sum and the accumulator were multiplied by
    (1.0 when the block did not raise the maximum, 0.0 for the first block); `total`: the running
    sum of exp(score − m) over the keys so far; `acc`: the running sum of exp(score − m) · value;
    `out`: acc / total, the output if the row ended here."""

    keys: tuple[int, int]
    scores: torch.Tensor
    m: float
    rescale: float
    total: float
    acc: torch.Tensor
    out: torch.Tensor


def _check_block(name: str, block: int, length: int) -> None:
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"{name} must be a whole number ≥ 1 (the keys or queries per tile), "
                         f"got {block!r}")  # fmt: skip
    if length < 1:
        raise ValueError(f"there are no {'queries' if name == 'block_q' else 'keys'} to tile")


@torch.no_grad()
def online_softmax_steps(scores: torch.Tensor, values: torch.Tensor, block: int) -> list[RowStep]:
    """The online softmax along one row: scores (T_k,) for one query, values (T_k, d_v), keys
    taken `block` at a time. Returns one RowStep per block; the last step's `out` equals
    softmax(scores) @ values."""
    if scores.dim() != 1 or values.dim() != 2 or values.size(0) != scores.size(0):
        raise ValueError(
            f"scores must be (T_k,) and values (T_k, d_v) for the same T_k; got scores "
            f"{tuple(scores.shape)} and values {tuple(values.shape)}"
        )
    _check_block("block", block, scores.size(0))
    m, total, acc = -math.inf, 0.0, torch.zeros(values.size(1), dtype=values.dtype)
    steps = []
    for start in range(0, scores.size(0), block):
        stop = min(start + block, scores.size(0))
        s = scores[start:stop]
        m_new = max(m, s.max().item())
        rescale = math.exp(m - m_new)  # exp(−inf) = 0.0 before the first block
        p = torch.exp(s - m_new)
        total = rescale * total + p.sum().item()
        acc = rescale * acc + p @ values[start:stop]
        m = m_new
        steps.append(RowStep((start, stop), s.clone(), m, rescale, total, acc.clone(), acc / total))
    return steps


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_k: int,
    block_q: int | None = None,
    is_causal: bool = False,
    mask: torch.Tensor | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v for q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), any
    leading dims (batch, heads), computed a tile at a time: `block_q` queries (default: all of
    them) against `block_k` keys, with the online softmax across the key tiles. is_causal: query
    i sees keys 0..i (top-left aligned, as torch's scaled_dot_product_attention); a tile whose
    keys all lie after its queries is skipped, as the kernels skip it. mask: boolean, True = may
    attend, broadcastable to (..., T_q, T_k), as in helpers.attention; a query that may attend to
    no key gets a zero output, as there. return_lse: also return each query's log-sum-exp
    (..., T_q, 1), m + log(total): the one number per row the kernels keep, from which any tile
    of the weights can be recomputed exactly, exp(score − lse) (−inf for a row with no key)."""
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"q, k and v must be (..., T, d) with the same leading dims; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.size(-1) != k.size(-1) or k.size(-2) != v.size(-2):
        raise ValueError(
            f"q and k need the same d_k, k and v the same T_k; got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    T_q, T_k = q.size(-2), k.size(-2)
    block_q = T_q if block_q is None else block_q
    _check_block("block_k", block_k, T_k)
    _check_block("block_q", block_q, T_q)
    scale = 1.0 / math.sqrt(q.size(-1))
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = may attend), got {mask.dtype}")
        mask = mask.expand(*lead, T_q, T_k)
    out = q.new_empty(*lead, T_q, v.size(-1))
    lse = q.new_empty(*lead, T_q, 1)
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        q_tile = q[..., q0:q1, :]
        m = q.new_full((*lead, q1 - q0, 1), -math.inf)
        total = q.new_zeros((*lead, q1 - q0, 1))
        acc = q.new_zeros((*lead, q1 - q0, v.size(-1)))
        for k0 in range(0, T_k, block_k):
            if is_causal and k0 > q1 - 1:
                break  # every later key tile lies after every query of this tile
            k1 = min(k0 + block_k, T_k)
            s = q_tile @ k[..., k0:k1, :].mT * scale
            if is_causal and k1 - 1 > q0:  # the tile crosses the diagonal
                rows = torch.arange(q0, q1).unsqueeze(-1)
                cols = torch.arange(k0, k1)
                s = s.masked_fill(cols > rows, -math.inf)
            if mask is not None:
                s = s.masked_fill(~mask[..., q0:q1, k0:k1], -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            # a row with no key seen yet keeps m = −inf: subtract 0 there, not −inf (NaN)
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            rescale = torch.exp(m - safe)
            p = torch.exp(s - safe)
            total = rescale * total + p.sum(dim=-1, keepdim=True)
            acc = rescale * acc + p @ v[..., k0:k1, :]
            m = m_new
        # a query that saw no key has total 0: its output is 0, not 0 / 0
        seen = total.clamp_min(torch.finfo(total.dtype).tiny)
        out[..., q0:q1, :] = torch.where(total > 0, acc / seen, 0.0)
        lse[..., q0:q1, :] = m + torch.log(total)  # −inf + log 0 = −inf where no key was seen
    return (out, lse) if return_lse else out
