"""The wrong objects each check must reject: one small function per mistake a reader would worry
about, which builds the wrong object and calls the check on it. The check must print ✗ (raise
AssertionError; an exercise check returns a Diagnosis with ok=False).

`@wrong("check_shape", "…")` declares one for a check wherever it is called; `sites.py` declares
those that belong to one call in one notebook. `outcome()` runs one. They are declared in three
modules, imported at the end of this one: `wrong_checks` (helpers/checks.py's checks),
`wrong_claims` (the claims behind the longer ✓ lines), `wrong_exercises` (the counts, and the
exercises' checks).
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Wrong:
    check: str  # the check's name, e.g. "check_close"
    label: str  # the wrong object, in a teacher's words
    run: Callable[[], object]  # builds it and calls the check
    finding: str = ""  # set when the check is known to pass it (a finding, not yet fixed)


WRONG: dict[str, list[Wrong]] = {}


def wrong(check: str, label: str, finding: str = ""):
    """Declare `label` as a wrong object `check` must reject; the function calls the check."""

    def register(run: Callable[[], object]) -> Callable[[], object]:
        WRONG.setdefault(check, []).append(Wrong(check, label, run, finding))
        return run

    return register


def outcome(w: Wrong) -> str:
    """ "✗" when the check rejected the wrong object, "✓" when it passed it, else the error."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = w.run()
    except AssertionError:
        return "✗"
    except Exception as error:  # any other error is not a ✗ line
        return f"raised {type(error).__name__}: {error}"
    if getattr(result, "ok", True) is False:
        return "✗"
    return "✓"


def _own(module: nn.Module) -> nn.Module:
    """A copy to change in place: seeded_attention's modules share cached tensors."""
    return copy.deepcopy(module)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _x(B: int = 1, T: int = 5, d_model: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.randn(B, T, d_model, generator=_gen(seed))  # (B, T, d_model)


# the wrong objects, declared in this order (the ledger lists them so)
from tests.ledger import wrong_checks, wrong_claims, wrong_exercises  # noqa: E402, F401
from tests.ledger.wrong_exercises import mistaken  # noqa: E402, F401
