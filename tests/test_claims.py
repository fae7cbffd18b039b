"""Each ✓ that stands for a claim in notebooks 01, 03, 04, 06 and 10–13 can fail: the same check
the notebook calls, fed the object it passes and a wrong one (one test per claim, named after the
notebook)."""

import pytest
import torch
from torch import nn

from helpers.attention import (
    FusedMultiHeadAttention,
    PerHeadMultiHeadAttention,
    SelfAttention,
    scaled_dot_product_attention,
)
from helpers.checks import check_close_all
from helpers.claims import (
    check_anti_diagonal,
    check_head_patterns,
    check_head_projects_once,
    check_layer_count,
    check_linear_layout,
    check_outputs_differ,
    check_parameter_count,
    check_separate_matrices,
    check_two_heads_win,
    check_two_place_roles,
)
from helpers.examples import seeded_attention
from helpers.layouts import fuse


class _RowLinear(nn.Module):
    """A layer that stores its matrix as (in_features, out_features) and computes x @ W."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_in, d_out))
        self.bias = None

    def forward(self, x):
        return x @ self.weight


def test_01_linear_layout_passes_for_nn_linear_without_bias(capsys):
    x = torch.randn(1, 7, 16)
    check_linear_layout(nn.Linear(16, 8, bias=False), x, "w_q")
    assert (
        "✓ w_q: weight (8, 16) = (out_features 8, in_features 16), no bias"
        in capsys.readouterr().out
    )


def test_01_linear_layout_fails_with_a_bias():
    with pytest.raises(AssertionError, match="it has a bias"):
        check_linear_layout(nn.Linear(16, 8), torch.randn(1, 7, 16), "w_q")


def test_01_linear_layout_fails_for_the_x_w_layout():
    with pytest.raises(AssertionError, match=r"its weight is \(16, 8\)"):
        check_linear_layout(_RowLinear(16, 8), torch.randn(1, 7, 16), "w_q")


def test_03_separate_matrices_passes_for_per_head_attention(capsys):
    check_separate_matrices(seeded_attention(64, 4, per_head=True))
    assert "✓ 12 = 3h weight tensors in the heads, no two sharing memory" in capsys.readouterr().out


def test_03_separate_matrices_fails_when_heads_share_k_and_v():
    grouped = PerHeadMultiHeadAttention(64, 4, num_kv_heads=1)  # K, V shared by all heads
    with pytest.raises(AssertionError, match="12 weights sit in only 6 separate blocks"):
        check_separate_matrices(grouped)


def test_03_separate_matrices_fails_for_views_of_one_matrix():
    per_head = PerHeadMultiHeadAttention(16, 2)
    big = torch.randn(16, 16)  # one (d_model, d_model) W^Q, its rows cut into the two heads
    for i, head in enumerate(per_head.heads):
        head.w_q.weight = nn.Parameter(big[8 * i : 8 * (i + 1)])  # a view: big's memory
    with pytest.raises(AssertionError, match="the 6 weights sit in only 5 separate blocks"):
        check_separate_matrices(per_head)


def test_03_separate_matrices_fails_for_a_wrong_shape():
    per_head = PerHeadMultiHeadAttention(16, 2)
    per_head.heads[0].w_v = nn.Linear(16, 4, bias=False)
    with pytest.raises(AssertionError, match=r"shapes \[\(4, 16\), \(8, 16\)\]"):
        check_separate_matrices(per_head)


class _HeadProjectingTwice(SelfAttention):
    """Wrong object for 03's "head 1 = attention of x W^Q, x W^K, x W^V": a head that applies a
    second (d_k, d_k) matrix after its W^Q (role "q") or its W^V (role "v"), the second
    projection a reader of the paper's formula worries about."""

    def __init__(self, d_model: int, d_k: int, role: str):
        super().__init__(d_model, d_k)
        self.role, self.again = role, nn.Linear(d_k, d_k, bias=False)

    def forward(self, x, mask=None, context=None):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)  # (B, T, d_k) each
        q, v = (self.again(q), v) if self.role == "q" else (q, self.again(v))
        return scaled_dot_product_attention(q, k, v)


def _x64() -> torch.Tensor:
    return torch.randn(1, 7, 64, generator=torch.Generator().manual_seed(0))


def test_03_head_projects_once_passes_for_a_head_of_the_per_head_module(capsys):
    check_head_projects_once(seeded_attention(64, 4, per_head=True).heads[1], _x64(), "head 1")
    assert "✓ head 1, run on x: its map and output = attention of q = x W^Q" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    "role, differs", [("q", "its map by"), ("v", "its output by")], ids=["q_twice", "v_twice"]
)
def test_03_head_projects_once_fails_for_a_head_that_projects_twice(role, differs):
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match=f"differs from one projection per matrix: {differs}"):
        check_head_projects_once(_HeadProjectingTwice(64, 16, role), _x64(), "head 1")


def test_03_head_projects_once_fails_for_a_head_with_biases():
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match="differs from one projection per matrix"):
        check_head_projects_once(SelfAttention(64, 16, bias=True), _x64(), "head 1")


@pytest.mark.parametrize("per_head", [True, False])
@pytest.mark.parametrize("h", [1, 2, 4, 8])
def test_03_04_four_d_model_squared_for_every_h(per_head, h, capsys):
    module = seeded_attention(32, h, per_head=per_head)
    assert check_parameter_count(module) == 4 * 32**2
    assert "✓ 4,096 parameters = 4·d_model² = 4·32²" in capsys.readouterr().out


def test_03_four_d_model_squared_plus_biases(capsys):
    assert check_parameter_count(PerHeadMultiHeadAttention(64, 4, bias=True)) == 4 * 64**2 + 4 * 64
    out = capsys.readouterr().out
    assert "✓ 16,640 parameters = 4·d_model² + 4·d_model (biases) = 4·64² + 4·64" in out


def test_04_four_d_model_squared_fails_when_d_k_is_not_d_model_over_h():
    wide = PerHeadMultiHeadAttention(32, 4, d_k=16)  # h·d_k = 64
    with pytest.raises(AssertionError, match="the module has 8,192"):
        check_parameter_count(wide)


def test_03_four_d_model_squared_fails_when_only_some_layers_have_biases():
    module = FusedMultiHeadAttention(32, 4)
    module.w_o = nn.Linear(32, 32)  # a bias on W^O only: 32 more, not 4·32
    with pytest.raises(AssertionError, match="the module has 4,128"):
        check_parameter_count(module)


@pytest.mark.parametrize("h", [2, 4, 8])  # at h = 1 the fused module has 3h + 1 = 4 too
def test_03_three_h_plus_one_matrices_fails_for_the_fused_module(h, capsys):
    check_layer_count(seeded_attention(32, h, per_head=True), 3 * h + 1, "3h + 1")
    assert f"✓ {3 * h + 1} weight matrices (nn.Linear layers) = 3h + 1" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="the module has 4$"):
        check_layer_count(seeded_attention(32, h), 3 * h + 1, "3h + 1")


def _maps(T: int, looks_at) -> torch.Tensor:
    """(1, 1, T, T) maps where query t puts all its weight on key looks_at(t) (t >= 1)."""
    w = torch.zeros(1, 1, T, T)
    w[0, 0, 0, 0] = 1
    for t in range(1, T):
        w[0, 0, t, looks_at(t)] = 1
    return w


def test_11_two_place_roles_pass_for_a_previous_head_and_a_first_head(capsys):
    two = torch.cat([_maps(8, lambda t: t - 1), _maps(8, lambda t: 0)], dim=1)
    one = (_maps(8, lambda t: t - 1) + _maps(8, lambda t: 0)) / 2
    check_two_place_roles(one, two)
    out = capsys.readouterr().out
    assert "head 0 puts 1.00 of its weight on the previous position, head 1 1.00" in out
    assert "✓ 1 head: 0.50 on the previous position and 0.50 on position 0, split" in out


def test_11_two_place_roles_fail_when_both_heads_look_at_the_previous_position():
    two = torch.cat([_maps(8, lambda t: t - 1), _maps(8, lambda t: t - 1)], dim=1)
    one = (_maps(8, lambda t: t - 1) + _maps(8, lambda t: 0)) / 2
    with pytest.raises(AssertionError, match="each place needs its own head"):
        check_two_place_roles(one, two)


def test_11_two_place_roles_fail_when_the_maps_are_shifted():
    two = torch.cat([_maps(8, lambda t: max(t - 2, 0)), _maps(8, lambda t: 0)], dim=1)
    one = (_maps(8, lambda t: t - 1) + _maps(8, lambda t: 0)) / 2
    with pytest.raises(AssertionError, match="on the previous position per head"):
        check_two_place_roles(one, two)


def test_11_two_place_roles_fail_when_the_one_head_does_not_split():
    two = torch.cat([_maps(8, lambda t: t - 1), _maps(8, lambda t: 0)], dim=1)
    with pytest.raises(AssertionError, match="one head splits its weight"):
        check_two_place_roles(_maps(8, lambda t: t - 1), two)


def _grads(module):
    return {name: p.grad for name, p in module.named_parameters()}


def test_06_every_gradient_compared_passes_for_fuse_of_per_head(capsys):
    per_head = PerHeadMultiHeadAttention(16, 2, bias=True)
    fused = fuse(per_head)
    x = torch.randn(1, 5, 16)
    per_head(x)[0].square().sum().backward()
    fused(x)[0].square().sum().backward()
    stacked = {
        "w_q.weight": torch.cat([h.w_q.weight.grad for h in per_head.heads]),
        "w_q.bias": torch.cat([h.w_q.bias.grad for h in per_head.heads]),
        "w_k.weight": torch.cat([h.w_k.weight.grad for h in per_head.heads]),
        "w_k.bias": torch.cat([h.w_k.bias.grad for h in per_head.heads]),
        "w_v.weight": torch.cat([h.w_v.weight.grad for h in per_head.heads]),
        "w_v.bias": torch.cat([h.w_v.bias.grad for h in per_head.heads]),
        "w_o.weight": per_head.w_o.weight.grad,
        "w_o.bias": per_head.w_o.bias.grad,
    }
    check_close_all(_grads(fused), stacked, "gradients")
    assert (
        "✓ gradients: all 8 equal within atol 1e-05 (w_q.weight, w_q.bias"
        in capsys.readouterr().out
    )
    # the same check fails when one head's block sits in another head's place
    swapped = dict(stacked)
    swapped["w_v.weight"] = torch.cat([stacked["w_v.weight"][8:], stacked["w_v.weight"][:8]])
    with pytest.raises(AssertionError, match="gradients, w_v.weight: max"):
        check_close_all(_grads(fused), swapped, "gradients")
    with pytest.raises(AssertionError, match=r"missing \['w_o.bias'\]"):
        check_close_all({k: v for k, v in stacked.items() if k != "w_o.bias"}, stacked, "grads")


def _patterns(**best: float) -> dict[str, torch.Tensor]:
    """(6, 12) scores: every head 0.05, the head (0, 0) given `best` for each named pattern."""
    names = ["previous token", "next token", "[CLS]", "same word elsewhere", "[SEP]", "itself"]
    scores = {name: torch.full((6, 12), 0.05) for name in names}
    scores["[CLS]"] += 0.4  # many heads rest on [CLS]
    for name, value in best.items():
        scores[name.replace("_", " ")][0, 0] = value
    return scores


FOUND = {"previous token": 0.9, "next token": 0.6, "[CLS]": 0.8, "same word elsewhere": 0.3}
GOOD = {"previous_token": 1.0, "next_token": 0.74, "[CLS]": 0.89, "same_word_elsewhere": 0.46}


def test_12_head_patterns_pass_for_minilm_like_scores(capsys):
    check_head_patterns(_patterns(**GOOD), FOUND, {"[SEP]": 0.5, "itself": 0.5})
    assert "✓ no head gives [SEP] or itself as much as its threshold" in capsys.readouterr().out


def test_12_head_patterns_fail_when_a_head_looks_mostly_at_sep():
    scores = _patterns(**GOOD, **{"[SEP]": 0.8})
    with pytest.raises(AssertionError, match=r"no head looks mostly at \[SEP\]: one head gives"):
        check_head_patterns(scores, FOUND, {"[SEP]": 0.5, "itself": 0.5})


def test_12_head_patterns_fail_when_no_head_looks_at_the_next_token():
    scores = _patterns(**(GOOD | {"next_token": 0.3}))
    with pytest.raises(AssertionError, match="a head for next token: the best head gives it 0.30"):
        check_head_patterns(scores, FOUND, {"[SEP]": 0.5})


def test_12_head_patterns_fail_when_every_head_does_the_same():
    scores = _patterns(**GOOD)
    scores["same word elsewhere"] = torch.full((6, 12), 0.46)  # the best head is the mean head
    with pytest.raises(AssertionError, match="not above 4× the mean head"):
        check_head_patterns(scores, FOUND, {"[SEP]": 0.5})


def _anti(B: int, h: int, T: int, on: float) -> torch.Tensor:
    """(B, h, T, T) maps with weight `on` on key T − 1 − t and the rest spread evenly."""
    w = torch.full((B, h, T, T), (1 - on) / (T - 1))
    t = torch.arange(T)
    w[:, :, t, T - 1 - t] = on
    return w


def test_13_anti_diagonal_passes_on_every_sequence(capsys):
    check_anti_diagonal(_anti(4, 2, 8, 0.95))
    assert "(lowest 0.95), and at least 90% in 100% of the 64 cases" in capsys.readouterr().out


def test_13_anti_diagonal_fails_when_one_sequence_looks_elsewhere():
    w = _anti(4, 2, 8, 0.95)
    w[3, 1] = torch.eye(8)  # one sequence, one head: the diagonal, not the anti-diagonal
    # the mean over the 4 sequences still puts 0.71 on the anti-diagonal; the check is per sequence
    assert float(w.mean(0)[1, torch.arange(8), 7 - torch.arange(8)].min()) > 0.7
    with pytest.raises(AssertionError, match="the lowest weight there is 0.00"):
        check_anti_diagonal(w)


def test_13_anti_diagonal_fails_when_too_few_cases_reach_90_percent():
    with pytest.raises(AssertionError, match="0% of the cases reach 0.9"):
        check_anti_diagonal(_anti(4, 2, 8, 0.6))


def test_06_key_bias_gets_no_gradient_but_the_query_bias_does():
    """06 checks W^K's bias gradient against 0 within 1e-6; the same check fails on W^Q's bias."""
    from helpers.checks import check_close

    module = FusedMultiHeadAttention(16, 2, bias=True)
    x, target = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    (module(x)[0] - target).square().mean().backward()
    zero = torch.zeros(16)
    check_close(module.w_k.bias.grad, zero, "W^K's bias gets no gradient", atol=1e-6)
    with pytest.raises(AssertionError, match=r"✗ W\^Q's bias gets no gradient: max"):
        check_close(module.w_q.bias.grad, zero, "W^Q's bias gets no gradient", atol=1e-6)


def _trained_pair(optimizer_class, steps: int = 5):
    """A per-head module and its fused copy after the same `steps` of `optimizer_class` each:
    their outputs on a fixed x."""
    torch.manual_seed(0)
    per_head = PerHeadMultiHeadAttention(16, 2, bias=True)
    fused = fuse(per_head)
    x, target = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    for module in (per_head, fused):
        optimizer = optimizer_class(module.parameters(), lr=1e-2)
        for _ in range(steps):
            optimizer.zero_grad()
            (module(x)[0] - target).square().mean().backward()
            optimizer.step()
    with torch.no_grad():
        return per_head(x)[0], fused(x)[0]


def test_06_layouts_stay_one_model_under_adam_and_the_check_fails_under_adafactor():
    """06's "outputs after 5 Adam steps" (check_close). Wrong object: the same steps taken by
    Adafactor, whose step depends on the whole matrix (factored second moment, RMS of the
    parameter), so the two layouts drift apart."""
    from helpers.checks import check_close

    check_close(*_trained_pair(torch.optim.Adam), "outputs after 5 Adam steps")
    with pytest.raises(AssertionError, match="✗ outputs after 5 Adafactor steps: max"):
        check_close(*_trained_pair(torch.optim.Adafactor), "outputs after 5 Adafactor steps")


def test_06_layouts_drift_under_adafactor_and_the_check_fails_under_adam(capsys):
    """06's "outputs after 5 more steps with Adafactor … differ" (check_outputs_differ). Wrong
    object: the same steps taken by Adam, which updates each number on its own, so the layouts
    stay equal (gaps of rounding, ~1e-7)."""
    check_outputs_differ(*_trained_pair(torch.optim.Adafactor), "Adafactor", at_least=1e-3)
    assert "✓ Adafactor differ: max |difference|" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="Adam differ: the largest difference is"):
        check_outputs_differ(*_trained_pair(torch.optim.Adam), "Adam", at_least=1e-3)


def test_04_wide_heads_count_4_h_d_k_d_model(capsys):
    wide = PerHeadMultiHeadAttention(32, 4, d_k=16)
    assert check_parameter_count(wide, tied=False) == 4 * 4 * 16 * 32
    assert "✓ 8,192 parameters = 4·h·d_k·d_model = 4·4·16·32" in capsys.readouterr().out


def test_04_wide_heads_count_fails_when_w_o_is_square():
    wide = PerHeadMultiHeadAttention(32, 4, d_k=16)
    wide.w_o = nn.Linear(32, 32, bias=False)  # W^O not widened to h·d_k inputs
    with pytest.raises(AssertionError, match="the module has 7,168"):
        check_parameter_count(wide, tied=False)


def test_11_outputs_differ_fails_at_h_1():
    x = torch.randn(1, 7, 48)
    one, same = seeded_attention(48, 1), seeded_attention(48, 1)
    with pytest.raises(AssertionError, match="the largest difference is 0, not above 0.1"):
        check_outputs_differ(one(x)[0], same(x)[0], "outputs", at_least=0.1)
    assert check_outputs_differ(one(x)[0], seeded_attention(48, 4)(x)[0], "outputs", 0.1) > 0.1


@pytest.fixture(scope="module")
def two_place_runs():
    from helpers.experiment import train_two_place

    return train_two_place(num_heads=1), train_two_place(num_heads=2)


def test_11_two_heads_win_passes_for_the_notebooks_runs(two_place_runs, capsys):
    check_two_heads_win(*two_place_runs)
    assert (
        "one head\n  still misses the first token at 25% of the positions"
        in capsys.readouterr().out
    )


def test_11_two_heads_win_fails_with_the_runs_swapped(two_place_runs):
    one, two = two_place_runs
    with pytest.raises(AssertionError, match=r"the models have \(2, 1\) heads"):
        check_two_heads_win(two, one)


def test_11_two_heads_win_fails_for_an_untrained_two_head_model(two_place_runs):
    from helpers.experiment import TrainResult, TwoPlaceModel

    torch.manual_seed(0)
    untrained = TrainResult(TwoPlaceModel(2), losses=[2.8] * 20)
    with pytest.raises(AssertionError, match="two heads: final loss 2.80"):
        check_two_heads_win(two_place_runs[0], untrained)
