"""helpers.figures.palette: the head colours stay apart for normal, deuteranope and protanope
vision."""

from __future__ import annotations

import re

import numpy as np
import pytest

from helpers.figures.palette import (
    HEAD_COLOURS,
    L_MAX,
    L_MIN,
    delta_e,
    hex_to_rgb,
    min_distance,
    simulate_cvd,
    to_lab,
)

KINDS = (None, "deuteranopia", "protanopia")

# Measured min pairwise CIEDE2000 of HEAD_COLOURS[:h] (normal, deuteranopia, protanopia):
#   h= 2: 71.95 70.99 70.28  -> assert >= 65
#   h= 4: 24.93 23.66 23.78  -> assert >= 22
#   h= 8: 23.58 23.40 23.39  -> assert >= 22
#   h=10: 14.71 14.41 14.46  -> assert >= 13.5
#   h=12: 13.67 13.61 13.57  -> assert >= 12.5
#   h=16: 13.67 13.11 13.20  -> assert >= 12
THRESHOLDS: dict[int, float] = {2: 65.0, 4: 22.0, 8: 22.0, 10: 13.5, 12: 12.5, 16: 12.0}

TAB10 = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip

# Sharma, Wu & Dalal (2005), "The CIEDE2000 color-difference formula: implementation notes,
# supplementary test data, and mathematical observations", Color Res. Appl. 30(1), Table 1.
SHARMA_PAIRS = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),  # 1
    ((50.0, 3.1571, -77.2803), (50.0, 0.0, -82.7485), 2.8615),  # 2
    ((50.0, 2.8361, -74.0200), (50.0, 0.0, -82.7485), 3.4412),  # 3
    ((50.0, -1.3802, -84.2814), (50.0, 0.0, -82.7485), 1.0000),  # 4
    ((50.0, -1.1848, -84.8006), (50.0, 0.0, -82.7485), 1.0000),  # 5
    ((50.0, -0.9009, -85.5211), (50.0, 0.0, -82.7485), 1.0000),  # 6
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),  # 7
    ((50.0, -1.0, 2.0), (50.0, 0.0, 0.0), 2.3669),  # 8
    ((50.0, 2.4900, -0.0010), (50.0, -2.4900, 0.0009), 7.1792),  # 9
    ((50.0, 2.4900, -0.0010), (50.0, -2.4900, 0.0010), 7.1792),  # 10
    ((50.0, 2.4900, -0.0010), (50.0, -2.4900, 0.0011), 7.2195),  # 11
    ((50.0, 2.4900, -0.0010), (50.0, -2.4900, 0.0012), 7.2195),  # 12
    ((50.0, -0.0010, 2.4900), (50.0, 0.0009, -2.4900), 4.8045),  # 13
    ((50.0, -0.0010, 2.4900), (50.0, 0.0010, -2.4900), 4.8045),  # 14
    ((50.0, -0.0010, 2.4900), (50.0, 0.0011, -2.4900), 4.7461),  # 15
    ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),  # 16
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),  # 17
    ((50.0, 2.5, 0.0), (61.0, -5.0, 29.0), 22.8977),  # 18
    ((50.0, 2.5, 0.0), (56.0, -27.0, -3.0), 31.9030),  # 19
    ((50.0, 2.5, 0.0), (58.0, 24.0, 15.0), 19.4535),  # 20
    ((50.0, 2.5, 0.0), (50.0, 3.1736, 0.5854), 1.0000),  # 21
    ((50.0, 2.5, 0.0), (50.0, 3.2972, 0.0), 1.0000),  # 22
    ((50.0, 2.5, 0.0), (50.0, 1.8634, 0.5757), 1.0000),  # 23
    ((50.0, 2.5, 0.0), (50.0, 3.2592, 0.3350), 1.0000),  # 24
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),  # 25
    ((63.0109, -31.0961, -5.8663), (62.8187, -29.7946, -4.0864), 1.2630),  # 26
    ((61.2901, 3.7196, -5.3901), (61.4292, 2.2480, -4.9620), 1.8731),  # 27
    ((35.0831, -44.1164, 3.7933), (35.0232, -40.0716, 1.5901), 1.8645),  # 28
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),  # 29
    ((36.4612, 47.8580, 18.3852), (36.2715, 50.5065, 21.2231), 1.4146),  # 30
    ((90.8027, -2.0831, 1.4410), (91.1528, -1.6435, 0.0447), 1.4441),  # 31
    ((90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381),  # 32
    ((6.7747, -0.2908, -2.4247), (5.8714, -0.0985, -2.2286), 0.6377),  # 33
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),  # 34
]


def test_sixteen_unique_valid_hex() -> None:
    assert len(HEAD_COLOURS) == 16
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in HEAD_COLOURS)
    assert len({c.lower() for c in HEAD_COLOURS}) == 16


@pytest.mark.parametrize("h", sorted(THRESHOLDS))
@pytest.mark.parametrize("kind", KINDS)
def test_prefix_min_distance(h: int, kind: str | None) -> None:
    d = min_distance(HEAD_COLOURS[:h], kind)
    print(f"h={h} {kind or 'normal'}: {d:.2f}")
    assert d >= THRESHOLDS[h]


def test_tab10_fails_deuteranopia_threshold() -> None:
    # tab10 measured: normal 16.20, deuteranopia 3.33, protanopia 1.25.
    d = min_distance(TAB10, "deuteranopia")
    print(f"tab10 deuteranopia min CIEDE2000: {d:.2f}")
    assert d == pytest.approx(3.33, abs=0.01)
    assert d < THRESHOLDS[10]


@pytest.mark.parametrize("kind", ["deuteranopia", "protanopia"])
def test_simulation_keeps_grey(kind: str) -> None:
    greys = np.linspace(0.0, 1.0, 11)[:, None] * np.ones(3)
    np.testing.assert_allclose(simulate_cvd(greys, kind), greys, atol=1e-6)


def test_simulation_confuses_red_green_for_deuteranopes() -> None:
    # '#ff0000' vs leaf green '#72a000': 63.17 for normal vision, 1.64 after deuteranopia.
    rgb = hex_to_rgb(["#ff0000", "#72a000"])
    normal = float(delta_e(*to_lab(rgb)))
    deutan = float(delta_e(*to_lab(simulate_cvd(rgb, "deuteranopia"))))
    assert normal > 50
    assert deutan < 5
    assert deutan < normal / 10


def test_simulation_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError):
        simulate_cvd(np.zeros(3), "tritanopia")


def test_lightness_bounds() -> None:
    # Measured L* range of HEAD_COLOURS: 25.0 .. 72.0.
    lstar = to_lab(hex_to_rgb(HEAD_COLOURS))[:, 0]
    assert (L_MIN, L_MAX) == (25.0, 72.0)
    assert lstar.min() >= L_MIN
    assert lstar.max() <= L_MAX


def test_to_lab_reference_values() -> None:
    np.testing.assert_allclose(to_lab(np.ones(3)), [100.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(to_lab(np.zeros(3)), [0.0, 0.0, 0.0], atol=1e-9)
    # sRGB red, D65: L* 53.24, a* 80.09, b* 67.20 (standard reference values).
    np.testing.assert_allclose(to_lab(np.array([1.0, 0, 0])), [53.24, 80.09, 67.20], atol=0.01)


@pytest.mark.parametrize(("lab1", "lab2", "expected"), SHARMA_PAIRS)
def test_ciede2000_sharma(lab1: tuple, lab2: tuple, expected: float) -> None:
    assert float(delta_e(np.array(lab1), np.array(lab2))) == pytest.approx(expected, abs=1e-4)
    assert float(delta_e(np.array(lab2), np.array(lab1))) == pytest.approx(expected, abs=1e-4)


def test_ciede2000_vectorised() -> None:
    a = np.array([p[0] for p in SHARMA_PAIRS])
    b = np.array([p[1] for p in SHARMA_PAIRS])
    np.testing.assert_allclose(delta_e(a, b), [p[2] for p in SHARMA_PAIRS], atol=1e-4)
