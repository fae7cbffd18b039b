"""Small experiments: two tasks, each trained on CPU in about a second, and the measurements
behind the √d_k in the scores (notebook 02). The checks behind those notebooks' ✓ lines are in
helpers.claims: each prints one line naming what it compared, or raises AssertionError saying what
came instead (`tests/test_claims_softmax_and_matrices.py` feeds each one a wrong measurement).

`two_place`: a task that needs two places at once, to compare one head with h heads.

At every position t, the model must name two tokens: the previous one (t − 1) and the first one
(position 0). One attention layer reads token + position embeddings under a causal mask; a linear
readout predicts both tokens. There is no residual path and no MLP, so everything the readout
knows comes through attention. One head has one softmax, so it must split its weight between the
two places and gets their values mixed; two heads can each look at one place and keep the two
apart in separate features of the concatenation. Both models have the same parameters.

`reverse`: cross-attention must find, for each output position, the source position to copy.
The decoder's queries know only which output position they fill (position embeddings); the keys
and values come from the source tokens (token + position embeddings). To write the source
backwards, output t must put its weight on source position T − 1 − t: an alignment the maps show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import FusedMultiHeadAttention

__all__ = [
    "two_place_batch",
    "TwoPlaceModel",
    "TrainResult",
    "train_two_place",
    "accuracy",
    "reverse_batch",
    "ReverseModel",
    "train_reverse",
    "reverse_accuracy",
    "alignment",
    "dot_product_variance",
    "Saturation",
    "softmax_saturation",
    "projected_dot_variance",
]

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


def _fit(model, batches, loss, steps: int, seed: int, batch: int, lr: float) -> TrainResult:
    """Adam on `model` for `steps` seeded batches from `batches(batch, generator=...)`.

    On one thread: with two, how a sum is split between them can change its last bits from run to
    run when the machine is busy, and 300 steps carry that into the third decimal of the loss."""
    generator = torch.Generator().manual_seed(seed)
    result = TrainResult(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(steps):
            tokens, targets = batches(batch, generator=generator)
            logits, _ = model(tokens)
            value = loss(logits, targets)
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            result.losses.append(value.item())
    finally:
        torch.set_num_threads(threads)
    return result


def train_two_place(
    num_heads: int, steps: int = 300, seed: int = 0, batch: int = 64, lr: float = 1e-2
) -> TrainResult:
    """Train a fresh, seeded TwoPlaceModel with Adam; returns it with its loss after every step."""
    torch.manual_seed(seed)
    return _fit(TwoPlaceModel(num_heads), two_place_batch, _loss, steps, seed, batch, lr)


@torch.no_grad()
def accuracy(model: TwoPlaceModel, batch: int = 1024, seed: int = 1234) -> tuple[float, float]:
    """Fraction of positions t >= 1 where the model names (previous, first) right, on fresh data."""
    tokens, targets = two_place_batch(batch, generator=torch.Generator().manual_seed(seed))
    logits, _ = model(tokens)
    right = (logits.argmax(-1) == targets)[:, 1:]  # (B, T - 1, 2)
    return float(right[..., 0].float().mean()), float(right[..., 1].float().mean())


def reverse_batch(
    batch: int, T: int = T_MAX, vocab: int = VOCAB, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random source sequences (B, T) and their targets (B, T): the same tokens backwards."""
    source = torch.randint(0, vocab, (batch, T), generator=generator)  # (B, T_k)
    return source, source.flip(1)  # (B, T_k), (B, T_q) with T_q = T_k


class ReverseModel(nn.Module):
    """Output positions (queries) -> one cross-attention layer over the source -> a readout."""

    def __init__(self, num_heads: int, d_model: int = D_MODEL, vocab: int = VOCAB, T: int = T_MAX):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, d_model)
        self.source_position = nn.Embedding(T, d_model)
        self.output_position = nn.Embedding(T, d_model)
        self.cross = FusedMultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, vocab)

    def forward(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """source (B, T_k) -> logits (B, T_q, vocab), weights (B, h, T_q, T_k); T_q = T_k."""
        B, T = source.shape
        context = self.token_embedding(source) + self.source_position.weight[:T]  # (B, T_k, d)
        queries = self.output_position.weight[:T].expand(B, T, -1)  # (B, T_q, d): positions only
        out, weights = self.cross(queries, context=context)  # keys and values from the source
        return self.readout(out), weights


def _reverse_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def train_reverse(
    num_heads: int, steps: int = 300, seed: int = 0, batch: int = 64, lr: float = 1e-2
) -> TrainResult:
    """Train a fresh, seeded ReverseModel with Adam; returns it with its loss after every step."""
    torch.manual_seed(seed)
    return _fit(ReverseModel(num_heads), reverse_batch, _reverse_loss, steps, seed, batch, lr)


@torch.no_grad()
def reverse_accuracy(model: ReverseModel, batch: int = 1024, seed: int = 1234) -> float:
    """Fraction of output tokens right, on fresh sequences."""
    source, targets = reverse_batch(batch, generator=torch.Generator().manual_seed(seed))
    logits, _ = model(source)
    return float((logits.argmax(-1) == targets).float().mean())


@torch.no_grad()
def alignment(model: ReverseModel, batch: int = 256, seed: int = 1234) -> torch.Tensor:
    """The mean weight each head puts on the right source position (T − 1 − t) for output t, on
    fresh sequences: (h, T_q). 1 everywhere is a perfect anti-diagonal."""
    source, _ = reverse_batch(batch, generator=torch.Generator().manual_seed(seed))
    _, weights = model(source)  # (B, h, T_q, T_k)
    T = source.size(1)
    t = torch.arange(T)
    return weights.mean(0)[:, t, T - 1 - t]  # (h, T_q)


def _unit_normal(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@lru_cache(maxsize=8)
def _pool(shape: tuple[int, ...], width: int, seed: int) -> torch.Tensor:
    """Unit-normal draws (*shape, width), kept: drawing them is most of the cost, and every d_k up
    to `width` reads its first d_k features, so a d_k slider's settings share one draw."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn((*shape, width), generator=generator, dtype=torch.float32)


def _features(shape: tuple[int, ...], d_k: int, seed: int) -> torch.Tensor:
    """(*shape, d_k) independent unit-normal entries in float32, the first d_k features of a pool
    at least 256 wide (a view: no copy)."""
    width = max(256, 1 << (d_k - 1).bit_length())
    return _pool(shape, width, seed)[..., :d_k]


def dot_product_variance(d_k: int, n: int = 20_000, seed: int = 0) -> float:
    """The variance of q·k over n pairs of vectors with independent unit-variance entries: d_k in
    theory (a sum of d_k products, each of variance 1). Measured: dot products in float32, their
    variance in float64."""
    q, k = _features((n,), d_k, seed), _features((n,), d_k, seed + 1)
    return float(torch.linalg.vecdot(q, k).double().var())


@dataclass
class Saturation:
    """Averages over many softmax rows of T keys, for a gradient g from above with unit-variance
    entries (L = Σ_j g_j w_j per row):

    - max_weight: the largest weight (1/T if uniform, 1 if one-hot);
    - entropy: in nats (log T if uniform, 0 if one-hot);
    - grad_norm: ‖∂L/∂scores‖, the gradient the softmax passes back to its input (the scores after
      any division; 0 if one-hot);
    - query_grad: ‖∂L/∂q‖, the gradient that reaches the query, through the division if there is
      one (W^Q's gradient is xᵀ times it), its mean over the rows;
    - query_grad_median: its median over the rows (the typical row: without the division the mean
      is carried by the few rows whose top two scores nearly tie);
    - query_grad_small: the share of rows whose ‖∂L/∂q‖ is below 0.01;
    - others_share: the share of Σ_j |∂L/∂s_j| that reaches the T − 2 keys other than the two
      with the largest weights ((T − 2)/T if all got the same; 0 if only two keys get any).
    """

    max_weight: float
    entropy: float
    grad_norm: float
    query_grad: float
    query_grad_median: float
    query_grad_small: float
    others_share: float


def softmax_saturation(
    d_k: int, scaled: bool = True, T: int = 16, n: int = 2_000, seed: int = 0
) -> Saturation:
    """Rows softmax(q·k_j / √d_k) (or without the division) for n queries over T keys, entries of
    unit variance, measured in float64: how peaked they are, and how much gradient reaches the
    scores, the query (mean, median, share of rows below 0.01), and the keys other than the top
    two."""
    q, k = _features((n, 1), d_k, seed).double(), _features((n, T), d_k, seed + 1).double()
    q.requires_grad_(True)
    raw = (q @ k.transpose(-2, -1)).squeeze(1)  # (n, T): q · k_j
    scores = raw / math.sqrt(d_k) if scaled else raw
    weights = scores.softmax(dim=-1)  # (n, T)
    upstream = _unit_normal((n, T), seed + 2)
    grad, grad_q = torch.autograd.grad(weights, (scores, q), upstream)  # (n, T), (n, 1, d_k)
    w = weights.detach()
    entropy = -(w * w.clamp_min(1e-300).log()).sum(-1)
    size = grad.abs()  # (n, T): how much gradient each key's score gets
    by_weight = size.gather(-1, w.argsort(-1, descending=True))  # largest weight first
    others = by_weight[:, 2:].sum(-1) / size.sum(-1)  # (n,): beyond the top two
    q_norm = grad_q.squeeze(1).norm(dim=-1)  # (n,): ‖∂L/∂q‖ of each row
    return Saturation(
        max_weight=float(w.max(-1).values.mean()),
        entropy=float(entropy.mean()),
        grad_norm=float(grad.norm(dim=-1).mean()),
        query_grad=float(q_norm.mean()),
        query_grad_median=float(q_norm.median()),
        query_grad_small=float((q_norm < 0.01).double().mean()),
        others_share=float(others.mean()),
    )


def projected_dot_variance(d_k: int, d_model: int = 256, n: int = 20_000, seed: int = 0) -> float:
    """The variance of q·k when q and k come from two freshly initialised `nn.Linear(d_model,
    d_k)` (PyTorch's default initialisation, seeded) applied to independent unit-variance inputs x:
    d_k · σ⁴ with σ² ≈ 1/3, the variance of each entry such a layer makes."""
    torch.manual_seed(seed)
    w_q, w_k = nn.Linear(d_model, d_k), nn.Linear(d_model, d_k)
    generator = torch.Generator().manual_seed(seed + 3)
    x = torch.randn((2, n, d_model), generator=generator)  # (2, n, d_model): pairs of tokens
    with torch.no_grad():
        return float(torch.linalg.vecdot(w_q(x[0]), w_k(x[1])).double().var())
