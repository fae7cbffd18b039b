"""The wrong objects of the claims behind the longer ✓ lines (helpers/claims/: layouts and
counts, scaling, the heads inside the matrices, positions, trained heads, induction, a refused
text): see wrong.py."""

from __future__ import annotations

import copy

import torch
from torch import nn

from helpers import claims, windows
from helpers.attention import (
    FusedMultiHeadAttention,
    KVCache,
    PerHeadMultiHeadAttention,
    merge_heads,
    split_heads,
)
from helpers.examples import seeded_attention
from helpers.positions import apply_rope, sinusoidal_positions
from helpers.windows import window_mask
from tests.ledger.wrong import _gen, _own, _x, wrong

# --- helpers/claims/layers.py: layouts and counts -------------------------------------------


class _RowLinear(nn.Module):
    """Stores its matrix as (in_features, out_features) and computes x @ W."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_in, d_out, generator=_gen(0)))
        self.bias = None

    def forward(self, x):
        return x @ self.weight


@wrong("check_linear_layout", "a layer that stores (in_features, out_features) and computes x @ W")
def _layout_row():
    claims.check_linear_layout(_RowLinear(16, 8), _x(), "w_q")


@wrong("check_linear_layout", "nn.Linear with a bias: x @ W.T + b")
def _layout_bias():
    claims.check_linear_layout(nn.Linear(16, 8), _x(), "w_q")


@wrong("check_separate_matrices", "heads 0 and 1 sharing one W^Q")
def _separate_shared():
    module = PerHeadMultiHeadAttention(16, 4)
    module.heads[1].w_q = module.heads[0].w_q
    claims.check_separate_matrices(module)


@wrong("check_separate_matrices", "the heads' W^Q cut as views of one (d_model, d_model) matrix")
def _separate_views():
    module = PerHeadMultiHeadAttention(16, 2)
    big = torch.randn(16, 16, generator=_gen(0))  # one W^Q, its rows cut into the two heads
    for i, head in enumerate(module.heads):
        head.w_q.weight = nn.Parameter(big[8 * i : 8 * (i + 1)])  # a view: big's memory
    claims.check_separate_matrices(module)


@wrong("check_separate_matrices", "grouped-query heads: 4 heads, K and V shared in 2 groups")
def _separate_gqa():
    claims.check_separate_matrices(PerHeadMultiHeadAttention(16, 4, num_kv_heads=2))


@wrong("check_parameter_count", "heads wider than d_model / h (d_k = 8 at d_model 16, h = 4)")
def _count_wide():
    claims.check_parameter_count(PerHeadMultiHeadAttention(16, 4, d_k=8))


@wrong("check_parameter_count", "grouped-query attention counted as plain: fewer K/V weights")
def _count_gqa():
    claims.check_parameter_count(FusedMultiHeadAttention(16, 4, num_kv_heads=2))


@wrong("check_parameter_count", "a bias on W^O only: d_model more, not 4·d_model")
def _count_one_bias():
    module = FusedMultiHeadAttention(16, 4)
    module.w_o = nn.Linear(16, 16)
    claims.check_parameter_count(module)


@wrong("check_layer_count", "the fused module (4 matrices) where 3h + 1 per-head layers are due")
def _layers_fused():
    claims.check_layer_count(FusedMultiHeadAttention(16, 4), 3 * 4 + 1, "3h + 1")


@wrong("check_head_projects_once", "a head that applies a second matrix after its W^Q")
def _projects_twice():
    from tests.ledger.sites import _TwiceHead

    claims.check_head_projects_once(_TwiceHead(16, 4), _x(), "head 1")


@wrong("check_head_projects_once", "a head that applies a second matrix after its W^V")
def _projects_twice_v():
    from tests.ledger.sites import _TwiceHead

    claims.check_head_projects_once(_TwiceHead(16, 4, after="v"), _x(), "head 1")


@wrong("check_head_projects_once", "a head whose W^Q, W^K, W^V have biases (x W + b)")
def _projects_bias():
    from helpers.attention import SelfAttention

    torch.manual_seed(0)
    claims.check_head_projects_once(SelfAttention(16, 4, bias=True), _x(), "head 1")


@wrong("check_kv_shared", "heads holding copies of their group's w_k and w_v (sharing broken)")
def _kv_copies():
    module = PerHeadMultiHeadAttention(16, 4, num_kv_heads=2)
    for head in module.heads[1::2]:
        head.w_k, head.w_v = copy.deepcopy(head.w_k), copy.deepcopy(head.w_v)
    claims.check_kv_shared(module, 2)


@wrong("check_kv_shared", "plain multi-head attention (4 K/V heads) checked as g = 2")
def _kv_plain():
    claims.check_kv_shared(PerHeadMultiHeadAttention(16, 4), 2)


@wrong("check_outputs_differ", "two outputs of the same module (one head vs one head)")
def _differ_same():
    out = seeded_attention(16, 1)(_x())[0]
    claims.check_outputs_differ(out, out.clone(), "outputs", at_least=0.1)


# --- 02 and 07: scaling and dropout --------------------------------------------------------


_D_KS = [4, 16, 64, 256]


@wrong("check_dot_product_variance", "variances of q·k / √d_k, flat, given as var(q·k)")
def _variance_scaled():
    claims.check_dot_product_variance(_D_KS, [1.0] * 4)


@wrong("check_dot_product_variance", "variances that grow as d_k² (σ² = d_k), not d_k")
def _variance_squared():
    claims.check_dot_product_variance(_D_KS, [d * d for d in _D_KS])


def _measures(scaled: bool) -> dict[str, list[float]]:
    """softmax_saturation-like measures: flat with the division, drifting without it."""
    if scaled:
        return {"max_weight": [0.4] * 4, "others_share": [0.6] * 4, "grad_norm": [0.3] * 4,
                "query_grad": [0.2] * 4, "query_grad_median": [0.15] * 4,
                "query_grad_small": [0.05] * 4}  # fmt: skip
    return {"max_weight": [0.5, 0.7, 0.85, 0.92], "others_share": [0.5, 0.3, 0.2, 0.1],
            "grad_norm": [0.3, 0.2, 0.1, 0.08], "query_grad": [0.3, 0.4, 0.5, 0.6],
            "query_grad_median": [0.1, 0.05, 0.02, 0.01],
            "query_grad_small": [0.1, 0.3, 0.5, 0.6]}  # fmt: skip


@wrong("check_scaled_rows_flat", "the measures without the division, which drift with d_k")
def _flat_unscaled():
    claims.check_scaled_rows_flat(_D_KS, _measures(scaled=False))


@wrong("check_unscaled_saturates", "the scaled measures passed as the unscaled ones")
def _saturates_scaled():
    claims.check_unscaled_saturates(_D_KS, _measures(True), _measures(True), T=16)


@wrong("check_query_gradient", "scaled and unscaled swapped")
def _gradient_swapped():
    claims.check_query_gradient(_D_KS, _measures(False), _measures(True))


@wrong("check_dropout_rate", "maps drawn with p = 0.1 checked against p = 0.2")
def _dropout_other_p():
    draws = nn.functional.dropout(torch.ones(200, 4, 7, 7), p=0.1, training=True)
    claims.check_dropout_rate(draws, 0.2)


@wrong("check_default", "a default misremembered: nn.MultiheadAttention(dropout=…) as 0.1")
def _default_dropout():
    claims.check_default(nn.MultiheadAttention, "dropout", 0.1)


# --- 05, 16, 17: heads inside the matrices -------------------------------------------------


def _token_rows(transpose: bool) -> torch.Tensor:
    T, h = 7, 4
    source = torch.arange(T).float()[:, None].expand(T, 16)  # (T, 16): each cell its token
    if transpose:
        return split_heads(source[None], h)[0]  # (h, T, d_k)
    return source[None].reshape(1, h, T, 4)[0]


@wrong("check_rows_are_tokens", "the straight view (reshape to (h, T, d_k), no transpose)")
def _rows_straight():
    claims.check_rows_are_tokens(_token_rows(transpose=False), "straight view")


def _moved(w_o: torch.Tensor, h: int = 4, d_k: int = 4) -> torch.Tensor:
    """How much each output feature moves when head i is silenced: (h, d_model)."""
    heads = split_heads(_x(seed=3), h)  # (B, h, T, d_k)
    out = merge_heads(heads) @ w_o
    moved = torch.zeros(h, h * d_k)
    for i in range(h):
        silenced = heads.clone()
        silenced[:, i] = 0
        moved[i] = (out - merge_heads(silenced) @ w_o).abs().mean((0, 1))
    return moved


@wrong("check_reach_all", "no W^O (the identity): each head moves only its own features")
def _reach_all_identity():
    claims.check_reach_all(_moved(torch.eye(16)))


@wrong("check_reach_own", "a random W^O: every head moves every feature")
def _reach_own_mixed():
    claims.check_reach_own(_moved(torch.randn(16, 16, generator=_gen(4))), 4)


@wrong("check_reach_own", "the heads merged in the wrong order: head 0 moves head 1's features")
def _reach_own_swapped():
    moved = _moved(torch.eye(16))
    claims.check_reach_own(moved[[1, 0, 2, 3]], 4)


@wrong("check_head_ranks", "a head whose W^Q has a zero row: rank d_k − 1")
def _ranks_deficient():
    module = _own(seeded_attention(16, 4))
    with torch.no_grad():
        module.w_q.weight[0] = 0
    claims.check_head_ranks([module])


@wrong("check_head_ranks", "a collapsed direction: one row of W^Q shrunk to 1 %")
def _ranks_collapsed():
    module = _own(seeded_attention(16, 4))
    with torch.no_grad():
        module.w_q.weight[0] *= 0.01
    claims.check_head_ranks([module], at_least=0.05)


@wrong("check_less_even", "fresh weights given as the trained ones")
def _less_even_fresh():
    torch.manual_seed(0)
    fresh = FusedMultiHeadAttention(16, 4)
    claims.check_less_even([fresh], fresh)


@wrong("check_less_even", "one odd head among fresh ones: one direction of its W_OV nearly gone")
def _less_even_one_odd():
    torch.manual_seed(0)
    fresh = FusedMultiHeadAttention(16, 4)
    one_odd = copy.deepcopy(fresh)
    with torch.no_grad():
        one_odd.w_v.weight[1] *= 1e-3  # head 0 only; the median matrix is still fresh
    claims.check_less_even([one_odd], fresh)


# --- 10: positions --------------------------------------------------------------------------


@wrong("check_order_blind", "a module that adds sinusoidal positions to x")
def _blind_positions():
    mha = seeded_attention(16, 4)
    table = sinusoidal_positions(5, 16)

    def with_positions(x, mask=None):
        return mha(x + table, mask)

    claims.check_order_blind(with_positions, _x(), torch.arange(4, -1, -1), "with positions")


@wrong("check_order_seen", "plain attention, no positions and no mask")
def _seen_plain():
    claims.check_order_seen(seeded_attention(16, 4), _x(), torch.arange(4, -1, -1), "plain")


def _qk() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(6, 8, generator=_gen(5)), torch.randn(6, 8, generator=_gen(6))  # (T, d_k)


@wrong("check_relative_scores", "absolute positions added to q and k instead of a rotation")
def _relative_added():
    table = sinusoidal_positions(200, 8)
    q, k = _qk()
    claims.check_relative_scores(q, k, lambda t, s: t + table[s : s + len(t)], (1, 5), "added")


@wrong("check_relative_scores", "only the queries turned, not the keys")
def _relative_queries_only():
    q, k = _qk()
    calls = iter(range(10**6))

    def turned(t, s):  # odd calls are the keys: leave them
        return t if next(calls) % 2 else apply_rope(t, offset=s)

    claims.check_relative_scores(q, k, turned, (1, 5), "q only")


@wrong("check_relative_scores", "no rotation at all (the identity): nothing depends on m − n")
def _relative_identity():
    q, k = _qk()
    claims.check_relative_scores(q, k, lambda t, s: t, (1, 5, 100), "identity")


# --- 11, 12, 13: what trained heads do ------------------------------------------------------


def _maps(T: int, looks_at) -> torch.Tensor:
    """(1, 1, T, T) maps where query t puts all its weight on key looks_at(t)."""
    maps = torch.zeros(1, 1, T, T)
    for t in range(T):
        maps[0, 0, t, looks_at(t)] = 1.0
    return maps


@wrong("check_two_place_roles", "both heads on the previous position, none on position 0")
def _roles_both_previous():
    previous = _maps(8, lambda t: max(t - 1, 0))
    split = (previous + _maps(8, lambda t: 0)) / 2
    claims.check_two_place_roles(split, torch.cat([previous, previous], dim=1))


@wrong("check_two_place_roles", "a single head that does not split (all on the previous position)")
def _roles_no_split():
    previous, first = _maps(8, lambda t: max(t - 1, 0)), _maps(8, lambda t: 0)
    claims.check_two_place_roles(previous, torch.cat([previous, first], dim=1))


def _runs():
    from helpers.experiment import TrainResult, TwoPlaceModel

    torch.manual_seed(0)
    return TrainResult(TwoPlaceModel(1), [0.5] * 20), TrainResult(TwoPlaceModel(2), [0.01] * 20)


@wrong("check_two_heads_win", "the runs swapped: the 2-head model given as the 1-head one")
def _win_swapped():
    one, two = _runs()
    claims.check_two_heads_win(two, one)


@wrong("check_two_heads_win", "an untrained 2-head model (low loss claimed, but it is wrong)")
def _win_untrained():
    one, two = _runs()
    claims.check_two_heads_win(one, two)


def _patterns(**best: float) -> dict[str, torch.Tensor]:
    names = ("previous token", "next token", "[CLS]", "same word elsewhere", "[SEP]", "itself")
    scores = {}
    for name in names:
        s = torch.full((6, 12), 0.02)
        s[0, 0] = best.get(name, 0.95 if name in names[:4] else 0.1)
        scores[name] = s
    return scores


_FOUND = {"previous token": 0.9, "next token": 0.6, "[CLS]": 0.8, "same word elsewhere": 0.3}


@wrong("check_head_patterns", "no head above the [CLS] threshold (best 0.5 < 0.8)")
def _patterns_no_cls():
    claims.check_head_patterns(_patterns(**{"[CLS]": 0.5}), _FOUND, {"[SEP]": 0.5})


@wrong("check_head_patterns", "a head that looks mostly at [SEP] (0.7, threshold 0.5)")
def _patterns_sep():
    claims.check_head_patterns(_patterns(**{"[SEP]": 0.7}), _FOUND, {"[SEP]": 0.5})


@wrong("check_head_patterns", "every head alike: the best no more than 4× the mean")
def _patterns_alike():
    scores = _patterns()
    scores["next token"] = torch.full((6, 12), 0.7)
    claims.check_head_patterns(scores, _FOUND, {"[SEP]": 0.5})


@wrong("check_heads_resting_on", "only the best head rests on [CLS]; the others at the mean")
def _resting_best_only():
    scores = torch.full((6, 12), 0.1)
    scores[0, 0] = 0.95
    claims.check_heads_resting_on(scores, "[CLS]")


@wrong("check_heads_resting_on", "many heads above 0.5 but none above 0.8")
def _resting_none_nearly_all():
    claims.check_heads_resting_on(torch.full((6, 12), 0.6), "[CLS]")


@wrong("check_anti_diagonal", "heads on the diagonal (each target on its own position)")
def _anti_diagonal():
    claims.check_anti_diagonal(torch.eye(6).expand(4, 2, 6, 6))


@wrong("check_anti_diagonal", "the mirrored position held only half the time above 0.9")
def _anti_weak():
    flipped = torch.eye(6).flip(-1).expand(4, 2, 6, 6).clone()
    flipped[:2] = 0.6 * flipped[:2] + 0.4 / 6
    claims.check_anti_diagonal(flipped)


@wrong("check_anti_diagonal", "one sequence's head on the diagonal, the mean still on the anti")
def _anti_one_sequence():
    flipped = torch.eye(6).flip(-1).expand(4, 2, 6, 6).clone()
    flipped[3, 1] = torch.eye(6)
    claims.check_anti_diagonal(flipped)


# --- 18: induction --------------------------------------------------------------------------


@wrong("check_copying", "a one-layer model: repeat loss 2.5, first copy 3.6")
def _copying_one_layer():
    claims.check_copying(3.6, 2.5, 3.47, "one layer")


@wrong("check_cannot_copy", "a model that copies: repeat loss 0.37")
def _cannot_copy_copies():
    claims.check_cannot_copy(0.37, 3.47, "two layers")


@wrong("check_induction_heads", "random maps: no previous-token head, no induction head")
def _induction_uniform():
    claims.check_induction_heads(torch.full((2, 4), 0.1), torch.full((2, 4), 0.1))


@wrong("check_phase_change", "a loss that falls steadily, with no abrupt drop")
def _phase_steady():
    claims.check_phase_change([3.5 * (1 - i / 1600) for i in range(1500)])


@wrong("check_composition", "silencing the previous-token head changes little (1.2×)")
def _composition_weak():
    without = {"previous": 0.45, "induction": 3.49, "one induction": 0.5}
    claims.check_composition(0.37, without, 3.47)


# --- helpers/claims/tiles.py: attention a tile at a time (19) --------------------------------


def _tiles_never_rescaled(q, k, v, block_k, block_q=None, is_causal=False):
    """Tiles whose running sums are never multiplied by exp(m_old − m_new)."""
    T_q, T_k = q.size(-2), k.size(-2)
    block_q = block_q or T_q
    out = torch.empty_like(q[..., :1]).expand(*q.shape[:-1], v.size(-1)).clone()
    for q0 in range(0, T_q, block_q):
        qt = q[..., q0 : q0 + block_q, :]
        m = torch.full((*qt.shape[:-1], 1), -torch.inf, dtype=q.dtype)
        total, acc = torch.zeros_like(m), torch.zeros(*qt.shape[:-1], v.size(-1), dtype=q.dtype)
        for k0 in range(0, T_k, block_k):
            s = qt @ k[..., k0 : k0 + block_k, :].mT / q.size(-1) ** 0.5
            if is_causal:
                rows = torch.arange(q0, q0 + qt.size(-2)).unsqueeze(-1)
                s = s.masked_fill(torch.arange(k0, k0 + s.size(-1)) > rows, -torch.inf)
            m = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m).nan_to_num(0.0)
            total, acc = total + p.sum(-1, keepdim=True), acc + p @ v[..., k0 : k0 + block_k, :]
        out[..., q0 : q0 + block_q, :] = acc / total
    return out


@wrong("check_tiles_match", "tiles whose running sums are never rescaled when the max rises")
def _tiles_unrescaled():
    claims.check_tiles_match(seeded_attention(16, 4), _x(), attend=_tiles_never_rescaled)


def _held(T: int, block: int):
    from helpers.attention import scaled_dot_product_attention
    from helpers.tiles import tiled_attention
    from helpers.timing import count_calls

    q, k, v = torch.randn(3, 1, 2, T, 4, generator=_gen(T))
    return (count_calls(lambda: scaled_dot_product_attention(q, k, v)),
            count_calls(lambda: tiled_attention(q, k, v, block, block)))  # fmt: skip


@wrong("check_never_held", "tiles as large as the sequence (one tile holds the whole map)")
def _held_one_tile():
    (p1, t1), (p2, t2) = _held(16, 32), _held(32, 32)
    claims.check_never_held([16, 32], [p1, p2], [t1, t2], 1, 2, 4, 32)


@wrong("check_never_held", "the plain computation's counts passed as the tiled ones")
def _held_plain_twice():
    (p1, _), (p2, _) = _held(64, 8), _held(128, 8)
    claims.check_never_held([64, 128], [p1, p2], [p1, p2], 1, 2, 4, 8)


@wrong("check_maps_formed", "need_weights=True in both calls")
def _maps_asked_twice():
    from helpers.timing import count_calls

    layer, x = nn.MultiheadAttention(16, 2, batch_first=True), _x(T=8)
    calls = count_calls(lambda: layer(x, x, x, need_weights=True))
    claims.check_maps_formed(calls, calls, 1, 2, 8)


@wrong("check_maps_formed", "need_weights=False in both calls (no maps formed)")
def _maps_never_asked():
    from helpers.timing import count_calls

    layer, x = nn.MultiheadAttention(16, 2, batch_first=True), _x(T=8)
    calls = count_calls(lambda: layer(x, x, x, need_weights=False))
    claims.check_maps_formed(calls, calls, 1, 2, 8)


# --- helpers/claims/base.py: a model that must refuse a text ---------------------------------


@wrong("check_refused", "a model that accepts the empty text (no error raised)")
def _refused_accepts():
    claims.check_refused(lambda text: text, "")


@wrong("check_refused", "a model that fails on the text some other way (a TypeError)")
def _refused_other_error():
    claims.check_refused(lambda text: text + 1, "")


# --- helpers/claims/windows.py: sliding windows and sinks (21) ---------------------------------


def _window_plus_one(T_q: int, T_k: int, window: int) -> torch.Tensor:
    """Mistral's paper's count: position i sees i − W … i, W + 1 positions."""
    return window_mask(T_q, T_k, window + 1)


def _band_both_ways(T_q: int, T_k: int, window: int) -> torch.Tensor:
    p, j = torch.arange(T_q).unsqueeze(1), torch.arange(T_k).unsqueeze(0)
    return (p - j).abs() < window  # not causal: the next positions too


@wrong("check_window_rows", "a window of W + 1 positions (i − W … i, Mistral's paper's count)")
def _rows_plus_one():
    claims.check_window_rows(7, _window_plus_one)


@wrong("check_window_rows", "a band on both sides of the diagonal (not causal)")
def _rows_both_ways():
    claims.check_window_rows(7, _band_both_ways)


@wrong("check_every_head_windowed", "the window applied to head 0 only")
def _windowed_one_head():
    mask = window_mask(5, 5, 2)
    scores = torch.randn(1, 4, 5, 5, generator=_gen(0))
    per_head = torch.stack([mask if i == 0 else torch.ones(5, 5, dtype=torch.bool).tril()
                            for i in range(4)])  # fmt: skip
    weights = scores.masked_fill(~per_head, float("-inf")).softmax(-1)
    claims.check_every_head_windowed(weights, mask)


@wrong("check_reach", "a reach whose layers each see W + 1 positions")
def _reach_plus_one():
    claims.check_reach(lambda w, layers, t: windows.reach(w + 1, layers, t), (2, 3), 3, 16)


@wrong("check_window_cache", "notebook 14's cache, which keeps every token (a causal output)")
def _cache_plain():
    module = seeded_attention(16, 4)
    claims.check_window_cache(
        module, _x(T=7), 3, 0, KVCache(), 2, windows.window_cache_bytes(3, 0, 4, 4)
    )


@wrong("check_window_cache", "a window cache that keeps no sink where the forward keeps one")
def _cache_no_sink():
    module = seeded_attention(16, 4)
    claims.check_window_cache(
        module, _x(T=7), 3, 1, windows.WindowKVCache(3), 2, windows.window_cache_bytes(3, 1, 4, 4)
    )


@wrong("check_renormalised", "the dropped key's weight set to 0, the others left as they were")
def _renormalised_zeroed():
    full = torch.randn(2, 3, 4, 5, generator=_gen(0)).softmax(-1)
    zeroed = full.clone()
    zeroed[..., 0] = 0
    claims.check_renormalised(full, zeroed, 0)
