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
    reverse_accuracy,
    reverse_batch,
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
