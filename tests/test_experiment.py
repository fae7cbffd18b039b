"""helpers.experiment: the two-place task, its model, and that heads beat one head on it; the
reversal task, whose trained cross-attention finds the alignment."""

import pytest
import torch

from helpers.attention import count_parameters
from helpers.experiment import (
    ReverseModel,
    TwoPlaceModel,
    accuracy,
    alignment,
    dot_product_variance,
    projected_dot_variance,
    reverse_accuracy,
    reverse_batch,
    softmax_saturation,
    train_reverse,
    train_two_place,
    two_place_batch,
)


def test_targets_are_the_previous_and_the_first_token():
    tokens, targets = two_place_batch(3, T=5, vocab=10, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 5) and targets.shape == (3, 5, 2)
    assert torch.equal(targets[:, 1:, 0], tokens[:, :-1])  # previous token
    assert torch.equal(targets[:, :, 1], tokens[:, :1].expand(3, 5))  # first token
    assert torch.equal(targets[:, 0, 0], tokens[:, 0])  # position 0 has no previous: itself


def test_model_shapes_and_equal_parameters_for_any_head_count():
    tokens, _ = two_place_batch(4)
    counts = set()
    for h in (1, 2, 4):
        model = TwoPlaceModel(h)
        logits, weights = model(tokens)
        assert logits.shape == (4, 8, 2, 16) and weights.shape == (4, h, 8, 8)
        assert (weights.triu(1) == 0).all()  # causal: no weight on later positions
        counts.add(count_parameters(model))
    assert counts == {16 * 16 + 8 * 16 + 4 * 16 * 16 + 16 * 32 + 32}


def test_training_is_seeded():
    a, b = train_two_place(2, steps=5, seed=3), train_two_place(2, steps=5, seed=3)
    assert a.losses == b.losses


@pytest.mark.parametrize("seed", [0, 1])
def test_two_heads_solve_the_task_and_one_head_cannot(seed):
    one, two = train_two_place(1, seed=seed), train_two_place(2, seed=seed)
    assert two.final_loss < 0.05 < 0.15 < one.final_loss
    assert accuracy(two.model) == (1.0, 1.0)
    assert min(accuracy(one.model)) < 0.9  # one head gets one of the two places wrong often


def test_reverse_targets_and_rectangular_cross_attention_shapes():
    source, targets = reverse_batch(3, T=5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(targets, source.flip(1))
    model = ReverseModel(2)
    logits, weights = model(reverse_batch(4)[0])
    assert logits.shape == (4, 8, 16) and weights.shape == (4, 2, 8, 8)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 2, 8), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("num_heads", "seed"), [(1, 0), (2, 0), (2, 1)])
def test_trained_cross_attention_reads_the_mirrored_source_position(num_heads, seed):
    result = train_reverse(num_heads, seed=seed)
    assert reverse_accuracy(result.model) > 0.99
    on_target = alignment(result.model)  # (h, T_q)
    assert on_target.shape == (num_heads, 8)
    assert on_target.min() >= 0.9, on_target  # ≥ 90 % of every head's weight, every output
    untrained = alignment(ReverseModel(num_heads))
    assert untrained.mean() < 0.3  # before training: spread over the 8 positions


@pytest.mark.parametrize("d_k", [4, 16, 64, 256])
def test_the_variance_of_q_dot_k_is_d_k(d_k):
    # 20,000 pairs: the relative standard error of the variance is about 1 %; allow 5 %
    assert abs(dot_product_variance(d_k) / d_k - 1) < 0.05


def test_unscaled_scores_saturate_the_softmax_and_its_gradient_reaches_two_keys():
    scaled = [softmax_saturation(d_k, scaled=True) for d_k in (4, 256)]
    unscaled = [softmax_saturation(d_k, scaled=False) for d_k in (4, 256)]
    # scaled: the same spread whatever d_k (16 keys: uniform would be 1/16 and log 16 = 2.77)
    assert abs(scaled[0].max_weight - scaled[1].max_weight) < 0.03
    assert abs(scaled[0].entropy - scaled[1].entropy) < 0.1
    assert abs(scaled[0].grad_norm - scaled[1].grad_norm) < 0.03
    assert abs(scaled[0].query_grad - scaled[1].query_grad) < 0.03
    assert scaled[1].others_share > 0.6  # most of the scores' gradient beyond the top two keys
    # unscaled: nearly one-hot at d_k = 256; less gradient into the scores, and almost all of it
    # on the top two keys; but more into q (the division also scales q's gradient by 1/√d_k)
    assert unscaled[1].max_weight > 0.9 and unscaled[1].entropy < 0.25
    assert unscaled[1].grad_norm < 0.35 * scaled[1].grad_norm
    assert unscaled[1].others_share < 0.15
    assert unscaled[1].query_grad > 4 * scaled[1].query_grad


def test_the_variance_of_q_dot_k_from_fresh_linear_layers_is_d_k_over_9():
    # nn.Linear's default initialisation: q entries of variance 1/3 for unit-variance inputs
    for d_k in (4, 64):
        assert abs(projected_dot_variance(d_k) / (d_k / 9) - 1) < 0.05
