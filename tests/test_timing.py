"""helpers.timing: candidates run interleaved, after a warm-up, and get one median each; calls
are counted exactly (products, multiply-adds, numbers read and written, views free)."""

import torch
import torch.nn.functional as F

from helpers.timing import count_calls, interleaved_medians


def test_candidates_run_interleaved_after_warmup():
    calls = []
    medians = interleaved_medians(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3, warmup=2
    )
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert set(medians) == {"a", "b"} and all(m >= 0 for m in medians.values())


def test_a_product_counts_its_multiply_adds_reads_and_writes():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    c = count_calls(lambda: a @ b)
    assert (c.calls, c.products, c.multiply_adds) == (1, 1, 3 * 4 * 5)
    assert (c.read, c.written) == (3 * 4 + 4 * 5, 3 * 5)
    assert c.ops == {"mm": 1}


def test_a_batched_product_counts_every_batch():
    c = count_calls(lambda: torch.randn(2, 3, 4) @ torch.randn(2, 4, 5))
    assert c.products == 1 and c.multiply_adds == 2 * 3 * 4 * 5


def test_a_view_reads_and_writes_nothing():
    x = torch.randn(6, 4)
    c = count_calls(lambda: x.t().view(2, 2, 6))
    assert c.calls == 2 and (c.read, c.written, c.products) == (0, 0, 0)


def test_a_broadcast_input_counts_the_numbers_in_memory():
    row = torch.randn(1, 8).expand(100, 8)  # 800 numbers seen, 8 in memory
    c = count_calls(lambda: row + 1)
    assert c.read == 8 and c.written == 800


def test_the_attention_kernel_is_one_product_of_both_its_products_multiply_adds():
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)
    c = count_calls(lambda: F.scaled_dot_product_attention(q, k, v))
    assert c.products == 1 and "_softmax" not in c.ops
    assert c.multiply_adds == 2 * 3 * 5 * 7 * (4 + 4)  # q·kᵀ, then weights·v


def test_attention_written_out_counts_the_same_multiply_adds_in_two_products():
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)
    c = count_calls(lambda: (q @ k.transpose(-2, -1)).softmax(-1) @ v)
    assert c.products == 2 and c.multiply_adds == 2 * 3 * 5 * 7 * (4 + 4)
