"""What the test_diagnose_* files share: learners written with one mistake switched on (the
view/transpose learner, 03's per-head loop, 13's cross-attention, 17's head scores), and
how a test reads a message (the lines marked `# <-`, the lines a message names, its phrases).
Like learner_code, the learners are written out by hand, independently of the reference."""

import inspect
import math

import torch

from helpers.diagnose import CIRCUIT_MISTAKES, CONTEXT_MISTAKES, MISTAKES


def learner(mistake=None):
    """A learner's view/transpose implementation, with one mistake switched on."""

    def my_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        d_k = d_model // num_heads
        if mistake == "weights_transposed":
            q, k, v = x @ w_q, x @ w_k, x @ w_v
        else:
            q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        if mistake == "heads_split_without_transpose":
            q, k, v = (t.view(B, num_heads, T, d_k) for t in (q, k, v))
        elif mistake == "heads_split_interleaved":
            q, k, v = (t.view(B, T, d_k, num_heads).permute(0, 3, 1, 2) for t in (q, k, v))
        else:
            q, k, v = (t.view(B, T, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1)
        if mistake == "scaled_by_d_model":
            scores = scores / math.sqrt(d_model)
        elif mistake == "scaled_by_d_k":
            scores = scores / d_k
        elif mistake != "no_scaling":
            scores = scores / math.sqrt(d_k)
        if mask is not None and mistake not in ("mask_ignored", "mask_after_softmax"):
            m = mask.unsqueeze(1)
            scores = scores.masked_fill(m if mistake == "mask_inverted" else ~m, float("-inf"))
        if mistake == "no_softmax":
            weights = scores
        else:
            weights = torch.softmax(scores, dim=2 if mistake == "softmax_over_queries" else 3)
        if mask is not None and mistake == "mask_after_softmax":
            weights = weights * mask.unsqueeze(1)
        out = weights @ (k if mistake == "keys_as_values" else v)
        if mistake == "heads_merged_without_transpose":
            out = out.reshape(B, T, d_model)
        else:
            out = out.transpose(1, 2).reshape(B, T, d_model)
        if mistake == "w_o_missing":
            return out
        return out @ w_o.T

    return my_attention


def per_head_loop(mistake=None):
    """The 02 exercise as a learner writes it: lists of per-head (d_k, d_model) weights, no mask."""

    def my_attention(x, w_q, w_k, w_v, w_o):
        outs = []
        for wq, wk, wv in zip(w_q, w_k, w_v):
            q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
            scores = q @ k.transpose(-2, -1)
            if mistake != "no_scaling":
                scores = scores / math.sqrt(q.shape[-1])
            weights = scores.softmax(dim=-2 if mistake == "softmax_over_queries" else -1)
            outs.append(weights @ (k if mistake == "keys_as_values" else v))
        merged = torch.cat(outs, dim=-1)
        return merged if mistake == "w_o_missing" else merged @ w_o.T

    return my_attention


def cross_learner(mistake=None):
    """The 09 exercise as a learner writes it, with at most one slip."""

    def my_cross_attention(x, context, w_q, w_k, w_v, w_o, num_heads):
        B, T_q, d_model = x.shape
        d_k = d_model // num_heads
        queries = context if mistake == "queries_from_context" else x
        source = x if mistake == "keys_values_from_x" else context

        def heads(t, w):  # (B, T, d_model) -> (B, h, T, d_k)
            return (t @ w.T).view(B, t.shape[1], num_heads, d_k).transpose(1, 2)

        q, k, v = heads(queries, w_q), heads(source, w_k), heads(source, w_v)
        scores = q @ k.transpose(-2, -1) / (1.0 if mistake == "no_scaling" else d_k**0.5)
        out = scores.softmax(-1) @ v  # (B, h, T, d_k)
        return out.transpose(1, 2).reshape(B, q.shape[2], d_model) @ w_o.T

    return my_cross_attention


def scores_learner(mistake=None, style="matmul"):
    """One head's scores from W_QK, as a learner writes them, with at most one mistake."""

    def my_head_scores(x, w_q, w_k):
        d_k, d_model = w_q.shape
        if style == "einsum":
            w_qk = torch.einsum("kd,ke->de", w_q, w_k)  # (d_model, d_model)
            return torch.einsum("bsd,de,bte->bst", x, w_qk, x) / math.sqrt(d_k)
        w_qk = w_k.T @ w_q if mistake == "w_qk_reversed" else w_q.T @ w_k
        divisor = {"no_scaling": 1, "scaled_by_d_model": d_model**0.5, "scaled_by_d_k": d_k}
        scores = x @ w_qk @ x.transpose(-2, -1) / divisor.get(mistake, d_k**0.5)
        return scores.softmax(-1) if mistake == "softmax_applied" else scores

    return my_head_scores


SWITCHED = sorted(set(MISTAKES) - {*CONTEXT_MISTAKES, *CIRCUIT_MISTAKES, "mask_filled_with_zero"})


def marked_lines(fn) -> list[int]:
    """The lines of fn marked `# <-` (or `# <-1`, `# <-2`), in the order of their numbers."""
    source, start = inspect.getsourcelines(fn)
    marks = {}
    for offset, line in enumerate(source):
        if "# <-" in line:
            marks[line.split("# <-")[1][:1].strip() or "1"] = start + offset
    return [marks[key] for key in sorted(marks)]


def lines_in(message: str) -> list[int]:
    """The line numbers of every `Where: line N` in a message, in order."""
    return [int(part.split(":")[0]) for part in message.split("Where: line ")[1:]]


def assert_says(message: str, says: tuple = (), never: tuple = ()) -> None:
    for text in says:
        assert text in message, f"{text!r} missing from:\n{message}"
    for text in never:
        assert text not in message, f"{text!r} in:\n{message}"
