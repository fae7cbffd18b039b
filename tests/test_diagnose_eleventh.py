"""helpers.diagnose after the tenth trial's judge (its two false messages): a broadcast error on a
line that reads a tensor made outside the function says so, and says nothing of a (B, T, T) mask
the line does not use; a cut made in a helper function (a view with d_k and num_heads swapped) is
named on the helper's line with the heads it really makes, not as "1 head" on the line that calls
it. Each learner function has one slip, the line the message must name marked `# <-`; each
message is also shown to stay silent on a function that has not that slip."""

import math

import torch

from helpers.diagnose import diagnose
from tests.messages import marked, says

CAUSAL = torch.ones(7, 7, dtype=torch.bool).tril()  # a notebook's mask, made for T = 7


def masked_with_the_notebooks_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, t, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(b, t, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~CAUSAL, float("-inf"))  # <-
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def masked_without_a_head_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, t, d_model = x.shape
    d_k = d_model // num_heads
    q, k, v = ((x @ w.T).view(b, t, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # <-
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def test_a_broadcast_error_on_a_tensor_made_outside_names_it_and_no_mask_shape():
    message = diagnose(masked_with_the_notebooks_mask, echo=False).message
    says(message, f"line {marked(masked_with_the_notebooks_mask)}:",
         "reads CAUSAL, a tensor of shape (7, 7) made outside the function")  # fmt: skip
    assert "(B, T, T)" not in message
    # the wrong object: the mask argument without its head dim keeps the mask's hint
    message = diagnose(masked_without_a_head_dim, echo=False).message
    says(message, f"line {marked(masked_without_a_head_dim)}:", "has no head dim")
    assert "made outside the function" not in message


def fused_with_a_swapped_view_in_a_helper(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d_model = x.shape
    d_k = d_model // num_heads

    def split(u):
        return u.view(b, t, d_k, num_heads).transpose(1, 2)  # <-

    q, k, v = split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T)
    w = torch.softmax(q @ k.transpose(-2, -1) / d_k**0.5, dim=-1)
    return (w @ v).transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def fused_with_one_head_in_a_helper(x, w_q, w_k, w_v, w_o, num_heads):
    b, t, d_model = x.shape

    def split(u):
        return u.view(b, t, 1, d_model).transpose(1, 2)  # <-

    q, k, v = split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T)
    w = torch.softmax(q @ k.transpose(-2, -1) / d_model**0.5, dim=-1)
    return (w @ v).transpose(1, 2).reshape(b, t, d_model) @ w_o.T


def test_a_cut_in_a_helper_function_is_named_there_with_the_heads_it_makes():
    message = diagnose(fused_with_a_swapped_view_in_a_helper, mask=False, echo=False).message
    says(message, "cut into 4 heads of 3 features", "d_k and num_heads are swapped",
         f"line {marked(fused_with_a_swapped_view_in_a_helper)}:")  # fmt: skip
    assert "1 head" not in message and "Tensor.split" not in message
    # the wrong object: a helper that really cuts one head is still told so, on its own line;
    # neither is told of Tensor.split, which neither calls (the helper is named split)
    message = diagnose(fused_with_one_head_in_a_helper, mask=False, echo=False).message
    says(message, "cut into 1 head", f"line {marked(fused_with_one_head_in_a_helper)}:")
    assert "Tensor.split" not in message


def split_reading_b_and_t_swapped(t, num_heads):
    T, B, d_model = t.shape  # <-
    return t.reshape(B, T, num_heads, d_model // num_heads).transpose(1, 2)


def split_with_a_wrong_number_in_it(t, num_heads):
    B, T, d_model = t.shape
    d_k = d_model // num_heads
    return t.reshape(B, T, num_heads, d_k).permute(0, 2, 3, 1) * 2.0  # <-


def test_a_reshape_that_reads_the_numbers_in_another_order_is_not_said_to_change_them():
    """The eleventh trial's false message: B and T swapped in a reshape give the reference's
    numbers, laid out so that no reordering of the dims gives the reference: not 'not the same
    numbers'. The wrong object: a shape in another order holding other numbers is told so."""
    from helpers.diagnose import check_exercise

    message = check_exercise(split_reading_b_and_t_swapped, "split_heads", echo=False).message
    says(message, "the same numbers, but no reordering of the dims puts them where")
    assert "not the same numbers" not in message
    message = check_exercise(split_with_a_wrong_number_in_it, "split_heads", echo=False).message
    says(message, "but not the same numbers")
