"""helpers.checks: the ✓ lines learners read, and failures that say what went wrong."""

import pytest
import torch

from helpers.checks import check_attention_rows, check_close, check_shape


def test_check_shape_prints_the_named_dims(capsys):
    check_shape(torch.zeros(2, 6, 8), (2, 6, 8), "q", dims="B T d_k")
    check_shape(torch.zeros(3, 4), (None, 4), "w")
    assert capsys.readouterr().out == "✓ q: (2, 6, 8) = (B, T, d_k)\n✓ w: (3, 4)\n"


@pytest.mark.parametrize(
    "got, expected, fragments",
    [
        ((2, 8, 6), (2, 6, 8), ["dim 1 (T) is 8, not 6.", "a step that reorders dims is missing"]),
        (
            (6, 8),
            (2, 6, 8),
            ["expected (2, 6, 8) = (B, T, d_k), got (6, 8).", "without its first dim"],
        ),
        ((2, 6, 2, 4), (2, 6, 8), ["some dims still need splitting or merging"]),
        ((2, 6, 16), (2, 6, 8), ["dim 2 (d_k) is 16, not 8.", "matrix or view that produced"]),
        ((2, 3, 16), (2, 6, 8), ["cut differently"]),
    ],
)
def test_check_shape_fails_with_what_and_a_hint(got, expected, fragments):
    with pytest.raises(AssertionError) as err:
        check_shape(torch.zeros(got), expected, "q", dims="B T d_k")
    for fragment in fragments:
        assert fragment in str(err.value)


def test_check_shape_wants_one_name_per_dim():
    with pytest.raises(ValueError, match="give one name per dim"):
        check_shape(torch.zeros(2, 3), (2, 3), "x", dims="B T d_model")


def test_check_close_passes_within_atol(capsys):
    a = torch.ones(3, dtype=torch.float64)
    check_close(a, a + 3e-12, "out")
    check_close(a, a.clone(), "same")
    check_close(a.float(), a.float() + 2e-6, "f32")
    assert capsys.readouterr().out.splitlines() == [
        "✓ out: equal within atol 1e-10",
        "✓ same: equal within atol 1e-10",
        "✓ f32: equal within atol 1e-05",
    ]


def test_check_close_fails_on_values_shapes_and_nan():
    a = torch.zeros(2, 3)
    b = a.clone()
    b[1, 2] = 0.5
    with pytest.raises(AssertionError) as err:
        check_close(a, b, "out")
    assert "max |difference| = 0.5 at index (1, 2), more than atol 1e-05" in str(err.value)
    assert "1 of 6 entries differ" in str(err.value)
    with pytest.raises(AssertionError, match=r"the shapes differ, \(2, 3\) and \(3, 2\)"):
        check_close(a, a.T, "out")
    with pytest.raises(AssertionError, match="the second tensor contains NaN at 1 places"):
        check_close(a, torch.tensor([[0.0, 0, 0], [0, 0, float("nan")]]), "out")
    with pytest.raises(AssertionError):
        check_close(a, a + 2e-5, "out")  # just over the float32 default


def test_check_attention_rows_accepts_softmax_rows(capsys):
    weights = torch.randn(2, 4, 5, 5).softmax(-1)
    check_attention_rows(weights)
    assert capsys.readouterr().out == (
        "✓ weights: all 40 rows of (2, 4, 5, 5) sum to 1 within 1e-05, entries in [0, 1]\n"
    )


def test_check_attention_rows_with_a_mask_and_an_empty_row(capsys):
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    mask[0] = False
    weights = torch.randn(3, 3).masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)
    check_attention_rows(weights, "w", mask=mask)
    assert "2 of 3 rows" in capsys.readouterr().out
    leaky = torch.full((3, 3), 1 / 3)
    with pytest.raises(AssertionError, match="some weight goes to a key the mask forbids"):
        check_attention_rows(leaky, "w", mask=mask)


def test_check_attention_rows_names_the_wrong_softmax_dim():
    wrong = torch.randn(4, 4).softmax(dim=0)  # columns sum to 1
    with pytest.raises(AssertionError, match="the softmax ran over the queries"):
        check_attention_rows(wrong)
    with pytest.raises(AssertionError, match="outside \\[0, 1\\]"):
        check_attention_rows(torch.randn(4, 4))
    with pytest.raises(AssertionError, match="entries are NaN"):
        check_attention_rows(torch.full((2, 2), float("nan")))


def test_checks_return_their_line_instead_of_printing_for_widgets(capsys):
    line = check_shape(torch.zeros(7), (7,), "row", dims="T", echo=False)
    assert line == "✓ row: (7,) = (T)"
    assert (
        check_close(torch.ones(2), torch.ones(2), "a", echo=False) == "✓ a: equal within atol 1e-05"
    )
    assert check_attention_rows(torch.ones(1, 1), echo=False).startswith(
        "✓ weights: the row of (1, 1) sums to 1"
    )  # one row: singular
    assert capsys.readouterr().out == ""
