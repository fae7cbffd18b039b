"""Figures from plain tensors and labels: what the notebooks call as `plots.…`. Knows nothing of
modules or widgets.

Every function returns a `matplotlib.figure.Figure` built without pyplot, so a widget callback
never leaves a figure behind for the notebook to show; `to_png` turns one into PNG bytes for a
`widgets.Image`. Attention weights always use one colour map on a fixed 0..1 scale. The figures
live by kind: `render` (the style, the colour map, `show`), `maps`, `weights`, `curves`.
"""

from helpers.figures.curves import copy_curves, loss_curves, parameter_counts, saturation, timings
from helpers.figures.maps import attention_map, heads_mosaic, masks_and_maps
from helpers.figures.render import (
    ATTENTION_CMAP,
    DISPLAY_HEIGHT,
    DISPLAY_WIDTH,
    MAX_DPI,
    MIN_TEXT_PX,
    SMALL,
    colormap_table,
    display_dpi,
    render,
    show,
    shown_width,
    to_png,
)
from helpers.figures.weights import block_matrix, head_cut, head_reach, qkv_layouts

__all__ = [
    "ATTENTION_CMAP",
    "DISPLAY_HEIGHT",
    "DISPLAY_WIDTH",
    "MAX_DPI",
    "MIN_TEXT_PX",
    "SMALL",
    "colormap_table",
    "display_dpi",
    "render",
    "shown_width",
    "to_png",
    "show",
    "attention_map",
    "heads_mosaic",
    "block_matrix",
    "loss_curves",
    "copy_curves",
    "qkv_layouts",
    "masks_and_maps",
    "timings",
    "parameter_counts",
    "saturation",
    "head_cut",
    "head_reach",
]
