"""Induction heads in a two-layer attention-only model, trained here (about 13 s each): the model
copies, a previous-token head in layer 0 and induction heads in layer 1 are found by their scores,
silencing either breaks the copying while another head does not, a one-layer model cannot copy,
and the repeat's loss drops abruptly. Each claim check is also fed a wrong object."""

import pytest
import torch

from helpers.claims import (
    check_cannot_copy,
    check_composition,
    check_copying,
    check_induction_heads,
)
from helpers.induction import (
    copy_losses,
    induction_scores,
    phase_change,
    previous_token_scores,
    repeated_batch,
    train_copying,
)


def test_a_repeated_batch_repeats_its_first_n_tokens():
    tokens, n = repeated_batch(16, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (16, 32) and bool(((n >= 4) & (n <= 16)).all())
    for row, k in zip(tokens, n.tolist()):
        assert torch.equal(row[k : 2 * k], row[:k])


def test_the_scores_find_a_hand_made_previous_token_and_induction_head():
    tokens, n = repeated_batch(8, generator=torch.Generator().manual_seed(1))
    T = tokens.size(1)
    previous = torch.zeros(8, 1, T, T)
    previous[:, 0, 0, 0] = 1
    previous[:, 0, torch.arange(1, T), torch.arange(T - 1)] = 1  # every query on t − 1
    assert torch.allclose(previous_token_scores(previous), torch.ones(1))
    induction = torch.zeros(8, 1, T, T)
    for b, k in enumerate(n.tolist()):
        for t in range(T):
            induction[b, 0, t, t - k + 1 if k <= t < 2 * k - 1 else t] = 1
    assert torch.allclose(induction_scores(induction, n), torch.ones(1))
    assert float(induction_scores(previous, n)) < 0.2  # a previous-token head is not one


@pytest.fixture(scope="module", params=[0, 1])
def two_layers(request):
    return train_copying(num_layers=2, seed=request.param)


def test_two_layers_copy_with_a_previous_token_head_and_induction_heads(two_layers, capsys):
    run = two_layers
    tokens, n = repeated_batch(512, generator=torch.Generator().manual_seed(1234))
    first, repeat, maps = copy_losses(run.model, tokens, n)
    check_copying(first, repeat, run.chance, "two layers")
    previous = torch.stack([previous_token_scores(m) for m in maps])  # (layers, h)
    induction = torch.stack([induction_scores(m, n) for m in maps])
    head, found = check_induction_heads(previous, induction)
    others = [j for j in range(run.model.num_heads) if j != head]
    without = {
        "previous": copy_losses(run.model, tokens, n, ablate=[(0, head)])[1],
        "induction": copy_losses(run.model, tokens, n, ablate=[(1, j) for j in found])[1],
        "other": max(copy_losses(run.model, tokens, n, ablate=[(0, j)])[1] for j in others),
    }
    check_composition(repeat, without, run.chance)
    slow, fast = phase_change(run.repeat)
    assert fast - slow <= 0.25 * len(run.repeat), (slow, fast)  # an abrupt drop
    with pytest.raises(AssertionError, match="the two heads work together"):
        check_composition(repeat, {**without, "other": without["previous"]}, run.chance)
    with pytest.raises(AssertionError, match="a previous-token head in layer 0"):
        check_induction_heads(previous.flip(0), induction.flip(0))  # the layers swapped


def test_one_layer_of_the_same_size_cannot_copy(capsys):
    run = train_copying(num_layers=1, seed=0)
    tokens, n = repeated_batch(512, generator=torch.Generator().manual_seed(1234))
    first, repeat, _ = copy_losses(run.model, tokens, n)
    check_cannot_copy(repeat, run.chance, "one layer")
    with pytest.raises(AssertionError, match="one layer copies the repeat"):
        check_copying(first, repeat, run.chance, "one layer")


def test_the_phase_change_reads_a_drop_and_no_drop():
    drop = [3.0] * 300 + [0.5] * 300
    slow, fast = phase_change(drop)
    assert fast - slow < 60
    assert phase_change([3.0] * 600) == (600, 600)  # never
