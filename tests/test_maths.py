"""The notebooks' maths is rendered, in one notation (course/authoring/maths.py): no backticked
formula is left, and every $…$ formula is one MathJax typesets as meant."""

from pathlib import Path

import nbformat
import pytest

from course.authoring.maths import convert, formulas, is_formula, problems, to_latex

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_formula_is_rendered_and_typesets(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    for cell in cells:
        _, left = convert(cell.source)
        how = f"run `python -m course.authoring.maths {path}`"
        assert left == [], f"backticked formulas: {left}; {how}"
        for formula in formulas(cell.source):
            assert problems(formula) == [], formula


def test_the_course_uses_maths_in_its_markdown():
    count = sum(
        len(formulas(c.source))
        for p in NOTEBOOKS
        for c in nbformat.read(p, as_version=4).cells
        if c.cell_type == "markdown"
    )
    assert count > 300


@pytest.mark.parametrize(
    "span, latex",
    [
        ("W_i^Q", "W_i^Q"),
        ("d_k = d_model / h", r"d_k = d_{\text{model}} / h"),
        ("softmax(q kᵀ / √d_k) v", r"\operatorname{softmax}(q k^\top / \sqrt{d_k}) v"),
        ("W_QK^i = W_i^Q W_i^Kᵀ", r"W_{QK,i} = W_i^Q W_i^{K\top}"),
        ("θ_i = 10000^(−2i/d_k)", r"\theta_i = 10000^{-2i/d_k}"),
        ("d_model² = 1,024", r"d_{\text{model}}^2 = 1{,}024"),
    ],
)
def test_formulas_become_latex_in_the_course_notation(span, latex):
    assert is_formula(span) and to_latex(span) == latex and problems(latex) == []


@pytest.mark.parametrize(
    "span", ["w_q", "x @ w.T", "(B, h, T, d_k)", "need_weights=True", "Linear(d_model, d_k)",
             "split_heads", "n = T // 2"],
)  # fmt: skip
def test_code_stays_code(span):
    assert not is_formula(span)


@pytest.mark.parametrize(
    "formula, problem",
    [
        (r"W_i^K^\top", "a double superscript or subscript"),
        (r"\sqrt{d_k", "unbalanced braces"),
        (r"\softmax(x)", r"unknown command \softmax"),
        ("q · k", "a Unicode symbol MathJax would set as text"),
    ],
)
def test_the_check_names_what_would_not_typeset(formula, problem):
    assert problem in problems(formula)
