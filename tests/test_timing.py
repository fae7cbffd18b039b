"""helpers.timing: candidates run interleaved, after a warm-up, and get one median each."""

from helpers.timing import interleaved_medians


def test_candidates_run_interleaved_after_warmup():
    calls = []
    medians = interleaved_medians(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3, warmup=2
    )
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert set(medians) == {"a", "b"} and all(m >= 0 for m in medians.values())
