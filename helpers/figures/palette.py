"""Colour-vision-deficiency-aware palette for attention heads.

All numerics use numpy only. Colours are sRGB hex strings; distances are CIEDE2000 in CIELAB
(D65). Colour-vision deficiency is simulated with Machado, Oliveira & Fernandes (2009).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Lightness limits (CIELAB L*) every head colour satisfies.
# L_MAX = 72: contrast with white >= 2.16:1 (WCAG formula); this is about as light as the
#   lightest matplotlib tab10 colours (tab:cyan L* 70.5, tab:olive 74.3), which are routinely
#   used for lines on white. Lighter colours wash out as thin lines and text. (WCAG's 3:1
#   non-text contrast would need L* <= 61.7 and 4.5:1 text contrast L* <= 50; the palette does
#   not meet those for every colour.)
# L_MIN = 25: contrast with white >= 11:1, but below ~25 the sRGB gamut has little chroma left
#   and colours merge with black text, axes and each other (contrast with black < 1.9:1).
L_MIN: float = 25.0
L_MAX: float = 72.0

# Found by tests/palette_search.py (seed 0, stages 8 then 16): the first 8 are the best
# 8-colour set found, then 8 more maximising the 16-colour score; each stage is in greedy
# max-min order, so every prefix is well separated. Score = min over {normal, deuteranopia,
# protanopia} of min pairwise CIEDE2000: first 8 -> 23.4, first 12 -> 13.6, all 16 -> 13.1
# (see tests/test_palette.py).
HEAD_COLOURS: tuple[str, ...] = (
    "#a902ff", "#e9a300", "#5e2d2a", "#796f79",
    "#9e5b00", "#5d216a", "#bbaea3", "#bda7dc",
    "#1f9667", "#564552", "#ff2b56", "#9e94a0",
    "#867aaa", "#1000cb", "#b87aff", "#812b00",
)  # fmt: skip

# Machado, G. M., Oliveira, M. M. & Fernandes, L. A. F. (2009). "A Physiologically-based Model
# for Simulation of Color Vision Deficiency". IEEE Trans. Visualization and Computer Graphics
# 15(6), 1291-1298. Table of simulation matrices, severity 1.0. They act on LINEAR RGB.
MACHADO_DEUTERANOPIA: np.ndarray = np.array(
    [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ]
)
MACHADO_PROTANOPIA: np.ndarray = np.array(
    [
        [0.152286, 1.052583, -0.204868],
        [0.114503, 0.786281, 0.099216],
        [-0.003882, -0.048116, 1.051998],
    ]
)
_CVD_MATRICES: dict[str, np.ndarray] = {
    "deuteranopia": MACHADO_DEUTERANOPIA,
    "protanopia": MACHADO_PROTANOPIA,
}

# IEC 61966-2-1 sRGB (D65) linear RGB -> XYZ.
_SRGB_TO_XYZ: np.ndarray = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
# D65 white as the image of RGB white, so neutral greys get a* = b* = 0 exactly.
_WHITE_XYZ: np.ndarray = _SRGB_TO_XYZ.sum(axis=1)


def hex_to_rgb(colours: str | Sequence[str]) -> np.ndarray:
    """'#rrggbb' (or a sequence of them) -> sRGB floats in 0..1, shape (3,) or (n, 3)."""
    if isinstance(colours, str):
        h = colours.lstrip("#")
        return np.array([int(h[i : i + 2], 16) for i in (0, 2, 4)], dtype=float) / 255.0
    return np.array([hex_to_rgb(c) for c in colours]).reshape(-1, 3)


def rgb_to_hex(rgb: np.ndarray) -> str:
    """sRGB floats in 0..1, shape (3,) -> '#rrggbb'."""
    r, g, b = (round(float(v) * 255) for v in np.clip(rgb, 0.0, 1.0))
    return f"#{r:02x}{g:02x}{b:02x}"


def srgb_to_linear(rgb: np.ndarray) -> np.ndarray:
    """Decode the sRGB transfer function (0..1 -> linear 0..1)."""
    rgb = np.asarray(rgb, dtype=float)
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(lin: np.ndarray) -> np.ndarray:
    """Encode linear RGB 0..1 with the sRGB transfer function."""
    lin = np.asarray(lin, dtype=float)
    return np.where(
        lin <= 0.0031308, 12.92 * lin, 1.055 * np.power(np.maximum(lin, 0.0), 1 / 2.4) - 0.055
    )


def luminance(colour: str) -> float:
    """WCAG 2.2 relative luminance of '#rrggbb'."""
    return float(srgb_to_linear(hex_to_rgb(colour)) @ np.array([0.2126, 0.7152, 0.0722]))


def contrast(a: str, b: str) -> float:
    """WCAG 2.2 contrast ratio of two '#rrggbb' colours, 1..21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def on_white(colour: str, ratio: float) -> str:
    """`colour` darkened just enough to stand `ratio`:1 against white (unchanged if it does):
    linear RGB scaled down, so the chromaticity stays (the hue, roughly) and only the luminance
    drops. The view's
    `lineColour` does the same for its lines."""
    most = 1.05 / ratio - 0.05  # the largest luminance with that contrast
    L = luminance(colour)
    if L <= most:
        return colour
    darker = linear_to_srgb(srgb_to_linear(hex_to_rgb(colour)) * most / L)
    return rgb_to_hex(np.floor(darker * 255) / 255)


TEXT_CONTRAST = 4.5  # WCAG 2.2 1.4.3: text
LINE_CONTRAST = 3.1  # 1.4.11: lines and other graphics (3:1, with room for rounding)
HEAD_TEXT: tuple[str, ...] = tuple(on_white(c, TEXT_CONTRAST) for c in HEAD_COLOURS)
HEAD_LINES: tuple[str, ...] = tuple(on_white(c, LINE_CONTRAST) for c in HEAD_COLOURS)


def simulate_cvd(rgb: np.ndarray, kind: str) -> np.ndarray:
    """Simulate dichromat vision (Machado 2009, severity 1) for sRGB array (..., 3) in 0..1."""
    if kind not in _CVD_MATRICES:
        raise ValueError(f"kind must be one of {sorted(_CVD_MATRICES)}, got {kind!r}")
    lin = srgb_to_linear(rgb)
    sim = np.clip(lin @ _CVD_MATRICES[kind].T, 0.0, 1.0)
    return linear_to_srgb(sim)


def to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB (..., 3) in 0..1 -> CIELAB (..., 3), D65 white."""
    xyz = srgb_to_linear(rgb) @ _SRGB_TO_XYZ.T / _WHITE_XYZ
    eps = (6 / 29) ** 3
    f = np.where(xyz > eps, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    lab_l = 116 * f[..., 1] - 16
    lab_a = 500 * (f[..., 0] - f[..., 1])
    lab_b = 200 * (f[..., 1] - f[..., 2])
    return np.stack([lab_l, lab_a, lab_b], axis=-1)


def delta_e(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIEDE2000 colour difference (kL = kC = kH = 1) between broadcastable Lab arrays (..., 3).

    Follows Sharma, Wu & Dalal (2005), Color Res. Appl. 30(1), 21-30.
    """
    lab1 = np.asarray(lab1, dtype=float)
    lab2 = np.asarray(lab2, dtype=float)
    l1, a1, b1 = lab1[..., 0], lab1[..., 1], lab1[..., 2]
    l2, a2, b2 = lab2[..., 0], lab2[..., 1], lab2[..., 2]
    pow25_7 = 25.0**7

    c_bar = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    c_bar7 = c_bar**7
    g = 0.5 * (1 - np.sqrt(c_bar7 / (c_bar7 + pow25_7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.where(c1p == 0, 0.0, np.degrees(np.arctan2(b1, a1p)) % 360)
    h2p = np.where(c2p == 0, 0.0, np.degrees(np.arctan2(b2, a2p)) % 360)
    chroma_zero = (c1p * c2p) == 0

    d_lp = l2 - l1
    d_cp = c2p - c1p
    dh = h2p - h1p
    dh = np.where(dh > 180, dh - 360, np.where(dh < -180, dh + 360, dh))
    dh = np.where(chroma_zero, 0.0, dh)
    d_hp = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh) / 2)

    l_bar = (l1 + l2) / 2
    cp_bar = (c1p + c2p) / 2
    h_sum = h1p + h2p
    h_bar = np.where(
        np.abs(h1p - h2p) <= 180,
        h_sum / 2,
        np.where(h_sum < 360, (h_sum + 360) / 2, (h_sum - 360) / 2),
    )
    h_bar = np.where(chroma_zero, h_sum, h_bar)

    t = (
        1
        - 0.17 * np.cos(np.radians(h_bar - 30))
        + 0.24 * np.cos(np.radians(2 * h_bar))
        + 0.32 * np.cos(np.radians(3 * h_bar + 6))
        - 0.20 * np.cos(np.radians(4 * h_bar - 63))
    )
    d_theta = 30 * np.exp(-(((h_bar - 275) / 25) ** 2))
    cp_bar7 = cp_bar**7
    r_c = 2 * np.sqrt(cp_bar7 / (cp_bar7 + pow25_7))
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / np.sqrt(20 + (l_bar - 50) ** 2)
    s_c = 1 + 0.045 * cp_bar
    s_h = 1 + 0.015 * cp_bar * t
    r_t = -np.sin(np.radians(2 * d_theta)) * r_c

    tl, tc, th = d_lp / s_l, d_cp / s_c, d_hp / s_h
    return np.sqrt(tl**2 + tc**2 + th**2 + r_t * tc * th)


def min_distance(colours: Sequence[str] | np.ndarray, kind: str | None = None) -> float:
    """Minimum pairwise CIEDE2000 among colours (hex strings or sRGB (n, 3)), after simulation.

    kind=None means normal vision; otherwise "deuteranopia" or "protanopia".
    """
    rgb = (
        np.asarray(colours, dtype=float)
        if isinstance(colours, np.ndarray)
        else hex_to_rgb(list(colours))
    )
    if kind is not None:
        rgb = simulate_cvd(rgb, kind)
    lab = to_lab(rgb)
    n = len(lab)
    if n < 2:
        return float("inf")
    i, j = np.triu_indices(n, k=1)
    return float(delta_e(lab[i], lab[j]).min())
