"""Tell a learner whether their attention code is right, and if not, which known mistake it makes.

`diagnose(my_attention)` runs a learner's
`my_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None)` on fixed inputs, without and with a
mask, and compares it with the reference. If it differs, it compares it with a catalogue of
mistakes learners really make (each one the reference with exactly one thing changed) and names
the one it matches, with a hint that points at the line to look at, not at the solution.
`check_exercise(fn, name)` does the same for the smaller exercises of the notebooks.

Conventions (as everywhere in the course): x is (B, T, d_model); weights are plain tensors in
nn.Linear's (out_features, in_features) layout, so a projection is `x @ w_q.T`; mask is boolean,
True = may attend, broadcastable to (B, T, T). Never raises because of the learner's code: every
problem becomes the message.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

from helpers.attention import attention_scores, merge_heads, split_heads

__all__ = [
    "Diagnosis",
    "MISTAKES",
    "CONTEXT_MISTAKES",
    "CIRCUIT_MISTAKES",
    "diagnose",
    "check_exercise",
    "reference_attention",
]

ATOL = 1e-4
B, T, D_MODEL, HEADS = 2, 5, 12, 3  # d_k = 4: every scaling mistake gives different numbers


@dataclass
class Diagnosis:
    ok: bool
    mistake: str | None
    message: str

    def __repr__(self) -> str:
        return f"Diagnosis(ok={self.ok}, mistake={self.mistake!r})"


# name: (what it looks like, a hint that points at the line)
MISTAKES: dict[str, tuple[str, str]] = {
    "no_scaling": (
        "the scores are not scaled",
        "look at the line that computes q·kᵀ: the scores should be divided by something.",
    ),
    "scaled_by_d_model": (
        "the scores are divided by √d_model",
        "each head compares vectors of d_k features, not d_model: look at your divisor.",
    ),
    "scaled_by_d_k": (
        "the scores are divided by d_k",
        "look at your divisor: is it the right power of d_k?",
    ),
    "softmax_over_queries": (
        "the softmax runs over the queries: the columns of the weights sum to 1, not the rows",
        "look at the dim of your softmax: each query's row should sum to 1.",
    ),
    "no_softmax": (
        "the weights are the raw scores, with no softmax",
        "look at the line that turns scores into weights.",
    ),
    "w_o_missing": (
        "the output is the concatenation of the heads: W^O is never applied",
        "look at your last line: one of the four matrices is not used.",
    ),
    "weights_transposed": (
        "the weight matrices are used the wrong way round (x @ w instead of x @ w.T)",
        "look at how you apply w_q, w_k, w_v and w_o: they are stored as (out_features, "
        "in_features), like nn.Linear's weight.",
    ),
    "heads_split_without_transpose": (
        "q, k and v are cut into heads with a view to (B, h, T, d_k) directly, which mixes "
        "tokens and heads",
        "look at how you cut q, k, v into heads: the d_k features of one head must come from "
        "one token. Which dims does your view split, and in which order?",
    ),
    "heads_split_interleaved": (
        "each head gets every h-th feature: the view cuts d_model into (d_k, h) instead of "
        "(h, d_k)",
        "head i owns the d_k features next to each other, i·d_k .. (i+1)·d_k: which of h and d_k "
        "comes first in your view?",
    ),
    "heads_merged_without_transpose": (
        "the heads' outputs are put back together in the wrong order: (B, h, T, d_k) reshaped "
        "to (B, T, d_model) directly",
        "look at the line that merges the heads: the head dim has to move back next to d_k "
        "before the reshape.",
    ),
    "keys_as_values": (
        "the weights multiply the keys instead of the values",
        "look at what your weights multiply.",
    ),
    "mask_ignored": (
        "the mask has no effect: right without a mask, wrong with one",
        "look at whether your mask reaches the scores at all.",
    ),
    "mask_inverted": (
        "the mask is applied the wrong way round",
        "here True means may attend (nn.MultiheadAttention uses the opposite): look at the "
        "condition in your masked_fill.",
    ),
    "mask_after_softmax": (
        "masked weights are set to 0 after the softmax, so rows no longer sum to 1",
        "look at where you apply the mask: before or after the softmax?",
    ),
    "keys_values_from_x": (
        "the keys and values come from x, not from the context: that is self-attention",
        "look at what you project with w_k and w_v: in cross-attention they read the other "
        "sequence.",
    ),
    "queries_from_context": (
        "the queries come from the context, so there is one output row per context token",
        "look at what you project with w_q: the output has one row per query, and the queries "
        "come from x.",
    ),
    "w_qk_reversed": (
        "the scores come out transposed: W_QK is built as W^K·W^Qᵀ, so row a holds key a's "
        "scores instead of query a's",
        "look at the order in your W_QK: q·kᵀ = (x·W^Q)·(x·W^K)ᵀ, so the queries' matrix comes "
        "first.",
    ),
    "softmax_applied": (
        "the scores went through a softmax: these are the weights, not the scores",
        "this exercise stops before the softmax: return the scores, divided by √d_k.",
    ),
}


CONTEXT_MISTAKES = ("keys_values_from_x", "queries_from_context")  # need a context to differ
CIRCUIT_MISTAKES = ("w_qk_reversed", "softmax_applied")  # 12's exercise: scores from W_QK


def reference_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor | None,
    num_heads: int,
    mask: torch.Tensor | None = None,
    mistake: str | None = None,
    intermediates: dict | None = None,
    context: torch.Tensor | None = None,
) -> torch.Tensor:
    """Multi-head attention from plain weights, or with `mistake` the same with that one error.

    With mistake=None it equals `FusedMultiHeadAttention` (a unit test checks this). w_o=None
    leaves W^O out (one-head exercises). `intermediates`, if given, receives q, k, v, scores and
    weights, each (B, h, T, ·). `context` (B, T_k, d_model), if given, gives the keys and values
    (cross-attention); the mask is then (B, T_q, T_k).
    """
    source = x if context is None else context
    if mistake == "keys_values_from_x":
        source = x
    elif mistake == "queries_from_context":
        x = source
    Bx, Tx, d_model = x.shape
    inner = w_q.shape[0]  # h · d_k
    d_k = inner // num_heads
    if mistake == "weights_transposed":
        project = lambda t, w: t @ w  # noqa: E731 - the mistake, spelled out
    else:
        project = lambda t, w: t @ w.T  # noqa: E731
    q, k, v = project(x, w_q), project(source, w_k), project(source, w_v)  # (B, T, h·d_k)
    q, k, v = (_split(t, num_heads, mistake) for t in (q, k, v))  # (B, h, T, d_k)
    if mistake is None:
        scores = attention_scores(q, k)  # (B, h, T, T), the course's own function
    else:
        divisor = {"no_scaling": 1.0, "scaled_by_d_model": math.sqrt(d_model)}.get(
            mistake, d_k if mistake == "scaled_by_d_k" else math.sqrt(d_k)
        )
        scores = q @ k.transpose(-2, -1) / divisor
    allowed = None if mask is None else mask.unsqueeze(-3)  # (B, 1, T, T)
    if allowed is not None and mistake == "mask_inverted":
        allowed = ~allowed
    if allowed is not None and mistake not in ("mask_ignored", "mask_after_softmax"):
        scores = scores.masked_fill(~allowed, float("-inf"))
    if mistake == "no_softmax":
        weights = scores
    else:
        weights = scores.softmax(dim=-2 if mistake == "softmax_over_queries" else -1)
    if allowed is not None and mistake == "mask_after_softmax":
        weights = weights.masked_fill(~allowed, 0.0)
    out = weights @ (k if mistake == "keys_as_values" else v)  # (B, h, T, d_k)
    if intermediates is not None:
        intermediates.update(q=q, k=k, v=v, scores=scores, weights=weights)
    if mistake == "heads_merged_without_transpose":
        merged = out.reshape(Bx, Tx, inner)
    else:
        merged = merge_heads(out)  # (B, T, h·d_k)
    if w_o is None or mistake == "w_o_missing":
        return merged
    return project(merged, w_o)  # (B, T, d_model)


def _split(t: torch.Tensor, num_heads: int, mistake: str | None = None) -> torch.Tensor:
    """(B, T, h·d_k) -> (B, h, T, d_k), or the same cut with one of the split mistakes."""
    Bt, Tt, inner = t.shape
    d_k = inner // num_heads
    if mistake == "heads_split_without_transpose":
        return t.reshape(Bt, num_heads, Tt, d_k)
    if mistake == "heads_split_interleaved":
        return t.reshape(Bt, Tt, d_k, num_heads).permute(0, 3, 1, 2)
    return split_heads(t, num_heads)


def _inputs(seed: int = 0) -> dict:
    """The fixed inputs: x (2, 5, 12), four (12, 12) weights, 3 heads, a padding mask (2, 5, 5)
    under which every query keeps at least one key either way round."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D_MODEL, generator=g)
    weights = {name: torch.randn(D_MODEL, D_MODEL, generator=g) / math.sqrt(D_MODEL) for name in
               ("w_q", "w_k", "w_v", "w_o")}  # fmt: skip
    lengths = torch.tensor([4, 3])
    mask = (torch.arange(T) < lengths.view(B, 1)).view(B, 1, T).expand(B, T, T)  # (B, T, T)
    return {"x": x, **weights, "num_heads": HEADS, "mask": mask}


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=ATOL, rtol=0, equal_nan=True)


def _where_in_learner_code(err: BaseException) -> str:
    """' (line 7: `scores = q @ k`)' for the deepest frame outside helpers and torch, if any."""
    frames = [
        f for f in traceback.extract_tb(err.__traceback__)
        if "/helpers/" not in f.filename and "/torch/" not in f.filename
    ]  # fmt: skip
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return f" (line {frame.lineno}: `{code}`)" if code else f" (line {frame.lineno})"


def _call(fn: Callable, args: dict) -> tuple[object, str | None]:
    """Call the learner's function; return (result, None) or (None, message)."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args.values()]
    try:
        with torch.no_grad():  # positional: the learner may name the parameters differently
            return fn(*copies), None
    except NotImplementedError:
        return None, (
            "⏳ Not done yet: fill in the function in the exercise cell above (it still raises "
            "NotImplementedError), run that cell, then run this check again."
        )
    except Exception as err:  # noqa: BLE001 - the learner's error, reported, never raised
        hint = ""
        if "cannot be multiplied" in str(err) or "Expected size for first two dimensions" in str(
            err
        ):
            hint = (
                " Hint: the two sides of a product do not line up: write down the shape of each on "
                "that line. The weights are stored as (out_features, in_features), like "
                "nn.Linear's weight, so a projection is x @ w.T."
            )
        elif "must match the size" in str(err) or "broadcast" in str(err):
            hint = (
                " Hint: two tensors do not line up; a mask of shape (B, T, T) needs a head dim "
                "(mask.unsqueeze(1)) to meet scores of shape (B, h, T, T)."
            )
        return None, (
            f"✗ Your function raised {type(err).__name__}: {err}{_where_in_learner_code(err)}."
            f"{hint}"
        )


def _unpack(result: object) -> tuple[torch.Tensor | None, dict]:
    """The learner may return out, (out, weights) or (out, {stage: tensor})."""
    if isinstance(result, torch.Tensor):
        return result, {}
    if isinstance(result, tuple) and result and isinstance(result[0], torch.Tensor):
        extra = result[1] if len(result) > 1 and isinstance(result[1], dict) else {}
        return result[0], extra
    return None, {}


def _shape_hint(got: tuple, expected: tuple) -> str:
    if len(got) == 4:
        return " It still has a head dim: merge the heads back into d_model features."
    if len(got) == 3 and got[:2] == expected[:2] and got[2] * HEADS == expected[2]:
        return " That is one head's width: concatenate all the heads' outputs."
    return ""


def _first_difference(out: torch.Tensor, expected: torch.Tensor, stages: dict, args: dict) -> str:
    """Where the learner's result first departs from the reference."""
    if stages:
        reference_stages: dict = {}
        reference_attention(**args, intermediates=reference_stages)
        for name in ("q", "k", "v", "scores", "weights"):
            if name not in stages:
                continue
            mine, ref = stages[name], reference_stages[name]
            if not isinstance(mine, torch.Tensor) or mine.shape != ref.shape:
                got = tuple(mine.shape) if isinstance(mine, torch.Tensor) else type(mine).__name__
                expected = tuple(ref.shape)
                return f"the first stage that differs is {name}: shape {got}, expected {expected}."
            if not _close(mine, ref):
                diff = (mine - ref).abs().nan_to_num(float("inf"))
                head = int(diff.amax(dim=(0, 2, 3)).argmax())
                return f"the first stage that differs is {name}, most of all in head {head}."
    diff = (out - expected).abs().nan_to_num(float("inf"))
    tokens = [
        int(t) for t in diff.amax(dim=(0, 2)).nonzero().flatten() if diff.amax(dim=(0, 2))[t] > ATOL
    ]
    return (
        f"the output differs at token positions {tokens} (largest difference "
        f"{float(diff.max()):.3g}). Return (out, {{'q': ..., 'k': ..., 'v': ..., 'scores': ..., "
        f"'weights': ...}}) with tensors shaped (B, h, T, ·) to see the first stage that differs."
    )


def _verdict(ok: bool, mistake: str | None, message: str, echo: bool) -> Diagnosis:
    if echo:
        print(message)
    return Diagnosis(ok, mistake, message)


def _per_head_args(args: dict) -> dict:
    """The learner's arguments for the loop exercise: x, then each of w_q, w_k, w_v as a list of h
    per-head (d_k, d_model) matrices (nn.Linear's layout), then w_o."""
    d_k = args["w_q"].shape[0] // args["num_heads"]
    per_head = {name: list(args[name].split(d_k)) for name in ("w_q", "w_k", "w_v")}
    return {"x": args["x"], **per_head, "w_o": args["w_o"]}


def diagnose(
    fn: Callable, echo: bool = True, mask: bool = True, per_head: bool = False
) -> Diagnosis:
    """Check `fn(x, w_q, w_k, w_v, w_o, num_heads, mask=None)` against the reference, without and
    (if `mask`) with a mask; name the catalogued mistake it makes, or show where it first differs.

    mask=False checks `fn(x, w_q, w_k, w_v, w_o, num_heads)`, with no mask parameter. per_head=True
    checks the loop exercise: `fn(x, w_q, w_k, w_v, w_o)` where w_q, w_k and w_v are lists of h
    per-head (d_k, d_model) matrices, and no mask.
    """
    args = _inputs()
    runs = {"without a mask": {**args, "mask": None}}
    if mask and not per_head:
        runs["with a mask"] = args
    mistakes = [
        name for name in MISTAKES
        if len(runs) > 1 or not name.startswith("mask_")
        if not (per_head and name.startswith("heads_"))
        if name not in CONTEXT_MISTAKES + CIRCUIT_MISTAKES
    ]  # fmt: skip
    outputs, stages = {}, {}
    for label, run_args in runs.items():
        if per_head:
            call_args = _per_head_args(run_args)
        elif not mask:  # the exercise's function has no mask parameter
            call_args = {name: a for name, a in run_args.items() if name != "mask"}
        else:
            call_args = run_args
        result, problem = _call(fn, call_args)
        if problem:
            return _verdict(False, None, problem, echo)
        out, extra = _unpack(result)
        if out is None:
            got = type(result).__name__
            message = f"✗ Your function returned {got}; it should return out (B, T, d_model)."
            return _verdict(False, None, message, echo)
        expected = reference_attention(**run_args)
        if out.shape != expected.shape:
            message = (
                f"✗ Wrong shape {label}: expected (B, T, d_model) = {tuple(expected.shape)}, got "
                f"{tuple(out.shape)}.{_shape_hint(tuple(out.shape), tuple(expected.shape))}"
            )
            return _verdict(False, None, message, echo)
        outputs[label], stages[label] = out.detach().float(), extra
    expected = {label: reference_attention(**a) for label, a in runs.items()}
    if all(_close(outputs[label], expected[label]) for label in runs):
        which = "without and with a mask" if len(runs) > 1 else "on fixed inputs"
        message = f"✓ Your attention matches the reference within atol {ATOL:.0e}, {which}."
        return _verdict(True, None, message, echo)
    for name in mistakes:
        what, hint = MISTAKES[name]
        if all(
            _close(outputs[label], reference_attention(**a, mistake=name))
            for label, a in runs.items()
        ):
            message = f"✗ This looks like a known mistake ({name}): {what}.\n  Hint: {hint}"
            return _verdict(False, name, message, echo)
    label = next(lbl for lbl in runs if not _close(outputs[lbl], expected[lbl]))
    where = _first_difference(outputs[label], expected[label], stages[label], runs[label])
    message = (
        f"✗ Your output differs from the reference {label}, and matches no known mistake: {where}"
        if len(runs) > 1
        else f"✗ Your output differs from the reference, and matches no known mistake: {where}"
    )
    return _verdict(False, None, message, echo)


# The smaller exercises: name -> (arguments, reference, mistakes that apply)
def _one_head_args() -> dict:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, D_MODEL, generator=g)
    return {
        "x": x,
        **{
            n: torch.randn(4, D_MODEL, generator=g) / math.sqrt(D_MODEL)
            for n in ("w_q", "w_k", "w_v")
        },
    }


def _one_head_reference(mistake=None, **a) -> torch.Tensor:
    return reference_attention(a["x"], a["w_q"], a["w_k"], a["w_v"], None, 1, mistake=mistake)


def _head_scores_args() -> dict:
    """x (2, 5, 12) and one head's w_q, w_k (d_k = 4, d_model = 12) in nn.Linear's layout."""
    a = _one_head_args()
    return {"x": a["x"], "w_q": a["w_q"], "w_k": a["w_k"]}


def _head_scores_reference(mistake=None, **a) -> torch.Tensor:
    """One head's scores x · W_QK · xᵀ / √d_k (B, T, T), W_QK = W^Q·W^Kᵀ in the x·W layout; or
    the same with one mistake."""
    x, w_q, w_k = a["x"], a["w_q"], a["w_k"]
    d_k, d_model = w_q.shape
    w_qk = w_k.T @ w_q if mistake == "w_qk_reversed" else w_q.T @ w_k  # (d_model, d_model)
    divisor = {"no_scaling": 1.0, "scaled_by_d_model": math.sqrt(d_model),
               "scaled_by_d_k": d_k}.get(mistake, math.sqrt(d_k))  # fmt: skip
    scores = x @ w_qk @ x.transpose(-2, -1) / divisor  # (B, T, T)
    return scores.softmax(dim=-1) if mistake == "softmax_applied" else scores


def _split_args() -> dict:
    return {
        "t": torch.arange(B * T * D_MODEL, dtype=torch.float32).view(B, T, D_MODEL),
        "num_heads": HEADS,
    }


def _cross_args() -> dict:
    """x (B, T_q = 5, d_model) and a longer context (B, T_k = 7, d_model): a mix-up of the two
    changes the numbers or the shape."""
    args = {name: a for name, a in _inputs(seed=2).items() if name != "mask"}
    context = torch.randn(B, T + 2, D_MODEL, generator=torch.Generator().manual_seed(3))
    return {"x": args.pop("x"), "context": context, **args}


EXERCISES: dict[str, tuple[Callable[[], dict], Callable[..., torch.Tensor], list[str]]] = {
    "one_head": (
        _one_head_args,
        _one_head_reference,
        [
            "no_scaling",
            "scaled_by_d_model",
            "scaled_by_d_k",
            "softmax_over_queries",
            "no_softmax",
            "keys_as_values",
        ],
    ),  # fmt: skip
    "split_heads": (
        _split_args,
        lambda mistake=None, **a: _split(a["t"], a["num_heads"], mistake),
        ["heads_split_without_transpose", "heads_split_interleaved"],
    ),
    "head_scores": (
        _head_scores_args,
        _head_scores_reference,
        ["no_scaling", "scaled_by_d_model", "scaled_by_d_k", "w_qk_reversed", "softmax_applied"],
    ),
    "cross_attention": (
        _cross_args,
        reference_attention,
        [
            "keys_values_from_x",
            "queries_from_context",
            "no_scaling",
            "scaled_by_d_model",
            "scaled_by_d_k",
            "softmax_over_queries",
            "no_softmax",
            "weights_transposed",
            "heads_split_without_transpose",
            "heads_merged_without_transpose",
            "w_o_missing",
            "keys_as_values",
        ],
    ),
}


def check_exercise(fn: Callable, name: str, echo: bool = True) -> Diagnosis:
    """Check a notebook exercise's function against its reference (see EXERCISES)."""
    make_args, reference, mistakes = EXERCISES[name]
    args = make_args()
    result, problem = _call(fn, args)
    if problem:
        return _verdict(False, None, problem, echo)
    out, _ = _unpack(result)
    expected = reference(**args)
    for mistake in mistakes if out is not None and out.shape != expected.shape else ():
        if _close(out.detach().float(), reference(mistake=mistake, **args)):  # a telling shape
            what, hint = MISTAKES[mistake]
            return _verdict(False, mistake, f"✗ This looks like {what}.\n  Hint: {hint}", echo)
    if out is None or out.shape != expected.shape:
        got = tuple(out.shape) if out is not None else type(result).__name__
        message = f"✗ Expected shape {tuple(expected.shape)}, got {got}."
        if out is not None and sorted(out.shape) == sorted(expected.shape):
            message += " The same sizes in another order: check which dims your transpose swaps."
        return _verdict(False, None, message, echo)
    if _close(out.detach().float(), expected):
        return _verdict(
            True, None, f"✓ Correct: equal to the reference within atol {ATOL:.0e}.", echo
        )
    for mistake in mistakes:
        if _close(out.detach().float(), reference(mistake=mistake, **args)):
            what, hint = MISTAKES[mistake]
            return _verdict(False, mistake, f"✗ This looks like {what}.\n  Hint: {hint}", echo)
    diff = (out.detach().float() - expected).abs()
    first = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    return _verdict(
        False,
        None,
        f"✗ Not equal to the reference: the largest difference is at index {first}.",
        echo,
    )
