"""What every claim check shares: the ✗ it raises, and `check_refused` (bad input refused
with a clear message)."""

from __future__ import annotations


def _fail(claim: str, why: str) -> AssertionError:
    return AssertionError(f"✗ {claim}: {why}")


def check_refused(call, text: str, error: type[Exception] = ValueError) -> None:
    """`call(text)` refuses bad input with `error` and a message (printed after ✓); ✗ when it
    accepts the text, or fails some other way."""
    try:
        call(text)
    except error as err:
        print(f"✓ refused: {err}")
        return
    except Exception as err:  # noqa: BLE001 - any other failure is the ✗ to report
        raise _fail(f"refused {text[:20]!r}", f"raised {type(err).__name__}: {err}") from err
    raise _fail(f"refused {text[:20]!r}", f"accepted it: no {error.__name__} was raised")
