"""The messages: a finding's headline, Where and Hint lines (`_entry`, `_message`), and the messages
for NaN, half precision and an output of the wrong shape."""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from helpers.checker.again import _written_numbers
from helpers.checker.compare import ATOL, Finding, _forms, _Run, _same
from helpers.checker.explain import _explain
from helpers.checker.locate import _made_at_records, _only_layout_calls
from helpers.checker.mistakes import KINDS, STAGE_WORDS, WRONG_NUM_HEADS, describe
from helpers.checker.run import _globals_read
from helpers.checker.sources import (
    _argument_set_again,
    _fill_as_written,
    _mask_made_elsewhere,
    _names_made_elsewhere,
    _values_made_from_keys,
)
from helpers.checker.trace import Record, Trace

STAGE_HINTS: dict[str, str] = {
    **dict.fromkeys(
        ("q", "k", "v"),
        "look at the line that makes it: which weight does it multiply, and which way round? "
        "nn.Linear stores (out_features, in_features): the input's d_model features must "
        "meet the weight's in_features, its second dim.",
    ),
    **dict.fromkeys(
        ("q_heads", "k_heads", "v_heads"),
        "look at how this line cuts the features into heads: head i owns the d_k features "
        "i·d_k .. (i+1)·d_k of each token; all heads together are (B, h, T, d_k).",
    ),
    "scores": "look at the product and the scale on this line.",
    "masked": "look at the mask's condition and the value your masked_fill puts in.",
    "weights": "look at the softmax on this line: what goes in, and over which dim?",
    "heads": "look at what the weights multiply on this line.",
    "merged": "look at how this line puts the heads back side by side.",
    "out": "look at this line: what is left to do once the heads are merged?",
    "w_qk": "look at the product on this line: which matrices, in which order?",
    "xw": "look at the product on this line, and the order of its factors.",
    "query_index": "look at the positions this line makes: which queries have an earlier "
    "occurrence of their token?",
    "key_index": "look at the positions this line makes: which key does query t read?",
    "stripe": "look at which entries of the maps this line reads: which query, and which key "
    "for each?",
    "kv_index": "look at the heads this line makes: which K/V head should query head i read?",
}


# hints worded for an exercise: exercise -> {mistake: hint}
_EXERCISE_HINTS: dict[str, dict[str, str]] = {
    "shared_kv": {  # "stage:NAME": the hint for an unnamed difference at that stage
        **dict.fromkeys(
            ("stage:k_heads", "stage:v_heads"),
            "look at the line that makes one block per query head: query head i should read "
            "K/V head i // (h / g), and all blocks together are (B, h, T, d_k).",
        ),
    },
    "head_scores": {
        "no_scaling": "look at the line that computes x·W_QK·xᵀ: the scores should be divided "
        "by something.",
    },
    "split_heads": {
        WRONG_NUM_HEADS: "look at the number of heads on this line: use the num_heads argument, "
        "not a number or an h left over from another cell.",
    },
}


# a stage's words for an exercise, where the general ones would not be true ("cut": what a
# wrong number of heads cuts)
_EXERCISE_WORDS: dict[str, dict[str, str]] = {
    "cross_attention": {"k": "keys k = context·W^K", "v": "values v = context·W^V"},
    "split_heads": {"cut": "t is"},
    "one_head": {  # 01's one head: nothing is cut into heads
        "q_heads": "queries q = x·W^Q",
        "k_heads": "keys k = x·W^K",
        "v_heads": "values v = x·W^V",
    },
    "loop": {  # 03's loop gets each head's matrices: nothing is cut
        "q_heads": "queries of each head (x·W_i^Q)",
        "k_heads": "keys of each head (x·W_i^K)",
        "v_heads": "values of each head (x·W_i^V)",
    },
    "shared_kv": {
        "k_heads": "keys, one block per query head",
        "v_heads": "values, one block per query head",
        "scores": "scores q·kᵀ/√d_k",
    },
}


def _only_lays_out(record: Record | None) -> bool:
    """Whether `record`'s line only lays numbers out anew or joins them: its calls are such steps
    and it has no operator that computes (`return torch.cat(outs, dim=1)`)."""
    code = record.code if record is not None else ""
    return _only_layout_calls(code) and not re.search(r"[+*/@%]|-(?!\d)", code)


def _entry(
    finding: Finding,
    indent: str,
    out: tuple[str, str] | None,
    hints: dict[str, str],
    words_of: dict[str, str],
) -> tuple[str, list[str]]:
    """(the headline, the Where and Hint lines) of one finding; `out` = (words, hint) for what
    an exercise returns, if not multi-head attention's output; `hints` reword a mistake's hint
    (a key "num_heads_" stands for every number of heads, "stage:NAME" for an unnamed difference
    at that stage), `words_of` a stage's words."""
    words_of = {**STAGE_WORDS, **words_of}
    if finding.mistake:
        what, hint = describe(
            finding.mistake, words_of.get("cut", "q, k and v"), finding.only, finding.right
        )
        generic = WRONG_NUM_HEADS if finding.mistake.startswith(WRONG_NUM_HEADS) else ""
        hint = finding.hint or hints.get(finding.mistake, hints.get(generic, hint))
        if finding.headline:  # what this code does, in place of the catalogue's words
            cut = words_of.get("cut", "q, k and v")
            verb = cut if cut.endswith((" is", " are")) else f"{cut} are"
            what = finding.headline.replace("{cut}", verb)
        head = f"{finding.mistake}: {what}."
    else:
        words = words_of[finding.stage]
        hint = hints.get(f"stage:{finding.stage}", STAGE_HINTS[finding.stage])
        if finding.stage == "out" and out:
            words, hint = out
        record = finding.record
        if finding.stage == "weights" and record is not None and "softmax" not in record.op:
            words = "weights"  # not "the softmax of the scores": there is none on its line
            hint = "look at how this line turns the scores into weights: which function, over "
            hint += "which dim?"
        if _only_lays_out(record):  # a reshape, a cat: the line has no product to look at
            hint = hint.replace(
                "look at what the weights multiply on this line",
                "look at what the weights multiply, where it is made: this line multiplies "
                "nothing, it only lays out or joins the heads it is given",
            )
        if "another order" in finding.detail and finding.stage != "merged":
            hint = ("the same numbers in another order: look at which head, token or feature "
                    "each place of this line's result gets (an index, a loop's order, a "
                    "transpose).")  # fmt: skip
        if record is not None and "dropout" in record.op:  # F.dropout trains by default
            hint = (
                "this line applies dropout, which zeroes numbers at random and scales the rest "
                "up (F.dropout does, unless training=False): the check expects no dropout."
            )
        hint = finding.hint or hint
        verb = "differs" if words.startswith(("output", "W_QK", "x·W_QK")) else "differ"
        detail = finding.detail
        for name, stage_words in words_of.items():  # "yours equal the reference's {v}"
            detail = detail.replace("{" + name + "}", stage_words)
        detail = f" ({detail})" if detail else ""
        head = (
            f"your {words} {verb} from the reference's{detail}, in a way that matches no known "
            "mistake."
        )
        if finding.used_at:  # made right on its line, then used in another tensor's place
            detail = detail.replace("(yours equal", "(it equals")
            head = (
                f"the tensor your code uses as the {words} differs from the reference's{detail}, "
                "in a way that matches no known mistake."
            )
        head = finding.headline or head
    record = finding.record
    if record is not None and "masked_fill" not in record.code:  # a mask applied another way
        hint = hint.replace(
            "the value your masked_fill puts in", "the value a masked score gets on this line"
        ).replace("the condition in your masked_fill", "the condition of your mask")
    where = record.where if record else ""
    if not where:  # no line to point at: the hint must not say "this line"
        hint = hint.replace(" on this line", "").replace("this line", "the line that makes it")
    if not where and not finding.mistake:
        where = "the check cannot tell which line of your code makes it."
    lines = [f"{indent}Where: {where}"] if where else []
    if where and finding.upstream:
        *most, last = [f"line {n}: `{code}`" if code else f"line {n}" for n, code in
                       finding.upstream]  # fmt: skip
        listed = f"{'; '.join(most)} and {last} make" if most else f"{last} makes"
        lines.append(
            f"{indent}  This is where the check first sees it: it could not compare what "
            f"{listed} with the reference, so the slip may be there or on this line."
        )
        hint = hint.replace(  # 15's heads grouped in a view: it may make no such block
            "look at the line that makes one key block per query head",
            "look at how your code pairs each query head with a K/V head",
        ).replace("look at the line that", "look at the line (this one or one before it) that")
    if where and finding.used_at:
        lines.append(
            f"{indent}  It is used in that role on {finding.used_at}: the slip may be there "
            "(which tensor goes where) or on this line."
        )
        if hint.startswith("look at the line that makes"):  # that line may well be right
            hint = (
                "look at both lines: which weight this line multiplies, and which of your "
                "tensors the line that uses it takes in that place."
            )
    if where and finding.mask_line:
        lines.append(
            f"{indent}  The mask this line applies is made on {finding.mask_line}; the check "
            "does not see masks themselves, so the slip may be in that mask or on this line."
        )
    index = record is not None and not record.dtype.is_floating_point  # `arange(h) % g`
    if where and (finding.made_elsewhere or finding.upstream or index):
        hint = hint.replace(  # the K/V head each query head reads may be chosen elsewhere
            "look at the line that makes one key block per query head",
            "look at how your code pairs each query head with a K/V head",
        )
    if where and finding.source is not None and finding.source.where:
        hint = hint.replace(  # the step may be on the line it is made from
            "look at how this line ",
            f"look at how this line, or line {finding.source.lineno} that it is made from, ",
            1,
        )
        lines.append(
            f"{indent}  It is made from {finding.source.where}; this step only rearranges, "
            "stacks or averages numbers, so the check cannot tell whether the slip is on this "
            "line or in what it is given."
        )
    if where and finding.made_elsewhere:
        lines.append(f"{indent}  {_read_elsewhere(finding)}")
        hint = _look_further(finding, hint)
    return head, [*lines, f"{indent}Hint: {hint}"]


def _listed(items: list[str]) -> str:
    *most, last = items
    return f"{'; '.join(most)} and {last}" if most else last


def _read_elsewhere(finding: Finding) -> str:
    """The sentence naming the earlier lines that set what a finding's line reads, each said to
    be read by the line that really reads it (this line, the line it is made from, or a line
    between: `sel` on line 9 read by line 10, and `n` on line 8 read by line 9)."""
    readers = finding.made_via or (0,) * len(finding.made_elsewhere)
    by: dict[int, list[str]] = {}
    for text, reader in zip(finding.made_elsewhere, readers):
        by.setdefault(reader, []).append(text)
    parts = []
    if 0 in by:
        who = "It" if finding.source is None else f"It and line {finding.source.lineno}"
        verb = "reads" if finding.source is None else "read"
        parts.append(f"{who} {verb} values set on {_listed(by.pop(0))}")
    for reader, texts in by.items():
        lead = "line" if parts else "Line"
        parts.append(f"{lead} {reader} reads values set on {_listed(texts)}")
    setting = "that line sets" if len(finding.made_elsewhere) == 1 else "those lines set"
    return (
        f"{', and '.join(parts)}: the check cannot compare what {setting} with the reference's "
        "(it has no step for it), so the slip may be there or on this line."
    )


def _look_further(finding: Finding, hint: str) -> str:
    """The hint's last words: the lines of _read_elsewhere the hint does not name yet."""
    named = {n for part in re.findall(r"lines? \d+(?:(?:, | and )\d+)*", hint)
             for n in re.findall(r"\d+", part)}  # fmt: skip
    readers = finding.made_via or (0,) * len(finding.made_elsewhere)
    by: dict[int, list[str]] = {}  # the reader -> the lines it reads, in order
    for text, reader in zip(finding.made_elsewhere, readers):
        number = re.match(r"line (\d+)", text)
        if number and number.group(1) not in named:
            by.setdefault(reader, []).append(number.group(1))
    parts = []
    for reader, numbers in by.items():
        one = len(numbers) == 1
        listed = f"{', '.join(numbers[:-1])} and {numbers[-1]}"
        which = f"line {numbers[0]}" if one else f"lines {listed}"
        if reader:
            parts.append(f"{which}, which line {reader} reads")
        else:
            parts.append(f"{which}, which {'sets' if one else 'set'} values it reads")
    if not parts:
        return hint
    return f"{hint} Then look at {', and '.join(parts)}."


def _message(
    findings: list[Finding],
    out: tuple[str, str] | None = None,
    hints: dict | None = None,
    words: dict | None = None,
) -> str:
    hints, words = hints or {}, words or {}
    if len(findings) == 1:
        finding = findings[0]
        head, rest = _entry(finding, "  ", out, hints, words)
        if finding.mistake:
            what = head.split(": ", 1)[1]
            head = f"This looks like a known mistake ({finding.mistake}): {what}"
        else:
            head = head[0].upper() + head[1:]
        return "\n".join([f"✗ {head}", *rest])
    lines = [f"✗ This looks like {len(findings)} mistakes, in the order your code makes them:"]
    for i, finding in enumerate(findings, 1):
        head, rest = _entry(finding, "     ", out, hints, words)
        lines += [f"  {i}. {head}", *rest]
    return "\n".join(lines)


def _shape_reading(trace: Trace, out: torch.Tensor, stages: dict, args: dict) -> str:
    """For an output of the wrong shape: ' It equals the reference's weights (…), of that shape;
    it is made on line 13: `…`.' when its numbers are a step of the reference's (in one of the
    step's layouts); ' Its shape is that of the input x; …' when it has an input's shape; else
    where the shape first goes wrong (_shape_origin); '' if none of these is known."""
    made = trace.record_of(out)
    at = f"; it is made on {made.where}" if made is not None and made.where else ""
    for name, value in stages.items():
        if name == "out" or not isinstance(value, torch.Tensor) or not value.is_floating_point():
            continue
        if any(_same(out, form) for form in _forms(value, KINDS.get(name, "out"))):
            words = STAGE_WORDS.get(name, name)
            return (
                f" Your output holds the reference's {words}, a step on the way to the output"
                f"{at}: is that the tensor to return, or does a step after it not happen?"
            )
    inputs = [n for n, a in args.items() if isinstance(a, torch.Tensor) and a.shape == out.shape]
    if inputs and at:
        named = " or ".join(f"`{n}`" for n in inputs)
        return (
            f" Its shape is that of the input {named}{at}: which tensors does that line "
            "multiply or return?"
        )
    return _shape_origin(trace, out, stages, args)


def _shape_origin(trace: Trace, out: torch.Tensor, stages: dict, args: dict) -> str:
    """' Following your output back, …': the earliest line on the output's way whose tensor has a
    shape that no input and no step of the reference has (in any of its layouts), reached through
    tensors of such shapes only; '' if there is none or its line is unknown."""
    known = {tuple(a.shape) for a in args.values() if isinstance(a, torch.Tensor)}
    for name, value in stages.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():  # not the positions
            known |= {tuple(f.shape) for f in _forms(value, KINDS.get(name, "out"))}
            if value.dim() == 4:  # one head's slice of (B, h, T, ·): a step on the way too
                known.add((value.shape[0], *value.shape[2:]))
    records = trace.records

    def odd(record: Record) -> bool:
        return record.dtype.is_floating_point and tuple(record.tensor.shape) not in known

    made = trace.record_of(out)
    if made is None or not odd(made):
        return ""
    at = next((i for i, r in enumerate(records) if r is made), None)
    small = at is None  # a vector or a number: not among the records
    todo = [j for j in made.parents if odd(records[j])] if small else [at]
    seen, origins = set(), []
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        parents = [j for j in records[i].parents if odd(records[j])]
        todo += parents
        if not parents:
            origins.append(i)
    origin = next((records[i] for i in sorted(origins) if records[i].where), None)
    if origin is None and small and made.where:  # made from tensors of the reference's shapes
        origin = made
    if origin is None:
        return ""
    return (
        " Following your output back, the first tensor on its way with a shape that no step of "
        f"the reference has is made on {origin.where} (shape {tuple(origin.tensor.shape)}): the "
        "shape may go wrong there."
    )


_HALF = (torch.float16, torch.bfloat16)


def _numeric_problem(
    records: list[Record], out: torch.Tensor, expected: torch.Tensor, masked: bool | None = None
) -> str:
    """The message for NaN in the output, or for code that computes in half precision; ''.
    `masked`: True, the call was given the check's mask (which leaves every query a key); False,
    the function takes a mask and this call passed none; None, it takes no mask."""
    if out.isnan().any() and not expected.isnan().any():
        first = next((r for r in records if r.tensor.isnan().any()), None)
        where = f" The first NaN is made on {first.where}." if first and first.where else ""
        rows = _rows_all_minus_inf(first, records)
        infinite = "" if rows else _infinite_input(first, records)
        if infinite:
            return (
                f"✗ Your output has NaN in {int(out.isnan().sum())} of its {out.numel()} numbers."
                f"{where} {infinite}"
            )
        if rows:
            given = "the check's mask leaves every query at least one key, so " if masked else ""
            called = ""
            which = "for a mask, at its condition and at which dim is queries and which keys"
            if masked is False:  # the call without a mask: nothing should be masked at all
                called = " when called without a mask (mask=None)"
                given = "this call passes no mask, so no key should be masked: "
                which = "for a mask your code makes when it is given none, at what that mask allows"
            return (
                f"✗ Your output{called} has NaN in {int(out.isnan().sum())} of its {out.numel()} "
                f"numbers.{where} {rows} Hint: {given}look at where those −inf come from; {which}."
            )
        return (
            f"✗ Your output has NaN in {int(out.isnan().sum())} of its {out.numel()} numbers."
            f"{where} Hint: NaN comes from 0·∞, ∞ − ∞, 0/0, the square root of a negative "
            "number, or a softmax over a row that is all −inf: look at that line and at what goes "
            "into it."
        )
    half = next((r for r in records if r.dtype in _HALF), None)
    if half is not None and not _same(out, expected):
        where = f", from {half.where}" if half.where else ""
        name = str(half.dtype).removeprefix("torch.")
        return (
            f"✗ Your code computes in {name}{where}: half precision keeps about 3 significant "
            f"digits, too few to match the reference (float32) within {ATOL:.0e}. Hint: keep "
            "every tensor in float32 on that line."
        )
    return ""


def _infinite_input(first: Record | None, records: list[Record]) -> str:
    """For the op that makes the first NaN: 'Its input, made on line 12: `…`, holds +∞ in 20
    places: …' when an input it reads holds +∞ (a softmax: ∞ − ∞) or ±∞ (any other op); ''
    when none does (then the NaN comes from elsewhere: 0/0, a square root, …)."""
    if first is None:
        return ""
    softmax = "softmax" in first.op
    for j in first.parents:
        given = records[j]
        if not given.dtype.is_floating_point:
            continue
        plus = int((given.tensor == float("inf")).sum())
        both = int(given.tensor.isinf().sum())
        count = plus if softmax else both
        if not count:
            continue
        where = f", made on {given.where}," if given.where else ""
        sign = "+∞" if softmax or both == plus else "±∞"
        why = (
            "a softmax row that holds +∞ computes ∞ − ∞, which is NaN. Hint: to keep a key out, "
            "fill its score with −∞ (or a large negative number), not +∞."
            if softmax
            else "∞ − ∞, 0·∞ and ∞/∞ are NaN. Hint: look at where those ∞ come from."
        )
        return f"Its input{where} holds {sign} in {count} place{'s' if count > 1 else ''}: {why}"
    return ""


def _rows_all_minus_inf(first: Record | None, records: list[Record]) -> str:
    """For a softmax that makes the first NaN: 'Its input, made on line 7: `...`, has 6 rows
    whose every score is −inf: a softmax of such a row is 0/0.' (the rows along the softmax's
    last dim); '' when that is not why."""
    if first is None or "softmax" not in first.op or not first.parents:
        return ""
    given = records[first.parents[0]]
    empty = int((given.tensor == float("-inf")).all(dim=-1).sum()) if given.tensor.dim() else 0
    if not empty:
        return ""
    where = f", made on {given.where}," if given.where else ""
    return (
        f"Its input{where} has {empty} row{'s' if empty > 1 else ''} whose every score is −inf "
        "(every key masked): a softmax of such a row is 0/0."
    )


def _explains(findings: list[Finding], out: torch.Tensor, stages_of: Callable) -> bool:
    """Whether the named mistakes, made in the reference, give the learner's output (NaN and
    all): then the names stand even where the output has NaN."""
    named = tuple(f.mistake for f in findings)
    if not named or None in named:
        return False
    try:
        return _same(out, stages_of(mistakes=named)["out"])
    except Exception:  # noqa: BLE001 - mistakes that cannot be made together
        return False


def _safe_explain(
    runs: list[tuple[list[Record], Callable]],
    candidates,
    fn: Callable | None = None,
    swapped: Callable[[], bool] | None = None,
) -> list[Finding]:
    """_explain over (records, stages_of) pairs; odd tensors must not become a traceback. `fn`:
    the learner's function, whose integers read from outside it matter to a divisor, and whose
    written numbers to a number of heads; `swapped()`: whether it cuts d_model / num_heads heads
    at the second sizes too (see _heads_hint)."""
    outside = [name for name, _ in _globals_read(fn)] if fn is not None else []
    written = _written_numbers(fn) if fn is not None else {}
    try:
        made = [_Run(records, stages_of) for records, stages_of in runs]
        findings = _explain(made, candidates, outside, written, swapped)
        findings = _last_step_alone(findings, made)
        findings = [_values_made_from_keys(f, made, fn) for f in findings]
        findings = [_mask_made_elsewhere(f, fn, made) for f in findings]
        findings = [_fill_as_written(f) for f in findings]
        findings = [_names_made_elsewhere(f, fn, made) for f in findings]
        return [_argument_set_again(f, fn, made) for f in findings]
    except Exception:  # noqa: BLE001
        return []


def _last_step_alone(findings: list[Finding], runs: list[_Run]) -> list[Finding]:
    """W^O named as missing where it is not: the learner's heads put side by side equal the
    reference's on a line of their own, and the output made from them is not them (`merged @
    w_v.T`: another matrix in W^O's place). Then the heads side by side were not "the output",
    and what differs is the last step alone: one finding there, with the line it reads."""
    if not any(f.mistake == "w_o_missing" for f in findings):
        return findings
    run = runs[0]
    merged, final = run.reference.get("merged"), run.records[-1]
    if merged is None or _same(final.tensor, merged):
        return findings
    made = [r for r in run.records[:-1] if r.where and r.tensor.shape == merged.shape
            and _same(r.tensor, merged)]  # fmt: skip
    out = run.reference.get("out")
    if not made or out is None or final.tensor.shape != out.shape:
        return findings
    record = _made_at_records(run.records)
    if record.lineno == made[-1].lineno:  # on one line with the heads side by side: as it was
        return findings
    last = [r for r in run.records[:-1]
            if r.lineno == record.lineno and r.tensor.shape == out.shape]  # fmt: skip
    if not last or not any(run.records[j] is made[-1] for j in last[-1].parents):
        return findings  # not made from them directly: as it was
    gap = (final.tensor - out).abs()
    detail = (
        f"largest difference {gap.max().item():.3g}; the heads put back side by side that it is "
        f"made from, on {made[-1].where}, equal the reference's"
    )
    hint = (
        "look at this last step: which matrix, in which layout, should multiply the heads side "
        "by side?"
    )
    return [Finding(None, "out", record, detail=detail, hint=hint)]
