// Hover and click on the canvas.
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

// Hover and click: what lies under a point of the canvas.
function matrixCellAt(m, x, y) {
  const col = Math.floor((x - m.x0) / m.cell), row = Math.floor((y - m.y0) / m.cell);
  return col >= 0 && col < m.n_out && row >= 0 && row < m.n_in ? { matrix: true, row, col } : null;
}

function tileCellAt(geometry, maps, x, y) {
  for (const t of geometry.tiles) {
    const k = Math.floor((x - t.x) / t.cell), q = Math.floor((y - t.y) / t.cell);
    if (k >= 0 && k < maps.tk && q >= 0 && q < maps.tq) return { head: t.head, q, k };
  }
  const labelled = geometry.labelled ? [geometry.labelled] : geometry.tiles;
  const first = labelled.find((t) => x < t.x && x > t.x - geometry.labelW);
  if (first) {
    const q = Math.floor((y - first.y) / first.cell);
    if (q >= 0 && q < maps.tq) return { head: null, q, k: null };
  }
  return null;
}

function lineLabelAt(L, maps, x, y) {
  if (x >= L.left + 4) return null;
  const q = Math.floor((y - L.yq(0) + L.pitchQ / 2) / L.pitchQ);
  return q >= 0 && q < maps.tq ? { head: null, q, k: null } : null;
}

// (head, query, key) under a point of the canvas, a matrix entry, or null
function cellAt(v, x, y) {
  if (!v.shown || v.el.dataset.state !== "ok") return null;
  const { geometry, maps } = v.shown;
  if (geometry.matrix) return matrixCellAt(geometry.matrix, x, y);
  if (geometry.tiles) return tileCellAt(geometry, maps, x, y);
  return lineLabelAt(geometry.lines, maps, x, y);
}

function hitOf(v, event) {
  const rect = v.canvas.getBoundingClientRect();
  return { rect, hit: cellAt(v, event.clientX - rect.left, event.clientY - rect.top) };
}

// x, y: the point on the canvas the tooltip names (the mouse, or the keyboard's cell)
function placeTooltip(v, x, y) {
  const tooltip = v.tooltip;
  tooltip.style.display = "block";
  const left = x + 14;
  tooltip.style.left = `${Math.max(0, Math.min(left, v.mapsBox.clientWidth - tooltip.offsetWidth - 4))}px`;
  tooltip.style.top = `${y + 14}px`;
}

function matrixTooltip(v, hit) {
  const { block, frame, geometry } = v.shown;
  const value = block.data[hit.row * block.n_out + hit.col];
  const head = Math.floor(hit.col / geometry.matrix.dk), own = hit.col % geometry.matrix.dk;
  v.tooltip.textContent = `${frame.name}[${hit.row}, ${hit.col}] = ${value.toFixed(3)} · head ${head} (its column ${own})`;
  v.tooltip.dataset.head = head;
}

function weightTooltip(v, hit) {
  const { block, maps } = v.shown;
  const w = maps.at(hit.head, hit.q, hit.k);
  v.tooltip.textContent = `${block.titles[hit.head]} · query '${block.rows[hit.q]}' → key '${block.cols[hit.k]}' · ${w.toFixed(3)}`;
  v.tooltip.dataset.head = hit.head;
  v.tooltip.dataset.query = hit.q;
  v.tooltip.dataset.key = hit.k;
}

function showTooltip(v, event) {
  if (legendAt(v, event)) {
    v.tooltip.style.display = "none";
    v.canvas.style.cursor = "pointer";
    return;
  }
  const { rect, hit } = hitOf(v, event);
  if (hit && !hit.matrix && hit.head === null) {
    v.tooltip.style.display = "none"; // a query's label: clickable, no weight to show
    v.canvas.style.cursor = "pointer";
    return;
  }
  if (!hit) {
    v.tooltip.style.display = "none";
    v.canvas.style.cursor = "default";
    return;
  }
  if (hit.matrix) matrixTooltip(v, hit);
  else weightTooltip(v, hit);
  placeTooltip(v, event.clientX - rect.left, event.clientY - rect.top);
  v.canvas.style.cursor = "pointer";
}

function selectQuery(v, event) {
  const entry = legendAt(v, event);
  if (entry) {
    const same = v.only && v.only.join() === entry.heads.join();
    v.only = same ? null : entry.heads; // a second click shows every head again
    draw(v);
    return;
  }
  followQuery(v, hitOf(v, event).hit);
}

// the lines mode's legend entry under the mouse, or null
function legendAt(v, event) {
  const L = v.shown && v.el.dataset.state === "ok" && v.shown.geometry.lines;
  if (!L) return null;
  const rect = v.canvas.getBoundingClientRect();
  const x = event.clientX - rect.left, y = event.clientY - rect.top;
  return L.hits.find((e) => x >= e.x0 && x <= e.x1 && y >= e.y0 && y <= e.y1) || null;
}

function followQuery(v, hit) {
  const { model } = v;
  if (!hit || hit.matrix) return;
  const keep = model.get("key_by").includes("query"); // the query is a control: never unset
  model.set("query", hit.q === model.get("query") && !keep ? -1 : hit.q);
  const focusBy = model.get("focus_by");
  if (focusBy && hit.head !== null) model.set(focusBy, hit.head); // a click on a tile picks it
  model.save_changes();
}
