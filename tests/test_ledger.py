"""The claims ledger (tests/ledger): every committed ✓ line is traced to the check that printed it,
that check rejects at least one plausible wrong object, and docs/claims.md is current. Reads the
notebooks' committed outputs and sources; runs no notebook."""

import json

import pytest

from tests.ledger.ledger import COMMAND, PAGE, entries, page, problems
from tests.ledger.trace import printers, trace, trace_all
from tests.ledger.wrong import WRONG, outcome


@pytest.fixture(scope="module")
def ledger():
    return entries()


def test_every_committed_tick_is_traced_and_can_fail(ledger):
    found = problems(ledger)
    assert not found, "\n".join(found)


def test_claims_page_is_current():
    assert PAGE.exists() and PAGE.read_text(encoding="utf-8") == page(), (
        f"{PAGE.name} is not current: run `{COMMAND}` (make notebooks runs it too)"
    )


@pytest.mark.parametrize(
    "w",
    [w for ws in WRONG.values() for w in ws],
    ids=lambda w: f"{w.check}: {w.label}",
)
def test_each_declared_wrong_object_is_rejected(w):
    if w.check not in printers():
        pytest.skip(f"helpers has no {w.check} in this checkout")
    assert outcome(w) == ("✓" if w.finding else "✗"), w.finding or "the check passed it"


def _notebook(tmp_path, source: str, printed: str):
    cell = {"cell_type": "code", "source": source, "metadata": {}, "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": printed}]}  # fmt: skip
    path = tmp_path / "99_made_up.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4}))
    return path


def test_a_tick_printed_by_hand_is_caught(tmp_path):
    ticks = trace(_notebook(tmp_path, 'print("✓ all good")', "✓ all good\n"))
    found = problems(entries(ticks))
    assert any("prints this ✓ itself" in line for line in found), found


def test_a_tick_no_code_can_print_is_untraced(tmp_path):
    ticks = trace(_notebook(tmp_path, "x = 1", "✓ out: (2, 3) = (B, T)\n"))
    assert ticks[0].site is None
    assert any("no check or print" in line for line in problems(entries(ticks)))


def test_each_tick_goes_to_its_own_call(tmp_path):
    source = (
        'check_close(a, b, "out: fused = per-head")\n'
        "for i in range(2):\n"
        '    check_close(a[i], b[i], f"map of head {i}: fused = per-head")\n'
    )
    printed = (
        "✓ out: fused = per-head: equal within atol 1e-05\n"
        "✓ map of head 0: fused = per-head: equal within atol 1e-05\n"
        "✓ map of head 1: fused = per-head: equal within atol 1e-05\n"
    )
    ticks = trace(_notebook(tmp_path, source, printed))
    assert [t.site.line for t in ticks] == [1, 3, 3]
    assert all(t.site.check == "check_close" for t in ticks)


def test_a_call_with_echo_false_prints_nothing(tmp_path):
    source = 'check_shape(x, (2, 3), "x", echo=False)'
    ticks = trace(_notebook(tmp_path, source, "✓ x: (2, 3)\n"))
    assert ticks[0].site is None


def test_every_notebook_has_ticks_traced():
    assert len({t.notebook for t in trace_all()}) >= 19
