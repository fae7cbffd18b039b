"""Record every tensor a learner's function makes, with the line of their code that made it.

`trace_call(fn, args)` runs `fn(*args)` under a `torch.overrides.TorchFunctionMode`: each torch
function or tensor method the learner calls (matmul, view, softmax, masked_fill_, einsum,
F.scaled_dot_product_attention, ...) is recorded as a `Record`: a float32 copy of the tensor it
returned, taken at that moment (so an in-place op that changes the tensor later does not change
the record), the op's name, and the line of the learner's own code (the innermost frame outside
`helpers` and torch). `helpers.diagnose` then looks among these for the reference's stages.

Torch only; the trace adds well under a millisecond to the course's small exercises.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["Record", "Trace", "trace_call"]

_HELPERS = str(Path(__file__).resolve().parent)
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
        """The last record made as `tensor` itself (the same object), if any."""
        for obj, record in reversed(self._made):
            if obj is tensor:
                return record
        return None

    _made: list  # (the tensor object the op returned, its record), kept alive for `is`


@functools.lru_cache(maxsize=256)
def _is_internal(filename: str) -> bool:
    path = str(Path(filename).resolve()) if os.path.isabs(filename) else filename  # any OS
    return path.startswith((_HELPERS, _TORCH)) or filename.startswith("<frozen")


def _learner_frames(stop) -> list:
    """The frames of the learner's own code, innermost first, below trace_call."""
    frame, learner = sys._getframe(2), []
    while frame is not None and frame.f_code is not stop:
        if not _is_internal(frame.f_code.co_filename):
            learner.append(frame)
        frame = frame.f_back
    return learner


def _learner_lines(stop) -> tuple[int | None, str, tuple[int, str] | None]:
    """(line, code, caller) of the innermost frame outside helpers and torch; caller is the
    outermost such frame below trace_call (the function checked) when it is another frame."""
    learner = _learner_frames(stop)
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


# ops whose result holds the same numbers as their input, laid out another way (or a part of them)
_SAME_NUMBERS = {
    "view", "reshape", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "flatten",
    "unflatten", "t", "expand", "clone", "detach", "to", "float", "double", "chunk", "split",
    "unbind", "__getitem__", "narrow", "select", "movedim", "swapaxes", "swapdims", "view_as",
    "reshape_as", "__get__",
}  # fmt: skip


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


class _Recorder(TorchFunctionMode):
    def __init__(self, stop, watch: Sequence[torch.Tensor] = ()) -> None:
        super().__init__()
        self.stop = stop  # the code object of trace_call: frames above it are not the learner's
        self.made: list = []
        self.families: dict[int, int] = {}  # id of a tensor made here -> its family
        self.index: dict[int, int] = {}  # id of a tensor made here -> its latest record
        self.watch = {id(t) for t in watch}  # the weight matrices passed in, as given
        self.from_watch: set[int] = set(self.watch)  # tensors made from them alone
        self.products: set[int] = set()  # ... by a product of them (W^Q·W^Kᵀ)
        self.alive: list = list(watch)  # keeps the ids above unique
        self.failed: tuple[str, tuple[str, ...]] | None = None  # the op that raised, its inputs

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
        parents = self._parents(args, kwargs)  # before the op: an in-place op's input is older
        name = getattr(func, "__name__", type(func).__name__)
        inputs = _tensors(args, kwargs)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = func(*args, **(kwargs or {}))
        except Exception:
            self.failed = (name, tuple(self._kind(t) for t in inputs))
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
        family = len(self.made)  # a new family, unless the op only rearranges its input
        if name in _SAME_NUMBERS and source is not None:
            family = self.families.get(id(source), family)
        tensors = out if isinstance(out, tuple | list) else (out,)
        if name == "__setitem__" and source is not None:  # t[i] = ...: t itself, changed
            tensors = (source,)
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() >= 2:
                copy = t.detach().to(torch.float32, copy=True)
                lines = _learner_lines(self.stop)
                record = Record(copy, name, *lines, family=family, parents=parents, dtype=t.dtype)
                self.index[id(t)] = len(self.made)
                self.made.append((t, record))
                self.families[id(t)] = family
        return out


def trace_call(fn: Callable, args: Sequence, watch: Sequence[torch.Tensor] = ()) -> Trace:
    """Call fn(*args) under the recorder, with no autograd; never raises for the learner's code.
    `watch`: tensors among args (the weight matrices) whose use the trace reports if an op raises.
    A warning an op raises is shown at the learner's line."""
    recorder = _Recorder(trace_call.__code__, watch)
    returned_at: list[tuple[int, str]] = []

    def on_return(frame, event, arg) -> None:  # the line of the learner's own `return`
        if (
            event == "return"
            and frame.f_back is not None
            and frame.f_back.f_code is here
            and not _is_internal(frame.f_code.co_filename)
        ):
            code = linecache.getline(frame.f_code.co_filename, frame.f_lineno, frame.f_globals)
            returned_at.append((frame.f_lineno, code.strip()))

    here = trace_call.__code__
    previous = sys.getprofile()
    sys.setprofile(on_return)
    try:
        with torch.no_grad(), recorder:
            result, error = fn(*args), None
    except Exception as err:  # noqa: BLE001 - the learner's error, reported by the caller
        result, error = None, err
    finally:
        sys.setprofile(previous)
    at = returned_at[-1] if returned_at and error is None else None
    failed = recorder.failed if error is not None else None
    return Trace(result, error, [r for _, r in recorder.made], at, failed, recorder.made)
