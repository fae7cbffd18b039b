"""The small, seeded example every notebook starts from: a sentence, made-up embeddings, and
attention modules with random weights scaled so their maps have visible contrast.

Nothing here is learned: real embeddings and weights come from training (see the notebook on a
pretrained model). Torch only.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import nn

from helpers.attention import FusedMultiHeadAttention, PerHeadMultiHeadAttention, check_num_heads
from helpers.layouts import split

__all__ = ["SENTENCE", "tokens", "embed", "init_weights_", "seeded_attention"]

SENTENCE = "the cat sat on a warm mat"


def tokens(sentence: str = SENTENCE) -> list[str]:
    """Split a sentence into word tokens (the course's toy tokenizer: one token per word)."""
    words = sentence.split()
    if not words:
        raise ValueError("The sentence is empty: give at least one word, e.g. 'the cat sat'.")
    return words


def embed(words: list[str], d_model: int, seed: int = 0) -> torch.Tensor:
    """Made-up embeddings: one seeded random vector per token, (1, T, d_model) = (B, T, d_model).

    Entries have mean 0 and variance 1, as after a LayerNorm. The same seed and d_model always
    give the same x.
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(1, len(words), d_model, generator=generator)  # (B, T, d_model)


@torch.no_grad()
def init_weights_(module: nn.Module, seed: int = 0, gain: float = 1.5) -> nn.Module:
    """Give every nn.Linear in `module` seeded weights N(0, gain² / in_features) and zero biases.

    With x of variance 1 this makes q and k entries of variance gain², so scores q·k/√d_k have a
    spread of about gain²: attention maps with contrast, as trained models have. PyTorch's default
    initialisation gives nearly uniform maps, which teach nothing to look at.
    """
    generator = torch.Generator().manual_seed(seed)
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            std = gain / math.sqrt(layer.in_features)
            weight = torch.randn(layer.weight.shape, generator=generator) * std
            layer.weight.copy_(weight)
            if layer.bias is not None:
                layer.bias.zero_()
    return module


@lru_cache(maxsize=64)
def _seeded_matrices(d_model: int, seed: int) -> dict[str, torch.Tensor]:
    return init_weights_(FusedMultiHeadAttention(d_model, 1), seed=seed).state_dict()


def seeded_attention(
    d_model: int, num_heads: int, seed: int = 0, per_head: bool = False
) -> FusedMultiHeadAttention | PerHeadMultiHeadAttention:
    """The course's example multi-head attention: seeded d_model x d_model matrices cut into
    `num_heads` heads, as a fused module, or with per_head=True as h separate heads.

    The matrices depend only on d_model and the seed, not on h: changing h cuts the same numbers
    into heads differently, which is all that h changes.
    """
    check_num_heads(d_model, num_heads)  # ValueError if num_heads does not divide d_model
    with torch.device("meta"):  # no random initialisation: every weight is loaded just below
        fused = FusedMultiHeadAttention(d_model, num_heads)
    fused.load_state_dict(_seeded_matrices(d_model, seed), assign=True)
    return split(fused) if per_head else fused
