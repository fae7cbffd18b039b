"""What belongs to one ✓ in one notebook rather than to its check: the wrong object specific to
that call, a generic fact (true of any weights), a tautology or a ✓ that cannot print ✗ (findings),
and, for a ✓ a cell prints itself, what backs it.

A `Claim` names a notebook ("03") and a pattern searched in the ✓ text; it must match at least one
committed ✓ line there (else it is stale and tests/test_ledger.py says so).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache

import torch
from torch import nn

from helpers import checks, claims
from helpers.attention import (
    FusedMultiHeadAttention,
    PerHeadMultiHeadAttention,
    SelfAttention,
    count_parameters,
    merge_heads,
    split_heads,
)
from helpers.examples import seeded_attention
from helpers.layouts import expand_kv, fuse, share_kv
from helpers.positions import apply_rope, sinusoidal_positions
from tests.ledger.wrong import Wrong, mistaken


@dataclass
class Claim:
    notebook: str  # "03"
    match: str  # a regex searched in the ✓ text
    wrong: list[Wrong] = field(default_factory=list)  # specific to this call
    generic: str = ""  # why the ✓ holds for any weights
    finding: str = ""  # a tautology or a ✓ that cannot print ✗
    backing: str = ""  # for a ✓ the cell prints itself: the code that must pass first
    backing_check: str = ""  # …and the check it relies on, whose wrong objects apply

    def matches(self, notebook: str, text: str) -> bool:
        return notebook.startswith(self.notebook) and re.search(self.match, text) is not None


CLAIMS: list[Claim] = []


def claim(notebook: str, match: str, **kwargs) -> Claim:
    c = Claim(notebook, match, **kwargs)
    CLAIMS.append(c)
    return c


def site_wrong(c: Claim, label: str, finding: str = ""):
    """Declare a wrong object for one claim; the function replays that call with it."""

    def register(run):
        c.wrong.append(Wrong(f"{c.notebook}: {c.match}", label, run, finding))
        return run

    return register


def _x(d_model: int = 16, T: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(1, T, d_model, generator=torch.Generator().manual_seed(seed))


# --- ✓ lines a cell prints itself -------------------------------------------------------------

_torch = claim(
    "00", r"^✓ torch .* imported$", backing='assert torch.__version__.startswith("2.13.")'
)


@site_wrong(_torch, "another torch installed (2.5.1)")
def _torch_other():
    version = "2.5.1"
    assert version.startswith("2.13."), version


_layouts = claim(
    "04",
    r"both layouts: .* parameters each",
    backing="check_parameter_count(module, echo=False) for every h, per-head and fused",
    backing_check="check_parameter_count",
)


@site_wrong(_layouts, "per-head heads of width 2·d_model / h at one h")
def _layouts_wide():
    claims.check_parameter_count(PerHeadMultiHeadAttention(16, 4, d_k=8), echo=False)


_learner = claim(
    "06",
    r"the learner's ModuleList holds the same",
    backing="assert count_parameters(learner) == n_fused",
)


@site_wrong(_learner, "a learner whose W^O has no bias")
def _learner_no_bias():
    fused = FusedMultiHeadAttention(16, 4, bias=True)
    learner = PerHeadMultiHeadAttention(16, 4, bias=True)
    learner.w_o = nn.Linear(16, 16, bias=False)
    assert count_parameters(learner) == count_parameters(fused)


claim(
    "10",
    r"^✓ (fused|per-head): the same at h = ",
    backing="check_order_blind(…, echo=False) at every h",
    backing_check="check_order_blind",
)

# --- 01, 03, 04: layouts and heads ------------------------------------------------------------

_generic_linear = "nn.Linear's definition: equal for any weights (the lesson is the layout)"
_w_q_x = claim("01", r"W_q x_3 = nn.Linear|x_3 W_qᵀ = nn.Linear", generic=_generic_linear)


@site_wrong(_w_q_x, "W_q used untransposed in the row form, x_3 W_q (a square W_q)")
def _w_q_untransposed():
    linear = nn.Linear(8, 8, bias=False)
    x_t = _x(8)[0, 0]
    checks.check_close((x_t.view(1, 8) @ linear.weight).flatten(), linear(x_t), "x_3 W_qᵀ")


claim("01", r"row 3 of q = q_3", generic="nn.Linear acts on each row alone, for any weights")


class _TwiceHead(SelfAttention):
    """A head whose forward applies a second matrix after W^Q (after="q") or W^V (after="v")."""

    def __init__(self, d_model: int, d_k: int, after: str = "q"):
        super().__init__(d_model, d_k)
        self.after, self.extra = after, nn.Linear(d_k, d_k, bias=False)

    def forward(self, x, mask=None):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        q, v = (self.extra(q), v) if self.after == "q" else (q, self.extra(v))
        weights = (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(-1)
        return weights @ v, weights


_two = claim(
    "03",
    r"two projections in a row = one",
    generic="associativity: (x W_1ᵀ) W_2ᵀ = x (W_2 W_1)ᵀ for any matrices; only the product's "
    "order is at stake",
)


@site_wrong(_two, "the product in the wrong order, W = W_1 W_2 (square matrices)")
def _two_wrong_order():
    first, second = nn.Linear(16, 16, bias=False), nn.Linear(16, 16, bias=False)
    x = _x()
    wrong_once = first.weight @ second.weight  # W_1 W_2: the order swapped
    checks.check_close(second(first(x)), x @ wrong_once.T, "two projections in a row = one")


_step = claim("03", r"out: step by step = PerHeadMultiHeadAttention")


@site_wrong(_step, "a head that is never run (head 1's output left as zeros)")
def _step_head_never_run():
    mha, x = seeded_attention(16, 4, per_head=True), _x()
    outs = [head(x)[0] for head in mha.heads]  # (B, T, d_k) each
    outs[1] = torch.zeros_like(outs[1])
    checks.check_close(mha.w_o(torch.cat(outs, -1)), mha(x)[0], "out: step by step")


_blocks = claim(
    "04",
    r"x·\[W_0 … W_3\] = \[x·W_0 … x·W_3\]",
    generic="block multiplication: holds for any blocks stacked in the same order",
)


@site_wrong(_blocks, "W^Q stacked in another order than the products (heads 0 and 1 swapped)")
def _blocks_swapped():
    blocks = [torch.randn(16, 4, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    x = _x()
    W_Q = torch.cat([blocks[1], blocks[0], *blocks[2:]], dim=1)
    checks.check_close(x @ W_Q, torch.cat([x @ W for W in blocks], -1), "x·[W_0 … W_3]")


_fused_out = claim("04", r"^✓ out: fused = per-head")


@site_wrong(_fused_out, "a fused W^Q with heads 0 and 1 swapped (W^K, W^V, W^O in order)")
def _fused_q_swapped():
    per_head, x = seeded_attention(16, 4, per_head=True), _x()
    fused = fuse(per_head)
    with torch.no_grad():
        w = fused.w_q.weight.view(4, 4, 16)  # (h, d_k, d_model)
        fused.w_q.weight.copy_(w[[1, 0, 2, 3]].reshape(16, 16))
        checks.check_close(fused(x)[0], per_head(x)[0], "out: fused = per-head")


_wide = claim("04", r"parameters = 4·h·d_k·d_model")


@site_wrong(_wide, "wide heads whose W^O was left square (d_model inputs, not h·d_k)")
def _wide_square_w_o():
    wide = PerHeadMultiHeadAttention(16, 4, d_k=8)
    wide.w_o = nn.Linear(16, 16, bias=False)
    claims.check_parameter_count(wide, tied=False)


# --- 06: gradients and optimizers ----------------------------------------------------------

_no_grad = claim(
    "06",
    r"W\^K's bias gets no gradient",
    generic="softmax ignores a shift shared by a row: true for any weights",
)


@site_wrong(_no_grad, "W^Q's bias, which does get a gradient")
def _q_bias_gradient():
    module = FusedMultiHeadAttention(16, 4, bias=True)
    module(_x())[0].square().mean().backward()
    checks.check_close(module.w_q.bias.grad, torch.zeros(16), "W^Q's bias", atol=1e-6)


def _trained(optimizer_class) -> tuple[nn.Module, nn.Module, torch.Tensor]:
    """A per-head module with biases and its fused copy after the same 5 steps of
    `optimizer_class` each, and their input x."""
    torch.manual_seed(0)
    per_head = PerHeadMultiHeadAttention(16, 2, bias=True)
    fused = fuse(per_head)
    x, target = _x(), _x(seed=1)
    for module in (per_head, fused):
        opt = optimizer_class(module.parameters(), lr=1e-2)
        for _ in range(5):
            opt.zero_grad()
            (module(x)[0] - target).square().mean().backward()
            opt.step()
    return per_head, fused, x


_adam = claim("06", r"after 5 Adam steps: all")


@site_wrong(_adam, "Adafactor in place of Adam (its step depends on each matrix's shape)")
def _adafactor():
    per_head, fused, _ = _trained(torch.optim.Adafactor)
    params, expected = dict(fused.named_parameters()), dict(fuse(per_head).named_parameters())
    del params["w_k.bias"], expected["w_k.bias"]  # no gradient, as in the cell
    checks.check_close_all(params, expected, "the other parameters after 5 Adafactor steps")


_adam_out = claim("06", r"^✓ outputs after 5 Adam steps")


@site_wrong(_adam_out, "the pair trained with Adafactor in place of Adam")
def _adafactor_out():
    per_head, fused, x = _trained(torch.optim.Adafactor)
    with torch.no_grad():
        checks.check_close(per_head(x)[0], fused(x)[0], "outputs after 5 Adafactor steps")


_adafactor_differ = claim("06", r"after 5 Adafactor steps differ")


@site_wrong(_adafactor_differ, "the pair trained with Adam in place of Adafactor (gap ~1e-7)")
def _adam_differ():
    per_head, fused, x = _trained(torch.optim.Adam)
    with torch.no_grad():
        claims.check_outputs_differ(per_head(x)[0], fused(x)[0], "after 5 Adam steps", 1e-3)


# --- 07: dropout ---------------------------------------------------------------------------


def _dropout_maps(n: int, rescale: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The eval maps and n training draws of the same weights with dropout p = 0.2; with
    rescale=False, a dropout that zeroes weights but does not divide the rest by 1 − p."""
    plain, x = seeded_attention(16, 4), _x(T=7)
    drop = FusedMultiHeadAttention(16, 4, dropout=0.2)
    drop.load_state_dict(plain.state_dict())
    torch.manual_seed(0)
    with torch.no_grad():
        draws = torch.stack([drop.train()(x)[1] for _ in range(n)])  # (n, B, h, T, T)
        return plain(x)[1], draws if rescale else draws * 0.8


_kept = claim("07", r"kept = eval weights / \(1 − p\)")


@site_wrong(_kept, "a dropout that zeroes weights but does not divide the rest by 1 − p")
def _kept_not_rescaled():
    eval_weights, draws = _dropout_maps(1, rescale=False)
    kept = draws[0] != 0
    checks.check_close(draws[0][kept], eval_weights[kept] / 0.8, "kept = eval weights / (1 − p)")


_average = claim("07", r"the average of \d+ draws = eval weights")


@site_wrong(_average, "draws of a dropout that does not divide by 1 − p: their average shrinks")
def _average_not_rescaled():
    eval_weights, draws = _dropout_maps(500, rescale=False)
    checks.check_close(draws.mean(0), eval_weights, "the average = eval weights", atol=0.03)


_eval_out = claim("07", r"eval mode: out = nn.MultiheadAttention")


@site_wrong(_eval_out, "the dropout module left in training mode")
def _eval_left_training():
    from helpers.layouts import to_torch

    x, drop = _x(T=7), FusedMultiHeadAttention(16, 4, dropout=0.2)
    drop.load_state_dict(seeded_attention(16, 4).state_dict())
    reference = to_torch(drop).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        checks.check_close(drop.train()(x)[0], reference(x, x, x)[0], "eval mode: out")


# --- 10: RoPE ------------------------------------------------------------------------------

_rope_head = claim("10", r"head 0 with RoPE")


@site_wrong(_rope_head, 'no rotation at all (the identity "rotation")')
def _rope_identity():
    q, k = (torch.randn(7, 8, generator=torch.Generator().manual_seed(s)) for s in (0, 1))
    claims.check_relative_scores(q, k, lambda t, s: t, (1, 5, 100), "head 0 with RoPE")


_rope_maps = claim("10", r"RoPE: the maps at positions 5 … 11 = at 0 … 6")


@site_wrong(_rope_maps, "positions added to x (sinusoidal), whose maps move with the sentence")
def _rope_maps_added():
    mha, x = seeded_attention(16, 4), _x(T=7)

    def maps(start):  # the cell's added_maps: no rotation, the positions' vectors added to x
        return mha(x + sinusoidal_positions(start + 7, 16)[start:])[1][0].detach()

    checks.check_close(maps(5), maps(0), "RoPE: the maps at positions 5 … 11 = at 0 … 6")


def _rope_module() -> FusedMultiHeadAttention:
    rope = FusedMultiHeadAttention(16, 4, rope=True)
    rope.load_state_dict(seeded_attention(16, 4).state_dict())  # the same matrices, with RoPE
    return rope


_rope_own_maps = claim("10", r"rope_maps\(0\) = the rope=True module's maps")


@site_wrong(_rope_own_maps, "maps computed without the turn (the plain module's maps)")
def _rope_maps_unturned():
    x = _x(T=7)
    with torch.no_grad():
        checks.check_close(seeded_attention(16, 4)(x)[1], _rope_module()(x)[1], "rope_maps(0)")


_rope_seen = claim("10", r"^✓ RoPE: tokens permuted")


@site_wrong(_rope_seen, "a RoPE module whose rotation turns nothing (apply_rope = the identity)")
def _rope_no_turn():
    from unittest import mock

    rope = _rope_module()
    with mock.patch("helpers.attention.apply_rope", lambda t, *args, **kwargs: t):
        claims.check_order_seen(rope, _x(T=7), torch.arange(6, -1, -1), "RoPE")


_added_differ = claim("10", r"added positions: the maps at 5 … 11 and at 0 … 6")


@site_wrong(_added_differ, "RoPE's maps in place of the added positions' (they do not move)")
def _added_differ_rope():
    x = _x(T=7)
    rope = _rope_module()

    def rope_maps(start):  # the cell's rope_maps
        q, k = (apply_rope(split_heads(w(x), 4), offset=start) for w in (rope.w_q, rope.w_k))
        return (q @ k.transpose(-2, -1) / 2).softmax(dim=-1)[0].detach()

    claims.check_outputs_differ(rope_maps(5), rope_maps(0), "added positions", at_least=0.01)


_rope_pairs = claim("10", r"pairs turned = complex numbers")


@site_wrong(_rope_pairs, "pairs turned by the wrong angle (m·θ with m counted from 1)")
def _rope_off_by_one():
    from helpers.positions import apply_rope_complex

    q = split_heads(_x(), 2)
    checks.check_close(apply_rope(q, offset=1), apply_rope_complex(q), "pairs turned")


# --- 11: one head vs h heads ---------------------------------------------------------------

_sum = claim(
    "11",
    r"one score = Σ_i head-i score / √h",
    generic="algebra: a dot product is the sum of its blocks, for any q and k",
)


@site_wrong(_sum, "the sum without the / √h")
def _sum_unscaled():
    q, k, h = _x(seed=1), _x(seed=2), 4
    one = q @ k.transpose(-2, -1) / math.sqrt(16)
    heads = split_heads(q, h) @ split_heads(k, h).transpose(-2, -1) / math.sqrt(4)
    checks.check_close(one, heads.sum(1), "one score = Σ_i head-i score")


_product = claim(
    "11",
    r"one head's map = Π_i softmax",
    generic="algebra: exp of a sum is the product of exps, for any scores",
)


@site_wrong(_product, "the mean of the h heads' maps in place of their renormalised product")
def _product_mean():
    q, k = _x(seed=1), _x(seed=2)
    one = (q @ k.transpose(-2, -1) / 4).softmax(-1)
    heads = (split_heads(q, 4) @ split_heads(k, 4).transpose(-2, -1) / 2 / 2).softmax(-1)
    checks.check_close(one, heads.mean(1), "one head's map")


# --- 15: shared K/V ------------------------------------------------------------------------

_one_w_k = claim("15", r"heads 0 and 3: one W\^K")


@site_wrong(_one_w_k, "a module whose sharing is broken: plain multi-head attention")
def _sharing_broken():
    plain = seeded_attention(16, 4)  # d_k = 4
    w = plain.w_k.weight
    checks.check_close(w[0:4], w[3 * 4 : 4 * 4], "heads 0 and 3: one W^K")


_expand = claim("15", r"GQA = expand_kv\(GQA\): (out|all)")


@site_wrong(_expand, "K/V heads tiled (head i reads group i mod g) instead of repeated in blocks")
def _expand_tiled():
    gqa, x = share_kv(seeded_attention(16, 4), 2), _x()
    plain = expand_kv(gqa)
    with torch.no_grad():
        for lin in (plain.w_k, plain.w_v):
            blocks = lin.weight.view(4, 4, 16)  # (h, d_k, d_model): groups 0 0 1 1
            lin.weight.copy_(blocks[[0, 2, 1, 3]].reshape(16, 16))  # tiled: 0 1 0 1
        checks.check_close(plain(x)[0], gqa(x)[0], "GQA = expand_kv(GQA): out")


# --- 16: W^O per head ----------------------------------------------------------------------

_w_o = claim(
    "16",
    r"concat · W\^O = Σ_i head_i · W\^O_i",
    generic="block multiplication: holds for any W^O cut along its rows",
)


@site_wrong(_w_o, "W^O cut from nn.Linear's layout untransposed (the columns of x·W)")
def _w_o_columns():
    mha = seeded_attention(16, 4)
    heads = split_heads(_x(), 4)  # (B, h, T, d_k)
    wrong = mha.w_o.weight.view(4, 4, 16)  # rows of the (out, in) matrix: not W^O_i
    with torch.no_grad():
        checks.check_close((heads @ wrong).sum(1), mha.w_o(merge_heads(heads)), "Σ_i head_i W^O_i")


_identity = claim(
    "16",
    r"folded module's W\^O = the identity",
    generic="by construction: fold_w_o writes torch.eye into w_o, for any weights. A fold that "
    "drops W^O (w_o = I, W^V unchanged) passes it too; the next ✓ (out folded = out) catches that",
)


def _fold(keep_w_o: bool = False, move_w_o: bool = True, order: str = "w_o @ w_v"):
    """A one-head module (d_model 16) folded by hand, possibly wrongly; and the original."""
    one = seeded_attention(16, 1)
    folded = FusedMultiHeadAttention(16, 1)
    folded.load_state_dict(one.state_dict())
    w_o, w_v = one.w_o.weight, one.w_v.weight
    with torch.no_grad():
        if move_w_o:
            folded.w_v.weight.copy_(w_o @ w_v if order == "w_o @ w_v" else w_v @ w_o)
        if not keep_w_o:
            folded.w_o.weight.copy_(torch.eye(16))
    return folded, one


@site_wrong(_identity, "a fold that moved W^O into W^V but left w_o as it was (W^O twice)")
def _fold_kept_w_o():
    folded, _ = _fold(keep_w_o=True)
    checks.check_close(folded.w_o.weight, torch.eye(16), "the folded module's W^O = the identity")


_folded_out = claim("16", r"out with W\^O folded into W\^V = out with W\^O")


@site_wrong(_folded_out, "a fold that dropped W^O: w_o = I, W^V not multiplied by it")
def _fold_dropped():
    folded, one = _fold(move_w_o=False)
    with torch.no_grad():
        checks.check_close(folded(_x())[0], one(_x())[0], "out with W^O folded into W^V")


@site_wrong(_folded_out, "the product the wrong way round: W^V·W^O as w_v @ w_o")
def _fold_reversed():
    folded, one = _fold(order="w_v @ w_o")
    with torch.no_grad():
        checks.check_close(folded(_x())[0], one(_x())[0], "out with W^O folded into W^V")


# --- 17: W_QK and W_OV ------------------------------------------------------------------------

_qk_maps = claim("17", r"softmax\(x · W_QK,i · xᵀ / √d_k\) = the module's maps")


@site_wrong(_qk_maps, "W_QK built as W^Q·W^Qᵀ (W^K replaced by W^Q)")
def _qk_from_q_twice():
    mha, x = seeded_attention(16, 4), _x()[0]
    w_q = mha.w_q.weight.view(4, 4, 16)  # (h, d_k, d_model)
    with torch.no_grad():
        maps = (x @ (w_q.transpose(1, 2) @ w_q) @ x.T / 2).softmax(-1)  # (h, T, T)
        checks.check_close(maps, mha(x[None])[1][0], "the module's maps")


_ov_sum = claim("17", r"Σ_i weights_i · x · W_OV,i = the module's out")


@site_wrong(_ov_sum, "head i paired with the W_OV of head i − 1")
def _ov_rolled():
    from helpers.layouts import head_circuits

    mha, x = seeded_attention(16, 4), _x()[0]
    _, w_ov = head_circuits(mha)  # (h, d_model, d_model)
    with torch.no_grad():
        out, weights = mha(x[None])
        wrong = (weights[0] @ x @ w_ov.roll(1, 0)).sum(0)
        checks.check_close(wrong, out[0], "Σ_i weights_i · x · W_OV,i = the module's out")


# --- 19: tiles and the online softmax -----------------------------------------------------------

_online_row = claim("19", r"the last step's acc / total = softmax\(scores\) @ v")


@site_wrong(_online_row, "the steps' sums never rescaled when the max rises")
def _online_unrescaled():
    from helpers.tiles import online_softmax_steps

    scores = torch.tensor([0.0, 1.0, 4.0, 2.0, -1.0], dtype=torch.float64)
    values = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    total, acc = 0.0, torch.zeros(3, dtype=torch.float64)
    for s in online_softmax_steps(scores, values, 2):
        p = torch.exp(s.scores - s.m)
        total, acc = total + p.sum(), acc + p @ values[s.keys[0] : s.keys[1]]
    checks.check_close(acc / total, scores.softmax(-1) @ values, "acc / total")


_recomputed = claim("20", r"the maps recomputed from q, k and one number per row")


@site_wrong(_recomputed, "the running max kept as the row's number, without log(total)")
def _recomputed_max_only():
    mha, x = seeded_attention(16, 4), _x()
    with torch.no_grad():
        q, k = (split_heads(w(x), 4) for w in (mha.w_q, mha.w_k))
        scores = q @ k.mT / 2.0
        m = scores.amax(-1, keepdim=True)
        checks.check_close(torch.exp(scores - m), mha(x)[1], "the maps recomputed")


# --- the exercises: the checker's own catalogue, one mistake per exercise ---------------------

EXERCISE_MISTAKE = {
    "one_head": "no_scaling",
    "split_heads": "heads_split_without_transpose",
    "head_scores": "w_qk_reversed",
    "induction_score": "induction_on_the_twin",
    "shared_kv": "kv_tiled",
    "cross_attention": "keys_values_from_x",
}
DIAGNOSE_MISTAKE = {  # which learner_code function fits which call of diagnose
    "per_head=True": "loop_w_o_missing",
    "mask=False": "no_scaling",
    "": "mask_ignored",
}


def _both_refused(first, second):
    """A result that is refused only when both are: the first if it passed, else the second."""
    return first if first.ok else second


@cache
def exercise_wrong(expression: str) -> Wrong | None:
    """For a call `check_exercise(fn, "name")` or `diagnose(fn, …)` in a cell: a learner's
    function for that exercise with one named mistake."""
    from helpers.diagnose import check_exercise, diagnose

    found = re.search(r"check_exercise\(\s*\w+,\s*\"(\w+)\"", expression)
    if found and found.group(1) == "tiled_attention":  # its ✓ has two halves: both can fail
        from tests.test_tiled_exercise import learner, whole_map

        return Wrong(
            "check_exercise",
            "tiled_attention with the sum not rescaled; and right, but from the whole map",
            lambda: _both_refused(check_exercise(learner("sum_not_rescaled"), "tiled_attention",
                                                 echo=False),
                                  check_exercise(whole_map, "tiled_attention", echo=False)),
        )  # fmt: skip
    if found and found.group(1) in EXERCISE_MISTAKE:
        name = found.group(1)
        mistake = EXERCISE_MISTAKE[name]
        return Wrong(
            "check_exercise",
            f"{name} with the catalogue's {mistake}",
            lambda: check_exercise(mistaken(name, mistake), name, echo=False),
        )
    if expression.startswith("diagnose("):
        import tests.learner_code as learner_code

        key = next((k for k in DIAGNOSE_MISTAKE if k and k in expression), "")
        fn = getattr(learner_code, DIAGNOSE_MISTAKE[key])
        kwargs = {"per_head": True} if "per_head=True" in expression else {}
        if "mask=False" in expression:
            kwargs["mask"] = False
        return Wrong(
            "diagnose",
            DIAGNOSE_MISTAKE[key].replace("_", " "),
            lambda: diagnose(fn, echo=False, **kwargs),
        )
    return None
