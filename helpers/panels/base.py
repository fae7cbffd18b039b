"""What every panel shares: `_Panel` (controls on top, an `AttentionView` below, the frames the
controls can reach next computed ahead), the sliders for h and d_model, tables and messages."""

from __future__ import annotations

import html
from collections.abc import Iterator

import ipywidgets as widgets
import torch

from helpers.attention import (
    check_num_heads,
    valid_head_counts,
)
from helpers.checks import check_shape
from helpers.panels.view import AttentionView, Frame

H_MAX = 16  # the h slider's range is 1 .. H_MAX
EVERY_H = "every h (show the impossible ones)"  # the switch that lets h stop where it cannot work


def plural(n: int, word: str) -> str:
    """'1 head', '4 heads', '2 softmaxes'."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith(("x", "s")) else f"{n} {word}s"


def _table(rows: list[tuple[str, ...]], caption: str) -> str:
    """An HTML table of strings; the first row is the header."""
    head, *body = rows
    esc = lambda s: html.escape(s, quote=False)  # noqa: E731
    th = "".join(f"<th>{esc(c)}</th>" for c in head)
    trs = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><caption>{esc(caption)}</caption><tr>{th}</tr>{trs}</table>"


def _lines(lines: list[str]) -> str:
    body = "<br>".join(html.escape(line, quote=False) for line in lines)
    return f'<div class="av-lines">{body}</div>'


def _shape_row(tensor: torch.Tensor, expected: tuple[int, ...], name: str, dims: str) -> tuple:
    """(name, shape, dims, ✓/✗) measured on the tensor itself."""
    try:
        check_shape(tensor, expected, name, dims=dims, echo=False)
        mark = "✓"
    except AssertionError:
        mark = f"✗ expected {tuple(expected)}"
    return (name, str(tuple(tensor.shape)), f"({', '.join(dims.split())})", mark)


def _titles(h: int) -> list[str]:
    return [f"head {i}" for i in range(h)]


def _h_slider(h: int) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=h, min=1, max=H_MAX, description="h (heads)", continuous_update=True,
        style={"description_width": "5.4em"},
    )  # fmt: skip


def _every_h_switch() -> widgets.Checkbox:
    """Off (the default): the h slider steps through the h that divide d_model, so every press
    changes the maps. On: it stops at every h, and an impossible one says why (the ✗)."""
    return widgets.Checkbox(value=False, description=EVERY_H, indent=False,
                            layout=widgets.Layout(width="auto"))  # fmt: skip


def _h_controls(panel, h: int, d_model: int = 0, high: int = 0) -> dict[str, widgets.Widget]:
    """The h slider and its every-h switch, and with a `high` the d_model slider (8 .. high),
    set on the panel as `h_slider`, `every_h` and `d_model_slider`: the controls of `_Panel`."""
    panel.h_slider, panel.every_h = _h_slider(h), _every_h_switch()
    controls = {"h": panel.h_slider}
    if high:
        panel.d_model_slider = _d_model_slider(d_model, high)
        controls["d_model"] = panel.d_model_slider
    return {**controls, "every_h": panel.every_h}


def _working_h(stops: list[int], h: int, previous: int | None = None) -> int:
    """h if it is one of the stops; else the next stop the way h moved from `previous` (a key
    press from 4 to 5 goes on to 8 at d_model = 64); else the nearest (the larger on a tie).
    The browser's `workingH` (js/events.js) follows the same rule."""
    if h in stops or not stops:
        return h
    up, down = [s for s in stops if s > h], [s for s in stops if s < h]
    if previous is not None and h > previous and up:
        return up[0]
    if previous is not None and h < previous and down:
        return down[-1]
    if up and (not down or up[0] - h <= h - down[-1]):
        return up[0]
    return down[-1]


def _d_model_slider(d_model: int, high: int) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=d_model, min=8, max=high, step=8, description="d_model", continuous_update=True,
        style={"description_width": "5.4em"}, layout=widgets.Layout(width="420px"),
    )  # fmt: skip


def _heads_or_why(d_model: int, h: int) -> int:
    """d_k = d_model / h, or a ValueError in the panel's words: the slider's h, and only the
    head counts the slider can reach."""
    if d_model % h:
        works = ", ".join(str(n) for n in valid_head_counts(d_model) if n <= H_MAX)
        raise ValueError(
            f"d_model = {d_model} is not divisible by h = {h}: each head would get d_k = "
            f"{d_model}/{h} = {d_model / h:.2f} features. h that work here: {works}."
        )
    return check_num_heads(d_model, h)


def _around(value: int, low: int, high: int, step: int, radius: int) -> list[int]:
    """value, then its neighbours one step away, two steps away, ... within [low, high]."""
    out = [value]
    for r in range(1, radius + 1):
        out += [v for v in (value - r * step, value + r * step) if low <= v <= high]
    return out


def _every_h_near_this_d_model(panel, setting: dict[str, int], radius: int):
    """The settings of an (h, d_model) panel to have ready: every h, at this d_model and at the
    d_model `radius` slider steps either side, the nearest first."""
    s = panel.d_model_slider
    for d_model in _around(setting["d_model"], s.min, s.max, s.step, radius):
        for h in _around(setting["h"], 1, H_MAX, 1, H_MAX):
            yield {"d_model": d_model, "h": h}


_SELECTIONS = (widgets.ToggleButtons, widgets.SelectionSlider)  # labels shown, index synced


def _describe(widget: widgets.Widget, controls: dict[str, widgets.Widget]) -> dict:
    """A control as a page without a kernel draws it: which view trait it moves, its range or
    its options' labels, its description; anything else as its text, marked as needing Python."""
    name = next((n for n, c in controls.items() if c is widget), None)
    common = {"name": name, "description": getattr(widget, "description", "")}
    if isinstance(widget, widgets.ToggleButtons):
        return {**common, "kind": "buttons", "options": list(widget._options_labels),
                "value": widget.index}  # fmt: skip
    if isinstance(widget, widgets.SelectionSlider):
        return {**common, "kind": "selection", "options": list(widget._options_labels),
                "value": widget.index}  # fmt: skip
    if isinstance(widget, widgets.Checkbox) and name:
        return {**common, "kind": "switch", "value": widget.value}
    if isinstance(widget, widgets.IntSlider) and name:
        return {**common, "kind": "slider", "min": widget.min, "max": widget.max,
                "step": widget.step, "value": widget.value}  # fmt: skip
    return {**common, "kind": "python", "value": str(getattr(widget, "value", ""))}


# where a panel is drawn, after its name, in the line shown where it is not (yet) drawn
WHERE = ": drawn here once this cell runs, in the notebook or its slideshow"


class _Panel(widgets.VBox):
    """Controls on top, an AttentionView below; `_frame(**setting)` computes one setting and
    `_reachable(setting, radius)` lists the settings to have ready (the current one first)."""

    WHAT = "the panel"  # named in the line shown before the notebook runs
    RADIUS = 2  # prefetch this many steps around the current setting; keep twice as many

    def __init__(
        self,
        controls: dict[str, widgets.ValueWidget],
        view: AttentionView,
        rows: list[widgets.Widget] | None = None,
    ):
        self.controls, self.view = controls, view
        if "every_h" in controls:
            self._stop_h_where_it_works()
        for name, control in controls.items():
            selection = isinstance(control, _SELECTIONS)
            values = [v for _, v in getattr(control, "options", ())]
            if selection and values != list(range(len(values))):
                raise ValueError(
                    f"the {name} options need the values 0 .. n-1 (the browser keys frames by "
                    f"their index); got {values}"
                )
            setattr(view, name, control.value)
            # moves switch frames in the browser (a selection widget syncs its index, not value)
            synced = "index" if selection else "value"
            widgets.jslink((control, synced), (view, name))
            control.observe(self._moved, names="value")  # ... and the kernel prefetches around
        switches_last = sorted(controls.values(), key=lambda c: isinstance(c, widgets.Checkbox))
        super().__init__([*(rows or [widgets.HBox(switches_last)]), view])
        self.add_class("course-panel")  # its controls' text at 15 px (view.css)
        self._moved()

    def __repr__(self) -> str:
        # what JupyterLab shows before the kernel runs, and a slideshow (where no panel loads)
        # even after; strict nbval compares it. True in both: where the panel is, and when.
        return f"▶ {self.WHAT}{WHERE}"

    @property
    def setting(self) -> dict[str, int]:
        return {name: self.controls[name].value for name in self.view.key_by}

    @property
    def current(self) -> Frame:
        """The frame the browser shows for the controls' current values."""
        return self.view.frame(self.view.key(**self.setting))

    @property
    def table(self) -> str:
        return self.current.side

    @property
    def message(self) -> str:
        return self.view.notice or self.current.error or self.current.note

    @property
    def maps(self) -> torch.Tensor:
        return self.view.maps(self.view.key(**self.setting))

    def _moved(self, change=None) -> None:
        """A control moved: make sure the browser holds the new setting and its neighbours."""
        try:
            if self.view.published and not self.view.has(self.view.key(**self.setting)):
                self._ensure(self.setting)  # a jump past what was sent ahead: show it first
                self.view.publish()
            for setting in self._reachable(self.setting, self.RADIUS):
                self._ensure(setting)
            keep = {self.view.key(**s) for s in self._reachable(self.setting, 2 * self.RADIUS)}
            self.view.publish(keep)
            if self.view.notice.startswith("Unexpected"):  # it worked again: lift our notice
                self.view.notice = ""
        except Exception as err:  # noqa: BLE001 - in class, a silent stale picture is worse
            self.view.notice = f"Unexpected {type(err).__name__}: {err}"

    def _stop_h_where_it_works(self) -> None:
        """With the every-h switch off, h stops only where d_model / h is whole: the view gets
        those h for each d_model the panel offers (`h_stops`) and moves h on in the browser
        (js/events.js); a move made here in Python (a test, a cell) is moved on here."""
        h, d_model = self.controls["h"], self.controls.get("d_model")
        if d_model is None:
            d_models = [self.view.d_model]  # the panel's own, fixed
        else:
            d_models = range(d_model.min, d_model.max + 1, d_model.step)
        works = lambda d: [n for n in valid_head_counts(d) if n <= h.max]  # noqa: E731
        self.view.h_stops = {str(d): works(d) for d in d_models}
        h.observe(self._keep_h_working, names="value")
        for control in (d_model, self.controls["every_h"]):
            if control is not None:
                control.observe(self._keep_h_working, names="value")

    def _keep_h_working(self, change) -> None:
        # a move from the browser was moved on there already: two movers would race
        if self.controls["every_h"].value or "value" in change.owner._property_lock:
            return
        h, d_model = self.controls["h"], self.view.d_model
        if "d_model" in self.controls:
            d_model = self.controls["d_model"].value
        previous = change.old if change.owner is h else None
        h.value = _working_h(self.view.h_stops[str(d_model)], h.value, previous)

    def _ensure(self, setting: dict[str, int]) -> None:
        """Compute one setting's frame unless the view holds it; errors become its message."""
        key = self.view.key(**setting)
        if self.view.has(key):
            return
        try:
            frame = self._frame(**setting)
        except ValueError as err:  # an impossible combination: say why
            frame = Frame(error=str(err))
        except Exception as err:  # noqa: BLE001
            frame = Frame(error=f"Unexpected {type(err).__name__}: {err}")
        self.view.add_frame(key, frame)

    def static_state(self) -> dict:
        """The panel for a page with no kernel (`course.site`): the frames of every setting its
        controls can reach (computed and checked as in the notebook), the view's state, and its
        controls row by row. Text boxes and other inputs that need Python are described as such."""
        for setting in self._reachable(self.setting, 10**6):
            self._ensure(setting)
        rows = []
        for row in self.children[:-1]:
            items = row.children if isinstance(row, widgets.Box) else (row,)
            rows.append([_describe(item, self.controls) for item in items])
        return {"kind": "panel", "what": self.WHAT, "rows": rows, **self.view.static_state()}

    def _reachable(self, setting: dict[str, int], radius: int) -> Iterator[dict[str, int]]:
        raise NotImplementedError

    def _frame(self, **setting: int) -> Frame:
        raise NotImplementedError
