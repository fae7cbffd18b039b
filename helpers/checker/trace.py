"""Record every tensor a learner's function makes, with the line of their code that made it.

`trace_call(fn, args)` runs `fn(*args)` under a `torch.overrides.TorchFunctionMode`: each torch
function or tensor method the learner calls (matmul, view, softmax, masked_fill_, einsum,
F.scaled_dot_product_attention, ...) is recorded as a `Record`: a float32 copy of the tensor it
returned, taken at that moment (so an in-place op that changes the tensor later does not change
the record), the op's name, and the line of the learner's own code (the innermost frame outside
`helpers` and torch). `helpers.diagnose` then looks among these for the reference's stages.

Every call comes back: past a deadline, or once the copies pass a number of bytes, `Stopped` is
raised into the learner's code from a `sys.settrace` hook on their own lines (any OS, and a pure
Python `while True: pass` too), again on their next line if a bare `except:` swallows it; an
interrupt ends the call the same way. Either way `Trace.stopped` says why and on which line, and
the hooks, the mode, autograd, the warnings filters and torch's random state are put back.

Torch only; the trace adds well under a millisecond to the course's small exercises.
"""

from __future__ import annotations

import collections
import functools
import linecache
import os
import sys
import sysconfig
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["Place", "Record", "Stopped", "Trace", "trace_call"]

_HELPERS = str(Path(__file__).resolve().parents[1])  # helpers/, this file in helpers/checker/
_TORCH = str(Path(torch.__file__).resolve().parent)


@dataclass(frozen=True)
class Record:
    """One tensor the learner's code made: its value then, the op, and the learner's line."""

    tensor: torch.Tensor  # float32 copy, detached
    op: str
    lineno: int | None
    code: str  # the source of that line, stripped ("" if unknown)
    caller: tuple[int, str] | None = None  # the line in the function checked, if lineno is in
    # another function of the learner's (a helper they wrote), else None
    family: int = -1  # records that are views or copies of one another share a family
    parents: tuple[int, ...] = ()  # the records whose tensors this op took as inputs
    dtype: torch.dtype = torch.float32  # the dtype the learner's tensor had (the copy is float32)

    @property
    def where(self) -> str:
        """'line 7: `scores = q @ k.transpose(-2, -1)`', or '' when the line is unknown; with
        ', called from line 9: `...`' when the line is in a helper of the learner's."""
        if self.lineno is None:
            return ""
        text = _line(self.lineno, self.code)
        return f"{text}, called from {_line(*self.caller)}" if self.caller else text


def _line(lineno: int, code: str) -> str:
    return f"line {lineno}: `{code}`" if code else f"line {lineno}"


@dataclass(frozen=True)
class Place:
    """A line of the learner's code, as in Record: its number, its source, and the line of the
    function checked that called it when it is in a helper of theirs."""

    lineno: int | None
    code: str = ""
    caller: tuple[int, str] | None = None

    @property
    def where(self) -> str:
        """'line 7: `while True:`' (', called from line 9: `...`'), or '' when unknown."""
        if self.lineno is None:
            return ""
        text = _line(self.lineno, self.code)
        return f"{text}, called from {_line(*self.caller)}" if self.caller else text


@dataclass
class Trace:
    """What one call did: its result (or the exception it raised) and the records, in order."""

    result: object
    error: BaseException | None
    records: list[Record]
    returned_at: tuple[int, str] | None  # the learner's `return` line: (line, code)
    failed: tuple[str, tuple[str, ...]] | None  # the op that raised and what went in: for each
    # tensor, "weight" (a watched matrix as given), "weight product" (a product of them), "other"

    def record_of(self, tensor: torch.Tensor) -> Record | None:
        """The last record made as `tensor` itself (the same object), if any; for a vector or a
        number, where it was made (one of the last few such, not among `records`)."""
        for obj, record in (*reversed(self._made), *reversed(self.small)):
            if obj is tensor:
                return record
        return None

    _made: list  # (the tensor object the op returned, its record), kept alive for `is`
    stopped: tuple[str, Place] | None = None  # why the call did not finish ("time", "memory",
    # "interrupt": KeyboardInterrupt, the notebook's stop button) and the line it was running
    changed: dict[str, tuple[str, Place]] = field(default_factory=dict)  # an input's name -> the
    # first in-place op on it (its storage) and the line
    read_after_change: frozenset = frozenset()  # the names in `changed` an op read afterwards
    failed_shapes: tuple = ()  # the shapes of the tensors that went into the op that raised
    reseeded: Place | None = None  # where the code reset torch's default random generator
    lines_run: frozenset = frozenset()  # (file, line) of each of the learner's lines that ran
    small: Sequence = ()  # (tensor, record) of the last float vectors and numbers made (a mean
    # per head returned), for record_of: where an output too small to be among the records is made


@functools.lru_cache(maxsize=256)
def _is_internal(filename: str) -> bool:
    path = str(Path(filename).resolve()) if os.path.isabs(filename) else filename  # any OS
    return path.startswith((_HELPERS, _TORCH)) or filename.startswith("<frozen")


_LIBRARIES = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


@functools.lru_cache(maxsize=1024)
def _is_learners(filename: str) -> bool:
    """Whether a code object's file is the learner's: not helpers', torch's, Python's own or a
    library's (the time limit traces only these frames' lines)."""
    if _is_internal(filename) or filename.startswith("<frozen"):
        return False
    path = str(Path(filename).resolve()) if os.path.isabs(filename) else filename
    return not path.startswith(_LIBRARIES)


def _learner_frames(stop, frame=None) -> list:
    """The frames of the learner's own code, innermost first, below trace_call (from `frame`, or
    from the caller's caller)."""
    frame, learner = frame or sys._getframe(2), []
    while frame is not None and frame.f_code is not stop:
        if not _is_internal(frame.f_code.co_filename):
            learner.append(frame)
        frame = frame.f_back
    return learner


def _learner_lines(stop, frame=None) -> tuple[int | None, str, tuple[int, str] | None]:
    """(line, code, caller) of the innermost frame outside helpers and torch; caller is the
    outermost such frame below trace_call (the function checked) when it is another frame."""
    learner = _learner_frames(stop, frame or sys._getframe(1))
    if not learner:
        return None, "", None
    inner, outer = learner[0], learner[-1]
    lines = [
        (f.f_lineno, linecache.getline(f.f_code.co_filename, f.f_lineno, f.f_globals).strip())
        for f in (inner, outer)
    ]
    # a helper the learner wrote sits between: say where it was called from (a comprehension's
    # own frame does not count: its line is the one to show)
    helper = any(not f.f_code.co_name.startswith("<") for f in learner[:-1])
    return *lines[0], (lines[1] if helper else None)


_SMALL_KEPT = 16  # the vectors and numbers kept for record_of: the last few made

# ops whose result holds the same numbers as their input, laid out another way (or a part of them)
_SAME_NUMBERS = {
    "view", "reshape", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "flatten",
    "unflatten", "t", "expand", "clone", "detach", "to", "float", "double", "chunk", "split",
    "unbind", "__getitem__", "narrow", "select", "movedim", "swapaxes", "swapdims", "view_as",
    "reshape_as", "__get__",
}  # fmt: skip


def _is_index(t: torch.Tensor) -> bool:
    """An integer tensor of positions or heads (torch.arange(n, 2 * n), idx % g): recorded too,
    so a slip in it is found on the line that made it (its record says its dtype)."""
    return t.dtype in _INDEX_DTYPES and t.dim() >= 1 and t.numel() <= 4096


_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)

_PRODUCTS = {"matmul", "mm", "bmm", "einsum", "__matmul__", "__rmatmul__", "tensordot"}


def _tensors(args, kwargs) -> list[torch.Tensor]:
    found = []
    for a in (*args, *(kwargs or {}).values()):
        found += [t for t in (a if isinstance(a, tuple | list) else (a,))
                  if isinstance(t, torch.Tensor)]  # fmt: skip
    return found


def _rewarn(caught, frames) -> None:
    """Show the warnings an op raised at the learner's line (torch's own stack level would point
    into this file), through the usual filters."""
    for w in caught:
        if not frames:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
            continue
        frame = frames[0]
        registry = frame.f_globals.setdefault("__warningregistry__", {})
        warnings.warn_explicit(
            w.message, w.category, frame.f_code.co_filename, frame.f_lineno,
            module=frame.f_globals.get("__name__"), registry=registry,
            module_globals=frame.f_globals,
        )  # fmt: skip


def _traceback_lines(tb, stop) -> tuple[int | None, str, tuple[int, str] | None]:
    """As _learner_lines, for where an exception was raised (the learner's line when it came)."""
    entries = []  # outermost first
    while tb is not None:
        entries.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    learner = [(f, n) for f, n in entries if f.f_code is not stop
               and not _is_internal(f.f_code.co_filename)]  # fmt: skip
    if not learner:
        return None, "", None
    lines = [
        (n, linecache.getline(f.f_code.co_filename, n, f.f_globals).strip())
        for f, n in (learner[-1], learner[0])
    ]
    helper = any(not f.f_code.co_name.startswith("<") for f, _ in learner[1:])
    return *lines[0], (lines[1] if helper else None)


class Stopped(BaseException):
    """Raised into the learner's code to stop the call (its time or the trace's memory is up). A
    BaseException, so an `except Exception:` in their loop lets it through; a bare `except:` that
    swallows it gets it again on their next line."""

    def __init__(self, guard: _Guard | None = None) -> None:
        super().__init__("stopped by the check")
        self.guard = guard

    def __del__(self) -> None:
        # swallowed: raising from a trace hook turned tracing off, so turn it back on
        guard = self.guard
        if guard is not None and guard.running and guard.stopped is not None:
            guard.rearm(sys._getframe(1))


class _Guard:
    """The time limit: a trace hook on the learner's own frames (line events only: torch's and
    helpers' frames get none) that raises Stopped on their first line past the deadline."""

    def __init__(self, stop, deadline: float | None) -> None:
        self.stop = stop  # trace_call's code: the frames above it are not the call's
        self.deadline = deadline  # a time.monotonic() value, or None
        self.stopped: tuple[str, Place] | None = None  # set once: why, and the line
        self.running = True  # False once trace_call has put everything back
        self.lines_run: set[tuple[str, int]] = set()

    def on_call(self, frame, event, arg):  # the global hook: a frame starts
        filename = frame.f_code.co_filename
        if not _is_learners(filename):
            return None
        back = frame.f_back  # code made by exec ("<string>": a dataclass's __init__) is the
        # learner's only when the learner's code calls it
        if filename.startswith("<") and back is not None and back.f_code is not self.stop:
            if back.f_trace != self.on_line:
                return None
        # an event per instruction too: `while True: pass` on one line makes no line events
        frame.f_trace_opcodes = True
        return self.on_line

    def on_line(self, frame, event, arg):  # the learner's frame's hook
        if event == "line":
            self.lines_run.add((frame.f_code.co_filename, frame.f_lineno))
        if (
            event in ("line", "opcode")
            and frame.f_lineno is not None
            and (
                self.stopped is not None
                or (self.deadline is not None and time.monotonic() > self.deadline)
            )
        ):
            self.halt("time", frame)
        return self.on_line

    def halt(self, reason: str, frame) -> None:
        """Raise Stopped; the first stop says why and where (`frame`: the learner's, or one of
        helpers' or torch's above it)."""
        if self.stopped is None:
            self.stopped = (reason, Place(*_learner_lines(self.stop, frame)))
        raise Stopped(self)

    def rearm(self, frame) -> None:
        """Trace the learner's frames from `frame` up to trace_call again (tracing was turned off
        when the hook raised), if `frame` runs inside this call."""
        frames = []
        while frame is not None and frame.f_code is not self.stop:
            frames.append(frame)
            frame = frame.f_back
        if frame is None:
            return
        for f in frames:
            if _is_learners(f.f_code.co_filename):
                f.f_trace, f.f_trace_opcodes = self.on_line, True
        sys.settrace(self.on_call)


# in-place ops that a name ending in "_" does not show (x[i] = ..., x += ...)
_IN_PLACE = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
             "__imod__", "__ipow__", "__imatmul__", "__iand__", "__ior__", "__ixor__"}  # fmt: skip


def _changes(name: str, source, kwargs) -> torch.Tensor | None:
    """The tensor an op changes in place (its `out=`, or its first argument), if any."""
    out = (kwargs or {}).get("out")
    if isinstance(out, torch.Tensor):
        return out
    in_place = (name.endswith("_") and not name.startswith("_")) or name in _IN_PLACE
    return source if in_place else None


class _Recorder(TorchFunctionMode):
    def __init__(
        self,
        stop,
        watch: Sequence[torch.Tensor] = (),
        guard: _Guard | None = None,
        max_bytes: int | None = None,
        inputs: dict[str, torch.Tensor] | None = None,
        min_dim: int = 2,
    ) -> None:
        super().__init__()
        self.min_dim = min_dim  # float tensors of fewer dims are kept apart (`small`), not recorded
        self.guard = guard  # the time limit, and who raises Stopped
        self.max_bytes = max_bytes  # the copies (and the tensors they keep alive), at most
        self.bytes = 0
        self.inputs = {t.untyped_storage().data_ptr(): name for name, t in (inputs or {}).items()
                       if isinstance(t, torch.Tensor) and t.numel()}  # fmt: skip
        self.changed: dict[str, tuple[str, Place]] = {}  # an input's name -> first in-place op
        self.read_after: set[str] = set()  # the changed inputs an op read after the change
        self.stop = stop  # the code object of trace_call: frames above it are not the learner's
        self.made: list = []
        self.small: collections.deque = collections.deque(maxlen=_SMALL_KEPT)
        self.families: dict[int, int] = {}  # id of a tensor made here -> its family
        self.index: dict[int, int] = {}  # id of a tensor made here -> its latest record
        self.watch = {id(t) for t in watch}  # the weight matrices passed in, as given
        self.from_watch: set[int] = set(self.watch)  # tensors made from them alone
        self.products: set[int] = set()  # ... by a product of them (W^Q·W^Kᵀ)
        self.alive: list = list(watch)  # keeps the ids above unique
        self.failed: tuple[str, tuple[str, ...]] | None = None  # the op that raised, its inputs
        self.failed_shapes: tuple[tuple[int, ...], ...] = ()  # and their shapes

    def _kind(self, t: torch.Tensor) -> str:
        if id(t) in self.watch:
            return "weight"
        return "weight product" if id(t) in self.products else "other"

    def _parents(self, args, kwargs) -> tuple[int, ...]:
        found = []
        for a in (*args, *(kwargs or {}).values()):
            for t in a if isinstance(a, tuple | list) else (a,):
                if isinstance(t, torch.Tensor) and id(t) in self.index:
                    found.append(self.index[id(t)])
        return tuple(found)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        guard = self.guard
        if guard is not None and (
            guard.stopped is not None
            or (guard.deadline is not None and time.monotonic() > guard.deadline)
        ):  # also when the learner's lines are not traced (a debugger's hook took the place)
            guard.rearm(sys._getframe(1))
            guard.halt("time", sys._getframe(1))
        parents = self._parents(args, kwargs)  # before the op: an in-place op's input is older
        name = getattr(func, "__name__", type(func).__name__)
        inputs = _tensors(args, kwargs)
        if self.changed:  # an op that reads a changed input (or a view of it) after the change
            for t in inputs:
                who = self.inputs.get(t.untyped_storage().data_ptr()) if t.numel() else None
                if who in self.changed:
                    self.read_after.add(who)
        caught: list = []  # read in `finally`, also when an interrupt lands before the `with`
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = func(*args, **(kwargs or {}))
        except Exception:
            self.failed = (name, tuple(self._kind(t) for t in inputs))
            self.failed_shapes = tuple(tuple(t.shape) for t in inputs)
            raise
        finally:
            if caught:
                _rewarn(caught, _learner_frames(self.stop))
        if inputs and all(id(t) in self.from_watch for t in inputs):
            made = [t for t in (out if isinstance(out, tuple | list) else (out,))
                    if isinstance(t, torch.Tensor)]  # fmt: skip
            self.alive += made
            self.from_watch |= {id(t) for t in made}
            if name in _PRODUCTS or any(id(t) in self.products for t in inputs):
                self.products |= {id(t) for t in made}
        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        changed = _changes(name, source, kwargs) if self.inputs else None
        if changed is not None and changed.numel():
            who = self.inputs.get(changed.untyped_storage().data_ptr())
            if who is not None and who not in self.changed:
                self.changed[who] = (name, Place(*_learner_lines(self.stop)))
        family = len(self.made)  # a new family, unless the op only rearranges its input
        if name in _SAME_NUMBERS and source is not None:
            family = self.families.get(id(source), family)
        tensors = out if isinstance(out, tuple | list) else (out,)
        if name == "__setitem__" and source is not None:  # t[i] = ...: t itself, changed
            tensors = (source,)
        for t in tensors:
            if isinstance(t, torch.Tensor) and (
                (t.is_floating_point() and t.dim() >= self.min_dim) or _is_index(t)
            ):
                copy = t.detach().to(torch.float32, copy=True)
                lines = _learner_lines(self.stop)
                record = Record(copy, name, *lines, family=family, parents=parents, dtype=t.dtype)
                self.index[id(t)] = len(self.made)
                self.made.append((t, record))
                self.families[id(t)] = family
                self.bytes += copy.nbytes + t.numel() * t.element_size()
            elif isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() <= 4096:
                copy = t.detach().to(torch.float32, copy=True)  # a vector or a number: kept
                lines = _learner_lines(self.stop)  # apart, the last few only (a loop of sums
                self.small.append((t, Record(copy, name, *lines, family=family, parents=parents,
                                             dtype=t.dtype)))  # costs nothing)  # fmt: skip
        if self.max_bytes is not None and self.bytes > self.max_bytes and guard is not None:
            guard.halt("memory", sys._getframe(1))
        return out


_RESEEDS = ("manual_seed", "seed", "set_state")  # what resets a torch.Generator
_SEED = 0x5EED_2A7E  # the generator's seed during a call (the learner's state is put back after)


def _reseeds(frame, arg) -> bool:
    """Whether a call into C resets torch's default random generator (torch.manual_seed,
    torch.set_rng_state, torch.random.seed, ...), other than fork_rng putting it back."""
    if getattr(arg, "__self__", None) is not torch.default_generator:
        return False
    if arg.__name__ not in _RESEEDS:
        return False
    while frame is not None and not _is_learners(frame.f_code.co_filename):
        if frame.f_code.co_name == "fork_rng":
            return False
        frame = frame.f_back
    return True


def _warning_state() -> tuple:
    return warnings.filters, warnings.showwarning, getattr(warnings, "_showwarnmsg_impl", None)


def _put_back_warnings(saved: tuple) -> None:
    """Undo a catch_warnings whose exit an interrupt skipped (its filters and its recording)."""
    if _warning_state() == saved:
        return
    warnings.filters, warnings.showwarning = saved[0], saved[1]
    if saved[2] is not None:
        warnings._showwarnmsg_impl = saved[2]
    getattr(warnings, "_filters_mutated", lambda: None)()


def trace_call(
    fn: Callable,
    args: Sequence,
    watch: Sequence[torch.Tensor] = (),
    *,
    deadline: float | None = None,
    max_bytes: int | None = None,
    inputs: dict[str, torch.Tensor] | None = None,
    min_dim: int = 2,
) -> Trace:
    """Call fn(*args) under the recorder, with no autograd; never raises for the learner's code.
    `watch`: tensors among args (the weight matrices) whose use the trace reports if an op raises.
    A warning an op raises is shown at the learner's line.

    `deadline` (a time.monotonic() value) and `max_bytes` (the copies' bytes) stop the call, and
    an interrupt ends it: `Trace.stopped` says why and the learner's line then. `inputs`: tensors
    among args, by name, whose in-place changes are noted in `Trace.changed`. Torch's default
    random generator is as before the call afterwards; `Trace.reseeded` says where the code reset
    it."""
    here = trace_call.__code__
    guard = _Guard(here, deadline)
    recorder = _Recorder(here, watch, guard, max_bytes, inputs, min_dim)
    returned_at: list[tuple[int, str]] = []
    reseeded: list[Place] = []

    def on_event(frame, event, arg) -> None:  # the profile hook: returns, and calls into C
        if event == "return":  # the line of the learner's own `return`
            if (
                frame.f_back is not None
                and frame.f_back.f_code is here
                and not _is_internal(frame.f_code.co_filename)
            ):
                line = frame.f_lineno or 0  # None: an instruction with no line of its own
                code = linecache.getline(frame.f_code.co_filename, line, frame.f_globals)
                returned_at.append((line, code.strip()))
        elif event == "c_call" and not reseeded and _reseeds(frame, arg):
            reseeded.append(Place(*_learner_lines(here, frame)))

    saved_trace, saved_profile, saved_warnings = sys.gettrace(), sys.getprofile(), _warning_state()
    grad, depth = torch.is_grad_enabled(), torch._C._len_torch_function_stack()
    rng, end = torch.default_generator.get_state(), None
    result = error = interrupted = None
    try:
        start = torch.default_generator.manual_seed(_SEED).get_state()  # a reseed shows below
        torch._C._set_grad_enabled(False)
        recorder.__enter__()
        sys.setprofile(on_event)
        sys.settrace(guard.on_call)
        result = fn(*args)
    except BaseException as err:  # noqa: BLE001 - the learner's error, a stop or an interrupt
        error = err
    finally:
        while True:  # put everything back, even when an interrupt lands here: each step redoes
            try:
                guard.running = False
                sys.settrace(saved_trace)
                sys.setprofile(saved_profile)
                while torch._C._len_torch_function_stack() > depth:
                    torch._C._pop_torch_function_stack()
                torch._C._set_grad_enabled(grad)
                if end is None:
                    end = torch.default_generator.get_state()
                torch.default_generator.set_state(rng)  # the learner's random numbers, as they were
                _put_back_warnings(saved_warnings)
                break
            except KeyboardInterrupt as err:
                interrupted = err
    if interrupted is not None or isinstance(error, KeyboardInterrupt):
        error = error if isinstance(error, KeyboardInterrupt) else interrupted
        stopped = ("interrupt", Place(*_traceback_lines(error.__traceback__, here)))
    else:
        stopped = guard.stopped
    at = returned_at[-1] if returned_at and error is None else None
    failed = recorder.failed if error is not None else None
    records = [r for _, r in recorder.made]
    # a reseed that left the generator as the call found it (a state saved and put back) is none
    place = reseeded[0] if reseeded and not torch.equal(end, start) else None
    return Trace(
        result, error, records, at, failed, recorder.made, stopped, recorder.changed,
        reseeded=place, lines_run=frozenset(guard.lines_run),
        failed_shapes=recorder.failed_shapes if error is not None else (),
        read_after_change=frozenset(recorder.read_after), small=tuple(recorder.small),
    )  # fmt: skip
