"""Maths in the notebooks' markdown is rendered (MathJax, in JupyterLab and in the slideshow), in
one notation: `python -m course.authoring.maths notebooks/*.ipynb` turns a backticked formula
into $LaTeX$, and a test checks that none is left and that every formula is one MathJax can typeset.

The notation: head index down, role up, as in W_i^Q (the key's W_i^K, the output's W^O_i);
Elhage et al.'s W_QK and W_OV keep their role down, and head i's are W_{QK,i}, W_{OV,i}; d_model
is d_{\\text{model}}. A backticked span is a formula only if every name in it is maths (one letter
with an index, or one of WORDS); the code's names (w_q, a call, a keyword, a tensor shape written
as a tuple) stay code."""

from __future__ import annotations

import re
import sys

WORDS = {
    "d_k", "d_model", "head_i", "concat", "weights", "weights_i", "softmax", "exp", "var",
    "T_q", "T_k", "W_QK", "W_OV", "W_QK^i", "W_OV^i", "x_bᵀ",
}  # fmt: skip
NAME = re.compile(r"[A-Za-zσθ][A-Za-z0-9_^{}σθᵀ]*")
LETTER = re.compile(r"[A-Za-zσθ](_[A-Za-z0-9]|_\{[A-Za-z0-9]+\})?(\^[A-Za-z0-9])?(_[A-Za-z0-9])?ᵀ?")
CODE = re.compile(r"\b(True|False|None|inf|import|def)\b|//|==|\w\(|\.\w|\bw_")
# the LaTeX commands the formulas use: all typeset by MathJax 3
COMMANDS = {"text", "cdot", "times", "dots", "sum", "sqrt", "top", "sigma", "theta", "partial",
            "odot", "approx", "operatorname", "exp", "log", "infty", "|"}  # fmt: skip
SUBSTITUTIONS = [
    ("W_QK^i", r"W_{QK,i}"), ("W_OV^i", r"W_{OV,i}"), ("W_QK", r"W_{QK}"), ("W_OV", r"W_{OV}"),
    ("d_model", r"d_{\text{model}}"), ("head_i", r"\text{head}_i"),
    ("weights_i", r"\text{weights}_i"), ("concat", r"\text{concat}"),
    ("weights", r"\text{weights}"), ("softmax", r"\operatorname{softmax}"), ("exp", r"\exp"),
    ("var", r"\operatorname{var}"),
]  # fmt: skip
SYMBOLS = {"·": r" \cdot ", "×": r" \times ", "…": r" \dots ", "Σ": r"\sum", "−": "-",
           "²": "^2", "⁴": "^4", "σ": r"\sigma", "θ": r"\theta", "∂": r"\partial ",
           "⊙": r" \odot ", "‖": r"\|", "≈": r" \approx "}  # fmt: skip


def is_formula(span: str) -> bool:
    """A backticked span that is maths, not code (see the module docstring)."""
    plain = re.sub(r"\b(softmax|exp|var)\(", r"\1 ", span)
    if span.startswith("(") or CODE.search(plain):
        return False
    names = NAME.findall(span)
    if not names or not all(n in WORDS or LETTER.fullmatch(n) for n in names):
        return False
    return bool(re.search(r"[\^_√·×Σ²⁴=∂]", span)) or len(span) == 1 or span in WORDS


def to_latex(span: str) -> str:
    s = span
    for name, latex in SUBSTITUTIONS:
        s = re.sub(rf"(?<![A-Za-z\\{{]){re.escape(name)}(?![A-Za-z0-9_])", lambda _, t=latex: t, s)
    s = re.sub(r"√\(([^)]*)\)", r"\\sqrt{\1}", s)
    s = re.sub(r"√([A-Za-z0-9]+(?:_\{[^}]*\}|_[A-Za-z0-9])?)", r"\\sqrt{\1}", s)
    s = re.sub(r"\^([A-Za-z0-9])ᵀ", r"^{\1\\top}", s)  # W_i^Kᵀ: one superscript
    s = re.sub(r"([A-Za-z}])ᵀ", r"\1^\\top", s)
    s = re.sub(r"\^\(([^)]*)\)", r"^{\1}", s)  # 10000^(−2i/d_k)
    for symbol, latex in SYMBOLS.items():
        s = s.replace(symbol, latex)
    s = s.replace("..", r" \dots ")
    s = re.sub(r"(?<=\d),(?=\d{3})", "{,}", s)  # 1,024: a thousands comma, not a list's
    return re.sub(r" {2,}", " ", s).strip()


def convert(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The markdown with its backticked formulas as $LaTeX$, and what changed."""
    changed = []

    def one(match):
        span = " ".join(match.group(1).split())
        if not is_formula(span):
            return match.group(0)
        changed.append((span, to_latex(span)))
        return f"${changed[-1][1]}$"

    return re.sub(r"`([^`]+)`", one, text), changed


def formulas(text: str) -> list[str]:
    """The $…$ formulas of a markdown text."""
    return re.findall(r"\$([^$]+)\$", text)


def problems(formula: str) -> list[str]:
    """What would keep MathJax from typesetting a formula as meant (empty: nothing)."""
    found = []
    depth = 0
    for ch in formula:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        found.append("unbalanced braces")
    found += [f"unknown command \\{c}" for c in re.findall(r"\\([A-Za-z]+|\|)", formula)
              if c not in COMMANDS]  # fmt: skip
    if re.search(r"\^(\{[^}]*\}|\\?\w+)\^", formula) or re.search(r"_(\{[^}]*\}|\w)_", formula):
        found.append("a double superscript or subscript")
    if re.search(r"[·×…Σ√ᵀ²⁴−]", formula):
        found.append("a Unicode symbol MathJax would set as text")
    return found


if __name__ == "__main__":
    import nbformat

    for path in sys.argv[1:]:
        notebook = nbformat.read(path, as_version=4)
        count = 0
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                cell.source, changed = convert(cell.source)
                count += len(changed)
        nbformat.write(notebook, path)
        print(f"{path}: {count} formulas rendered")
