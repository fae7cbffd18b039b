"""What the checker's tests share: the line a learner function marks, and a message's phrases."""

import inspect


def marked(fn, mark: str = "# <-") -> int:
    """The file line of the first line of `fn` holding `mark` (the line a message must name)."""
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, line in enumerate(lines) if mark in line)


def says(message: str, *texts: str) -> None:
    """Assert that the message holds each text, showing the whole message when one is missing."""
    for text in texts:
        assert text in message, f"{text!r} missing from:\n{message}"
