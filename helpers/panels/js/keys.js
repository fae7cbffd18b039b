// The keyboard: a cursor over the cells, read aloud.
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

// The keyboard: Tab reaches the maps; the arrow keys move a cell outlined in black and white (up
// and down: the query; left and right: the key, and on into the next head at a tile's edge), Page
// Up and Page Down change head, Enter or Space follows the query as a click does, Escape leaves.
// The cell's text is the hover's, shown beside it and said by a screen reader (aria-live).
const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));

function placeCursor(v) {
  const { geometry: g, maps } = v.shown;
  const c = v.cursor || {};
  if (g.matrix) {
    const m = g.matrix;
    return (v.cursor = { row: clamp(c.row ?? 0, 0, m.n_in - 1), col: clamp(c.col ?? 0, 0, m.n_out - 1) });
  }
  const followed = v.model.get("query");
  const q = clamp(c.q ?? (followed >= 0 ? followed : 0), 0, maps.tq - 1);
  if (g.lines) return (v.cursor = { q });
  const focus = v.model.get("focus_by") ? v.model.get(v.model.get("focus_by")) : -1;
  // with one head enlarged (12), the keyboard reads the enlarged tile, and Page Up/Down change it
  const start = g.labelled ? g.tiles.indexOf(g.labelled) : Math.max(0, g.tiles.findIndex((t) => t.head === focus));
  if (g.labelled) return (v.cursor = { tile: start, q, k: clamp(c.k ?? 0, 0, maps.tk - 1) });
  return (v.cursor = { tile: clamp(c.tile ?? start, 0, g.tiles.length - 1), q, k: clamp(c.k ?? 0, 0, maps.tk - 1) });
}

// the cursor as a hit (what hover and click take), and the box it outlines, in canvas pixels
function cursorHit(v) {
  const { geometry: g } = v.shown;
  const c = placeCursor(v);
  if (g.matrix) {
    const m = g.matrix;
    return { hit: { matrix: true, row: c.row, col: c.col }, box: [m.x0 + c.col * m.cell, m.y0 + c.row * m.cell, m.cell, m.cell] };
  }
  if (g.lines) {
    const L = g.lines;
    return { hit: { head: null, q: c.q, k: null }, box: [0, L.yq(c.q) - L.pitchQ / 2, L.left, L.pitchQ] };
  }
  const t = g.tiles[c.tile];
  return { hit: { head: t.head, q: c.q, k: c.k }, box: [t.x + c.k * t.cell, t.y + c.q * t.cell, t.cell, t.cell] };
}

function showCursor(v) {
  if (!v.shown || v.el.dataset.state !== "ok") return hideCursor(v);
  const { hit, box } = cursorHit(v);
  const [x, y, w, h] = box;
  Object.assign(v.ring.style, { display: "block", left: `${x - 3}px`, top: `${y - 3}px`, width: `${w + 6}px`, height: `${h + 6}px` });
  if (hit.matrix) matrixTooltip(v, hit);
  else if (hit.head !== null) weightTooltip(v, hit);
  else {
    v.tooltip.textContent = `query '${v.shown.block.rows[hit.q]}' · Enter shows only its lines`;
    v.tooltip.dataset.query = hit.q;
  }
  placeTooltip(v, x + w, y + h / 2);
  v.live.textContent = v.tooltip.textContent;
  // keep the cell and its text on screen: a focused canvas may sit partly below the window
  for (const shown of [v.ring, v.tooltip]) shown.scrollIntoView?.({ block: "nearest", inline: "nearest" });
}

function hideCursor(v) {
  v.ring.style.display = "none";
  v.tooltip.style.display = "none";
}

function moveCursor(v, key) {
  const { geometry: g, maps } = v.shown;
  const c = v.cursor;
  const step = { ArrowUp: -1, ArrowDown: 1, ArrowLeft: -1, ArrowRight: 1, PageUp: -1, PageDown: 1 }[key] || 0;
  if (g.matrix) {
    const m = g.matrix;
    if (key === "ArrowUp" || key === "ArrowDown") c.row = clamp(c.row + step, 0, m.n_in - 1);
    else if (key === "ArrowLeft" || key === "ArrowRight") c.col = clamp(c.col + step, 0, m.n_out - 1);
    else if (key === "PageUp" || key === "PageDown") c.col = clamp(c.col + step * m.dk, 0, m.n_out - 1);
    else c.col = key === "Home" ? 0 : m.n_out - 1;
    return;
  }
  if (key === "ArrowUp" || key === "ArrowDown") c.q = clamp(c.q + step, 0, maps.tq - 1);
  if (g.lines) return;
  const focusBy = v.model.get("focus_by");
  if (g.labelled && (key === "PageUp" || key === "PageDown")) {
    v.model.set(focusBy, clamp(v.model.get(focusBy) + step, 0, maps.h - 1)); // enlarge another head
    v.model.save_changes();
    return;
  }
  const last = g.labelled ? c.tile : g.tiles.length - 1, first = g.labelled ? c.tile : 0;
  if (key === "ArrowLeft" && c.k === 0 && c.tile > first) [c.tile, c.k] = [c.tile - 1, maps.tk - 1];
  else if (key === "ArrowRight" && c.k === maps.tk - 1 && c.tile < last) [c.tile, c.k] = [c.tile + 1, 0];
  else if (key === "ArrowLeft" || key === "ArrowRight") c.k = clamp(c.k + step, 0, maps.tk - 1);
  else if (key === "PageUp" || key === "PageDown") c.tile = clamp(c.tile + step, first, last);
  else if (key === "Home" || key === "End") c.k = key === "Home" ? 0 : maps.tk - 1;
}

const MOVES = ["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown", "Home", "End"];

function onKey(v, event) {
  if (![...MOVES, "Enter", " ", "Escape"].includes(event.key)) return;
  event.preventDefault(); // no page scroll
  event.stopPropagation(); // nor JupyterLab's: its arrow keys would move to another cell
  if (event.key === "Escape") return leave(v);
  if (!v.shown || v.el.dataset.state !== "ok") return;
  if (!v.keyboard) {
    v.keyboard = true; // after a click, the first key shows the cell
    showHint(v);
  }
  placeCursor(v);
  if (event.key === "Enter" || event.key === " ") followQuery(v, cursorHit(v).hit);
  else moveCursor(v, event.key);
  showCursor(v);
}

function leave(v) {
  v.keyboard = false;
  hideCursor(v);
  v.canvas.blur();
  const notebook = v.el.closest(".jp-Notebook"); // back to the notebook's command mode
  if (notebook) notebook.focus();
}

// Arrow keys on the panel's own controls (01's query buttons, a slider's handle) must not reach
// JupyterLab either: they would move the notebook to another cell. JupyterLab reads keys as they
// bubble up, so stopping them at the panel is enough there. RISE's slideshow page reads them on
// the way down, before the panel sees them, and would change slides: from the window, before it,
// such a key is marked as handled (preventDefault), which its shortcuts skip and the control
// under it still gets. Not in a text box, where the keys move the caret.
function guardPanelKeys(v) {
  const panel = v.el.closest(".course-panel");
  if (!panel || panel.dataset.keysGuarded) return;
  panel.dataset.keysGuarded = "1";
  panel.addEventListener("keydown", (event) => {
    if (MOVES.includes(event.key)) event.stopPropagation();
  });
  const beforeTheApp = (event) => {
    if (!panel.isConnected) return window.removeEventListener("keydown", beforeTheApp, true);
    const typing = event.target.closest && event.target.closest("input, textarea, [contenteditable]");
    if (MOVES.includes(event.key) && panel.contains(event.target) && !typing) event.preventDefault();
  };
  window.addEventListener("keydown", beforeTheApp, true);
}
