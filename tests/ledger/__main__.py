"""`python -m tests.ledger` writes docs/claims.md for the notebooks as saved; `--check` only says
whether it is current; `--rev HEAD` reads the notebooks as committed at HEAD instead (for a
checkout where someone is mid-edit)."""

import sys

from tests.ledger.ledger import COMMAND, PAGE, entries, page, problems


def main(argv: list[str]) -> int:
    rev = argv[argv.index("--rev") + 1] if "--rev" in argv else None
    text = page(rev)
    if "--check" in argv:
        current = PAGE.exists() and PAGE.read_text(encoding="utf-8") == text
        print(f"{PAGE.name} is current" if current else f"{PAGE.name} is stale: run {COMMAND}")
        return 0 if current else 1
    PAGE.write_text(text, encoding="utf-8")
    found = problems(entries(rev=rev))
    for line in found:
        print(f"✗ {line}")
    print(f"wrote {PAGE.relative_to(PAGE.parents[1])} ({len(found)} problems)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
