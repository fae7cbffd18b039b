"""Each ✓ of notebook 15's K/V sharing and notebook 12's [CLS] count can fail: the check the
notebook calls, fed the object it passes and the wrong objects a reader would worry about (heads
that hold copies of their group's K/V, a module with too many or too few K/V heads; a model where
only the best head rests on [CLS])."""

import copy

import pytest
import torch

from helpers.attention import PerHeadMultiHeadAttention
from helpers.claims import check_head_patterns, check_heads_resting_on, check_kv_shared


def _copied_kv(module: PerHeadMultiHeadAttention) -> PerHeadMultiHeadAttention:
    """Wrong object: sharing broken. Every head holds its own copy of its group's w_k and w_v:
    the same numbers (so the same output, for now), but tensors of its own."""
    broken = copy.deepcopy(module)
    for head in broken.heads:
        head.w_k, head.w_v = copy.deepcopy(head.w_k), copy.deepcopy(head.w_v)
    return broken


def test_15_kv_shared_passes_for_a_gqa_module(capsys):
    check_kv_shared(PerHeadMultiHeadAttention(64, 8, num_kv_heads=2), 2)
    out = capsys.readouterr().out
    assert "✓ the 8 heads use 2 w_k and 2 w_v, one of each per group of 4 heads" in out
    assert "parameters() counts each once: 10,240 numbers" in out


def test_15_kv_shared_fails_for_heads_holding_copies():
    torch.manual_seed(0)
    shared = PerHeadMultiHeadAttention(64, 8, num_kv_heads=2)
    broken = _copied_kv(shared)
    assert repr(broken) == repr(shared)  # what 15 says: printing the module cannot tell
    x = torch.randn(1, 5, 64)
    torch.testing.assert_close(broken(x)[0], shared(x)[0])  # nor can the output, untrained
    with pytest.raises(AssertionError, match="head 1's w_k is not head 0's"):
        check_kv_shared(broken, 2)


def test_15_kv_shared_fails_for_the_wrong_number_of_kv_heads():
    with pytest.raises(AssertionError, match="head 1's w_k is not head 0's"):
        check_kv_shared(PerHeadMultiHeadAttention(64, 8), 2)  # plain: 8 K/V heads
    with pytest.raises(AssertionError, match="hold 1 different w_k tensors, not 2"):
        check_kv_shared(PerHeadMultiHeadAttention(64, 8, num_kv_heads=1), 2)  # MQA: 1
    with pytest.raises(AssertionError, match="g must divide h = 8"):
        check_kv_shared(PerHeadMultiHeadAttention(64, 8, num_kv_heads=2), 3)


# like MiniLM on 12's sentences: 27 heads above 0.5, 2 of them above 0.8
CLS_MINILM = torch.tensor([0.89, 0.82] + [0.6] * 25 + [0.3] * 45).reshape(6, 12)


def test_12_heads_resting_on_cls_passes_for_minilm_like_scores(capsys):
    assert check_heads_resting_on(CLS_MINILM, "[CLS]") == (27, 2)
    out = capsys.readouterr().out
    assert "✓ 27 of the 72 heads give [CLS] more than 0.5 of their weight" in out
    assert "(checked: at least 25% of them, 18); 2 more than 0.8" in out


def test_12_heads_resting_on_cls_fails_when_only_the_best_head_does():
    """The wrong object the old ✓ could not catch: one head rests on [CLS], the rest do not."""
    one = torch.full((6, 12), 0.4)
    one[4, 5] = 0.89
    check_head_patterns({"[CLS]": one}, found={"[CLS]": 0.8}, absent={})  # best head only: ✓
    with pytest.raises(AssertionError, match="1 give it more than 0.5, 1 more than 0.8"):
        check_heads_resting_on(one, "[CLS]")


def test_12_heads_resting_on_cls_fails_for_every_head_at_the_mean_or_none_above_0_8():
    with pytest.raises(AssertionError, match="0 give it more than 0.5"):
        check_heads_resting_on(torch.full((6, 12), 0.45), "[CLS]")  # the mean head, everywhere
    with pytest.raises(AssertionError, match="72 give it more than 0.5, 0 more than 0.8"):
        check_heads_resting_on(torch.full((6, 12), 0.7), "[CLS]")
