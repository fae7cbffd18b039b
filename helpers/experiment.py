"""A small task that needs two places at once, to compare one head with h heads.

At every position t, the model must name two tokens: the previous one (t − 1) and the first one
(position 0). One attention layer reads token + position embeddings under a causal mask; a linear
readout predicts both tokens. There is no residual path and no MLP, so everything the readout
knows comes through attention. One head has one softmax, so it must split its weight between the
two places and gets their values mixed; two heads can each look at one place and keep the two
apart in separate features of the concatenation. Both models have the same parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import FusedMultiHeadAttention

__all__ = ["two_place_batch", "TwoPlaceModel", "TrainResult", "train_two_place", "accuracy"]

VOCAB, T_MAX, D_MODEL = 16, 8, 16


def two_place_batch(
    batch: int, T: int = T_MAX, vocab: int = VOCAB, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences and their targets.

    Returns tokens (B, T) and targets (B, T, 2): targets[..., t, 0] is the token at t − 1 (at t = 0,
    which has no previous token, the token itself), targets[..., t, 1] the token at position 0.
    """
    tokens = torch.randint(0, vocab, (batch, T), generator=generator)  # (B, T)
    previous = torch.cat([tokens[:, :1], tokens[:, :-1]], dim=1)  # (B, T)
    first = tokens[:, :1].expand(batch, T)  # (B, T)
    return tokens, torch.stack([previous, first], dim=-1)  # (B, T), (B, T, 2)


class TwoPlaceModel(nn.Module):
    """Embeddings -> one causal multi-head attention layer -> a readout of two tokens."""

    def __init__(self, num_heads: int, d_model: int = D_MODEL, vocab: int = VOCAB, T: int = T_MAX):
        super().__init__()
        self.vocab = vocab
        self.token_embedding = nn.Embedding(vocab, d_model)
        self.position_embedding = nn.Embedding(T, d_model)
        self.attention = FusedMultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, 2 * vocab)  # logits for (previous, first)
        self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).tril())

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens (B, T) -> logits (B, T, 2, vocab), attention weights (B, h, T, T)."""
        B, T = tokens.shape
        x = self.token_embedding(tokens) + self.position_embedding.weight[:T]  # (B, T, d_model)
        out, weights = self.attention(x, self.causal[:T, :T])  # (B, T, d_model), (B, h, T, T)
        return self.readout(out).view(B, T, 2, self.vocab), weights


@dataclass
class TrainResult:
    model: TwoPlaceModel
    losses: list[float] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        """Mean loss of the last 20 steps (one step is noisy)."""
        tail = self.losses[-20:]
        return sum(tail) / len(tail)


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    # position 0 has no previous token: leave it out
    return F.cross_entropy(logits[:, 1:].flatten(0, 2), targets[:, 1:].flatten())


def train_two_place(
    num_heads: int, steps: int = 300, seed: int = 0, batch: int = 64, lr: float = 1e-2
) -> TrainResult:
    """Train a fresh, seeded TwoPlaceModel with Adam; returns it with its loss after every step."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    result = TrainResult(TwoPlaceModel(num_heads))
    optimizer = torch.optim.Adam(result.model.parameters(), lr=lr)
    for _ in range(steps):
        tokens, targets = two_place_batch(batch, generator=generator)
        logits, _ = result.model(tokens)
        loss = _loss(logits, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        result.losses.append(loss.item())
    return result


@torch.no_grad()
def accuracy(model: TwoPlaceModel, batch: int = 1024, seed: int = 1234) -> tuple[float, float]:
    """Fraction of positions t >= 1 where the model names (previous, first) right, on fresh data."""
    tokens, targets = two_place_batch(batch, generator=torch.Generator().manual_seed(seed))
    logits, _ = model(tokens)
    right = (logits.argmax(-1) == targets)[:, 1:]  # (B, T - 1, 2)
    return float(right[..., 0].float().mean()), float(right[..., 1].float().mean())
