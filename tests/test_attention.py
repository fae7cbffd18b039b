"""helpers.attention: the formula, masks without NaN, and the errors a learner sees."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from helpers.attention import (
    FusedMultiHeadAttention,
    KVCache,
    PerHeadMultiHeadAttention,
    SelfAttention,
    check_num_heads,
    kv_cache_bytes,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    valid_head_counts,
)
from helpers.layouts import split

f64 = torch.float64


def qkv(*lead, T=5, d_k=4, dtype=f64):
    return (torch.randn(*lead, T, d_k, dtype=dtype) for _ in range(3))


@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    T=st.integers(1, 7),
    d_k=st.integers(1, 6),
)
def test_sdpa_equals_the_formula_written_out_and_torch(lead, T, d_k):
    q, k, v = qkv(*lead, T=T, d_k=d_k)
    out, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    assert weights.shape == (*lead, T, T) and out.shape == (*lead, T, d_k)
    torch.testing.assert_close(weights, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-10, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(*lead, T, dtype=f64), atol=1e-12, rtol=0)


def test_sdpa_with_different_query_and_key_lengths_and_d_v():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 9)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 9) and weights.shape == (2, 3, 7)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_sdpa_masks_match_torch_and_zero_the_forbidden_weights(dtype, atol):
    q, k, v = qkv(2, 3, T=6, d_k=4, dtype=dtype)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    padding = (torch.arange(6) < torch.tensor([6, 3]).view(2, 1)).view(2, 1, 1, 6)  # (B, 1, 1, T)
    for mask in (causal, padding, causal & padding):
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(out, ref, atol=atol, rtol=0)
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
        torch.testing.assert_close(
            weights.sum(-1), torch.ones(2, 3, 6, dtype=dtype), atol=atol, rtol=0
        )


def test_fully_masked_rows_give_zeros_and_no_nan_even_in_gradients():
    q, k, v = (t.requires_grad_() for t in qkv(2, T=4, d_k=3))
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[:, 1] == 0).all() and (out[:, 1] == 0).all()
    # PyTorch's fused kernel agrees: zeros for such rows
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=0)
    (out.square().sum() + weights.square().sum()).backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[:, 1] == 0).all()  # the empty query gets no gradient


def test_every_query_masked_gives_all_zeros():
    q, k, v = qkv(1, T=3, d_k=2)
    out, weights = scaled_dot_product_attention(q, k, v, torch.zeros(3, 3, dtype=torch.bool))
    assert out.abs().max() == 0 and weights.abs().max() == 0


def test_split_and_merge_heads_are_inverse_views_of_the_features():
    t = torch.arange(2 * 3 * 12.0).view(2, 3, 12)  # (B, T, d_model)
    heads = split_heads(t, 4)
    assert heads.shape == (2, 4, 3, 3)  # (B, h, T, d_k)
    # head 1 of token 2 holds features 3..5 of token 2
    assert heads[0, 1, 2].tolist() == t[0, 2, 3:6].tolist()
    assert torch.equal(merge_heads(heads), t)


@pytest.mark.parametrize("Module", [PerHeadMultiHeadAttention, FusedMultiHeadAttention])
def test_modules_return_documented_shapes(Module):
    x = torch.randn(2, 5, 12)
    out, weights = Module(12, 3)(x)
    assert out.shape == (2, 5, 12) and weights.shape == (2, 3, 5, 5)
    out, weights = SelfAttention(12, 4)(x)
    assert out.shape == (2, 5, 4) and weights.shape == (2, 5, 5)


def test_valid_head_counts():
    assert valid_head_counts(12) == [1, 2, 3, 4, 6, 12]
    assert valid_head_counts(7) == [1, 7]
    assert check_num_heads(512, 8) == 64


# ---- bad input: a ValueError a learner can act on -------------------------------------------


@pytest.mark.parametrize("Module", [PerHeadMultiHeadAttention, FusedMultiHeadAttention])
def test_heads_that_do_not_divide_d_model(Module):
    with pytest.raises(ValueError) as err:
        Module(10, 3)
    msg = str(err.value)
    assert "d_model=10 is not divisible by num_heads=3" in msg
    assert "Head counts that work for d_model=10: 1, 2, 5, 10." in msg


@pytest.mark.parametrize("d_model, num_heads", [(0, 1), (8, 0), (8, -2), (8.0, 2), (8, True)])
def test_sizes_must_be_positive_whole_numbers(d_model, num_heads):
    with pytest.raises(ValueError, match="must be a positive whole number"):
        FusedMultiHeadAttention(d_model, num_heads)


@pytest.mark.parametrize("Module", [PerHeadMultiHeadAttention, FusedMultiHeadAttention])
def test_x_of_the_wrong_rank_or_width(Module):
    mha = Module(8, 2)
    with pytest.raises(ValueError) as err:
        mha(torch.randn(5, 8))
    assert str(err.value) == (
        "x must have 3 dims (B, T, d_model) = (B, T, 8); got shape (5, 8) with 2 dims. "
        "Add a batch dim with x.unsqueeze(0)."
    )
    with pytest.raises(ValueError, match=r"got shape \(2, 5, 6\), whose last dim is 6"):
        mha(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        mha([[1.0] * 8])


@pytest.mark.parametrize("Module", [PerHeadMultiHeadAttention, FusedMultiHeadAttention])
def test_mask_that_does_not_broadcast(Module):
    mha = Module(8, 2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError) as err:
        mha(x, torch.ones(4, 4, dtype=torch.bool))
    assert str(err.value) == (
        "mask of shape (4, 4) does not broadcast to (B, h, T_q, T_k) = (2, 2, 5, 5). Use "
        "(T_q, T_k) for one mask shared by the batch (e.g. causal), (B, 1, T_k) to hide padded "
        "keys, (B, T_q, T_k), or with a head dim (B, 1, T_q, T_k) or (B, h, T_q, T_k), as "
        "F.scaled_dot_product_attention takes them."
    )
    with pytest.raises(
        ValueError, match=r"must be a boolean tensor \(True = may attend\); got torch.float32"
    ):
        mha(x, torch.ones(5, 5))


def test_sdpa_rejects_mismatched_q_k_v():
    with pytest.raises(ValueError, match=r"same last dim d_k.*q \(2, 3, 4\) and k \(2, 3, 5\)"):
        scaled_dot_product_attention(
            torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 3, 5)
        )
    with pytest.raises(ValueError, match="one row per key"):
        scaled_dot_product_attention(torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"does not broadcast to the scores' shape"):
        scaled_dot_product_attention(*qkv(2, T=3, d_k=2), torch.ones(2, 2, dtype=torch.bool))


def _every_mask_shape(B, h, T, generator):
    """Boolean masks (True = may attend) in every shape the modules take, each with the (B, h, T, T)
    it means; every query keeps at least its own key, so no row is empty."""
    own = torch.eye(T, dtype=torch.bool)
    per_head = (torch.rand(B, h, T, T, generator=generator) > 0.5) | own
    per_batch = (torch.rand(B, T, T, generator=generator) > 0.5) | own
    lengths = torch.randint(1, T + 1, (B,), generator=generator)
    keys = torch.arange(T) < lengths.view(B, 1)  # (B, T): padded keys False
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return {
        "(T, T)": (causal, causal.expand(B, h, T, T)),
        "(B, T, T)": (per_batch, per_batch.unsqueeze(1).expand(B, h, T, T)),
        "(B, 1, T)": (keys.view(B, 1, T), keys.view(B, 1, 1, T).expand(B, h, T, T)),
        "(B, 1, T, T)": (per_batch.unsqueeze(1), per_batch.unsqueeze(1).expand(B, h, T, T)),
        "(B, h, T, T)": (per_head, per_head),
    }


@pytest.mark.parametrize(
    "shape", ["(T, T)", "(B, T, T)", "(B, 1, T)", "(B, 1, T, T)", "(B, h, T, T)"]
)
def test_every_mask_shape_equals_pytorch_sdpa_in_both_layouts(shape):
    torch.manual_seed(0)
    B, h, T, d_model = 2, 4, 5, 16
    fused = FusedMultiHeadAttention(d_model, h, bias=True).double()
    per_head = split(fused)
    x = torch.randn(B, T, d_model, dtype=torch.float64)
    mask, meaning = _every_mask_shape(B, h, T, torch.Generator().manual_seed(1))[shape]
    q, k, v = (split_heads(w(x), h) for w in (fused.w_q, fused.w_k, fused.w_v))
    expected = fused.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=meaning)))
    out, weights = fused(x, mask)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
    assert weights.shape == (B, h, T, T)
    assert (weights[~meaning] == 0).all()  # nothing where the mask says no
    out_heads, weights_heads = per_head(x, mask)  # head i gets its own slice of a (B, h, T, T)
    torch.testing.assert_close(out_heads, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(weights_heads, weights, atol=1e-10, rtol=0)
    kernel, _ = fused(x, mask, need_weights=False)
    torch.testing.assert_close(kernel, expected, atol=1e-10, rtol=0)


def test_a_mask_with_the_wrong_head_count_says_which_shapes_work():
    mha = FusedMultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError) as err:
        mha(x, torch.ones(2, 3, 5, 5, dtype=torch.bool))
    message = str(err.value)
    assert message.startswith("mask of shape (2, 3, 5, 5) does not broadcast to (B, h, T_q, T_k)")
    assert "(B, 1, T_q, T_k) or (B, h, T_q, T_k)" in message
    with pytest.raises(ValueError, match=r"mask of shape \(1, 2, 1, 5, 5\) does not broadcast"):
        mha(x, torch.ones(1, 2, 1, 5, 5, dtype=torch.bool))


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])  # plain, grouped-query, multi-query
@pytest.mark.parametrize("chunks", [[1] * 7, [2, 1, 4], [7]])
def test_cached_decoding_equals_the_full_causal_forward(num_kv_heads, chunks):
    torch.manual_seed(0)
    B, T, d_model, h = 2, 7, 16, 4
    fused = FusedMultiHeadAttention(d_model, h, bias=True, num_kv_heads=num_kv_heads).double()
    x = torch.randn(B, T, d_model, dtype=f64)
    out_full, weights_full = fused(x, torch.ones(T, T, dtype=torch.bool).tril())
    cache, outs, start = KVCache(), [], 0
    for size in chunks:  # feed the tokens in chunks, only the new ones each time
        out, weights = fused(x[:, start : start + size], cache=cache)
        end = start + size
        assert weights.shape == (B, h, size, end) and len(cache) == end
        torch.testing.assert_close(weights, weights_full[:, :, start:end, :end], atol=1e-10, rtol=0)
        outs.append(out)
        start = end
    torch.testing.assert_close(torch.cat(outs, dim=1), out_full, atol=1e-10, rtol=0)
    d_k = d_model // h  # 2 (k and v) · B · g · d_k · T · 8 bytes (float64)
    assert cache.nbytes == 2 * B * num_kv_heads * d_k * T * 8
    assert cache.nbytes == kv_cache_bytes(T, num_kv_heads, d_k, bytes_per_number=8, B=B)


def test_a_cache_is_for_self_attention_and_one_layer():
    fused = FusedMultiHeadAttention(8, 2)
    cache = KVCache()
    fused(torch.randn(1, 3, 8), cache=cache)
    with pytest.raises(ValueError, match="a KVCache is for self-attention decoding"):
        fused(torch.randn(1, 1, 8), context=torch.randn(1, 4, 8), cache=cache)
    with pytest.raises(ValueError, match=r"holds k of shape \(B, g, T, d_k\) = \(1, 2, 3, 4\)"):
        fused(torch.randn(2, 1, 8), cache=cache)  # another batch size: another cache


def test_kv_cache_bytes_is_the_arithmetic_of_a_real_configuration():
    # d_model 4096, 32 query heads of d_k 128, 32 layers, 8,192 tokens, 2-byte numbers
    mha = kv_cache_bytes(8192, 32, 128, num_layers=32, bytes_per_number=2)
    gqa = kv_cache_bytes(8192, 8, 128, num_layers=32, bytes_per_number=2)
    assert (mha, gqa) == (4 * 2**30, 2**30)  # 4 GiB and 1 GiB per sequence
    assert kv_cache_bytes(1, 8, 128, num_layers=32, bytes_per_number=2) == 128 * 1024
    with pytest.raises(ValueError, match="num_kv_heads must be a whole number ≥ 0, got 2.5"):
        kv_cache_bytes(10, 2.5, 8)


@pytest.mark.parametrize("Module", [PerHeadMultiHeadAttention, FusedMultiHeadAttention])
def test_dropout_on_the_weights_scales_the_kept_ones_and_is_off_in_eval(Module):
    torch.manual_seed(0)
    p, B, T, d_model, h = 0.25, 64, 6, 16, 4
    module = Module(d_model, h, dropout=p).double()
    x = torch.randn(B, T, d_model, dtype=f64)
    module.eval()
    with torch.no_grad():
        out_eval, w_eval = module(x)
    torch.testing.assert_close(w_eval.sum(-1), torch.ones(B, h, T, dtype=f64), atol=1e-12, rtol=0)
    module.train()
    with torch.no_grad():
        _, w_train = module(x)
    kept = w_train != 0
    # every kept weight is the eval weight scaled by 1 / (1 - p); about p of them are zeroed
    torch.testing.assert_close(w_train[kept], w_eval[kept] / (1 - p), atol=1e-12, rtol=0)
    zeroed = 1 - kept.double().mean()
    assert abs(float(zeroed) - p) < 0.02, zeroed  # 24,576 weights: 4 standard deviations ≈ 0.011
    rows = w_train.sum(-1)  # (B, h, T): each row sums to 1 only on average
    assert float((rows - 1).abs().max()) > 0.1
    assert abs(float(rows.mean()) - 1) < 0.01, rows.mean()  # 1,536 rows
    module.eval()
    torch.testing.assert_close(module(x)[0], out_eval, atol=0, rtol=0)  # off again in eval


def test_dropout_matches_torch_in_eval_and_travels_through_the_layouts():
    from helpers.layouts import from_torch, to_torch

    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, dropout=0.1, batch_first=True).double().eval()
    ours = from_torch(mha).eval()
    x = torch.randn(2, 5, 16, dtype=f64)
    assert ours.dropout == 0.1 and to_torch(ours).dropout == 0.1
    assert split(ours).dropout == 0.1 and all(head.dropout == 0.1 for head in split(ours).heads)
    out_t, w_t = mha(x, x, x, average_attn_weights=False)
    out, w = ours(x)
    torch.testing.assert_close(out, out_t, atol=1e-10, rtol=0)
    torch.testing.assert_close(w, w_t, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match=r"0 <= dropout < 1; got 1.0\. 0.0 \(the default\)"):
        FusedMultiHeadAttention(16, 4, dropout=1.0)


def test_dropout_message_does_not_call_0_1_the_norm():
    """07 shows recent LLMs with attention dropout 0.0: the message may not call 0.1 the norm."""
    with pytest.raises(ValueError) as refused:
        FusedMultiHeadAttention(16, 4, dropout=-0.1)
    message = str(refused.value)
    assert "typically" not in message and "many recent LLMs set 0.0" in message
