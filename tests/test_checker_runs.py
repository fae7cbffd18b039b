"""Every check comes back, and a ✓ means the function had no side effect.

A never-ending loop in any exercise is stopped at the time limit with a ✗ that names the line it
was running, also when the loop catches every exception; a loop that piles up tensors is stopped
at the trace's memory bound; an interrupt (the notebook's stop button) gives one line, never a
traceback; and whatever stops the call, the trace hook, the torch function mode, autograd, the
warnings filters and torch's random numbers are as before. A right output is no ✓ when the
function changes its arguments in place, reseeds torch's random numbers, or returns another dtype.
Each time limit here is half a second: the assertions are on the messages, never on timings.
"""

import inspect
import math
import re
import sys
import warnings

import pytest
import torch

import helpers.checker.exercises as exercises_module
import helpers.checker.run as run_module
import helpers.checker.trace as trace_module
from helpers.diagnose import EXERCISES, check_exercise, diagnose

LIMIT = 0.5  # s


def line_of(fn, text: str) -> int:
    source, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(source) if text in line)


def spin(*args):
    n = 0
    while True:  # a loop that never ends
        n += 1


def swallow_everything(*args):
    n = 0
    while True:
        try:
            n += 1
            n -= 1
        except:  # noqa: E722 - the learner's bare except
            pass


def swallow_base_exception(*args):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


def continue_in_finally(x, *args):
    while True:
        try:
            x = x * 1.0
        finally:
            continue  # noqa: B012 - swallows whatever the try raised


def spin_on_one_line(*args):
    while True: pass  # noqa: E701 - one line: no line event after the first  # fmt: skip


def helper_that_spins(*args):
    def wait():
        while True:
            pass

    return wait()


def allocate(x, *args):
    kept = []
    while True:
        try:
            kept.append(x @ x.transpose(-2, -1))  # keeps every product
        except BaseException:
            pass


def _state():
    return (
        sys.gettrace(),
        sys.getprofile(),
        torch.is_grad_enabled(),
        torch._C._len_torch_function_stack(),
        warnings.filters,
        warnings.showwarning,
        torch.get_rng_state(),
    )


def assert_put_back(before):
    after = _state()
    assert after[:4] == before[:4], "a hook, the torch function mode or autograd was left set"
    assert after[4] is before[4] and after[5] is before[5], "the warnings filters were left"
    assert torch.equal(after[6], before[6]), "torch's random numbers were changed"


def stopped_at(result, fn, text: str) -> None:
    assert not result.ok
    assert result.message.startswith(
        f"✗ Your function did not finish within the check's time limit ({LIMIT:g} s)"
    ), result.message
    assert f"it was stopped while running line {line_of(fn, text)}" in result.message
    assert "Hint: does a loop there never end?" in result.message


# --- the time limit ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_loop_that_never_ends_is_stopped_in_every_exercise(name):
    before = _state()
    result = check_exercise(spin, name, echo=False, time_limit=LIMIT)
    stopped_at(result, spin, "n += 1" if "n += 1" in result.message else "while True")
    if "n += 1" in result.message:  # a line inside the loop: the loop is named too
        assert f"inside the loop on line {line_of(spin, 'while True')}: `while True:" in (
            result.message
        ), result.message
    assert_put_back(before)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_loop_on_one_line_with_no_tensor_in_it_is_stopped_too(name):
    """`while True: pass` jumps back within one line: the guard sees its instructions."""
    before = _state()
    result = check_exercise(spin_on_one_line, name, echo=False, time_limit=LIMIT)
    stopped_at(result, spin_on_one_line, "while True: pass")
    assert_put_back(before)


@pytest.mark.parametrize(
    "options", [{}, {"mask": False}, {"per_head": True}], ids=["masked", "fused", "loop"]
)
def test_a_loop_that_never_ends_is_stopped_in_diagnose(options):
    before = _state()
    result = diagnose(spin, echo=False, time_limit=LIMIT, **options)
    stopped_at(result, spin, "n += 1" if "n += 1" in result.message else "while True")
    assert_put_back(before)


@pytest.mark.parametrize(
    "fn, line",
    [
        (swallow_everything, r"`(try:|n [+-]= 1|pass|while True:)`"),
        (swallow_base_exception, r"`(pass|while True:)`"),
        (continue_in_finally, r"`(x = x \* 1\.0|continue.*|try:|while True:)`"),
    ],
)
def test_a_loop_that_catches_every_exception_is_stopped_all_the_same(fn, line):
    before = _state()
    result = check_exercise(fn, "one_head", echo=False, time_limit=LIMIT)
    assert result.message.startswith("✗ Your function did not finish"), result.message
    assert re.search(rf"while running line \d+: {line}", result.message), result.message
    assert_put_back(before)


def test_the_line_in_a_helper_of_the_learners_says_where_it_was_called():
    result = check_exercise(helper_that_spins, "split_heads", echo=False, time_limit=LIMIT)
    loop = line_of(helper_that_spins, "while True")  # the loop's two lines
    called = line_of(helper_that_spins, "return")
    where = rf"line ({loop}: `while True:`|{loop + 1}: `pass`), called from line {called}: `return"
    assert re.search(where, result.message), result.message


def test_the_message_states_the_default_limit(monkeypatch):
    monkeypatch.setattr(run_module, "TIME_LIMIT", LIMIT)
    result = check_exercise(spin, "one_head", echo=False)
    stopped_at(result, spin, "n += 1" if "n += 1" in result.message else "while True")


def test_a_right_answer_is_still_right_under_the_limits():
    def one_head(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v

    # the limits a learner's check runs under (TIME_LIMIT, TRACE_LIMIT_MB): not LIMIT, a time
    # the check itself can pass on a loaded machine (it did once beside make test's other lanes)
    assert check_exercise(one_head, "one_head", echo=False).ok


# --- the memory bound -------------------------------------------------------------------------


def test_a_loop_that_piles_up_tensors_is_stopped_at_the_memory_bound(monkeypatch):
    monkeypatch.setattr(run_module, "TRACE_LIMIT_MB", 1)
    before = _state()
    result = check_exercise(allocate, "one_head", echo=False, time_limit=30)
    line = line_of(allocate, "kept.append")
    assert result.message.startswith(
        "✗ Your function made more than 1 MB of tensors (the check keeps a copy of each): it was "
        f"stopped while running line {line}: `kept.append(x @ x.transpose(-2, -1))  # keeps"
    ), result.message
    assert_put_back(before)


def test_the_trace_stops_growing_once_the_bound_is_passed():
    x = torch.randn(2, 5, 12)
    trace = trace_module.trace_call(allocate, [x], max_bytes=2**20)
    assert trace.stopped[0] == "memory"
    kept = sum(r.tensor.nbytes for r in trace.records)
    assert kept < 2**20 and isinstance(trace.error, trace_module.Stopped)


# --- interrupts -------------------------------------------------------------------------------


def test_an_interrupt_in_the_learners_code_is_one_line_with_the_line():
    def interrupted(x, w_q, w_k, w_v):
        q = x @ w_q.T  # noqa: F841
        raise KeyboardInterrupt  # as the stop button does, here

    before = _state()
    result = check_exercise(interrupted, "one_head", echo=False)
    line = line_of(interrupted, "raise KeyboardInterrupt")
    assert result.message == (
        f"■ Check stopped by you while running line {line}: `raise KeyboardInterrupt  # as the "
        "stop button does, here`."
    )
    assert not result.ok and "\n" not in result.message
    assert_put_back(before)


def test_an_interrupt_while_the_check_compares_is_one_line(monkeypatch):
    def wrong(x, w_q, w_k, w_v):
        return (x @ w_q.T @ (x @ w_k.T).transpose(-2, -1)).softmax(-1) @ (x @ w_v.T)

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(exercises_module, "_safe_explain", interrupt)
    result = check_exercise(wrong, "one_head", echo=False)
    assert result.message == "■ Check stopped by you before it finished."


_MAYBE = """
def maybe():
    calls[0] += 1
    if calls[0] == k:
        raise KeyboardInterrupt
"""
_INJECTED = {
    "torch_function": """
def hook(self, func, types, args=(), kwargs=None):
    maybe()
    out = original(self, func, types, args, kwargs)
    maybe()
    return out
""",
    "line_hook": """
def hook(self, frame, event, arg):
    if event == "line":
        maybe()
    return original(self, frame, event, arg)
""",
    "catch_warnings": """
class hook(original):
    def __enter__(self):  # the interrupt lands before `as caught` is assigned
        maybe()
        return super().__enter__()
""",
}


def _interrupting(where: str, k: int, original) -> dict:
    """A stand-in for a hook of helpers.checker.trace that raises KeyboardInterrupt at its k-th
    call; its code reads as helpers' own, as the hook's it stands for."""
    namespace = {"calls": [0], "k": k, "original": original}
    exec(compile(_MAYBE + _INJECTED[where], trace_module.__file__, "exec"), namespace)
    return namespace


def _right_loop(x, w_q, w_k, w_v, w_o):
    """02's exercise, right, with many ops and lines: an interrupt can land in any of them."""
    outs = []
    for wq, wk, wv in zip(w_q, w_k, w_v, strict=True):
        q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
        outs.append(weights @ v)
    return torch.cat(outs, dim=-1) @ w_o.T


@pytest.mark.parametrize("k", [1, 2, 4, 7, 11, 16, 22])
@pytest.mark.parametrize("where", ["torch_function", "line_hook", "catch_warnings"])
def test_an_interrupt_from_inside_the_trace_at_any_point_is_one_line(monkeypatch, where, k):
    """The interrupt lands inside the recorder (before or after the op), in the time limit's
    hook, or in a warnings context the recorder opens (before `caught` is assigned): never an
    UnboundLocalError, never a traceback, and everything is put back."""
    owner, name = {
        "torch_function": (trace_module._Recorder, "__torch_function__"),
        "line_hook": (trace_module._Guard, "on_line"),
        "catch_warnings": (trace_module.warnings, "catch_warnings"),
    }[where]
    hook = _interrupting(where, k, getattr(owner, name))
    monkeypatch.setattr(owner, name, hook["hook"])
    before = _state()
    result = diagnose(_right_loop, echo=False, per_head=True, time_limit=5)
    monkeypatch.undo()
    assert_put_back(before)
    assert hook["calls"][0] >= k  # it was interrupted
    source, first = inspect.getsourcelines(_right_loop)
    lines = "|".join(str(first + i) for i in range(2, len(source)))  # the body, below the docstring
    assert re.fullmatch(
        rf"■ Check stopped by you while running line ({lines}): `[^`]+`"
        rf"(, inside the loop on line ({lines}): `for [^`]+`)?\.",
        result.message,
    ), result.message


# --- side effects and dtype -------------------------------------------------------------------


def test_a_change_in_place_to_an_argument_is_named_with_its_line():
    def transposed_in_place(x, w_q, w_k, w_v):
        w_q.t_()  # (d_model, d_k) now
        q, k, v = x @ w_q, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v

    result = check_exercise(transposed_in_place, "one_head", echo=False)
    line = line_of(transposed_in_place, "w_q.t_()")
    assert result.message == (
        "✗ Your output's numbers are right, but your function changes its argument w_q in place, "
        f"on line {line}: `w_q.t_()  # (d_model, d_k) now`: the caller's w_q would change too "
        "(the check passed a copy). Hint: make a new tensor instead (`x = x / 2` rather than "
        "`x /= 2`, masked_fill rather than masked_fill_)."
    )


def test_an_input_scaled_in_place_is_named_in_15s_exercise():
    def scaled_in_place(q, k, v):
        h, g, d_k = q.shape[1], k.shape[1], q.shape[-1]
        k, v = k.repeat_interleave(h // g, dim=1), v.repeat_interleave(h // g, dim=1)
        q /= math.sqrt(d_k)
        return (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v

    result = check_exercise(scaled_in_place, "shared_kv", echo=False)
    line = line_of(scaled_in_place, "q /= ")
    assert not result.ok
    assert f"changes its argument q in place, on line {line}: `q /= math.sqrt(d_k)`" in (
        result.message
    )


def test_a_mask_inverted_in_place_is_named_and_a_wrong_output_gets_a_note():
    def inverted_in_place(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        B, T, d_model = x.shape
        d_k = d_model // num_heads
        q, k, v = ((x @ w.T).view(B, T, num_heads, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        if mask is not None:
            hidden = mask.logical_not_()
            scores = scores.masked_fill(hidden.unsqueeze(1), float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d_model)
        return out @ w_o.T

    line = line_of(inverted_in_place, "logical_not_")
    result = diagnose(inverted_in_place, echo=False)
    assert not result.ok
    assert f"argument mask in place, on line {line}: `hidden = mask.logical_not_()`" in (
        result.message
    )

    def also_wrong(x, w_q, w_k, w_v):
        x /= 2
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v

    wrong = check_exercise(also_wrong, "one_head", echo=False)
    assert not wrong.ok and wrong.message.startswith("✗")
    # x changed before it is used: the check cannot tell what else differs, and says so
    assert wrong.message.startswith(
        "✗ Your output differs from the reference's, and your function changes its argument x "
        f"in place, on line {line_of(also_wrong, 'x /= 2')}: `x /= 2`."
    ), wrong.message
    assert "cannot tell which differences come from that change" in wrong.message
    assert not wrong.findings


def test_the_check_never_changes_the_tensors_it_was_given(monkeypatch):
    given = EXERCISES["one_head"][0]()
    kept = {name: t.clone() for name, t in given.items()}
    make_args, stages_of, candidates = EXERCISES["one_head"]
    fixed = {
        **EXERCISES,
        "one_head": (lambda second=False: make_args(True) if second else given, stages_of, ()),
    }
    monkeypatch.setattr(exercises_module, "EXERCISES", fixed)

    def everything_in_place(x, w_q, w_k, w_v):
        x.mul_(0)
        w_q.zero_()
        return x

    assert not check_exercise(everything_in_place, "one_head", echo=False).ok
    assert all(torch.equal(given[name], kept[name]) for name in kept)


def test_another_output_dtype_is_named_with_its_line():
    def in_float64(x, w_q, w_k, w_v):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1).double()
        return weights @ v.double()

    result = check_exercise(in_float64, "one_head", echo=False)
    line = line_of(in_float64, ".double()")
    assert result.message.startswith(
        "✗ Your output's numbers are right, but its dtype is float64 (from line "
        f"{line}: `weights = "
    ), result.message
    assert result.message.endswith(
        "where the inputs' is float32. Hint: return float32, the inputs' dtype."
    )

    def in_float16(t, num_heads):  # 0..119 are exact in float16
        B, T, d = t.shape
        return t.half().view(B, T, num_heads, d // num_heads).transpose(1, 2)

    half = check_exercise(in_float16, "split_heads", echo=False)
    assert half.message.startswith("✗ Your output's numbers are right, but its dtype is float16")


def test_a_reseed_inside_the_function_is_named_and_the_notebooks_numbers_are_kept():
    def reseeds(x, w_q, w_k, w_v):
        torch.manual_seed(0)
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v

    torch.manual_seed(1234)
    before = torch.get_rng_state()
    result = check_exercise(reseeds, "one_head", echo=False)
    assert torch.equal(torch.get_rng_state(), before)
    line = line_of(reseeds, "manual_seed")
    assert result.message == (
        "✗ Your output's numbers are right, but your function reseeds torch's random number "
        f"generator on line {line}: `torch.manual_seed(0)`: each call resets the random numbers "
        "the rest of the notebook draws (the check put them back). Hint: this function needs no "
        "random numbers; seed once, at the top of the notebook."
    )
    for reseed in ("torch.set_rng_state(torch.manual_seed(5).get_state())", "torch.random.seed()"):
        namespace = {"torch": torch, "math": math}
        exec(
            "def f(t, num_heads):\n"
            f"    {reseed}\n"
            "    B, T, d = t.shape\n"
            "    return t.view(B, T, num_heads, d // num_heads).transpose(1, 2)\n",
            namespace,
        )
        assert "reseeds torch's random number generator" in (
            check_exercise(namespace["f"], "split_heads", echo=False).message
        )


def test_random_numbers_drawn_or_put_back_are_no_reseed():
    def draws_and_puts_back(t, num_heads):
        state = torch.get_rng_state()
        torch.randn(3)
        torch.set_rng_state(state)  # the learner's stream, as it was
        with torch.random.fork_rng():
            torch.manual_seed(7)
        torch.Generator().manual_seed(0)  # a generator of its own
        B, T, d = t.shape
        return t.view(B, T, num_heads, d // num_heads).transpose(1, 2)

    def draws(t, num_heads):
        torch.rand(2)  # unused, but drawn
        B, T, d = t.shape
        return t.view(B, T, num_heads, d // num_heads).transpose(1, 2)

    torch.manual_seed(99)
    before = torch.get_rng_state()
    assert check_exercise(draws_and_puts_back, "split_heads", echo=False).ok
    assert check_exercise(draws, "split_heads", echo=False).ok
    assert torch.equal(torch.get_rng_state(), before)  # the check drew nothing of the notebook's


def nested_spin(x, w_q, w_k, w_v):
    a, total = 0, 0
    while a < 3:
        for b in range(3):
            total += b
    return total


def test_a_stop_inside_a_loop_names_the_loop_around_it():
    """The line a call is stopped on may be the loop's body (`n += 1`): the message then names
    the loop too, and every loop around it, the innermost first (an inner `for` that always ends
    may sit in the `while` that never does); on the loop's own line, or a line in no loop, it adds
    nothing."""
    from helpers.checker.run import _enclosing_loops
    from helpers.checker.trace import Place

    body, header = line_of(spin, "n += 1"), line_of(spin, "while True")
    assert _enclosing_loops(spin.__code__, Place(body, "n += 1")) == [
        f"line {header}: `while True:  # a loop that never ends`"
    ]
    assert _enclosing_loops(spin.__code__, Place(header, "while True:")) == []
    assert _enclosing_loops(spin.__code__, Place(header - 1, "n = 0")) == []
    assert _enclosing_loops(spin.__code__, Place(body, "n += 1", caller=(1, "x"))) == []
    inner, outer = line_of(nested_spin, "for b in"), line_of(nested_spin, "while a <")
    assert _enclosing_loops(nested_spin.__code__, Place(inner + 1, "total += b")) == [
        f"line {inner}: `for b in range(3):`",
        f"line {outer}: `while a < 3:`",
    ]
    # stopped on whichever line of the loops it is running, the check names the outer one
    message = check_exercise(nested_spin, "one_head", echo=False, time_limit=2).message
    assert f"line {outer}: `while a < 3:`" in message, message
