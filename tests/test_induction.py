"""Induction heads in a two-layer attention-only model, trained here (25–40 s each on the 2-core
test machine): the model copies, a previous-token head in layer 0 and induction heads in layer 1
are found by their scores, silencing either breaks the copying while another head does not, a
one-layer model cannot complete the repeat, and the repeat's loss drops abruptly. Each claim
check is also fed a wrong object."""

import pytest
import torch

from helpers.claims import (
    check_cannot_copy,
    check_composition,
    check_copying,
    check_induction_heads,
    check_phase_change,
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


def test_18_an_evenly_spread_head_scores_what_the_notebook_says():
    # 18 gives, for scale, the scores of a head that spreads its weight evenly over the keys it
    # can see, on its 512 fresh sequences: 0.10 previous-token, 0.07 induction
    tokens, n = repeated_batch(512, generator=torch.Generator().manual_seed(1234))
    T = tokens.size(1)
    even = torch.tril(torch.ones(T, T))
    maps = (even / even.sum(-1, keepdim=True)).expand(512, 1, T, T)
    assert round(float(previous_token_scores(maps)), 2) == 0.10
    assert round(float(induction_scores(maps, n)), 2) == 0.07


@pytest.fixture(scope="module", params=[0, 3])  # 3: where other layer-0 heads matter too
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
    without = {
        "previous": copy_losses(run.model, tokens, n, ablate=[(0, head)])[1],
        "induction": copy_losses(run.model, tokens, n, ablate=[(1, j) for j in found])[1],
        "one induction": max(copy_losses(run.model, tokens, n, ablate=[(1, j)])[1] for j in found),
    }
    check_composition(repeat, without, run.chance)
    slow = check_phase_change(run.repeat)  # an abrupt drop
    assert 0 < slow == phase_change(run.repeat)[0]
    for wrong in ({"previous": 3.9 * repeat}, {"induction": 0.85 * run.chance},
                  {"one induction": without["induction"]},
                  {"previous": 4.05 * repeat, "one induction": 4.05 * repeat}):  # fmt: skip
        # (the last fails at seed 3 only because one head matters as much as the previous one)
        with pytest.raises(AssertionError, match="the two kinds of head work together"):
            check_composition(repeat, {**without, **wrong}, run.chance)
    with pytest.raises(AssertionError, match="a previous-token head in layer 0"):
        check_induction_heads(previous.flip(0), induction.flip(0))  # the layers swapped


def test_one_layer_of_the_same_size_cannot_copy(capsys):
    run = train_copying(num_layers=1, seed=0)
    tokens, n = repeated_batch(512, generator=torch.Generator().manual_seed(1234))
    first, repeat, _ = copy_losses(run.model, tokens, n)
    check_cannot_copy(repeat, run.chance, "one layer", copying=0.37)
    assert f"loss {repeat:.2f} on the repeat, against 0.37 for" in capsys.readouterr().out
    assert repeat > 0.6 * run.chance  # measured 2.48 of 3.47 at seed 0: a margin above half
    with pytest.raises(AssertionError, match="one layer copies the repeat"):
        check_copying(first, repeat, run.chance, "one layer")
    with pytest.raises(AssertionError, match="two layers cannot complete the repeat"):
        check_cannot_copy(0.37, run.chance, "two layers")  # what two layers reach


def test_the_phase_change_reads_a_drop_and_no_drop():
    drop = [3.0] * 300 + [0.5] * 300
    slow, fast = phase_change(drop)
    assert fast - slow < 60
    assert phase_change([3.0] * 600) == (600, 600)  # never


def test_18_the_phase_change_check_fails_on_a_steady_decline_and_on_no_drop(capsys):
    # the mean of the 50 steps ending at 313 is the first below 80 % of 3.0 (13 of them at 0.5)
    assert check_phase_change([3.0] * 300 + [0.5] * 300) == 313
    out = capsys.readouterr().out
    assert "by step 313 and to 30 % by step 343: the second fall took 30 steps" in out
    assert "21.9× as fast per step" in out  # (50 / 30) / (20 / 263)
    steady = [3.0 - 2.7 * i / 599 for i in range(600)]  # 80 % to 30 % takes 250 of 600 steps
    with pytest.raises(AssertionError, match="the repeat's loss drops abruptly"):
        check_phase_change(steady)
    # a quick steady decline from the start: the second fall is short (99 of 1500 steps) but
    # no faster per step than the first, so it is not abrupt
    quick = [max(3.0 - 2.7 * i / 200, 0.3) for i in range(1500)]
    with pytest.raises(AssertionError, match=r"less than 2× as fast per step as before: 1\.0×"):
        check_phase_change(quick)
    with pytest.raises(AssertionError, match="the repeat's loss drops abruptly"):
        check_phase_change([3.0] * 600)


def test_18_the_panel_shows_the_models_maps_and_each_heads_scores(two_layers):
    from helpers.induction import repeat_words
    from helpers.panels import InductionExplorer

    model = two_layers.model
    panel = InductionExplorer(model, n=10, seed=3)
    tokens, words = panel.sequences[0]
    assert tokens.shape == (1, 20) and torch.equal(tokens[0, :10], tokens[0, 10:])
    with torch.no_grad():
        _, maps = model(tokens)
    for layer in range(2):
        for head in range(model.num_heads):
            panel.layer_slider.value, panel.head_slider.value = layer, head
            assert torch.allclose(panel.maps, maps[layer][0])
            previous = float(previous_token_scores(maps[layer])[head])
            induction = float(induction_scores(maps[layer], torch.tensor([10]))[head])
            assert f"on the previous token: {previous:.2f}" in panel.table
            assert f"after its first-half twin: {induction:.2f}" in panel.table
    panel.choice.value = 1  # the sentence, repeated
    sentence, labels = repeat_words("the cat sat on a warm mat")
    assert torch.equal(panel.sequences[1][0], sentence) and labels[7:] == labels[:7]
    assert panel.message.startswith("14 tokens: 7, then the same 7 again")
    with pytest.raises(ValueError, match="needs 40 positions and the model has 32"):
        InductionExplorer(model, n=20)


def test_a_model_trained_once_in_a_test_run_is_read_back_with_the_same_weights(
    tmp_path, monkeypatch
):
    """$COURSE_TRAINED_CACHE (set by `make test` for one run): the second call with the same
    arguments reads the first's model and replays its steps; other arguments train anew."""
    from course.commands import TRAINED_CACHE
    from helpers.induction import CACHE_ENV

    assert TRAINED_CACHE == CACHE_ENV  # the command sets the variable the training reads
    monkeypatch.delenv(CACHE_ENV, raising=False)
    fresh = train_copying(num_layers=1, steps=30, seed=0)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    first = train_copying(num_layers=1, steps=30, seed=0)
    assert len(list(tmp_path.glob("*.pt"))) == 1
    seen = []
    again = train_copying(
        num_layers=1, steps=30, seed=0, on_step=lambda s, r: seen.append((s, len(r.repeat)))
    )
    assert seen == [(s, s + 1) for s in range(30)]  # every step replayed, the curve growing
    assert again.repeat == first.repeat == fresh.repeat and again.first == fresh.first
    for name, weight in fresh.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[name], weight), name
    other = train_copying(num_layers=1, steps=30, seed=1)  # another seed: trained, kept apart
    assert other.repeat != fresh.repeat and len(list(tmp_path.glob("*.pt"))) == 2
