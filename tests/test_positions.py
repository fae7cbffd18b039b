"""Word order: attention alone is blind to it (permutation-equivariant), position embeddings and a
causal mask are not, and RoPE turns each head's q and k so that a score depends on position only
through m − n (and does depend on it).
RoPE is checked against an independent formulation (complex numbers) and against Hugging Face's
Llama code, and each check is fed a wrong object to show it can fail."""

import re

import pytest
import torch
from torch import nn

from helpers.attention import FusedMultiHeadAttention, KVCache, PerHeadMultiHeadAttention
from helpers.claims import check_order_blind, check_order_seen, check_relative_scores
from helpers.layouts import fuse, split, to_torch
from helpers.positions import (
    apply_rope,
    apply_rope_complex,
    rope_angles,
    rope_cos_sin,
    sinusoidal_positions,
    turn,
)

B, T, D_MODEL = 2, 7, 24
PERM = torch.tensor([3, 0, 6, 1, 5, 2, 4])


def _x(seed: int = 0, d_model: int = D_MODEL) -> torch.Tensor:
    return torch.randn(B, T, d_model, generator=torch.Generator().manual_seed(seed))


def _gap(capsys) -> float:
    """The max gap check_order_seen printed last."""
    return float(re.findall(r"max gap ([0-9.]+)\)", capsys.readouterr().out)[-1])


def _seeded(cls, h, **kwargs):
    torch.manual_seed(0)
    return cls(D_MODEL, h, **kwargs)


class WithPositions(nn.Module):
    """Attention on x + a position table: what a model's first layer sees."""

    def __init__(self, attention: nn.Module, table: torch.Tensor):
        super().__init__()
        self.attention, self.table = attention, table

    def forward(self, x, mask=None):
        return self.attention(x + self.table, mask)


@pytest.mark.parametrize("h", [1, 2, 3, 4, 6, 8, 12, 24])
@pytest.mark.parametrize("cls", [FusedMultiHeadAttention, PerHeadMultiHeadAttention])
def test_attention_without_positions_is_blind_to_order(cls, h, capsys):
    check_order_blind(_seeded(cls, h), _x(), PERM, f"h = {h}")
    assert "outputs and all maps permuted the same way" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrap",
    [
        lambda m: WithPositions(m, sinusoidal_positions(T, D_MODEL)),  # Vaswani et al.'s
        lambda m: WithPositions(
            m, torch.randn(T, D_MODEL, generator=torch.Generator().manual_seed(5))
        ),
    ],
    ids=["sinusoidal", "learned"],
)
def test_position_embeddings_break_the_blindness_and_the_check_says_so(wrap, capsys):
    module = wrap(_seeded(FusedMultiHeadAttention, 4))
    with pytest.raises(AssertionError, match="blind to order: permuting the tokens changes more"):
        check_order_blind(module, _x(), PERM, "with positions")
    check_order_seen(module, _x(), PERM, "with positions")
    assert _gap(capsys) > 0.01


def test_a_causal_mask_breaks_it_too_and_rope_does(capsys):
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    plain = _seeded(FusedMultiHeadAttention, 4)
    # the mask belongs to positions, not to tokens: permuted tokens meet another mask
    check_order_seen(plain, _x(), PERM, "causal", mask=causal)
    assert _gap(capsys) > 0.01
    check_order_seen(_seeded(FusedMultiHeadAttention, 4, rope=True), _x(), PERM, "rope")
    assert _gap(capsys) > 0.01
    with pytest.raises(AssertionError, match="sees the order: the permuted input gives only"):
        check_order_seen(plain, _x(), PERM, "no positions")  # the check can fail


@pytest.mark.parametrize("d_k", [2, 8, 64, 128])
def test_rope_equals_the_complex_product(d_k):
    t = torch.randn(
        3, 5, 11, d_k, dtype=torch.float64, generator=torch.Generator().manual_seed(d_k)
    )
    positions = torch.arange(11) * 3 + 2
    assert torch.allclose(apply_rope(t, positions), apply_rope_complex(t, positions), atol=1e-12)
    wrong = apply_rope_complex(t, positions + 1)  # the positions shifted by one
    assert (apply_rope(t, positions) - wrong).abs().max() > 1e-3


def test_rope_keeps_lengths_and_turns_pair_i_by_m_theta_i():
    t = torch.randn(1, 1, 9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    turned = apply_rope(t)
    assert torch.allclose(turned.norm(dim=-1), t.norm(dim=-1), atol=1e-12)
    angles = rope_angles(torch.arange(9), 16)  # (9, 8)
    assert torch.allclose(
        angles[:, 1], torch.arange(9.0, dtype=torch.float64) * 10_000 ** (-2 / 16)
    )
    assert torch.equal(apply_rope(t[..., :1, :]), t[..., :1, :])  # position 0: no turn


def test_rope_matches_hugging_face_llama_within_1e_6():
    """The same angles (Hugging Face computes them in float32, the course in float64) and the same
    turn of the same pairs (i, i + d_k / 2)."""
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    h, d_k, base = 4, 32, 500_000.0
    config = LlamaConfig(hidden_size=h * d_k, num_attention_heads=h, rope_theta=base)
    rotary = llama.LlamaRotaryEmbedding(config)
    q, k = (torch.randn(2, h, 13, d_k, generator=torch.Generator().manual_seed(s)) for s in (0, 1))
    cos, sin = rotary(q, torch.arange(13)[None].expand(2, 13))  # (2, 13, d_k) each
    ours_cos, ours_sin = rope_cos_sin(torch.arange(13), d_k, base)  # (13, d_k)
    assert (ours_cos - cos[0]).abs().max() < 1e-6 and (ours_sin - sin[0]).abs().max() < 1e-6
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, cos, sin)
    c, s = cos[:, None], sin[:, None]  # (2, 1, 13, d_k): one table for every head
    assert (turn(q, c, s) - q_ref).abs().max() < 1e-6 and (turn(k, c, s) - k_ref).abs().max() < 1e-6
    other_cos, _ = rope_cos_sin(torch.arange(13), d_k, 10_000.0)  # another base: not Llama 3's
    assert (other_cos - cos[0]).abs().max() > 1e-2


def test_with_rope_a_score_depends_only_on_m_minus_n(capsys):
    q, k = (
        torch.randn(9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(s))
        for s in (2, 3)
    )
    check_relative_scores(q, k, lambda t, s: apply_rope(t, offset=s), (1, 5, 100), "RoPE")
    assert "unchanged when query and key both move by 1, 5, 100" in capsys.readouterr().out
    table = sinusoidal_positions(200, 16).double()
    absolute = lambda t, s: t + table[s : s + len(t)]  # noqa: E731  added positions: not relative
    with pytest.raises(AssertionError, match="scores depend only on m − n: shifting both"):
        check_relative_scores(q, k, absolute, (1, 5, 100), "added positions")


def _no_turn(t, offset=0):
    """Wrong object for 10's RoPE checks: a "rotation" that turns nothing."""
    return t


def _same_turn_everywhere(t, offset=0):
    """Wrong object for 10's RoPE checks: every position turned by position 3's angles."""
    return apply_rope(t, positions=torch.full((t.size(-2),), 3))


@pytest.mark.parametrize("rotate", [_no_turn, _same_turn_everywhere], ids=["no_turn", "same_turn"])
def test_rope_check_fails_when_the_score_does_not_depend_on_m_minus_n(rotate):
    q, k = (
        torch.randn(9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(s))
        for s in (2, 3)
    )
    with pytest.raises(AssertionError, match="the score changes with m − n: .* change nothing"):
        check_relative_scores(q, k, rotate, (1, 5, 100), "no rotation")


def test_rope_check_prints_one_score_per_offset_that_changes_with_it(capsys):
    q, k = (torch.randn(7, 8, generator=torch.Generator().manual_seed(s)) for s in (0, 1))
    check_relative_scores(q, k, lambda t, s: apply_rope(t, offset=s), (1, 5), "RoPE")
    out = capsys.readouterr().out
    assert "one score\n  per m − n, and it changes with m − n" in out
    assert "over m − n = −6 … 6" in out


def test_rope_makes_attention_see_order_and_a_rope_that_turns_nothing_does_not(monkeypatch):
    rope = _seeded(FusedMultiHeadAttention, 4, rope=True)
    check_order_seen(rope, _x(), PERM, "RoPE")
    monkeypatch.setattr("helpers.attention.apply_rope", _no_turn)  # wrong object: no turn
    with pytest.raises(AssertionError, match="RoPE: sees the order: the permuted input gives only"):
        check_order_seen(rope, _x(), PERM, "RoPE")


def test_rope_per_head_and_fused_are_the_same_model():
    per_head = _seeded(PerHeadMultiHeadAttention, 4, rope=True)
    fused = fuse(per_head)
    assert fused.rope and split(fused).rope
    out, weights = per_head(_x())
    out_f, weights_f = fused(_x())
    assert torch.allclose(out, out_f, atol=1e-5) and torch.allclose(weights, weights_f, atol=1e-5)
    plain = fuse(_seeded(PerHeadMultiHeadAttention, 4))  # the same weights without rope differ
    assert (plain(_x())[1] - weights_f).abs().max() > 1e-3


def test_rope_decoding_with_a_cache_equals_the_full_causal_forward():
    fused = _seeded(FusedMultiHeadAttention, 4, rope=True)
    x = _x()
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    full, _ = fused(x, causal)
    cache = KVCache()
    steps = [fused(x[:, :3], cache=cache)[0]] + [
        fused(x[:, t : t + 1], cache=cache)[0] for t in range(3, T)
    ]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_rope_refuses_odd_widths_cross_attention_and_nn_multiheadattention():
    with pytest.raises(ValueError, match="d_k must be even; d_k = 5 is odd"):
        FusedMultiHeadAttention(15, 3, rope=True)
    fused = _seeded(FusedMultiHeadAttention, 4, rope=True)
    with pytest.raises(
        ValueError, match="cross-attention's queries and keys come from two sequences"
    ):
        fused(_x(), context=_x(1))
    with pytest.raises(ValueError, match="nn.MultiheadAttention has no rotary positions"):
        to_torch(fused)


def test_sinusoidal_positions_are_vaswanis_table():
    table = sinusoidal_positions(50, 8)
    assert table.shape == (50, 8)
    p, i = 7, 1  # feature 2i of position p is sin(p / 10000^(2i / d_model)), 2i + 1 its cos
    assert (
        abs(float(table[p, 2 * i]) - torch.sin(torch.tensor(p / 10_000 ** (2 * i / 8))).item())
        < 1e-6
    )
    assert (
        abs(float(table[p, 2 * i + 1]) - torch.cos(torch.tensor(p / 10_000 ** (2 * i / 8))).item())
        < 1e-6
    )
    with pytest.raises(ValueError, match="d_model must be even, not 7"):
        sinusoidal_positions(4, 7)
