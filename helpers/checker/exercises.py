"""The checks the notebooks call: `diagnose` (03's loop, 06, 09) and `check_exercise` (the smaller
exercises), each exercise's inputs and reference (EXERCISES)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import torch

from helpers.checker.again import (
    _at_second_sizes,
    _float64_note,
    _other_values_problem,
    _second_call_problem,
    _second_problem,
    _swap_check,
)
from helpers.checker.compare import (
    _SCALING,
    ATOL,
    D_MODEL,
    HEADS,
    Diagnosis,
    _same,
    _verdict,
    reference_attention,
)
from helpers.checker.mistakes import (
    CIRCUIT_MISTAKES,
    CONTEXT_MISTAKES,
    INDUCTION_MISTAKES,
    SHARED_KV_MISTAKES,
    WRONG_NUM_HEADS,
)
from helpers.checker.online import check_tiled
from helpers.checker.run import (
    _changed_in_place,
    _checked,
    _Halted,
    _mask_leak,
    _note,
    _records,
    _returned_note,
    _run,
    _shape_hint,
    _side_effect_message,
    _side_effect_note,
    _traced,
    _unpack,
)
from helpers.checker.shapes import _is_numpy, _numpy_message, _permuted, _shape_message
from helpers.checker.sizes import (
    FURTHER_CHECK_SIZES,
    INDUCTION_SIZES,
    INDUCTION_SIZES2,
    SHARED_KV_SIZES,
    SHARED_KV_SIZES2,
    SHARED_KV_SIZES3,
    _sizes,
    _two_sizes,
)
from helpers.checker.sources import _fallback
from helpers.checker.stages import (
    attention_stages,
    head_scores_stages,
    induction_stages,
    shared_kv_stages,
    split_stages,
)
from helpers.checker.words import (
    _EXERCISE_HINTS,
    _EXERCISE_WORDS,
    STAGE_HINTS,
    _explains,
    _message,
    _numeric_problem,
    _safe_explain,
    _shape_reading,
)


def _inputs(seed: int = 0, second: bool = False) -> dict:
    """The fixed inputs: x (2, 5, 12), four (12, 12) weights, 3 heads, a padding mask (2, 5, 5)
    under which every query keeps at least one key either way round; `second`: the same at the
    second sizes (1, 3, 16), 2 heads. Another seed gives other values and, at the first sizes,
    another mask (each item's length changed), so a mask kept from an earlier call shows."""
    b, t, d_model, heads, _, _ = _sizes(second)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, d_model, generator=g)
    weights = {name: torch.randn(d_model, d_model, generator=g) / d_model**0.5 for name in
               ("w_q", "w_k", "w_v", "w_o")}  # fmt: skip
    lengths = torch.tensor([2] if second else [4, 3] if seed == 0 else [3, 2])
    mask = (torch.arange(t) < lengths.view(b, 1)).view(b, 1, t).expand(b, t, t)  # (B, T, T)
    return {"x": x, **weights, "num_heads": heads, "mask": mask}


def _causal_inputs() -> dict:
    """The first inputs with a mask whose query rows differ: causal and padding together, query t
    keeping keys 0 … t of its sequence's real tokens (key 0 at least)."""
    args = _inputs()
    t = args["x"].size(1)
    args["mask"] = args["mask"] & torch.ones(t, t, dtype=torch.bool).tril()
    return args


def _call_args(run_args: dict, mask: bool, per_head: bool) -> dict:
    """The arguments diagnose passes to the learner's function."""
    if per_head:
        return _per_head_args(run_args)
    if not mask:  # the exercise's function has no mask parameter
        return {name: a for name, a in run_args.items() if name != "mask"}
    return run_args


def _reordered_parameters(
    fn: Callable, args: dict, expected: torch.Tensor, only_if_right: bool = False
) -> str:
    """'' unless fn's parameters carry the exercise's names in another order (`context, x`
    where the check passes x, context): then what each moved parameter receives, and whether
    fn is right when each argument goes to the parameter of its name (run, not guessed)."""
    try:
        params = list(inspect.signature(fn).parameters)[: len(args)]
    except (TypeError, ValueError):
        return ""
    names = list(args)
    if params == names or sorted(params) != sorted(names):
        return ""
    copies = [args[p].clone() if isinstance(args[p], torch.Tensor) else args[p] for p in params]
    copies = [[w.clone() for w in a] if isinstance(a, list) else a for a in copies]
    try:
        out, _ = _unpack(_traced(fn, copies).result)
    except _Halted:
        out = None
    moved = [(mine, theirs) for mine, theirs in zip(params, names) if mine != theirs]
    gets = "; ".join(f"your `{mine}` receives the check's {theirs}" for mine, theirs in moved)
    right = out is not None and out.shape == expected.shape and _same(out, expected)
    if only_if_right and not right:
        return ""
    then = (
        "Given each argument under its own name, your function is right: put its parameters "
        "in the exercise's order."
        if right
        else "Put its parameters in the exercise's order, then check again: given each argument "
        "under its own name, it still differs from the reference."
    )
    return (
        f"✗ Your function's parameters are ({', '.join(params)}), in another order than the "
        f"exercise's ({', '.join(names)}), and the check passes its arguments in the exercise's "
        f"order: {gets}. {then}"
    )


def _per_head_args(args: dict) -> dict:
    """The learner's arguments for the loop exercise: x, then each of w_q, w_k, w_v as a list of h
    per-head (d_k, d_model) matrices (nn.Linear's layout), then w_o."""
    d_k = args["w_q"].shape[0] // args["num_heads"]
    per_head = {name: list(args[name].split(d_k)) for name in ("w_q", "w_k", "w_v")}
    return {"x": args["x"], **per_head, "w_o": args["w_o"]}


_ONE_HEAD = (*_SCALING, "softmax_over_queries", "no_softmax", "keys_as_values", "keys_from_w_q",
             "values_from_w_k", "keys_values_swapped", "scaled_after_softmax", "softmax_over_batch",
             "queries_keys_swapped")  # fmt: skip


_MULTI_HEAD = (*_ONE_HEAD, "weights_transposed", "w_o_transposed", "w_o_missing",
               "heads_split_without_transpose", "heads_split_interleaved",
               "heads_merged_without_transpose", "softmax_over_heads",
               "residual_added")  # fmt: skip


def _wrong_head_counts() -> list[str]:
    """The slips "num_heads_k": every other number of heads that divides the test's d_model."""
    counts = [k for k in range(1, D_MODEL + 1) if D_MODEL % k == 0 and k != HEADS]
    return [f"{WRONG_NUM_HEADS}{k}" for k in counts]


_MASKS = ("mask_ignored", "mask_inverted", "mask_after_softmax", "mask_filled_with_zero")


def diagnose(
    fn: Callable,
    echo: bool = True,
    mask: bool = True,
    per_head: bool = False,
    time_limit: float | None = None,
) -> Diagnosis:
    """Check `fn(x, w_q, w_k, w_v, w_o, num_heads, mask=None)` against the reference, without and
    (if `mask`) with a mask; name each mistake it makes, with the line that makes it.

    mask=False checks `fn(x, w_q, w_k, w_v, w_o, num_heads)`, with no mask parameter. per_head=True
    checks the loop exercise: `fn(x, w_q, w_k, w_v, w_o)` where w_q, w_k and w_v are lists of h
    per-head (d_k, d_model) matrices, and no mask. `time_limit`: seconds for all the calls
    together (TIME_LIMIT if None); the function is stopped then, or when its tensors pass
    TRACE_LIMIT_MB, with a ✗ that names the line it was running.
    """
    return _checked(lambda: _diagnose(fn, echo, mask, per_head), echo, time_limit)


def _diagnose(fn: Callable, echo: bool, mask: bool, per_head: bool) -> Diagnosis:
    args = _inputs()
    runs = {"without a mask": {**args, "mask": None}}
    if mask and not per_head:
        runs["with a mask"] = args
    exercise = "loop" if per_head else "masked" if mask else "fused"
    note = _note(fn, exercise)
    candidates = [
        name for name in (*_MULTI_HEAD, *(_MASKS if len(runs) > 1 else ()))
        if not (per_head and name.startswith("heads_split"))
    ] + ([] if per_head else _wrong_head_counts())  # fmt: skip
    results = {}
    for label, run_args in runs.items():
        call_args = _call_args(run_args, mask, per_head)
        when = f" when called {label}" if len(runs) > 1 else ""
        trace, problem = _run(fn, call_args, when, exercise)
        if problem:
            return _verdict(False, problem, echo, note="" if problem[0] == "○" else note)
        out, extra = _unpack(trace.result)
        expected = reference_attention(**run_args)
        if out is None or not _same(out, expected):
            reordered = _reordered_parameters(fn, call_args, expected)
            if reordered:
                return _verdict(False, reordered, echo, note=note)
        if out is None:
            got = type(trace.result).__name__
            missing = " (is its last line a `return`?)" if trace.result is None else ""
            message = (
                f"✗ Your function returned {got}{missing}; it should return out (B, T, d_model)."
            )
            if _is_numpy(trace.result):
                message = _numpy_message(trace.result, expected, "out (B, T, d_model)")
            return _verdict(False, message, echo, note=note)
        if out.shape != expected.shape:
            message = (
                f"✗ Wrong shape{f' {label}' if len(runs) > 1 else ''}: expected (B, T, d_model) "
                f"= {tuple(expected.shape)}, got "
                f"{tuple(out.shape)}.{_shape_hint(tuple(out.shape), tuple(expected.shape))}"
            )
            if not _shape_hint(tuple(out.shape), tuple(expected.shape)):
                stages = attention_stages(**run_args)
                message += _shape_reading(trace, out, stages, call_args)
            return _verdict(False, message, echo, note=note)
        results[label] = (trace, out, extra, expected)
    returned = [t.result for t, _, _, _ in results.values()
                if not isinstance(t.result, torch.Tensor)]  # fmt: skip
    if all(_same(out, expected) for _, out, _, expected in results.values()):
        if returned:  # the right output, inside a tuple or a list
            message = _returned_note(returned[0], tuple(expected.shape), right=True)
            return _verdict(False, message, echo)
        for trace, out, _, expected in results.values():  # in place, a reseed, the dtype
            message = _side_effect_message(trace, out, expected)
            if message:
                return _verdict(False, message, echo)
        for label, (trace, _, _, _) in results.items():  # masked keys must get exactly 0
            leak = (
                _mask_leak(trace, runs[label]["mask"]) if runs[label]["mask"] is not None else None
            )
            if leak is not None:
                return _verdict(False, _message([leak]), echo, [leak])
        for label, run_args in runs.items():  # the same at the second sizes
            second = {**_inputs(second=True), "mask": run_args["mask"]}
            if second["mask"] is not None:
                second["mask"] = _inputs(second=True)["mask"]
            when = f" (called {label})" if len(runs) > 1 else ""
            again = _second_call_problem(
                fn, _call_args(run_args, mask, per_head), reference_attention(**run_args), when
            )
            other = _inputs(seed=1)  # other values (another mask too), the same sizes
            other["mask"] = other["mask"] if run_args["mask"] is not None else None
            again = again or _other_values_problem(
                fn, _call_args(other, mask, per_head), reference_attention(**other), when
            )
            if again:  # wrong again at the same sizes: not the sizes
                return _verdict(False, again, echo, note=note)
            problem = _second_problem(
                fn, _call_args(second, mask, per_head), reference_attention(**second), when
            )
            if problem:
                return _verdict(False, _at_second_sizes(exercise, fn, problem), echo, note=note)
        if len(runs) > 1:  # the padding masks' query rows are all alike: one whose rows differ
            causal = _causal_inputs()
            problem = _second_problem(
                fn, _call_args(causal, mask, per_head), reference_attention(**causal),
                " with a causal mask",
            )  # fmt: skip
            if problem:
                message = (
                    "✗ Right without a mask and with padding masks, whose query rows are all "
                    f"alike, but not with a mask whose rows differ: {problem} The mask there is "
                    "causal and padding together, (B, T, T), query t keeping keys 0 … t of its "
                    "sequence's real tokens. Hint: look at how your code applies the mask: does "
                    "each query get its own row of it?"
                )
                return _verdict(False, message, echo, note=note)
        which = "without and with a padding mask" if len(runs) > 1 else "on fixed inputs"
        causal = "; and with a causal one at the first sizes" if len(runs) > 1 else ""
        message = (
            f"✓ Your attention matches the reference within atol {ATOL:.0e}, {which}, "
            f"{_two_sizes(exercise)}{causal}."
        )
        last = list(runs.values())[-1]  # with the mask, if there is one
        dtype = _float64_note(fn, _call_args(last, mask, per_head))
        return _verdict(True, f"{message}\n  {dtype}" if dtype else message, echo)
    if returned:
        note = "\n  ".join(n for n in (_returned_note(returned[0], (), False), note) if n)
    effects = dict.fromkeys(_side_effect_note(t) for t, _, _, _ in results.values())
    plain_note, note = note, "\n  ".join(n for n in (note, *effects) if n)
    second_args = {**_inputs(second=True), "mask": None}
    right = [lbl for lbl, (_, out, _, exp) in results.items() if _same(out, exp)]
    findings = _safe_explain(
        [
            (_records(trace, out, extra), functools.partial(attention_stages, **runs[label]))
            for label, (trace, out, extra, _) in results.items()
        ],
        candidates,
        fn,
        None
        if per_head
        else _swap_check(
            fn,
            _call_args(second_args, mask, per_head),
            lambda a: reference_attention(**{**second_args, "num_heads": a["num_heads"]}),
        ),
    )
    label = [lbl for lbl, (_, out, _, exp) in results.items() if not _same(out, exp)][0]
    trace, out, _, expected = results[label]
    stages = functools.partial(attention_stages, **runs[label])
    unnamed = findings and not any(f.mistake for f in findings)
    if right and runs[label]["mask"] is None and unnamed:  # right with the mask, wrong without
        # (the scaling under `if mask is not None:`): named from that call alone, if the named
        # mistake gives its output
        records = _records(trace, out, results[label][2])
        alone = _safe_explain([(records, stages)], candidates, fn, None)
        if alone and all(f.mistake for f in alone) and _explains(alone, out, stages):
            findings = alone
    given = None if len(runs) == 1 else runs[label]["mask"] is not None  # takes a mask: given?
    problem = _numeric_problem(trace.records, out, expected, given)
    if problem and not _explains(findings, out, functools.partial(attention_stages, **runs[label])):
        return _verdict(False, problem, echo, note=note)  # NaN or float16 the names do not explain
    if _changed_in_place(trace) and not (len(findings) == 1 and findings[0].mistake):
        return _verdict(False, _changed_in_place(trace), echo, note=plain_note)
    words = _EXERCISE_WORDS.get(exercise)
    message = _message(findings, words=words) if findings else _fallback(out, expected)
    masks_only = findings and all(f.mistake in _MASKS for f in findings)  # mask slips: no news
    if right and not masks_only and message.startswith("✗ "):
        message = f"✗ Right when called {right[0]}, but not when called {label}. {message[2:]}"
    return _verdict(False, message, echo, findings, note)


# The smaller exercises: name -> (arguments, the stages of its reference, the mistakes that apply)
def _one_head_args(second: bool = False, seed: int = 0) -> dict:
    b, t, d_model, _, d_k, _ = _sizes(second)
    g = torch.Generator().manual_seed(1 + 100 * seed)
    x = torch.randn(b, t, d_model, generator=g)
    return {
        "x": x,
        **{
            n: torch.randn(d_k, d_model, generator=g) / d_model**0.5 for n in ("w_q", "w_k", "w_v")
        },  # fmt: skip
    }


def _one_head_stages(x, w_q, w_k, w_v, mistakes=(), given=None) -> dict:
    return attention_stages(x, w_q, w_k, w_v, None, 1, mistakes=mistakes, given=given)


def _head_scores_args(second: bool = False, seed: int = 0) -> dict:
    """x (2, 5, 12) and one head's w_q, w_k (d_k = 4, d_model = 12) in nn.Linear's layout."""
    a = _one_head_args(second, seed)
    return {"x": a["x"], "w_q": a["w_q"], "w_k": a["w_k"]}


def _head_scores_reference(mistake=None, **a) -> torch.Tensor:
    """One head's scores x · W_QK · xᵀ / √d_k (B, T, T), W_QK = W^Q·W^Kᵀ in the x·W layout; or
    the same with one mistake."""
    return head_scores_stages(**a, mistakes=() if mistake is None else (mistake,))["out"]


def _split_args(second: bool = False, seed: int = 0) -> dict:
    """t (B, T, d_model) counting 0, 1, 2, … (from 1000 · seed), so each number tells where it
    came from."""
    b, t, d_model, heads, _, _ = _sizes(second)
    count = torch.arange(b * t * d_model, dtype=torch.float32) + 1000 * seed
    return {
        "t": count.view(b, t, d_model),
        "num_heads": heads,
    }


def _cross_args(second: bool = False, seed: int = 0) -> dict:
    """x (B, T_q = 5, d_model) and a longer context (B, T_k = 7, d_model): a mix-up of the two
    changes the numbers or the shape."""
    b, _, d_model, _, _, t_k = _sizes(second)
    args = {name: a for name, a in _inputs(2 + 100 * seed, second).items() if name != "mask"}
    context = torch.randn(b, t_k, d_model, generator=torch.Generator().manual_seed(3 + 100 * seed))
    return {"x": args.pop("x"), "context": context, **args}


def _cross_stages(x, context, w_q, w_k, w_v, w_o, num_heads, mistakes=(), given=None) -> dict:
    return attention_stages(x, w_q, w_k, w_v, w_o, num_heads, None, context, mistakes, given)


def _induction_args(second: bool = False, seed: int = 0) -> dict:
    """maps (B, h, T, T): causal softmax rows of random scores (every query's weights spread over
    itself and the keys before it), for sequences whose first T // 2 tokens repeat."""
    sizes = INDUCTION_SIZES2 if second else INDUCTION_SIZES
    b, h, t = sizes["B"], sizes["h"], sizes["T"]
    scores = 2 * torch.randn(b, h, t, t, generator=torch.Generator().manual_seed(4 + 100 * seed))
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    return {"maps": scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)}


def _shared_kv_args(second: bool | int = False, seed: int = 0) -> dict:
    """q (B, h, T, d_k) and k, v (B, g, T, d_k): h query heads, g K/V heads; `second`: the
    second set of sizes (True or 1) or a further one (2)."""
    sizes = (SHARED_KV_SIZES, SHARED_KV_SIZES2, SHARED_KV_SIZES3)[int(second)]
    b, h, g, t, d_k = (sizes[n] for n in ("B", "h", "g", "T", "d_k"))
    gen = torch.Generator().manual_seed(5 + 100 * seed)
    return {
        "q": torch.randn(b, h, t, d_k, generator=gen),
        "k": torch.randn(b, g, t, d_k, generator=gen),
        "v": torch.randn(b, g, t, d_k, generator=gen),
    }


EXERCISES: dict[str, tuple[Callable[..., dict], Callable[..., dict], tuple[str, ...]]] = {
    "one_head": (_one_head_args, _one_head_stages, _ONE_HEAD),
    "split_heads": (
        _split_args,
        split_stages,
        ("heads_split_without_transpose", "heads_split_interleaved", *_wrong_head_counts()),
    ),
    "head_scores": (_head_scores_args, head_scores_stages, (*_SCALING, *CIRCUIT_MISTAKES)),
    "induction_score": (_induction_args, induction_stages, INDUCTION_MISTAKES),
    "shared_kv": (
        _shared_kv_args,
        shared_kv_stages,
        (
            *SHARED_KV_MISTAKES,
            "no_scaling",
            "scaled_by_d_k",
            "scaled_after_softmax",
            "softmax_over_queries",
            "no_softmax",
            "keys_as_values",
        ),
    ),  # fmt: skip
    "cross_attention": (
        _cross_args,
        _cross_stages,
        (
            *CONTEXT_MISTAKES,
            *_MULTI_HEAD,
            *_wrong_head_counts(),
        ),
    ),
}


# what each exercise returns, for a learner, and where to look when it differs in no known way
EXERCISE_OUT: dict[str, tuple[str, str]] = {
    "one_head": (
        "output (weights·v)",
        "look at this line: what does it compute from the weights and v?",
    ),
    "split_heads": ("heads (t cut into h blocks of d_k)", STAGE_HINTS["q_heads"]),
    "head_scores": ("scores x·W_QK·xᵀ/√d_k", STAGE_HINTS["scores"]),
    "shared_kv": (
        "output (each query head's weights · its group's values)",
        STAGE_HINTS["heads"],
    ),
    "induction_score": (
        "induction scores (one per head)",
        "look at the line that reads the weights: which queries, which key for each, and how "
        "they become one number per head?",
    ),
}


def check_exercise(
    fn: Callable, name: str, echo: bool = True, time_limit: float | None = None
) -> Diagnosis:
    """Check a notebook exercise's function against its reference (see EXERCISES). `time_limit`:
    seconds for all the calls together (TIME_LIMIT if None), as for diagnose."""
    return _checked(lambda: _check_exercise(fn, name, echo), echo, time_limit)


def _check_exercise(fn: Callable, name: str, echo: bool) -> Diagnosis:
    if name == "tiled_attention":  # 19's loop over blocks has a check of its own
        return check_tiled(fn, echo)
    make_args, stages_of, candidates = EXERCISES[name]
    args = make_args()
    note = _note(fn, name)
    trace, problem = _run(fn, args, name=name)
    if problem and problem.startswith("✗ Your function raised"):  # (k, q, v): a shape error
        reordered = _reordered_parameters(fn, args, stages_of(**args)["out"], only_if_right=True)
        problem = reordered or problem
    if problem:
        return _verdict(False, problem, echo, note="" if problem[0] == "○" else note)
    out, extra = _unpack(trace.result)
    expected = stages_of(**args)["out"]
    if out is not None and _same(out, expected):
        if not isinstance(trace.result, torch.Tensor):  # right, inside a tuple or a list
            message = _returned_note(trace.result, tuple(expected.shape), right=True)
            return _verdict(False, message, echo)
        message = _side_effect_message(trace, out, expected)  # in place, a reseed, the dtype
        if message:
            return _verdict(False, message, echo)
        again = _second_call_problem(fn, make_args(), expected)
        other = make_args(seed=1)  # other values, the same sizes
        again = again or _other_values_problem(fn, other, stages_of(**other)["out"])
        if again:  # wrong again at the same sizes: not the sizes
            return _verdict(False, again, echo, note=note)
        for which in range(1, 2 + len(FURTHER_CHECK_SIZES.get(name, ()))):
            second = make_args(second=which)
            problem = _second_problem(fn, second, stages_of(**second)["out"])
            if problem:
                message = _at_second_sizes(name, fn, problem, which)
                return _verdict(False, message, echo, note=note)
        message = f"✓ Correct: equal to the reference within atol {ATOL:.0e}, {_two_sizes(name)}."
        dtype = _float64_note(fn, args)
        return _verdict(True, f"{message}\n  {dtype}" if dtype else message, echo)
    reordered = _reordered_parameters(fn, args, expected)
    if reordered:
        return _verdict(False, reordered, echo, note=note)
    if out is None and trace.result is None:
        message = (
            "✗ Your function returned None: is its last line a `return`? It should return "
            f"{EXERCISE_OUT.get(name, ('the result',))[0]}, of shape {tuple(expected.shape)}."
        )
        return _verdict(False, message, echo, note=note)
    if out is not None and not isinstance(trace.result, torch.Tensor):
        note = "\n  ".join(n for n in (_returned_note(trace.result, (), False), note) if n)
    plain_note, note = note, "\n  ".join(n for n in (note, _side_effect_note(trace)) if n)
    findings = []
    if out is not None:
        stages_of_args = functools.partial(stages_of, **args)
        second = make_args(second=True)
        swapped = (
            _swap_check(fn, second, lambda a: stages_of(**a)["out"])
            if "num_heads" in second
            else None
        )
        findings = _safe_explain(
            [(_records(trace, out, extra), stages_of_args)], candidates, fn, swapped
        )
        problem = _numeric_problem(trace.records, out, expected)
        if problem and out.shape == expected.shape and not _explains(findings, out, stages_of_args):
            return _verdict(False, problem, echo, note=note)
    explained = findings and all(f.mistake for f in findings)
    if out is None and _is_numpy(trace.result):
        what = EXERCISE_OUT.get(name, ("the result",))[0]
        message = _numpy_message(
            trace.result, expected, f"{what}, of shape {tuple(expected.shape)}"
        )
        return _verdict(False, message, echo, note=note)
    if out is None or (out.shape != expected.shape and not explained):
        message = _shape_message(out, expected, trace, name)
        if out is not None and _permuted(out, expected) is None:  # where the shape first goes wrong
            message += _shape_reading(trace, out, stages_of(**args), args)
        return _verdict(False, message, echo, note=note)
    if _changed_in_place(trace) and not (len(findings) == 1 and findings[0].mistake):
        return _verdict(False, _changed_in_place(trace), echo, note=plain_note)
    words, hints = EXERCISE_OUT.get(name), _EXERCISE_HINTS.get(name)
    message = (
        _message(findings, words, hints, _EXERCISE_WORDS.get(name))
        if findings
        else _fallback(out, expected)
    )
    return _verdict(False, message, echo, findings, note)
