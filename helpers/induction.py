"""Heads that work together across layers: a small causal model that learns to copy (issue 24).

The task: random tokens in which each sequence's first n tokens (n drawn per sequence, 4 … T/2)
repeat right after them. The first copy cannot be predicted (loss near ln vocab); the repeat can,
but only by *induction*: at a token A, find where A occurred before and predict the token that came
after it. n varies, so position alone cannot say where to look.

`AttentionOnly` is a transformer with attention layers only (no MLP, no norm), causal, with learned
positions: the course's `FusedMultiHeadAttention` in each layer, added to the residual stream. Two
layers learn induction in a few seconds of CPU training: a *previous-token head* in layer 0 writes
"the token before me was A" into each position, and *induction heads* in layer 1 find, from the
current token A, the position whose previous token was A, and copy its token (K-composition:
layer 1's keys read what layer 0 wrote; Elhage et al., 2021; Olsson et al., 2022). One layer
cannot. The scores that find the heads, the ablations that show they work together and the
one-layer comparison are measured on fresh sequences; `helpers.claims` checks them.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import (
    FusedMultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)

VOCAB, T_MAX, D_MODEL, HEADS = 32, 32, 64, 4


def repeated_batch(
    B: int, T: int = T_MAX, vocab: int = VOCAB, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """B sequences of T random tokens whose first n repeat at once: tokens (B, T), n (B,)."""
    tokens = torch.randint(0, vocab, (B, T), generator=generator)
    n = torch.randint(4, T // 2 + 1, (B,), generator=generator)
    position = torch.arange(T)
    in_repeat = (position >= n[:, None]) & (position < 2 * n[:, None])
    source = torch.where(in_repeat, position - n[:, None], position)
    return tokens.gather(1, source), n


def repeat_words(sentence: str, vocab: int = VOCAB) -> tuple[torch.Tensor, list[str]]:
    """A sentence's words, then the same words again, as token ids (1, 2T) and their labels: each
    distinct word gets its own id, in order of first use. The model never saw words; to it these
    are tokens like any other, so a sentence only makes the maps easier to read."""
    from helpers.examples import tokens as split_words

    words = split_words(sentence)
    ids = {word: i for i, word in enumerate(dict.fromkeys(words))}
    if len(ids) > vocab:
        raise ValueError(
            f"the sentence has {len(ids)} different words; the model knows {vocab} tokens"
        )
    first = torch.tensor([ids[word] for word in words])
    return torch.cat([first, first])[None], words + words


def _predicted_parts(n: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks (B, T − 1) over the predictions (position t predicts token t + 1): those of the first
    copy (t + 1 < n, unpredictable) and those inside the repeat (n < t + 1 < 2n, copyable)."""
    target = torch.arange(1, T)[None]
    return target < n[:, None], (target > n[:, None]) & (target < 2 * n[:, None])


class AttentionOnly(nn.Module):
    """Token and position embeddings, `num_layers` causal attention layers added to the residual
    stream, and a linear readout to the vocabulary."""

    def __init__(
        self,
        num_layers: int = 2,
        num_heads: int = HEADS,
        d_model: int = D_MODEL,
        vocab: int = VOCAB,
        T: int = T_MAX,
    ):
        super().__init__()
        self.num_heads, self.vocab = num_heads, vocab
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(T, d_model)
        self.layers = nn.ModuleList(
            FusedMultiHeadAttention(d_model, num_heads) for _ in range(num_layers)
        )
        self.unembed = nn.Linear(d_model, vocab)

    def forward(
        self, tokens: torch.Tensor, ablate: Iterable[tuple[int, int]] = ()
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """logits (B, T, vocab) and each layer's maps (B, h, T, T). `ablate` lists (layer, head)
        pairs whose output is set to 0 before W^O: the head says nothing."""
        T = tokens.size(1)
        x = self.embed(tokens) + self.position(torch.arange(T, device=tokens.device))
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        silenced = set(ablate)
        maps = []
        for i, layer in enumerate(self.layers):
            q, k, v = (split_heads(w(x), self.num_heads) for w in (layer.w_q, layer.w_k, layer.w_v))
            out, weights = scaled_dot_product_attention(q, k, v, causal)  # (B, h, T, d_k)
            keep = torch.tensor([(i, j) not in silenced for j in range(self.num_heads)])
            out = out * keep.to(out.dtype)[None, :, None, None]
            x = x + layer.w_o(merge_heads(out))  # the residual stream
            maps.append(weights)
        return self.unembed(x), maps


def copy_losses(
    model: AttentionOnly, tokens: torch.Tensor, n: torch.Tensor, ablate=()
) -> tuple[float, float, list[torch.Tensor]]:
    """Mean cross-entropy on the first copy's predictions and on the repeat's, and the maps."""
    with torch.no_grad():
        logits, maps = model(tokens, ablate)
    loss = F.cross_entropy(
        logits[:, :-1].reshape(-1, model.vocab), tokens[:, 1:].reshape(-1), reduction="none"
    ).view(tokens.size(0), -1)
    first, repeat = _predicted_parts(n, tokens.size(1))
    return float(loss[first].mean()), float(loss[repeat].mean()), maps


def previous_token_scores(maps: torch.Tensor) -> torch.Tensor:
    """Each head's mean weight on the position just before the query: maps (B, h, T, T) -> (h,)."""
    t = torch.arange(1, maps.size(-1))
    return maps[:, :, t, t - 1].mean(dim=(0, 2))


def induction_scores(maps: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Each head's mean weight, at a query inside the repeat, on the token after the previous
    occurrence of the query's token (position t − n + 1): maps (B, h, T, T), n (B,) -> (h,)."""
    _, repeat = _predicted_parts(n, maps.size(-1))
    b, t = repeat.nonzero(as_tuple=True)  # query t predicts t + 1, inside the repeat
    return maps[b, :, t, t - n[b] + 1].mean(dim=0)


@dataclass
class CopyRun:
    model: AttentionOnly
    first: list[float] = field(default_factory=list)  # per step: the first copy's loss
    repeat: list[float] = field(default_factory=list)  # per step: the repeat's loss
    seconds: float = 0.0

    @property
    def chance(self) -> float:
        return math.log(self.model.vocab)


def train_copying(
    num_layers: int = 2,
    steps: int = 1500,
    seed: int = 0,
    batch: int = 64,
    lr: float = 3e-3,
    on_step: Callable[[int, CopyRun], None] | None = None,
    **sizes,
) -> CopyRun:
    """Train an `AttentionOnly` model on repeated sequences with Adam, seeded; `on_step(step, run)`
    is called after every step (a notebook draws the loss curve as it grows).

    Under the course's tests only ($COURSE_TRAINED_CACHE, a folder `make test` makes for one run
    and removes after it): a model whose training with the same arguments has finished in that run
    is read back instead of trained again, its steps replayed through `on_step`. Training is
    seeded, so the weights are the ones a new training gives (tests/test_induction.py checks both
    ways)."""
    import time

    cached = _cache_file(num_layers, steps, seed, batch, lr, sizes)
    if cached is not None and cached.exists():
        return _replayed(cached, on_step)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    run = CopyRun(AttentionOnly(num_layers, **sizes))
    optimizer = torch.optim.Adam(run.model.parameters(), lr=lr)
    start = time.perf_counter()
    for step in range(steps):
        tokens, n = repeated_batch(batch, generator=generator)
        logits, _ = run.model(tokens)
        loss = F.cross_entropy(
            logits[:, :-1].reshape(-1, run.model.vocab), tokens[:, 1:].reshape(-1), reduction="none"
        ).view(batch, -1)
        first, repeat = _predicted_parts(n, tokens.size(1))
        optimizer.zero_grad()
        loss.mean().backward()
        optimizer.step()
        run.first.append(float(loss[first].mean().detach()))
        run.repeat.append(float(loss[repeat].mean().detach()))
        if on_step is not None:
            on_step(step, run)
    run.seconds = time.perf_counter() - start
    if cached is not None:
        _save(run, cached, num_layers, sizes)
    return run


CACHE_ENV = "COURSE_TRAINED_CACHE"


def _cache_file(*arguments) -> Path | None:
    """Where a model trained with these arguments is kept during a test run; None outside one."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return None
    key = hashlib.sha256(repr((arguments, torch.__version__)).encode()).hexdigest()[:24]
    return Path(folder) / f"copying-{key}.pt"


def _save(run: CopyRun, path: Path, num_layers: int, sizes: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"num_layers": num_layers, "sizes": sizes, "weights": run.model.state_dict(),
             "first": run.first, "repeat": run.repeat, "seconds": run.seconds}  # fmt: skip
    partial = path.with_suffix(f".{os.getpid()}.part")
    torch.save(state, partial)
    partial.replace(path)  # whole or absent, for another process reading the folder


def _replayed(path: Path, on_step: Callable[[int, CopyRun], None] | None) -> CopyRun:
    state = torch.load(path, weights_only=True)
    model = AttentionOnly(state["num_layers"], **state["sizes"])
    model.load_state_dict(state["weights"])
    run = CopyRun(model, seconds=state["seconds"])
    for step, (first, repeat) in enumerate(zip(state["first"], state["repeat"], strict=True)):
        run.first.append(first)
        run.repeat.append(repeat)
        if on_step is not None:
            on_step(step, run)
    return run


def phase_change(repeat: list[float], window: int = 50) -> tuple[int, int]:
    """The steps at which the repeat's loss, smoothed over `window` steps, first falls below 80 %
    and below 30 % of its starting value: a short gap between them is an abrupt drop."""
    smooth = torch.tensor(repeat).unfold(0, window, 1).mean(dim=1)
    start = float(smooth[0])

    def below(share: float) -> int:  # len(repeat) if it never gets there
        steps = (smooth < share * start).nonzero()
        return int(steps[0]) + window if len(steps) else len(repeat)

    return below(0.8), below(0.3)
