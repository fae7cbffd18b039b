"""Each ✓ that stands for a claim in notebooks 02, 05, 07, 16 and 17 can fail: the same check the
notebook calls, fed the object it passes and a wrong one (a missing scale, swapped labels, a
dropout that does not rescale, a permuted head, a block-diagonal W^O, a collapsed direction). One
test per claim, named after the notebook and the claim."""

import copy
import math

import pytest
import torch
from torch import nn

from helpers.attention import (
    FusedMultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from helpers.checks import check_close
from helpers.claims import (
    check_default,
    check_dot_product_variance,
    check_dropout_rate,
    check_head_ranks,
    check_less_even,
    check_query_gradient,
    check_reach_all,
    check_reach_own,
    check_rows_are_tokens,
    check_scaled_rows_flat,
    check_unscaled_saturates,
)
from helpers.examples import SENTENCE, embed, seeded_attention, tokens
from helpers.experiment import (
    dot_product_variance,
    projected_dot_variance,
    softmax_saturation,
)
from helpers.layouts import (
    fold_w_o,
    head_circuits,
    head_singular_values,
    w_o_blocks,
)

D_KS = [4, 16, 64, 256]
MEASURES = ("max_weight", "entropy", "grad_norm", "others_share", "query_grad")
Q_SPREAD = ("query_grad_median", "query_grad_small")
WORDS = tokens(SENTENCE)


def _series(scaled: bool) -> dict[str, list[float]]:
    rows = [softmax_saturation(d_k, scaled=scaled, T=16) for d_k in D_KS]
    return {m: [getattr(r, m) for r in rows] for m in MEASURES + Q_SPREAD}


@pytest.fixture(scope="module")
def saturation():
    return _series(True), _series(False)


# 02 · var(q·k) = d_k · σ⁴


def test_02_variance_d_k_passes_for_unit_variance_entries(capsys):
    check_dot_product_variance(D_KS, [dot_product_variance(d_k) for d_k in D_KS])
    assert "✓ var(q·k) = d_k · σ⁴ (σ² = 1) within 5 % for every d_k" in capsys.readouterr().out


def test_02_variance_d_k_fails_for_the_scaled_scores():
    scaled = [dot_product_variance(d_k) / d_k for d_k in D_KS]  # var(q·k / √d_k): about 1
    with pytest.raises(AssertionError, match=r"d_k = 16: 0.987 \(expected 16\)"):
        check_dot_product_variance(D_KS, scaled)


def test_02_fresh_linear_variance_d_k_over_9_fails_if_sigma2_were_1():
    variances = [projected_dot_variance(d_k) for d_k in D_KS]
    check_dot_product_variance(D_KS, variances, sigma2=1 / 3)  # what 11 claims
    with pytest.raises(AssertionError, match="expected 4"):
        check_dot_product_variance(D_KS, variances)  # "roughly variance 1": not a fresh layer


def _q_variances(d: int = 256) -> torch.Tensor:
    """The variance of q's entries from unit-variance x: a fresh nn.Linear (the notebook's
    layer), and nn.MultiheadAttention's W^Q block (Xavier on its packed weight: 1/2, not 1/3)."""
    x = torch.randn(20_000, d, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    linear, torch_mha = nn.Linear(d, d), nn.MultiheadAttention(d, num_heads=4)
    with torch.no_grad():
        return torch.stack([linear(x).var(), (x @ torch_mha.in_proj_weight[:d].T).var()])


def test_02_fresh_linear_sigma2_is_a_third_and_fails_for_another_initialisation():
    linear, other = _q_variances()
    check_close(linear, torch.tensor(1 / 3), "σ² = 1/3", atol=0.01)
    with pytest.raises(AssertionError, match="σ² = 1/3: max"):
        check_close(other, torch.tensor(1 / 3), "σ² = 1/3", atol=0.01)


# 02 · the softmax with and without the division


def test_02_scaled_rows_flat_fails_without_the_division(saturation):
    scaled, unscaled = saturation
    check_scaled_rows_flat(D_KS, {m: scaled[m] for m in MEASURES})  # the notebook's table
    with pytest.raises(AssertionError, match="max_weight from 0.43 to 0.92"):
        check_scaled_rows_flat(D_KS, {m: unscaled[m] for m in MEASURES})  # computed without it


def test_02_unscaled_saturates_fails_with_the_division(saturation):
    scaled, unscaled = saturation
    check_unscaled_saturates(D_KS, scaled, unscaled, T=16)
    with pytest.raises(AssertionError, match="the largest weight is 0.25, not above 0.85"):
        check_unscaled_saturates(D_KS, scaled, scaled, T=16)


def test_02_unscaled_saturates_fails_if_the_gradient_reached_every_key(saturation):
    scaled, unscaled = saturation
    spread = {**unscaled, "others_share": scaled["others_share"]}  # one-hot, gradient spread
    with pytest.raises(AssertionError, match="the 14 other keys get 67 %"):
        check_unscaled_saturates(D_KS, scaled, spread, T=16)


def test_02_query_gradient_larger_without_the_division_fails_with_labels_swapped(
    saturation, capsys
):
    scaled, unscaled = saturation
    check_query_gradient(D_KS, scaled, unscaled)
    out = capsys.readouterr().out
    assert "mean 4.4× larger (1.26 vs 0.28), median 5.3× smaller (0.050 vs 0.265)" in out
    assert "rows below 0.01: 40 % (÷ √d_k: 0 %)" in out
    with pytest.raises(AssertionError, match="expected smaller, then larger"):
        check_query_gradient(D_KS, unscaled, scaled)


def test_02_query_gradient_fails_when_the_typical_row_gets_more_too(saturation):
    """The claim is about the typical row as well as the mean: rows that all got the mean's
    gradient (no row near 0) would fail it."""
    scaled, unscaled = saturation
    even = {**unscaled, "query_grad_median": unscaled["query_grad"], "query_grad_small": [0.0] * 4}
    with pytest.raises(AssertionError, match="expected a smaller median and more such rows"):
        check_query_gradient(D_KS, scaled, even)


def test_02_query_gradient_is_the_scores_gradient_through_the_division():
    """‖∂L/∂q‖ is what autograd gives through q @ kᵀ (÷ √d_k): W^Q's gradient is xᵀ times it."""
    d_k, T = 64, 16
    q = torch.randn(1, d_k, dtype=torch.float64, requires_grad=True)
    k = torch.randn(T, d_k, dtype=torch.float64)
    g = torch.randn(T, dtype=torch.float64)
    for divisor in (math.sqrt(d_k), 1.0):
        scores = (q @ k.T / divisor).squeeze(0)
        (grad_q,) = torch.autograd.grad((scores.softmax(-1) * g).sum(), q)
        w = scores.detach().softmax(-1)
        by_hand = (w * (g - (w * g).sum())) @ k / divisor  # Σ_j ∂L/∂s_j · k_j / divisor
        torch.testing.assert_close(grad_q[0], by_hand)


# 07 · dropout


def _dropout_run(p: float, rescale: bool = True, n: int = 2000):
    x = embed(WORDS, 32)
    plain = seeded_attention(32, 4)
    drop = FusedMultiHeadAttention(32, 4, dropout=p)
    drop.load_state_dict(plain.state_dict())
    torch.manual_seed(0)
    with torch.no_grad():
        _, eval_weights = plain(x)
        draws = torch.stack([drop.train()(x)[1] for _ in range(n)])  # (n, B, h, T, T)
    if not rescale:
        draws = draws * (1 - p)  # a dropout that zeroes weights but does not divide the rest
    return eval_weights, draws


def test_07_dropout_rate_fails_for_another_p(capsys):
    _, draws = _dropout_run(0.2)
    check_dropout_rate(draws, 0.2)
    assert "(p = 0.2, within 0.01)" in capsys.readouterr().out
    _, other = _dropout_run(0.1)
    with pytest.raises(AssertionError, match=r"0\.\d+ of them are 0 \(within 0.01 of 0.2"):
        check_dropout_rate(other, 0.2)


def test_07_kept_weights_divided_by_1_minus_p_fails_without_the_rescale():
    p = 0.2
    eval_weights, draws = _dropout_run(p, rescale=False, n=1)
    kept = draws[0] != 0
    with pytest.raises(AssertionError, match="kept = eval weights / "):
        check_close(draws[0][kept], eval_weights[kept] / (1 - p), "kept = eval weights / (1 − p)")


def test_07_average_of_draws_is_eval_fails_without_the_rescale():
    eval_weights, draws = _dropout_run(0.2)
    check_close(draws.mean(0), eval_weights, "the average = eval weights", atol=0.03)
    _, shrunk = _dropout_run(0.2, rescale=False)
    with pytest.raises(AssertionError, match="the average = eval weights: max"):
        check_close(shrunk.mean(0), eval_weights, "the average = eval weights", atol=0.03)


def test_07_eval_mode_equals_nn_multiheadattention_fails_in_training_mode():
    from helpers.layouts import to_torch

    x = embed(WORDS, 32)
    drop = FusedMultiHeadAttention(32, 4, dropout=0.2)
    drop.load_state_dict(seeded_attention(32, 4).state_dict())
    reference = to_torch(drop).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        ref_out, _ = reference(x, x, x)
        check_close(drop.eval()(x)[0], ref_out, "eval mode: out = nn.MultiheadAttention's")
        with pytest.raises(AssertionError, match="out = nn.MultiheadAttention's: max"):
            check_close(drop.train()(x)[0], ref_out, "eval mode: out = nn.MultiheadAttention's")


def test_07_multiheadattention_dropout_default_fails_for_another_default(capsys):
    check_default(nn.MultiheadAttention, "dropout", 0.0)
    assert "✓ nn.MultiheadAttention(dropout=…) defaults to 0.0" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="the installed one defaults to 0.5"):
        check_default(nn.Dropout, "p", 0.0)


def test_07_dropout_settings_the_prose_names():
    """BERT drops attention weights with p = 0.1 and Hugging Face's GPT-2 configuration keeps it;
    Llama, Mistral and Qwen2 configure attention_dropout = 0.0 (Hugging Face's config classes, a
    test tool only)."""
    transformers = pytest.importorskip("transformers")
    assert transformers.BertConfig().attention_probs_dropout_prob == 0.1
    assert transformers.GPT2Config().attn_pdrop == 0.1
    for name in ("LlamaConfig", "MistralConfig", "Qwen2Config"):
        assert getattr(transformers, name)().attention_dropout == 0.0, name


def test_07_a_float32_softmax_gives_exactly_0_only_past_a_gap_of_about_104():
    """Why 11 marks a weight as dropped only where the eval map's is not 0."""
    assert torch.tensor([0.0, -103.0]).softmax(-1)[1] > 0
    assert torch.tensor([0.0, -105.0]).softmax(-1)[1] == 0


# 05 · the cut into heads


def test_05_rows_are_tokens_fails_for_the_straight_view(capsys):
    T, n_features, n_heads = len(WORDS), 16, 4
    source = torch.arange(T).float()[:, None].expand(T, n_features)
    check_rows_are_tokens(split_heads(source[None], n_heads)[0], "view + transpose")
    assert "✓ view + transpose: all 28 head rows hold their own token" in capsys.readouterr().out
    straight = source[None].reshape(1, n_heads, T, n_features // n_heads)[0]
    with pytest.raises(AssertionError, match=r"24 of 28 head rows .* head 0, row 1 holds"):
        check_rows_are_tokens(straight, "straight view")


# 16 · W^O per head and what it is for


def _own_copy(d_model: int, h: int):
    """The seeded module, copied: its tensors are cached and shared, so a test that changes a
    weight in place must change its own copy."""
    return copy.deepcopy(seeded_attention(d_model, h))


def _heads_and_out(mha, x):
    with torch.no_grad():
        qkv = (split_heads(m(x), mha.num_heads) for m in (mha.w_q, mha.w_k, mha.w_v))
        heads, _ = scaled_dot_product_attention(*qkv)  # (B, h, T, d_k)
        concat = merge_heads(heads)
        return heads, concat, mha.w_o(concat)


def test_16_w_o_per_head_sum_fails_for_permuted_blocks():
    mha, x = seeded_attention(32, 4), embed(WORDS, 32)
    heads, _, out = _heads_and_out(mha, x)
    blocks = w_o_blocks(mha)  # (h, d_k, d_model)
    check_close((heads @ blocks).sum(1), out, "concat · W^O = Σ_i head_i · W^O_i")
    with pytest.raises(AssertionError, match=r"Σ_i head_i · W\^O_i: max"):
        check_close((heads @ blocks.roll(1, 0)).sum(1), out, "concat · W^O = Σ_i head_i · W^O_i")


def _moved(mha, x, use_w_o: bool, order=None) -> torch.Tensor:
    """As in 12: how much each output feature moves when head i is silenced, (h, d_model)."""
    heads, _, _ = _heads_and_out(mha, x)
    h, order = mha.num_heads, order or list(range(mha.num_heads))
    layer = mha.w_o if use_w_o else nn.Identity()
    with torch.no_grad():
        full = layer(merge_heads(heads[:, order]))
        moved = torch.zeros(h, mha.d_model)
        for i in range(h):
            silenced = heads.clone()
            silenced[:, i] = 0
            moved[i] = (full - layer(merge_heads(silenced[:, order]))).abs().mean((0, 1))
    return moved


def test_16_every_head_reaches_every_feature_fails_for_a_block_diagonal_w_o(capsys):
    mha, x = _own_copy(32, 4), embed(WORDS, 32)
    check_reach_all(_moved(mha, x, use_w_o=True))
    assert "each head moves all 32 output features" in capsys.readouterr().out
    with torch.no_grad():
        mha.w_o.weight.mul_(torch.block_diag(*[torch.ones(8, 8)] * 4))  # head i -> its own 8
    with pytest.raises(AssertionError, match="head 0 moves 8"):
        check_reach_all(_moved(mha, x, use_w_o=True))


def test_16_without_w_o_head_i_writes_its_own_coordinates_fails_for_permuted_heads():
    mha, x = seeded_attention(32, 4), embed(WORDS, 32)
    check_reach_own(_moved(mha, x, use_w_o=False), d_k=8)
    with pytest.raises(AssertionError, match=r"head 0 moves 8 features \(8 … 15\)"):
        check_reach_own(_moved(mha, x, use_w_o=False, order=[1, 0, 2, 3]), d_k=8)


@pytest.mark.parametrize("bias", [False, True])
def test_16_one_head_w_o_folds_into_w_v_and_a_wrong_fold_fails(bias):
    torch.manual_seed(0)
    one, x = FusedMultiHeadAttention(16, 1, bias=bias), torch.randn(2, 5, 16)
    folded = fold_w_o(one)
    with torch.no_grad():
        check_close(folded(x)[0], one(x)[0], "h = 1: W^O folded into W^V")
        check_close(folded(x)[1], one(x)[1], "and the same map")
        folded.w_v.weight.copy_(one.w_v.weight @ one.w_o.weight)  # the product the wrong way round
        with pytest.raises(AssertionError, match="h = 1: W\\^O folded into W\\^V: max"):
            check_close(folded(x)[0], one(x)[0], "h = 1: W^O folded into W^V")


def test_16_w_o_does_not_fold_for_several_heads():
    with pytest.raises(ValueError, match="4 heads, each with its own W\\^V_i·W\\^O_i"):
        fold_w_o(seeded_attention(32, 4))


# 17 · each head as W_QK and W_OV


def test_17_maps_from_w_qk_fail_for_w_q_times_w_q():
    mha, x = seeded_attention(32, 4), embed(WORDS, 32)
    w_qk, _ = head_circuits(mha)
    with torch.no_grad():
        _, weights = mha(x)
        maps = (x[0] @ w_qk @ x[0].T / math.sqrt(8)).softmax(-1)
        check_close(maps, weights[0], "softmax(x · W_QK · xᵀ / √d_k) = the module's maps")
        w_q = mha.w_q.weight.view(4, 8, 32)
        wrong = (x[0] @ (w_q.transpose(1, 2) @ w_q) @ x[0].T / math.sqrt(8)).softmax(-1)
    with pytest.raises(AssertionError, match="the module's maps: max"):
        check_close(wrong, weights[0], "softmax(x · W_QK · xᵀ / √d_k) = the module's maps")


def test_17_out_from_w_ov_fails_for_a_permuted_head():
    mha, x = seeded_attention(32, 4), embed(WORDS, 32)
    _, w_ov = head_circuits(mha)
    with torch.no_grad():
        out, weights = mha(x)
        check_close((weights[0] @ x[0] @ w_ov).sum(0), out[0], "Σ_i weights_i · x · W_OV,i")
        wrong = (weights[0] @ x[0] @ w_ov.roll(1, 0)).sum(0)  # head i paired with W_OV of i − 1
    with pytest.raises(AssertionError, match="W_OV,i: max"):
        check_close(wrong, out[0], "Σ_i weights_i · x · W_OV,i")


def test_17_head_singular_values_are_those_of_the_full_products():
    mha = seeded_attention(32, 4)
    singular_qk, singular_ov = head_singular_values(mha)
    w_qk, w_ov = head_circuits(mha)
    for fast, full in ((singular_qk, w_qk), (singular_ov, w_ov)):
        torch.testing.assert_close(fast, torch.linalg.svdvals(full.double())[:, :8])


def test_17_rank_d_k_is_generic_and_fails_for_a_rank_deficient_head(capsys):
    torch.manual_seed(0)
    check_head_ranks([FusedMultiHeadAttention(32, 4)])  # any random weights: rank d_k
    assert "all 4 heads' W_QK and W_OV have rank d_k = 8 (a generic" in capsys.readouterr().out
    deficient = _own_copy(32, 4)
    with torch.no_grad():
        deficient.w_q.weight[3] = deficient.w_q.weight[2]  # head 0's W^Q: two equal columns
    with pytest.raises(AssertionError, match=r"their ranks are \[7, 8\]"):
        check_head_ranks([deficient])


def test_17_no_collapsed_direction_fails_when_training_shrinks_one():
    healthy = seeded_attention(32, 4)
    check_head_ranks([healthy], at_least=0.05)
    collapsed = _own_copy(32, 4)
    with torch.no_grad():
        collapsed.w_v.weight[5] *= 1e-3  # head 0 writes almost nothing along one direction
    check_head_ranks([collapsed])  # the rank alone cannot tell: still 8
    with pytest.raises(AssertionError, match="none with a collapsed direction"):
        check_head_ranks([collapsed], at_least=0.05)


def test_17_less_even_than_fresh_passes_when_most_heads_are_uneven(capsys):
    torch.manual_seed(0)
    fresh = FusedMultiHeadAttention(32, 4)
    uneven = _own_copy(32, 4)
    with torch.no_grad():  # in every head, one direction of W_QK and of W_OV nearly gone
        uneven.w_k.weight[::8] *= 1e-2
        uneven.w_v.weight[::8] *= 1e-2
    check_less_even([uneven], fresh)
    out = capsys.readouterr().out
    assert "✓ the median trained W_QK or W_OV uses its directions less evenly" in out
    assert "8 trained matrices: median 0 %" in out and "(8 below 10 %); 8 fresh:" in out


def test_17_less_even_than_fresh_fails_for_one_odd_head_or_fresh_weights():
    torch.manual_seed(0)
    fresh = FusedMultiHeadAttention(32, 4)
    one_odd = _own_copy(32, 4)
    with torch.no_grad():
        one_odd.w_v.weight[5] *= 1e-3  # one direction of head 0's W_OV nearly gone, the rest fresh
    with pytest.raises(AssertionError, match="median .* % trained, lowest .* % fresh"):
        check_less_even([one_odd], fresh)  # the lowest alone would pass: the median does not
    with pytest.raises(AssertionError, match="% trained, lowest .* % fresh"):
        check_less_even([fresh], fresh)  # the same weights: not less even
