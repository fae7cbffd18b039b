"""helpers.layouts: per-head, fused, PyTorch's module and PyTorch's kernel compute one thing."""

import copy

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from helpers.attention import (
    FusedMultiHeadAttention,
    PerHeadMultiHeadAttention,
    count_parameters,
    merge_heads,
    split_heads,
)
from helpers.examples import seeded_attention
from helpers.layouts import (
    expand_kv,
    from_torch,
    fuse,
    head_circuits,
    head_ranks,
    share_kv,
    split,
    to_torch,
)

ATOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def close(a, b, dtype):
    torch.testing.assert_close(a, b, atol=ATOL[dtype], rtol=0)


def make_mask(kind: str, B: int, T: int, lengths: list[int]) -> torch.Tensor | None:
    """A boolean mask (True = may attend) broadcastable to (B, T, T); no row is fully masked."""
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    padding = (torch.arange(T) < torch.tensor(lengths).view(B, 1)).unsqueeze(1)  # (B, 1, T)
    return {"none": None, "causal": causal, "padding": padding, "both": causal & padding}[kind]


def torch_kernel_forward(fused, x, mask):
    """The fused module's weights run through torch.nn.functional.scaled_dot_product_attention."""
    q, k, v = (split_heads(lin(x), fused.num_heads) for lin in (fused.w_q, fused.w_k, fused.w_v))
    attn_mask = None if mask is None else mask.unsqueeze(-3)  # (..., 1, T, T)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, h, T, d_k)
    return fused.w_o(merge_heads(out))


def torch_module_forward(mha, x, mask, B, T, lengths, kind):
    """nn.MultiheadAttention, whose boolean masks mean True = NOT allowed: pass the negation."""
    attn_mask = ~make_mask("causal", B, T, lengths) if kind in ("causal", "both") else None
    key_padding_mask = (
        ~make_mask("padding", B, T, lengths).squeeze(1) if kind in ("padding", "both") else None
    )
    return mha(
        x, x, x,
        attn_mask=attn_mask,
        key_padding_mask=key_padding_mask,
        need_weights=True,
        average_attn_weights=False,
    )  # fmt: skip


shapes = st.tuples(
    st.integers(1, 3),  # B
    st.integers(1, 7),  # T
    st.integers(1, 6),  # num_heads
    st.integers(1, 5),  # d_k
)


@given(
    shape=shapes,
    bias=st.booleans(),
    kind=st.sampled_from(["none", "causal", "padding", "both"]),
    dtype=st.sampled_from([torch.float64, torch.float32]),
    data=st.data(),
)
def test_all_layouts_agree(shape, bias, kind, dtype, data):
    B, T, h, d_k = shape
    d_model = h * d_k
    lengths = data.draw(st.lists(st.integers(1, T), min_size=B, max_size=B), label="lengths")
    mask = make_mask(kind, B, T, lengths)
    x = torch.randn(B, T, d_model, dtype=dtype)

    per_head = PerHeadMultiHeadAttention(d_model, h, bias=bias).to(dtype)
    fused = fuse(per_head)
    mha = to_torch(fused)
    out, weights = per_head(x, mask)
    assert out.shape == (B, T, d_model) and weights.shape == (B, h, T, T)

    out_fused, weights_fused = fused(x, mask)
    close(out_fused, out, dtype)
    close(weights_fused, weights, dtype)
    out_fast, no_weights = fused(x, mask, need_weights=False)  # PyTorch's fused kernel
    close(out_fast, out, dtype)
    assert no_weights is None

    with torch.no_grad():
        close(torch_kernel_forward(fused, x, mask), out, dtype)
        out_torch, weights_torch = torch_module_forward(mha, x, mask, B, T, lengths, kind)
    close(out_torch, out, dtype)
    close(weights_torch, weights, dtype)

    # and back: split(fuse(.)) and from_torch(to_torch(.)) give the same maps again
    out_split, weights_split = split(fused)(x, mask)
    close(out_split, out, dtype)
    close(weights_split, weights, dtype)
    out_back, weights_back = from_torch(mha)(x, mask)
    close(out_back, out, dtype)
    close(weights_back, weights, dtype)


@pytest.mark.parametrize("bias", [False, True])
def test_conversions_copy_every_weight_exactly(bias):
    per_head = PerHeadMultiHeadAttention(12, 3, bias=bias)
    fused = fuse(per_head)
    # head i's W_i^Q is rows i*d_k .. (i+1)*d_k of the fused (out, in) weight
    for i, head in enumerate(per_head.heads):
        assert torch.equal(fused.w_q.weight[4 * i : 4 * (i + 1)], head.w_q.weight)
        assert torch.equal(fused.w_v.weight[4 * i : 4 * (i + 1)], head.w_v.weight)
    round_trip = split(fused)
    for a, b in zip(per_head.state_dict().values(), round_trip.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert per_head.state_dict().keys() == round_trip.state_dict().keys()

    mha = nn.MultiheadAttention(12, 3, bias=bias, batch_first=True)
    fused = from_torch(mha)
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    assert torch.equal(fused.w_q.weight, w_q) and torch.equal(fused.w_k.weight, w_k)
    assert torch.equal(fused.w_v.weight, w_v) and torch.equal(fused.w_o.weight, mha.out_proj.weight)
    back = to_torch(fused)
    for a, b in zip(mha.state_dict().values(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert back.batch_first and (back.in_proj_bias is not None) == bias


def test_conversions_are_copies_not_views():
    per_head = PerHeadMultiHeadAttention(8, 2)
    fused = fuse(per_head)
    with torch.no_grad():
        fused.w_q.weight.zero_()
    assert per_head.heads[0].w_q.weight.abs().sum() > 0


def test_conversions_keep_dtype():
    fused = FusedMultiHeadAttention(8, 2, bias=True).double()
    for module in (split(fused), fuse(split(fused)), to_torch(fused), from_torch(to_torch(fused))):
        assert {p.dtype for p in module.parameters()} == {torch.float64}


@given(h=st.integers(1, 8), d_k=st.integers(1, 8), bias=st.booleans())
def test_parameter_counts_are_equal(h, d_k, bias):
    d_model = h * d_k
    per_head = PerHeadMultiHeadAttention(d_model, h, bias=bias)
    fused = FusedMultiHeadAttention(d_model, h, bias=bias)
    expected = 4 * d_model * d_model + (4 * d_model if bias else 0)
    assert count_parameters(per_head) == count_parameters(fused) == expected
    assert count_parameters(to_torch(fused)) == expected


@pytest.mark.parametrize("bias", [False, True])
def test_fused_gradient_is_the_per_head_gradients_stacked(bias):
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    per_head = PerHeadMultiHeadAttention(12, 4, bias=bias).double()
    fused = fuse(per_head)
    target = torch.randn(2, 5, 12, dtype=torch.float64)
    for module in (per_head, fused):
        out, _ = module(x, mask)
        F.mse_loss(out, target).backward()
    for name in ("w_q", "w_k", "w_v"):
        stacked = torch.cat([getattr(head, name).weight.grad for head in per_head.heads])
        close(getattr(fused, name).weight.grad, stacked, torch.float64)
        if bias:
            stacked_bias = torch.cat([getattr(head, name).bias.grad for head in per_head.heads])
            close(getattr(fused, name).bias.grad, stacked_bias, torch.float64)
    close(fused.w_o.weight.grad, per_head.w_o.weight.grad, torch.float64)
    assert fused.w_q.weight.grad.abs().max() > 1e-6  # the gradient is not trivially zero


@pytest.mark.parametrize("Module", [PerHeadMultiHeadAttention, FusedMultiHeadAttention])
def test_fully_masked_rows_in_modules_give_no_nan(Module):
    x = torch.randn(2, 4, 8, requires_grad=True)
    mha = Module(8, 2, bias=True)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[0, 2] = False  # batch 0, query 2 may attend to nothing
    out, weights = mha(x, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[0, :, 2] == 0).all()
    torch.testing.assert_close(out[0, 2], mha.w_o.bias)  # nothing attended: only W^O's bias
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())
    assert torch.isfinite(x.grad).all()


def test_07_separate_q_k_v_weights_only_when_kdim_or_vdim_differs():
    """07 c2: kdim/vdim equal to embed_dim keep the stacked in_proj_weight; only another width
    (torch's `_qkv_same_embed_dim` false) gives q_proj_weight, k_proj_weight, v_proj_weight."""
    same = nn.MultiheadAttention(8, 2, kdim=8, vdim=8)
    assert same.in_proj_weight is not None and same.q_proj_weight is None
    for other in (nn.MultiheadAttention(8, 2, kdim=4), nn.MultiheadAttention(8, 2, vdim=4)):
        assert other.in_proj_weight is None
        assert other.q_proj_weight.shape == (8, 8) and other.k_proj_weight is not None


def test_from_torch_rejects_what_the_course_modules_cannot_hold():
    with pytest.raises(ValueError, match="kdim = vdim = embed_dim"):
        from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv=False"):
        from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="takes an nn.MultiheadAttention; got Linear"):
        from_torch(nn.Linear(8, 8))
    with pytest.raises(
        ValueError, match="fuse\\(\\) takes a PerHeadMultiHeadAttention; got FusedMulti"
    ):
        fuse(FusedMultiHeadAttention(8, 2))


def test_heads_of_any_width_map_back_to_d_model_but_do_not_fuse():
    mha = PerHeadMultiHeadAttention(12, 5, d_k=7)  # h·d_k = 35 != d_model = 12
    out, weights = mha(torch.randn(2, 4, 12))
    assert out.shape == (2, 4, 12) and weights.shape == (2, 5, 4, 4)
    assert mha.w_o.weight.shape == (12, 35)  # nn.Linear layout: (d_model, h·d_k)
    assert count_parameters(mha) == 4 * 5 * 7 * 12
    with pytest.raises(
        ValueError, match=r"fuse\(\) needs h·d_k = d_model.*5·7 = 35 and d_model = 12"
    ):
        fuse(mha)
    with pytest.raises(ValueError, match="d_k must be a positive whole number"):
        PerHeadMultiHeadAttention(12, 5, d_k=0)


@pytest.mark.parametrize("bias", [False, True])
def test_gpt_style_qkv_projection_round_trip(bias):
    from helpers.layouts import from_qkv, to_qkv

    fused = FusedMultiHeadAttention(12, 3, bias=bias).double()
    qkv = to_qkv(fused)
    assert qkv.weight.shape == (36, 12)  # (3 d_model, d_model)
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    q, k, v = qkv(x).split(12, dim=-1)
    close(q, fused.w_q(x), torch.float64)
    close(v, fused.w_v(x), torch.float64)
    # head 1's W_1^Q is rows d_k .. 2 d_k of the qkv weight
    per_head = split(fused)
    assert torch.equal(qkv.weight[4:8], per_head.heads[1].w_q.weight)
    back = from_qkv(qkv, fused.w_o, 3)
    for a, b in zip(fused.state_dict().values(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(
        ValueError, match=r"qkv must be Linear\(d_model, 3·d_model\); got Linear\(12, 24\)"
    ):
        from_qkv(nn.Linear(12, 24), fused.w_o, 3)


def test_need_weights_false_gives_zeros_for_fully_masked_rows_too():
    fused = FusedMultiHeadAttention(8, 2, bias=True)
    x = torch.randn(2, 4, 8)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[1, 0] = False
    out, _ = fused(x, mask)
    fast, _ = fused(x, mask, need_weights=False)
    torch.testing.assert_close(fast, out, atol=1e-6, rtol=0)
    torch.testing.assert_close(fast[1, 0], fused.w_o.bias)


cross_shapes = st.tuples(
    st.integers(1, 3),  # B
    st.integers(1, 6),  # T_q
    st.integers(1, 6),  # T_k
    st.integers(1, 5),  # num_heads
    st.integers(1, 4),  # d_k
)


@settings(deadline=None)
@given(
    shape=cross_shapes,
    bias=st.booleans(),
    masked=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
    data=st.data(),
)
def test_cross_attention_equals_torch_multihead_attention(shape, bias, masked, dtype, data):
    """Queries from x (B, T_q, d_model), keys and values from a context (B, T_k, d_model): every
    layout equals nn.MultiheadAttention(x, context, context), outputs and all h rectangular maps."""
    B, T_q, T_k, h, d_k = shape
    d_model = h * d_k
    x = torch.randn(B, T_q, d_model, dtype=dtype)
    context = torch.randn(B, T_k, d_model, dtype=dtype)
    mask = None
    if masked:  # each sequence's context padded to its own length: (B, 1, T_k)
        lengths = data.draw(st.lists(st.integers(1, T_k), min_size=B, max_size=B), label="lengths")
        mask = (torch.arange(T_k) < torch.tensor(lengths).view(B, 1)).view(B, 1, T_k)
    per_head = PerHeadMultiHeadAttention(d_model, h, bias=bias).to(dtype)
    fused = fuse(per_head)
    out, weights = fused(x, mask, context=context)
    assert out.shape == (B, T_q, d_model) and weights.shape == (B, h, T_q, T_k)
    out_heads, weights_heads = per_head(x, mask, context=context)
    close(out_heads, out, dtype)
    close(weights_heads, weights, dtype)
    close(fused(x, mask, context=context, need_weights=False)[0], out, dtype)
    with torch.no_grad():
        padding = None if mask is None else ~mask.squeeze(1)  # (B, T_k), True = padded
        out_torch, weights_torch = to_torch(fused)(
            x, context, context, key_padding_mask=padding, need_weights=True,
            average_attn_weights=False,
        )  # fmt: skip
    close(out_torch, out, dtype)
    close(weights_torch, weights, dtype)
    out_back, weights_back = from_torch(to_torch(fused))(x, mask, context=context)
    close(out_back, out, dtype)
    close(weights_back, weights, dtype)


def test_context_x_is_self_attention_and_a_wrong_context_says_why():
    fused = FusedMultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    torch.testing.assert_close(fused(x, context=x)[0], fused(x)[0], atol=0, rtol=0)
    with pytest.raises(ValueError) as err:
        fused(x, context=torch.randn(3, 4, 12))
    assert str(err.value) == (
        "context must be (B, T_k, d_model) = (2, T_k, 12), with the batch of x (2, 5, 12) and the "
        "module's d_model; got (3, 4, 12). T_k may differ from x's T."
    )
    with pytest.raises(ValueError, match=r"context must be a tensor of shape \(B, T_k, d_model\)"):
        PerHeadMultiHeadAttention(12, 3)(x, context=torch.randn(4, 12))


@settings(deadline=None)
@given(
    h_and_g=st.sampled_from([(1, 1), (2, 1), (4, 1), (4, 2), (6, 3), (6, 2), (8, 4), (4, 4)]),
    d_k=st.integers(1, 4),
    bias=st.booleans(),
    causal=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_shared_kv_heads_equal_sdpa_enable_gqa_and_expand_kv(h_and_g, d_k, bias, causal, dtype):
    """Grouped-query (g K/V heads for h query heads; g = 1 multi-query): per-head = fused =
    F.scaled_dot_product_attention(..., enable_gqa=True) on the projected heads = expand_kv(.)."""
    h, g = h_and_g
    B, T, d_model = 2, 5, h * d_k
    x = torch.randn(B, T, d_model, dtype=dtype)
    mask = torch.ones(T, T, dtype=torch.bool).tril() if causal else None
    per_head = PerHeadMultiHeadAttention(d_model, h, bias=bias, num_kv_heads=g).to(dtype)
    fused = fuse(per_head)
    assert fused.w_k.weight.shape == (g * d_k, d_model) and fused.num_kv_heads == g
    out, weights = fused(x, mask)
    out_heads, weights_heads = per_head(x, mask)
    close(out_heads, out, dtype)
    close(weights_heads, weights, dtype)
    q = split_heads(fused.w_q(x), h)  # (B, h, T, d_k)
    k, v = (split_heads(w(x), g) for w in (fused.w_k, fused.w_v))  # (B, g, T, d_k)
    with torch.no_grad():
        kernel = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        close(fused.w_o(merge_heads(kernel)), out, dtype)
    plain = expand_kv(fused)
    assert plain.num_kv_heads == h and plain.w_k.weight.shape == (d_model, d_model)
    out_plain, weights_plain = plain(x, mask)
    close(out_plain, out, dtype)
    close(weights_plain, weights, dtype)
    out_back, weights_back = split(fused)(x, mask)  # split keeps the sharing
    close(out_back, out, dtype)
    close(weights_back, weights, dtype)


def test_per_head_gqa_shares_modules_and_its_gradient_is_the_fused_rows():
    per_head = PerHeadMultiHeadAttention(12, 4, num_kv_heads=2).double()
    heads = per_head.heads
    assert heads[0].w_k is heads[1].w_k and heads[2].w_v is heads[3].w_v  # shared, not copied
    assert heads[1].w_k is not heads[2].w_k and heads[0].w_q is not heads[1].w_q
    # W^Q 12·12, W^K and W^V 2 K/V heads · 3 features · 12, W^O 12·12
    assert count_parameters(per_head) == 144 + 2 * (2 * 3 * 12) + 144
    fused = fuse(per_head)
    assert count_parameters(fused) == count_parameters(per_head)
    x, target = (torch.randn(2, 5, 12, dtype=torch.float64) for _ in range(2))
    for module in (per_head, fused):
        F.mse_loss(module(x)[0], target).backward()
    for name in ("w_k", "w_v"):
        stacked = torch.cat([getattr(heads[i], name).weight.grad for i in (0, 2)])  # one per group
        close(getattr(fused, name).weight.grad, stacked, torch.float64)


def test_bad_num_kv_heads_and_layouts_that_cannot_share_say_why():
    with pytest.raises(ValueError) as err:
        FusedMultiHeadAttention(16, 4, num_kv_heads=3)
    assert str(err.value) == (
        "num_kv_heads = 3 does not divide num_heads = 4: each K/V head serves an equal group of "
        "query heads. num_kv_heads that work here: 1, 2, 4 (1 = multi-query, 4 = plain multi-head)."
    )
    with pytest.raises(ValueError, match="num_kv_heads must be a positive whole number; got 0"):
        PerHeadMultiHeadAttention(16, 4, num_kv_heads=0)
    gqa = FusedMultiHeadAttention(16, 4, num_kv_heads=2)
    with pytest.raises(ValueError, match=r"Call it on expand_kv\(module\)"):
        to_torch(gqa)
    assert to_torch(expand_kv(gqa)).in_proj_weight.shape == (48, 16)


@pytest.mark.parametrize("bias", [False, True])
def test_share_kv_averages_each_groups_blocks_and_expand_kv_undoes_it(bias):
    torch.manual_seed(0)
    h, d_k, d_model = 8, 3, 24
    mha = FusedMultiHeadAttention(d_model, h, bias=bias).double()
    x = torch.randn(2, 5, d_model, dtype=torch.float64)
    same = share_kv(mha, h)  # g = h: nothing is shared, nothing changes
    for a, b in zip(same(x), mha(x)):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    for g in (4, 2, 1):
        gqa = share_kv(mha, g)
        assert gqa.num_kv_heads == g and gqa.w_k.weight.shape == (g * d_k, d_model)
        for name in ("w_k", "w_v"):
            blocks = getattr(mha, name).weight.view(h, d_k, d_model)
            mean = blocks.view(g, h // g, d_k, d_model).mean(1).reshape(g * d_k, d_model)
            torch.testing.assert_close(getattr(gqa, name).weight, mean, atol=1e-12, rtol=0)
        assert torch.equal(gqa.w_q.weight, mha.w_q.weight)
        assert torch.equal(gqa.w_o.weight, mha.w_o.weight)
        back = share_kv(expand_kv(gqa), g)  # exact on heads that already share
        for a, b in zip(back(x), gqa(x)):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_share_kv_says_what_it_takes():
    with pytest.raises(ValueError, match="num_kv_heads = 3 does not divide num_heads = 4"):
        share_kv(FusedMultiHeadAttention(16, 4), 3)
    with pytest.raises(ValueError, match=r"share_kv\(\) needs one K and one V per head"):
        share_kv(FusedMultiHeadAttention(16, 4, num_kv_heads=2), 1)
    with pytest.raises(ValueError, match="share_kv.. takes a FusedMultiHeadAttention; got Per"):
        share_kv(PerHeadMultiHeadAttention(16, 4), 2)


@pytest.mark.parametrize("num_kv_heads", [None, 2])
def test_w_o_per_head_and_the_qk_ov_circuits_equal_the_module(num_kv_heads):
    from helpers.attention import attention_scores, split_heads
    from helpers.layouts import head_circuits, w_o_blocks

    torch.manual_seed(0)
    B, T, d_model, h = 2, 6, 24, 4
    d_k = d_model // h
    fused = FusedMultiHeadAttention(d_model, h, num_kv_heads=num_kv_heads).double()
    x = torch.randn(B, T, d_model, dtype=torch.float64)
    with torch.no_grad():
        out, weights = fused(x)  # (B, T, d_model), (B, h, T, T)
        heads = weights @ split_heads(expand_kv(fused).w_v(x), h)  # (B, h, T, d_k)
    blocks = w_o_blocks(fused)  # (h, d_k, d_model)
    summed = sum(heads[:, i] @ blocks[i] for i in range(h))  # Σ_i head_i · W^O_i
    torch.testing.assert_close(summed, out, atol=1e-10, rtol=0)
    w_qk, w_ov = head_circuits(fused)
    assert w_qk.shape == w_ov.shape == (h, d_model, d_model)
    with torch.no_grad():
        q, k = split_heads(fused.w_q(x), h), split_heads(expand_kv(fused).w_k(x), h)
        scores = attention_scores(q, k)  # (B, h, T, T)
    for i in range(h):
        torch.testing.assert_close(x @ w_qk[i] @ x.transpose(1, 2) / d_k**0.5, scores[:, i],
                                   atol=1e-10, rtol=0)  # fmt: skip
    written = sum(weights[:, i] @ x @ w_ov[i] for i in range(h))
    torch.testing.assert_close(written, out, atol=1e-10, rtol=0)
    ranks = torch.linalg.matrix_rank(torch.cat([w_qk, w_ov]))
    assert ranks.tolist() == [d_k] * (2 * h)  # each d_model x d_model, of rank d_k
    for a, b in zip(head_circuits(split(fused)), (w_qk, w_ov)):  # the per-head layout agrees
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize(("d_model", "h"), [(32, 4), (48, 3), (64, 16), (120, 1), (128, 1)])
def test_head_ranks_equal_matrix_rank_of_the_float64_products(d_model, h):
    module = seeded_attention(d_model, h)
    ranks_qk, ranks_ov = head_ranks(module)  # from the d_k-wide factors, float64
    assert ranks_qk == ranks_ov == [d_model // h] * h  # rank d_k; one wide head: full rank
    w_qk, w_ov = head_circuits(copy.deepcopy(module).double())  # the d_model x d_model products
    assert torch.linalg.matrix_rank(w_qk).tolist() == ranks_qk
    assert torch.linalg.matrix_rank(w_ov).tolist() == ranks_ov


def test_head_ranks_see_a_rank_lost_inside_a_head():
    module = copy.deepcopy(seeded_attention(32, 4))  # a copy: the course's module stays whole
    with torch.no_grad():
        module.w_k.weight[8:10] = 0  # head 1's W^K loses 2 of its 8 columns (x·W layout)
        module.w_o.weight[:, 24:27] = 0  # head 3's W^O block loses 3 of its 8 rows
    assert head_ranks(module) == ([8, 6, 8, 8], [8, 8, 8, 5])
