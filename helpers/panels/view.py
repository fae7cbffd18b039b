"""`AttentionView`: a widget of the course's own that draws attention maps in the browser.

The kernel computes; the browser only draws. A panel computes every setting its controls can
reach next (with `helpers.attention` and its checks) and hands each to the view as a *frame*:
a block of maps (h, T_q, T_k), the side table as HTML and a one-line note, or an error saying
why that setting cannot work. The maps travel as float32 buffers: the first set in the
traits, every later step as one custom message with only what it adds or drops. The panel's
sliders are tied to the view's traits with `widgets.jslink`, so a move switches frames inside the
browser (one frame on screen later, no round trip to the kernel); the kernel then prefetches
around the new setting. The JavaScript sits beside this file, in parts (`js/`, joined into one
module by `view_script`), with `view.css`: no build step, nothing fetched from a CDN.

In the browser: hover a cell for its weight (3 decimals), click a query (a row or its word) to
follow it through every head, and switch between maps and lines (query → key, as in bertviz).
From the keyboard: Tab reaches the maps; the arrow keys move an outlined cell (query, key, and on
into the next head), Page Up/Down change head, Enter or Space follows the query, Escape leaves; the
cell's text is shown as on hover and given to a screen reader (aria-live). Arrow keys pressed
anywhere in a panel stay in it (JupyterLab would move to another cell). With `h_stops` sent and
`every_h` off, the h slider stops only where d_model / h is whole: the browser moves it on.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anywidget
import numpy as np
import torch
import traitlets

from helpers.figures.palette import HEAD_COLOURS
from helpers.figures.plots import colormap_table

__all__ = ["AttentionView", "Frame"]

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Frame:
    """What one setting of the controls shows: a block of maps (by id), the side HTML, a note;
    or, for a setting that cannot work, only `error` (the browser greys the last good frame)."""

    block: str | None = None
    side: str = ""
    note: str = ""
    error: str | None = None
    bands: int = 0  # a matrix block: cut into this many heads' columns
    name: str = ""  # a matrix block: its name, e.g. "W^Q"


# The view's JavaScript: one ES module in parts, joined in this order (constants before their use).
VIEW_JS = ("store", "tiles", "modes", "build", "save", "pointer", "keys", "events")


def view_script() -> str:
    """The panels' JavaScript as one module: the parts in panels/js/, in VIEW_JS's order."""
    return "\n".join((HERE / "js" / f"{name}.js").read_text(encoding="utf-8") for name in VIEW_JS)


class AttentionView(anywidget.AnyWidget):
    """h attention maps drawn on a canvas at the screen's pixel ratio, with a side table.

    `key_by` names the traits (tied to the panel's controls) whose values pick the frame shown,
    e.g. ("d_model", "h") -> the frame "d_model=64|h=4". `focus_by` names the trait that picks a
    head to outline (and, with `enlarge`, to draw large). `query` is the followed row (-1: none).
    """

    _esm = view_script()
    _css = HERE / "view.css"

    buffer = traitlets.Bytes(b"").tag(sync=True)
    blocks = traitlets.Dict().tag(sync=True)
    frames = traitlets.Dict().tag(sync=True)
    key_by = traitlets.List(traitlets.Unicode()).tag(sync=True)
    focus_by = traitlets.Unicode("").tag(sync=True)
    enlarge = traitlets.Bool(False).tag(sync=True)
    # the controls a panel may tie to the view
    h = traitlets.Int(1).tag(sync=True)
    d_model = traitlets.Int(0).tag(sync=True)
    # the h that divide each d_model ({"64": [1, 2, 4, 8, 16]}): with every_h off, h stops only
    # there (the browser moves a press from 4 to 5 on to 8); every_h on: at every h, with the ✗
    h_stops = traitlets.Dict().tag(sync=True)
    every_h = traitlets.Bool(True).tag(sync=True)
    d_k = traitlets.Int(0).tag(sync=True)
    t_k = traitlets.Int(0).tag(sync=True)  # the number of keys (context tokens)
    kv = traitlets.Int(0).tag(sync=True)  # which K/V-head choice (an index into its buttons)
    choice = traitlets.Int(0).tag(sync=True)  # any other selection: an index into its options
    block = traitlets.Int(1).tag(sync=True)  # keys per block (19's online softmax)
    step = traitlets.Int(1).tag(sync=True)  # blocks read so far
    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(-1).tag(sync=True)
    query = traitlets.Int(-1).tag(sync=True)
    mode = traitlets.Unicode("maps").tag(sync=True)
    toolbar = traitlets.Bool(True).tag(sync=True)  # the maps / lines switch
    notice = traitlets.Unicode("").tag(sync=True)  # a kernel message above the maps
    height = traitlets.Int(420).tag(sync=True)  # CSS px of the drawing area, whatever h is
    palette = traitlets.List(traitlets.Unicode(), list(HEAD_COLOURS)).tag(sync=True)
    colormap = traitlets.List(traitlets.Unicode()).tag(sync=True)
    # a saved view's file name starts with this: the notebook's name where JupyterLab tells the
    # kernel (JPY_SESSION_NAME), else "attention"
    name = traitlets.Unicode("").tag(sync=True)

    def __init__(self, key_by: Iterable[str], **kwargs):
        kwargs.setdefault("name", Path(os.environ.get("JPY_SESSION_NAME", "attention")).stem)
        super().__init__(key_by=list(key_by), colormap=colormap_table(), **kwargs)
        self._blocks: dict[str, tuple[dict, np.ndarray]] = {}
        self._frames: dict[str, Frame] = {}
        self._sent_frames: set[str] = set()
        self._sent_blocks: set[str] = set()
        self._published = False
        self.on_msg(self._on_message)

    def __repr__(self) -> str:
        return "AttentionView(): run the notebook to draw it"

    def key(self, **setting: int) -> str:
        """The frame key of a setting, built as the browser builds it from the traits."""
        missing = [name for name in self.key_by if name not in setting]
        if missing:
            raise ValueError(f"a setting needs {self.key_by}; got {sorted(setting)}")
        return "|".join(f"{name}={int(setting[name])}" for name in self.key_by)

    def has(self, key: str) -> bool:
        return key in self._frames

    def has_maps(self, block: str) -> bool:
        return block in self._blocks

    def add_maps(
        self,
        block: str,
        weights: torch.Tensor,
        rows: list[str],
        cols: list[str],
        titles: list[str],
        colours: list[str] | None = None,
    ) -> str:
        """Stage a block of maps (h, T_q, T_k) with its query and key labels and tile titles."""
        w = torch.as_tensor(weights).detach().to("cpu", torch.float32)
        if w.dim() != 3 or w.shape[1:] != (len(rows), len(cols)) or len(titles) != w.shape[0]:
            raise ValueError(
                f"add_maps expects weights (h, T_q, T_k) = ({len(titles)}, {len(rows)}, "
                f"{len(cols)}) for {len(titles)} titles, {len(rows)} queries and {len(cols)} "
                f"keys; got {tuple(w.shape)}."
            )
        meta = {"rows": list(rows), "cols": list(cols), "titles": list(titles), "h": w.shape[0]}
        if colours is not None:
            meta["colours"] = list(colours)
        self._blocks[block] = (meta, w.numpy().astype("<f4").ravel())
        return block

    def add_matrix(self, block: str, matrix: torch.Tensor, row_label: str, col_label: str) -> str:
        """Stage one (d_in, d_out) weight matrix in the x·W layout, drawn grey on a symmetric
        scale; a frame showing it says into how many heads' columns (`bands`) it is cut."""
        m = torch.as_tensor(matrix).detach().to("cpu", torch.float32)
        if m.dim() != 2:
            raise ValueError(f"add_matrix expects one (d_in, d_out) matrix; got {tuple(m.shape)}.")
        meta = {
            "kind": "matrix", "n_in": m.shape[0], "n_out": m.shape[1], "h": 1,
            "limit": float(m.abs().max()) or 1.0, "row_label": row_label, "col_label": col_label,
            "rows": [], "cols": [], "titles": [],
        }  # fmt: skip
        self._blocks[block] = (meta, m.numpy().astype("<f4").ravel())
        return block

    def add_frame(self, key: str, frame: Frame) -> None:
        if frame.error is None and frame.block not in self._blocks:
            raise ValueError(f"frame {key!r} shows block {frame.block!r}, which was not added")
        self._frames[key] = frame

    def frame(self, key: str) -> Frame | None:
        return self._frames.get(key)

    def maps(self, key: str) -> torch.Tensor:
        """The numbers a frame shows, as the browser receives them: weights (h, T_q, T_k), or
        for a matrix block the matrix (d_in, d_out)."""
        meta, data = self._blocks[self._frames[key].block]
        if meta.get("kind") == "matrix":
            return torch.from_numpy(data.copy()).view(meta["n_in"], meta["n_out"])
        return torch.from_numpy(data.copy()).view(meta["h"], len(meta["rows"]), len(meta["cols"]))

    def clear(self) -> None:
        """Forget every frame and block (sent on the next `publish`, not before: the browser
        keeps showing the old frames until the new ones arrive)."""
        self._frames, self._blocks = {}, {}

    @property
    def published(self) -> bool:
        """Whether the traits hold a first set of frames (every later publish is a delta)."""
        return self._published

    @property
    def sent(self) -> set[str]:
        """The frame keys the browser holds."""
        return set(self._sent_frames)

    def publish(self, keep: set[str] | None = None, full: bool = False) -> None:
        """Send the browser what changed since the last publish; drop frames not in `keep`.

        The first publish (and a `full` one, e.g. a new text) sets the traits, which every view
        starts from, even one rendered while the kernel is still busy. Later ones send only the
        added and dropped frames as one custom message: a slider step costs its new frames, not
        all of them again.
        """
        if keep is not None:
            self._frames = {k: f for k, f in self._frames.items() if k in keep}
        used = {f.block for f in self._frames.values() if f.error is None}
        self._blocks = {b: v for b, v in self._blocks.items() if b in used}
        if full or not self._published:
            frames, blocks, buffer = self._pack(self._frames, self._blocks)
            with self.hold_sync():  # one message: never frames without their maps
                self.buffer, self.blocks, self.frames = buffer, blocks, frames
            self._published = True
        else:
            added = {k: f for k, f in self._frames.items() if k not in self._sent_frames}
            new_blocks = {b: v for b, v in self._blocks.items() if b not in self._sent_blocks}
            dropped = sorted(self._sent_frames - self._frames.keys())
            gone = sorted(self._sent_blocks - self._blocks.keys())
            if added or new_blocks or dropped or gone:
                self._send_delta(added, new_blocks, dropped, gone)
        self._sent_frames, self._sent_blocks = set(self._frames), set(self._blocks)

    def static_state(self) -> dict:
        """Everything the browser's view reads, as JSON (the float32 maps in base64): for a page
        with no kernel (`course.site`), which draws the same frames with the same JavaScript."""
        frames, blocks, buffer = self._pack(self._frames, self._blocks)
        skip = {"buffer", "frames", "blocks", "layout", "tabbable", "tooltip", "comm"}
        traits = {
            name: getattr(self, name)
            for name in self.trait_names(sync=lambda x: x)
            if not name.startswith("_") and name not in skip
        }
        return {
            "traits": {**traits, "frames": frames, "blocks": blocks},
            "buffer": base64.b64encode(buffer).decode("ascii"),
        }

    def _pack(self, frames: dict[str, Frame], blocks: dict[str, tuple[dict, np.ndarray]]):
        """(frames as JSON, blocks with their offsets into one buffer, the float32 buffer)."""
        metas, pieces, offset = {}, [], 0
        for name, (meta, data) in blocks.items():
            metas[name] = {**meta, "offset": offset, "size": data.size}
            pieces.append(data)
            offset += data.size
        buffer = np.concatenate(pieces).tobytes() if pieces else b""
        as_json = {
            k: {"block": f.block, "side": f.side, "note": f.note, "error": f.error,
                "bands": f.bands, "name": f.name}
            for k, f in frames.items()
        }  # fmt: skip
        return as_json, metas, buffer

    def _send_delta(self, frames, blocks, dropped=(), gone=(), reset=False) -> None:
        as_json, metas, buffer = self._pack(frames, blocks)
        content = {
            "type": "delta", "frames": as_json, "blocks": metas, "reset": reset,
            "drop_frames": list(dropped), "drop_blocks": list(gone),
        }  # fmt: skip
        self.send(content, buffers=[buffer] if buffer else None)

    def _on_message(self, _, content, buffers) -> None:
        # a view rendered late (or again) asks for everything the kernel holds
        if isinstance(content, dict) and content.get("type") == "snapshot":
            self._send_delta(self._frames, self._blocks, reset=True)
