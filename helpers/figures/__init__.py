"""Figures: what the notebooks show as pictures, and the colours the panels share.

- `plots`: every static figure (matplotlib), as the notebooks call them (`plots.heads_mosaic`, …,
  `plots.show`), gathered from `render` (the style sized for a projector, the colour map, `show`),
  `maps`, `weights` and `curves`;
- `palette`: the head colours, apart under colour-vision deficiency, and their contrast;
- `panel_svg`: the small SVG figures drawn beside a panel's maps.

May import the attention math (`helpers.attention`, `helpers.layouts`), torch and matplotlib;
never a panel, the checker or the course's tools.
"""
