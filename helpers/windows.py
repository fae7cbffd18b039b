"""Sliding-window attention and attention sinks, in the course's terms: a mask that lets each query
see only the last `window` positions (and, with `sinks`, the first few tokens as well), the same
mask on every head; and a KV cache that keeps only the tokens such a mask can still reach, so its
memory stops growing with the text.

Notebook 21 uses them. Imports the attention math only."""

from __future__ import annotations

import torch

from helpers.attention import KVCache, _fmt, kv_cache_bytes


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number ≥ 0, got {value!r}.")


def window_mask(T_q: int, T_k: int, window: int, sinks: int = 0) -> torch.Tensor:
    """(T_q, T_k) boolean, True = may attend. The queries are the last T_q of the T_k positions
    (query t sits at position T_k - T_q + t, as in causal decoding); query p may attend key j when
    j ≤ p and either p - j < window (the last `window` positions, its own included) or j < sinks
    (the first `sinks` tokens, kept whatever the distance). window ≥ T_k is plain causal."""
    _check_sizes(T_q=T_q, T_k=T_k, window=window, sinks=sinks)
    if window < 1:
        raise ValueError(f"window must be at least 1 (a query sees itself), got {window}.")
    if T_q > T_k:
        raise ValueError(f"the queries are the last T_q of the T_k positions: T_q = {T_q} > T_k = "
                         f"{T_k}.")  # fmt: skip
    p = torch.arange(T_k - T_q, T_k)  # the queries' positions
    return _allowed(p, torch.arange(T_k), window, sinks)


def _allowed(p: torch.Tensor, j: torch.Tensor, window: int, sinks: int) -> torch.Tensor:
    """(len(p), len(j)): query position p may attend key position j (window_mask's rule)."""
    p, j = p.unsqueeze(1), j.unsqueeze(0)
    return (j <= p) & ((p - j < window) | (j < sinks))


def reach(window: int, layers: int, T: int) -> torch.Tensor:
    """(T, T) boolean: which positions can have reached which after `layers` layers that each
    attend through window_mask(T, T, window): a layer passes on what its keys carried, so the
    masks compose like a graph's steps (a boolean matrix power)."""
    _check_sizes(layers=layers)
    step = window_mask(T, T, window).to(torch.int64)
    seen = torch.eye(T, dtype=torch.int64)
    for _ in range(layers):
        seen = (step @ seen).clamp(max=1)
    return seen.bool()


class WindowKVCache(KVCache):
    """A KVCache for sliding-window attention: after each step it keeps the first `sinks` tokens
    and the last `window` − 1, and drops the rest, which no later query could reach (the next
    query sees itself and the `window` − 1 before it). Its memory stops growing once it holds
    sinks + window − 1 tokens between steps. `positions` are the kept
    tokens' positions; `mask` lets each new query see what window_mask allows. A step with
    several new tokens (a prompt) attends before anything is dropped, so its first queries still
    see their whole window."""

    def __init__(self, window: int, sinks: int = 0):
        super().__init__()
        _check_sizes(window=window, sinks=sinks)
        if window < 1:
            raise ValueError(f"window must be at least 1 (a query sees itself), got {window}.")
        self.window, self.sinks = window, sinks
        self.positions = torch.zeros(0, dtype=torch.long)
        self._seen = 0
        self._step: torch.Tensor | None = None  # the positions the last append returned

    @property
    def seen(self) -> int:
        return self._seen

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' k, v (B, g, T_new, d_k); return the kept tokens and the new ones
        (B, g, T_k, d_k) for this step; then keep only the sinks and the last window."""
        if k.shape != v.shape or k.dim() != 4:
            raise ValueError(f"k and v must both be (B, g, T_new, d_k); got {_fmt(k.shape)} and "
                             f"{_fmt(v.shape)}.")  # fmt: skip
        keys, values = super().append(k, v)
        new = torch.arange(self._seen, self._seen + k.size(2))
        self.positions = torch.cat([self.positions, new])
        self._seen += k.size(2)
        self._step = self.positions
        keep = (self.positions < self.sinks) | (self.positions > self._seen - self.window)
        self.k, self.v, self.positions = keys[:, :, keep], values[:, :, keep], self.positions[keep]
        return keys, values

    def mask(self, T_new: int) -> torch.Tensor:
        """(T_new, T_k) for the keys the last append returned: window_mask's rule by position."""
        if self._step is None:
            raise ValueError("append the new tokens' k and v first: the mask is for that step.")
        p = torch.arange(self._seen - T_new, self._seen)
        return _allowed(p, self._step, self.window, self.sinks)


def window_cache_bytes(
    window: int, sinks: int, num_kv_heads: int, d_k: int, bytes_per_number: int = 4, B: int = 1
) -> int:
    """What a full WindowKVCache holds between steps, whatever the length of the text: 2 (k and v)
    · B · num_kv_heads · d_k · (sinks + window − 1) · bytes_per_number."""
    _check_sizes(window=window, sinks=sinks)
    if window < 1:
        raise ValueError(f"window must be at least 1 (a query sees itself), got {window}.")
    return kv_cache_bytes(sinks + window - 1, num_kv_heads, d_k, 1, bytes_per_number, B)
