"""The engine: the first stage no learner tensor matches, the catalogued mistake that lets the most
stages match, then on downstream (`_explain`); a departure no mistake explains is a difference."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

import torch

from helpers.checker.compare import (
    _CUTS,
    _LATE_WORDS,
    _MADE_LATE,
    _MAX_FINDINGS,
    _MOST_NEGATIVE,
    _SCALING,
    ATOL,
    Finding,
    _comparable,
    _forms,
    _Found,
    _op,
    _ratio,
    _Run,
    _same,
    _same_in_some_form,
    _vouched,
)
from helpers.checker.departures import (
    _REWORK,
    _contradicted,
    _end_of_rework,
    _heads_hint,
    _kept_trial,
    _outside_divisor,
    _reworked,
    _right_stages,
    _scaled_elsewhere,
    _scaled_stand_in,
)
from helpers.checker.locate import (
    _blamed_input,
    _fused_call,
    _layout_source,
    _made_after_the_weights,
    _made_at,
    _made_at_records,
    _merge_start,
    _own_twin,
    _role,
    _same_line,
    _unseen_lines,
)
from helpers.checker.mistakes import DEPENDS, HOME, KINDS, WRONG_NUM_HEADS
from helpers.checker.misused import (
    _STAGE_WORDS,
    _V_DIVIDED,
    _divided_by_root_d_k,
    _dropped_method,
    _keys_made_as_queries,
    _made_right_elsewhere,
    _made_swapped,
    _returned,
    _softmax_after,
    _unread_upstream,
    _unused_mask,
    _used_in_its_place,
)
from helpers.checker.scales import _scale_hint, _scale_lines, _scale_of
from helpers.checker.sources import _position
from helpers.checker.trace import Record
from helpers.checker.unexplained import (
    _changed_in,
    _changed_input,
    _cut_first,
    _equals_other_stage,
    _first_use,
    _made_in_place,
    _misplaced,
    _missing_head,
    _own,
    _right_head_then_more,
    _right_until,
    _transposed_input,
    _wrong_pass,
)


def _departure(run: _Run) -> str:
    """The stage where the learner's values first differ: the first stage no own record vouches
    for that the learner made a tensor in place of (else the output)."""
    vouched = _vouched(_own(run.found), run.stages)
    return next(
        (n for n in run.stages if n not in vouched and _made_in_place(n, run)), "out"
    )  # fmt: skip


def _explains_departure(run: _Run, stages: dict, found: _Found) -> bool:
    """Whether a trial's stages, with the mistake made, explain the stage where the learner's
    values first differ in a run that departs: a learner's record then matches it, or a later
    one vouches for it."""
    if "out" in run.found:
        return False
    return "out" in found or run.departs in _vouched(_own(found), stages)


def _partly(kept: list) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """For a mistake made in some of q, k and v only: (those it is made in, those the learner
    made right), else ((), ())."""
    held = {
        n.removesuffix("_heads") for _, _, keep in kept for n, t in keep.items() if t is not None
    }
    if not held:
        return (), ()
    made = {n.removesuffix("_heads") for _, _, keep in kept for n, t in keep.items() if t is None}
    order = ("q", "k", "v")
    return tuple(n for n in order if n in made - held), tuple(n for n in order if n in held)


def _progress(found: _Found, stages: dict) -> int:
    """How far the learner's records follow the stages: borrowed matches do not count."""
    own = {name: i for name, i in found.items() if name not in found.borrowed}
    return len(_vouched(own, stages)) + ("out" in found)


def _where_named(name: str, before: dict, after: dict, found: _Found, records: list[Record]):
    """(stage, record) where mistake `name` is made: its HOME stage if the learner's tensors match
    it there, else the earliest stage it changes that they match (not through a borrowed record,
    and not a stage it leaves equal to an earlier one)."""
    own = {n: i for n, i in found.items() if n not in found.borrowed}
    changed = [n for n in after if n not in before or not _same(before[n], after[n])]
    home = HOME.get(name)
    if home in changed and home in found.borrowed:  # k made with w_q: the record like q's, after it
        taken = records[found[home]]
        twins = [r for r in records[found[home] + 1 :]
                 if r.tensor.shape == taken.tensor.shape and r.dtype.is_floating_point
                 and (r.lineno != taken.lineno or r.family != taken.family)  # `q, k, v = ...`
                 and _same(r.tensor, taken.tensor)]  # fmt: skip
        if twins:
            return home, twins[0]
    if name == "queries_keys_swapped" and home in own:  # q·kᵀ written right, q made with W^K
        made = _keys_made_as_queries(records, own)
        if made is not None:
            return home, made
    if home in own and home in changed:
        if home == "out" and name != "w_o_missing":  # `return out`: the line that made out
            return home, _made_at_records(records)
        return home, records[own[home]]
    if name.startswith(WRONG_NUM_HEADS) and "out" in own:  # 03: the view that cuts, not return
        family = records[own["out"]].family
        cut = [r for r in records[:-1] if r.family == family and _op(r) in _CUTS]
        if cut:
            return "out", cut[0]
    if name in _MADE_LATE:  # √d_k on v: weights·(v/√d_k) is (weights/√d_k)·v, made on v's line
        used = {parent for r in records for parent in r.parents}
        for stage in ("v_heads", "v"):
            divided = [r for i, r in enumerate(records)
                       if i in used and _divided_by_root_d_k(r.tensor, stage, before)]  # fmt: skip
            if divided:
                return stage, divided[0]
    if name in _MADE_LATE and home in changed:  # made at its home or after, not before
        changed = changed[changed.index(home) :] + changed[: changed.index(home)]
    for skip_copies in (True, False):
        for stage in changed:
            copy = any(_same(after[d], after[stage]) for d in DEPENDS.get(stage, ()) if d in after)
            if stage in own and not (skip_copies and copy):
                made = _made_at_records(records) if own[stage] == len(records) - 1 else None
                if made is not None and made.lineno != records[-1].lineno:  # `return blocks`:
                    return stage, made  # the line that made blocks
                return stage, records[own[stage]]
    return (changed[0] if changed else "out"), None


def _difference(
    mine: torch.Tensor,
    stage: str,
    value: torch.Tensor,
    heads: int = 1,
    head: int | None = None,
    op: str = "",
) -> str:
    """'largest difference 0.781, most of all in head 1' between the learner's tensor and the
    stage, in the form with the learner's shape; `head`: the head a loop's pass made mine for
    (compared with that head's, not with the nearest of all heads'); `op`: the op that made mine
    (18's weights summed or averaged over the queries are compared with the reference's sum or
    mean, not with one query's)."""
    forms = [f for f in _forms(value, KINDS[stage]) if f.shape == mine.shape]
    if KINDS[stage] == "stripe" and mine.shape != value.shape:  # one query's, or all of them
        reduce = {"sum": value.sum(-1), "mean": value.mean(-1)}.get(op)  # reduced over queries
        forms = [reduce] if reduce is not None and reduce.shape == mine.shape else []
    one_pass = False
    if head is not None and value.dim() == 4 and head < value.shape[1]:
        one_pass = value[:, head].shape == mine.shape
        forms = [value[:, head]] if one_pass else forms
    if not forms:
        return f"shape {tuple(mine.shape)}, where the reference has {tuple(value.shape)}"
    diffs = [(_comparable(mine) - _comparable(f)).abs().nan_to_num(float("inf")) for f in forms]
    diff, form = min(zip(diffs, forms), key=lambda pair: float(pair[0].max()))
    text = f"largest difference {float(diff.max()):.3g}"
    if one_pass:  # one pass of a loop over the heads: the others may differ more
        text += f" in head {head}'s pass"
    if KINDS[stage] == "stripe" and mine.shape != value.shape:
        text += f", yours and the reference's each {'summed' if op == 'sum' else 'averaged'} over "
        text += "the queries"
    ratio = _ratio(mine, form)
    if ratio is not None and stage in ("scores", "xw", "out"):
        return f"yours are the reference's × {ratio:.3g}: the same numbers at another scale"
    hidden, theirs = _comparable(mine) <= _MOST_NEGATIVE, _comparable(form) <= _MOST_NEGATIVE
    if (hidden != theirs).any():  # -inf against a number: say which entries, not 1e4
        extra, missing = int((hidden & ~theirs).sum()), int((theirs & ~hidden).sum())
        parts = [_entries(extra, "masked that the reference keeps") if extra else "",
                 _entries(missing, "kept that the reference masks") if missing else ""]  # fmt: skip
        text = ", ".join(part for part in parts if part)
        filled = _comparable(mine)[theirs & ~hidden].unique() if missing else None
        if filled is not None and filled.numel() == 1:  # one finite number where -inf belongs
            parts[1] = _entries(missing, "that the reference masks")
            parts[1] += f" hold {float(filled):g} in yours, a finite number"
            text = ", ".join(part for part in parts if part)
        diff = (hidden != theirs).float()
    elif KINDS[stage] in ("maps", "out") and _transposed_of(mine, form):
        return "yours are the reference's transposed: rows and columns swapped"
    elif _reordered(mine, form):
        order = ": the same numbers as the reference's, in another order"
        if KINDS[stage] == "out":
            where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
            return f"{text}, at index {where}{order}"
        return f"{text}{order}"
    if KINDS[stage] == "out":
        where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
        return f"{text}, at index {where}"
    if diff.dim() == 4 and mine.shape == value.shape and value.shape[1] > 1:
        return f"{text}, {_which_heads(diff.amax(dim=(0, 2, 3)))}"
    if KINDS[stage] == "tokens" and heads > 1 and mine.shape == value.shape:  # (B, T, h·d_k)
        return f"{text}, {_which_heads(diff.unflatten(-1, (heads, -1)).amax(dim=(0, 1, 3)))}"
    return text


def _weights_used(run: _Run) -> Record | None:
    """The weights the learner's heads' outputs are made from: the input of the weights' shape
    to the tensor in the heads' place, or None."""
    if "heads" not in run.stages or "weights" not in run.stages:
        return None
    i = _role("heads", run.stages, run.found, run.records)
    shape = tuple(run.stages["weights"].shape)
    parents = [run.records[j] for j in run.records[i].parents] if i is not None else []
    return next((r for r in parents if tuple(r.tensor.shape) == shape), None)


def _pass(record: Record, run: _Run) -> int | None:
    """Which pass of a loop over the heads made record (the i-th record of its line, op and
    shape, when the line makes one per head), or None."""
    heads = run.stages["q_heads"].shape[1] if "q_heads" in run.stages else 1
    key = (record.lineno, record.op, tuple(record.tensor.shape))
    siblings = [r for r in run.records if (r.lineno, r.op, tuple(r.tensor.shape)) == key]
    if heads < 2 or len(siblings) != heads:
        return None
    return next((i for i, r in enumerate(siblings) if r is record), None)


def _transposed_of(mine: torch.Tensor, form: torch.Tensor) -> bool:
    """Whether mine is form with its last two dims swapped (and form is not symmetric)."""
    if form.dim() < 2 or form.shape[-1] != form.shape[-2] or mine.shape != form.shape:
        return False
    return _same(mine, form.transpose(-2, -1)) and not _same(mine, form)


def _reordered(mine: torch.Tensor, form: torch.Tensor) -> bool:
    """Whether mine holds form's numbers, in another order."""
    a, b = _comparable(mine).flatten().sort().values, _comparable(form).flatten().sort().values
    return bool(a.isfinite().all()) and torch.allclose(a, b, atol=ATOL, rtol=0)


def _alike(values: torch.Tensor) -> bool:
    return float(values.max() - values.min()) <= ATOL


def _entries(n: int, how: str) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'} {how}"


def _which_heads(per_head: torch.Tensor) -> str:
    """'only in heads 1, 2' when some heads are right; 'in every head alike', or 'in every head,
    most of all in head 1', when none is."""
    wrong = [i for i, d in enumerate(per_head.tolist()) if d > ATOL]
    if len(per_head) > 1 and len(wrong) == len(per_head) and _alike(per_head):
        return "in every head alike"
    if 0 < len(wrong) < len(per_head):
        return f"only in head{'s' if len(wrong) > 1 else ''} {', '.join(map(str, wrong))}"
    if len(per_head) > 1 and len(wrong) == len(per_head):
        return f"in every head, most of all in head {int(per_head.argmax())}"
    return f"most of all in head {int(per_head.argmax())}"


def _explain(
    runs: list[_Run],
    candidates: Iterable[str],
    outside: Iterable[str] = (),
    written: Mapping = MappingProxyType({}),
    swapped: Callable[[], bool] | None = None,
) -> list[Finding]:
    """Every departure of the learner's records from the reference, in the order the code makes
    them (see the module doc). A mistake must help in every run (without and with a mask): a
    mask's -inf can make wrong numbers equal elsewhere."""
    made: list[str] = []
    findings: list[Finding] = []
    stages_at: list[list[dict]] = []  # each finding's runs' stages when it was made
    while len(findings) < _MAX_FINDINGS:
        pending = [run for run in runs if "out" not in run.found]
        if not pending:
            break
        scored, current = [], sum(_progress(run.found, run.stages) for run in runs)
        for run in runs:  # what the learner's code makes right, and where it first departs
            run.right, run.departs = _right_stages(run), _departure(run)
        for name in candidates:
            if name in made:
                continue
            try:
                kept = [_kept_trial(run, (*made, name)) for run in runs]
            except (RuntimeError, ValueError, IndexError):  # cannot happen with these shapes
                continue
            if None in kept:  # it would change a stage the learner's code makes right
                continue
            if name == "keys_values_swapped" and not _made_swapped(runs, kept):
                continue  # made in one of the two only, or k and v made right and used swapped
            trials = [(stages, found) for stages, found, _ in kept]
            if not any(_explains_departure(run, *t) for run, t in zip(runs, trials)):
                continue  # it explains no stage where the learner's values first differ
            if any(_reworked(run, *t) for run, t in zip(runs, trials)):
                continue  # the learner did more to that tensor: the mistake does not explain it
            if _contradicted(name, runs):
                continue
            if name in _SCALING and any(_scaled_elsewhere(run, *t) for run, t in zip(runs, trials)):
                continue  # the learner scales q, k or W_QK: "the scores are divided by" is not it
            score = sum(_progress(found, stages) for stages, found in trials)
            if score > current:
                scored.append((score, name, kept))
        if scored:  # the mistake that explains most; of equals, the one made earliest in the code
            top = max(score for score, _, _ in scored)
            options = []
            for _, name, kept in (option for option in scored if option[0] == top):
                places = [
                    _where_named(name, run.stages, stages, found, run.records)
                    for run, (stages, found, _) in zip(runs, kept)
                ]
                stage, record = next((p for p in places if p[1] is not None), places[-1])
                options.append((_position(record, runs), name, stage, record, kept))
            position, name, stage, record, kept = min(options, key=lambda o: o[0])
            trials = [(stages, found) for stages, found, _ in kept]
            only, right = _partly(kept)
            earlier = {HOME.get(m, "").removesuffix("_heads") for m in made}  # q from the context,
            right = tuple(n for n in right if n not in earlier)  # found first: not "made right"
            hint = ""
            unused = _unused_mask(runs) if name == "mask_ignored" else None
            if unused is not None:  # the mask is there, but its result is thrown away
                record, position = unused, _position(unused, runs)
                fn = "masked_fill" if _op(unused) == "masked_fill" else "torch.where"
                hint = (
                    f"{fn} returns a new tensor and leaves its input as it was: this line "
                    "throws the result away, so the scores that go on from here are still "
                    "unmasked."
                )
                if unused.op == "masked_fill_":  # in place: the tensor it masks is never read
                    after = _softmax_after(unused, runs)
                    reads = (f"the softmax on line {after.lineno} reads another tensor"
                             if after is not None and after.lineno else "what follows reads "
                             "another tensor")  # fmt: skip
                    hint = (
                        "masked_fill_ masks its tensor in place, but nothing after this line "
                        f"reads that tensor: {reads}, the scores without the mask."
                    )
            stages_at.append([run.stages for run in runs])
            made.append(name)
            for run, (stages, found, keep) in zip(runs, kept):
                run.stages, run.found = stages, found
                run.given.update({n: t for n, t in keep.items() if t is not None})  # made right
            if name == "keys_values_swapped" and record is not None:  # v made on its own line?
                v = runs[0].found.get("v")
                v_line = runs[0].records[v].lineno if v is not None else None
                if v_line and v_line != record.lineno:
                    hint = (
                        f"look at this line and line {v_line}, where v is made: which of the "
                        "weights does each one multiply?"
                    )
            if (
                name == "queries_keys_swapped"
                and record is not None
                and "scores" in (found := runs[0].found)
                and record is _keys_made_as_queries(runs[0].records, _own(found))
            ):
                hint = (
                    "look at which weight makes q and which makes k: your q equals the "
                    "reference's keys and your k its queries, so your q·kᵀ is the reference's "
                    "k·qᵀ."
                )
            made_right = _made_right_elsewhere(name, stage, record, runs[0], stages_at[-1][0])
            if made_right is not None:  # k = x·W^Kᵀ right, then q·qᵀ: not "k made with w_q"
                headline, hint = _used_in_its_place(name, made_right)
            upstream = _unseen_lines(name, stage, record, runs)
            finding = Finding(name, stage, record, position=position, hint=hint, only=only)
            if made_right is not None:
                finding = dataclasses.replace(finding, headline=headline)
            if name in _MADE_LATE and record is not None and stage.removesuffix("_heads") == "v":
                finding = dataclasses.replace(
                    finding,
                    headline=_V_DIVIDED,
                    hint="the division by √d_k belongs to the scores, before the softmax: "
                    "this line makes v as x·W^Vᵀ, and nothing more.",
                )
            elif name in _MADE_LATE and record is not None and stage not in ("scores", HOME[name]):
                finding = dataclasses.replace(finding, headline=_LATE_WORDS[name])
            if (
                record is not None
                and stage.removesuffix("_heads") in ("q", "k", "v")
                and finding.headline != _V_DIVIDED  # made wrong on its line, not used wrong
            ):
                used_at = next(filter(None, (_first_use(record, stage, run) for run in runs)), "")
                finding = dataclasses.replace(finding, used_at=used_at)  # k, v made, then swapped
            findings.append(dataclasses.replace(finding, right=right, upstream=upstream))
            continue
        # a departure no known mistake explains: report it once (from the first run that shows
        # it) and go on from the learner's own tensor in every run that departs there
        first = pending[0]
        if first.borrowed:  # this call goes on from a departure first seen in another call:
            break  # what differs next may be that same slip showing again, or another: unknown
        special = [_missing_head(run) or _misplaced(run) or _wrong_pass(run) for run in pending]
        if special[0]:
            stage, target, record, detail, hint = special[0]
            stages_at.append([run.stages for run in runs])
            finding = Finding(None, stage, record, detail, _position(record, runs), hint)
            if "yours equal the reference's" in detail:  # made right, used in another's place?
                finding = dataclasses.replace(finding, used_at=_first_use(record, stage, first))
            findings.append(finding)
            if stage == target and all(
                s and s[1] == target and s[2].tensor.shape == run.stages[target].shape
                for run, s in zip(pending, special)
            ):  # a right tensor in the wrong place: go on from it
                for run, s in zip(pending, special):
                    run.given[target] = s[2].tensor
                    run.stages, run.found = run.trial(tuple(made))
                    run.borrowed |= run is not first
                continue
            break
        unvouched = [n for n in first.stages if n not in _vouched(first.found, first.stages)]
        stage = next((n for n in unvouched if _made_in_place(n, first)), "out")
        scaled = _scaled_stand_in(first)  # W_QK made at another scale, then scaled again
        if scaled is not None:
            stage = scaled
        departs, changed = stage, None if scaled else _changed_input(stage, first)
        if (
            changed
            and first.records[changed[1]].family == first.records[first.found[changed[0]]].family
            and _same_line(changed[1], departs, first)
        ):  # `weights.mT @ v`: the right weights, rearranged on the line of the next step
            changed = None
        stage = changed[0] if changed else stage
        if stage != "out" and _same_in_some_form(first.stages["out"], stage, first.stages[stage]):
            stage = "out"  # one head and no W^O: what it makes is the output itself
        target = _cut_first(stage, first)  # the stage whose tensor the learner made instead
        followed = []
        for run in pending:
            i = _changed_in(target, departs, run) if changed and target == stage else None
            i = _role(target, run.stages, run.found, run.records) if i is None else i
            followed.append((run, run.records[i] if i is not None else None))
        used = _weights_used(first) if target == "masked" else None
        if (
            used is not None
            and _made_after_the_weights(target, followed[0][1], first)
            and not _same_in_some_form(used.tensor, "weights", first.stages["weights"])
        ):  # no masked scores of the learner's, but the weights it uses differ: say so there
            stage = target = "weights"
            followed = [(run, _weights_used(run)) for run in pending]
        elif target != "out" and (
            _made_after_the_weights(target, followed[0][1], first)
            or (not first.found and _returned(followed[0][1], first))  # no step followed:
            or _unread_upstream(followed[0][1], target, first)  # q, then numpy: not the heads
        ):  # the output itself, not a tensor on its way to it
            stage = target = "out"  # no tensor of the learner's stands for that stage: say what
            followed = [  # differs where it shows, the output
                (run, run.records[i] if (i := _role("out", run.stages, run.found, run.records))
                 is not None else None)
                for run in pending
            ]  # fmt: skip
        record = followed[0][1]
        if record is not None:  # k made with w_v: not v's own line, but the line like it
            record = _own_twin(record, target, first)
            if target == "weights":  # a softmax by hand: e = exp(s), then e / e.sum(...)
                record = _end_of_rework(record, first)
            followed[0] = (followed[0][0], record)
        if record is not None and _same_in_some_form(record.tensor, target, first.stages[target]):
            break  # the learner's tensor there is right: the departure is not one to name
        if any(f.stage == stage and f.record is record for f in findings):
            break  # said already
        heads = first.stages["q_heads"].shape[1] if "q_heads" in first.stages else 1
        detail = (
            _difference(
                record.tensor,
                target,
                first.stages[target],
                heads,
                _pass(record, first),
                _op(record),
            )  # fmt: skip
            if record
            else ""
        )
        scale = _scale_of(record.tensor, target, first.stages[target]) if record else None
        if scale is not None and (_op(record) in _REWORK or target == "w_qk"):
            detail = f"yours are the reference's × {scale:.3g}: the same numbers at another scale"
        alias = _equals_other_stage(record, target, first) if record else ""
        detail = f"{detail}; {alias}" if detail and alias else detail or alias
        if detail and record is not None and ".numpy(" in record.code:  # the torch part only
            detail = (  # the op may come before the numpy part or after it (from_numpy(...).view)
                "this line goes through numpy, which the check cannot follow; it compares what "
                f"`{_op(record)}` returns on this line: {detail}"
            )
        if detail and first.given:  # compared with the steps that follow from the learner's own
            own = " and ".join("{" + name + "}" for name in first.given)  # earlier tensor
            detail += f", measured from your own {own} on, not from the reference's"
        elif detail and made:  # the stages here are the reference's with those mistakes made
            names = " and ".join(made)
            detail += f", measured against the reference with {names} made in it"
        hint = _right_until(first) if stage == "out" else ""
        if stage in ("q", "k", "v") and record is not None and _transposed_input(record, first):
            hint = "look at the line that makes it: which input and which weight does it use?"
        if target in ("scores", "masked") and "masked that the reference keeps" in detail:
            if "masked" not in first.stages:
                hint = (
                    "this line hides scores with a mask the check did not ask for: this call "
                    "passes no mask, so every score should stay."
                )
            elif "kept that the reference masks" not in detail and "only in head" not in detail:
                hint = (
                    "look at the mask on this line: it hides scores that the check's mask keeps "
                    "(True = may attend)."
                )
        if target in ("scores", "masked") and "masked" in first.stages and "only in head" in detail:
            if "the reference keeps" in detail or "the reference masks" in detail:
                hint = (
                    "look at how the mask reaches each head: the check's mask is the same for "
                    "every head, but your code masks some heads differently from others (as a mask "
                    "given to some heads only, or tiled over the heads in another order, would)."
                )
        if scale is not None and target not in ("scores", "masked", "weights", "out"):
            hint = _scale_hint(record, first)
        if target == "out" and not hint and "at another scale" in detail:
            hint = (
                "the same numbers at another scale: look at what the result is multiplied or "
                "divided by on its way (a sum where a mean belongs, or another divisor)."
            )
            here = {record.lineno, _made_at(first).lineno} if record is not None else set()
            others = [n for n in _scale_lines(first) if n not in here]
            if others:  # `xw = x @ w_qk / √d_k`, then the scores divided again
                listed = " and ".join(", ".join(map(str, others)).rsplit(", ", 1))
                hint += f" Your code scales on line{'s' if len(others) > 1 else ''} {listed} too."
        if "reference's transposed" in detail:
            hint = (
                "look at the order of the product and the transposes on this line: row a of the "
                "scores holds query a's scores."
            )
        head = _right_head_then_more(record, target, first) if record is not None else None
        if head is not None:  # `a @ v @ w_o[blk, blk].T`: weights·v right, then multiplied again
            detail = ""
            hint = (
                "each head's output is its weights·v alone: look at what this line does after "
                "weights·v (W^O comes once, after the heads are put side by side)."
            )
        headline = ""
        if head is not None:
            headline = (
                "the tensor your code puts side by side as each head's output is not weights·v "
                f"alone: on this line, weights·v is head {head}'s output, right, and the line then "
                "multiplies it again."
            )
        if record is not None and "scaled_dot_product_attention" in record.op:
            headline, hint = _fused_call(record, target, first, hint)
        method = _dropped_method(record, first) if record is not None else None
        if method is not None:  # `scores.exp()` alone: its result kept by nothing
            detail = ""
            headline = (
                f"{_STAGE_WORDS.get(target, 'your tensors')} are made without what this line "
                f"computes: `{method}` returns a new tensor, and nothing keeps it."
            )
            hint = (
                f"`.{method}()` leaves the tensor it is called on as it was: assign its result "
                "(name = …) and use it on the lines after."
            )
        shown = _merge_start(record, first) if target == "merged" and record else record
        shown = _made_at(first) if target == "out" and record is not None else shown
        stages_at.append([run.stages for run in runs])
        findings.append(Finding(None, stage, shown, detail, _position(shown, runs), hint, headline))
        if any(r is None or r.tensor.shape != run.stages[target].shape for run, r in followed):
            break  # the learner's tensor is laid out another way: stop here
        for run, r in followed:
            run.given[target] = r.tensor
            run.stages, run.found = run.trial(tuple(made))
            run.borrowed |= run is not first  # going on from a departure another call showed
    findings = [_blamed_input(f, runs, at) for f, at in zip(findings, stages_at)]
    findings = [_layout_source(f, runs) for f in findings]
    findings = [_outside_divisor(f, runs[0], outside) or f for f in findings]
    named = [f.mistake for f in findings]
    findings = [_heads_hint(f, runs[0], outside, written, swapped) for f in findings]
    cut = next((f for f in findings if f.headline.startswith("{cut} cut into")), None)
    if cut is not None:  # a cut into another number of heads: what follows it is not known
        findings = [cut]
    unnamed = next((f for f, was in zip(findings, named) if was and not f.mistake), None)
    if unnamed is not None:  # a number of heads that its cut does not show: what followed from
        findings = [unnamed]  # that number is not known either
    return sorted(findings, key=lambda f: f.position)
