// The browser half of helpers/panels/view.py: it draws attention maps the kernel computed.
// It never computes attention: every number it shows is a float32 that came from the kernel.
//
// The kernel sends frames ahead: a frame maps a key such as "d_model=64|h=4" to what that setting
// shows (a block of maps, the side table as HTML, a note or an error); a block holds its
// (h, T_q, T_k) weights as float32. The first set arrives in the traits `frames`, `blocks` and
// `buffer`; later steps arrive as custom messages ("delta") with only what was added or dropped.
// The panel's sliders are tied to this widget's traits with jslink, so a move picks another
// frame here, with no round trip to the kernel.

const BASE_FONT = 14; // CSS px: the smallest text drawn anywhere in the panel, at a scale of 1
// The text drawn on the canvas: BASE_FONT times the panel's `--av-scale` (view.css: 1,
// or JupyterLab's Presentation Mode's 17/14), set by paint() before each drawing.
let FONT = BASE_FONT;
const FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans', 'Noto Sans CJK SC', sans-serif";
const GAP = 12; // between tiles
const TITLE = 26; // a tile's title line and its colour bar
const LABEL_PITCH = 15; // the closest two labels may sit (font size + 1)
const MAX_CELL = 56;
const MIN_NUMBER_CELL = 40; // cells this large print their weight inside

function element(tag, className, parent) {
  const node = document.createElement(tag);
  node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

function currentKey(model) {
  return model.get("key_by").map((name) => `${name}=${model.get(name)}`).join("|");
}

function float32(view) {
  if (!view || view.byteLength === 0) return new Float32Array(0);
  // copy: a DataView's offset need not be a multiple of 4
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength).slice();
  return new Float32Array(bytes.buffer);
}

// The frames and blocks a view holds: the traits' snapshot, then the deltas the kernel sends.
// (Each view keeps its own: anywidget hands every view its own model object.)
function newStore() {
  return { frames: {}, blocks: {} };
}

function addBlocks(store, metas, data) {
  for (const [name, meta] of Object.entries(metas)) {
    store.blocks[name] = { ...meta, data: data.subarray(meta.offset, meta.offset + meta.size) };
  }
}

function loadTraits(store, model) {
  store.frames = { ...model.get("frames") };
  store.blocks = {};
  addBlocks(store, model.get("blocks"), float32(model.get("buffer")));
}

function applyDelta(store, msg, buffers) {
  if (msg.reset) {
    store.frames = {};
    store.blocks = {};
  }
  addBlocks(store, msg.blocks, float32(buffers && buffers[0]));
  Object.assign(store.frames, msg.frames);
  for (const key of msg.drop_frames) delete store.frames[key];
  for (const name of msg.drop_blocks) delete store.blocks[name];
}

// One block's maps as a function (head, query, key) -> weight.
function mapsOf(block) {
  const { h, rows, cols, data } = block;
  const tq = rows.length, tk = cols.length;
  return { h, tq, tk, at: (i, q, k) => data[(i * tq + q) * tk + k] };
}

function fitLabel(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let cut = text;
  while (cut.length > 1 && ctx.measureText(cut + "…").width > width) cut = cut.slice(0, -1);
  return cut + "…";
}

function widest(ctx, labels) {
  return Math.max(0, ...labels.map((s) => ctx.measureText(s).width));
}

// Where every tile goes in a w x h area: the number of columns that gives the largest square cells.
function layoutGrid(ctx, area, maps, rows, cols, enlarge) {
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`; // the followed query's label is bold: room for it
  const labelW = Math.min(widest(ctx, rows), 96) + 8;
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  const labelH = Math.min(widest(ctx, cols), 72) + 8;
  const colorbarW = 72;
  // with one head enlarged, the grid of all heads is an overview: no labels (hover tells)
  const gridLabelW = enlarge ? 4 : labelW, gridLabelH = enlarge ? 4 : labelH;
  let gridW = area.width - gridLabelW - colorbarW;
  let bigCell = 0;
  if (enlarge) {
    // the chosen head enlarged on the right, the grid of all heads on the left
    bigCell = Math.min(
      MAX_CELL,
      (area.height - labelH - TITLE) / maps.tq,
      (gridW * 0.62 - labelW) / maps.tk,
    );
    gridW -= labelW + bigCell * maps.tk + GAP;
  }
  let best = null;
  for (let ncol = 1; ncol <= maps.h; ncol++) {
    const nrow = Math.ceil(maps.h / ncol);
    const cellW = (gridW - (ncol - 1) * GAP) / (ncol * maps.tk);
    const cellH = (area.height - gridLabelH - nrow * TITLE - (nrow - 1) * GAP) / (nrow * maps.tq);
    const cell = Math.min(cellW, cellH, MAX_CELL);
    if (!best || cell > best.cell + 1e-9) best = { ncol, nrow, cell };
  }
  const { ncol, nrow } = best;
  const cell = Math.max(best.cell, 1);
  const tileW = cell * maps.tk, tileH = cell * maps.tq;
  const tiles = [];
  for (let i = 0; i < maps.h; i++) {
    const r = Math.floor(i / ncol), c = i % ncol;
    tiles.push({ head: i, x: gridLabelW + c * (tileW + GAP), y: r * (tileH + TITLE + GAP) + TITLE, cell });
  }
  let big = null;
  if (enlarge) big = { x: gridLabelW + ncol * (tileW + GAP) + labelW, y: TITLE, cell: bigCell };
  const right = big ? big.x + bigCell * maps.tk : gridLabelW + ncol * (tileW + GAP) - GAP;
  return { tiles, big, labelW, labelH, tileW, tileH, nrow, ncol, colorbarX: right + 16 };
}

// Every n-th label, n chosen so that labels never sit closer than LABEL_PITCH.
function labelStep(cell) {
  return Math.max(1, Math.ceil(LABEL_PITCH / cell));
}

// One small canvas reused for every tile's pixels (OffscreenCanvas is missing in older Safari).
let scratchCanvas = null;
function scratch(width, height) {
  scratchCanvas = scratchCanvas || document.createElement("canvas");
  scratchCanvas.width = width;
  scratchCanvas.height = height;
  return scratchCanvas;
}

function headColour(block, palette, i) {
  return (block.colours && block.colours[i]) || palette[i % palette.length];
}

// Contrast (WCAG 2.2): relative luminance of an sRGB colour, and the ratio of two colours.
function luminance(rgb) {
  const linear = rgb.map((x) => (x / 255 <= 0.04045 ? x / 255 / 12.92 : ((x / 255 + 0.055) / 1.055) ** 2.4));
  return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
}

function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

// black or white, whichever stands out more: at least 4.58:1 on any colour
function textOn(rgb) {
  return contrast(rgb, [0, 0, 0]) >= contrast(rgb, [255, 255, 255]) ? [0, 0, 0] : [255, 255, 255];
}

// A head's colour for its lines and their legend: the palette's, darkened where it is too light to
// stand 3:1 against the white page (WCAG 2.2 non-text contrast); linear RGB scaled down, so the
// hue and saturation stay and only the lightness drops.
const LINE_CONTRAST = 3.1;

function lineColour(hex) {
  const rgb = [1, 3, 5].map((j) => parseInt(hex.slice(j, j + 2), 16));
  const most = 1.05 / LINE_CONTRAST - 0.05; // the largest luminance with that contrast
  const L = luminance(rgb);
  if (L <= most) return hex;
  const linear = rgb.map((x) => (x / 255 <= 0.04045 ? x / 255 / 12.92 : ((x / 255 + 0.055) / 1.055) ** 2.4));
  const srgb = linear.map((y) => {
    const z = (y * most) / L;
    return Math.floor(255 * (z <= 0.0031308 ? 12.92 * z : 1.055 * z ** (1 / 2.4) - 0.055));
  });
  return `#${srgb.map((x) => x.toString(16).padStart(2, "0")).join("")}`;
}

const DIM = 0.55; // a row not followed is mixed with this much white

// the colour of a weight's cell: the colormap's, faded when another query is followed
function cellColour(colormap, w, dimmed) {
  const c = colormap[Math.max(0, Math.min(255, Math.round(w * 255)))] || [255, 255, 255];
  return dimmed ? c.map((x) => Math.round(x * (1 - DIM) + 255 * DIM)) : c;
}

function drawTile(ctx, maps, head, tile, colormap, selected = -1) {
  const dimmed = (q) => selected >= 0 && selected < maps.tq && q !== selected;
  if (ctx.vector) drawCells(ctx, maps, head, tile, colormap, dimmed);
  else drawPixels(ctx, maps, head, tile, colormap, dimmed);
  if (tile.cell >= MIN_NUMBER_CELL) {
    ctx.font = `${FONT}px ${FONT_FAMILY}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (let q = 0; q < maps.tq; q++) {
      for (let k = 0; k < maps.tk; k++) {
        const w = maps.at(head, q, k);
        if (!Number.isFinite(w)) continue;
        ctx.fillStyle = `rgb(${textOn(cellColour(colormap, w, dimmed(q))).join(",")})`;
        const cx = tile.x + (k + 0.5) * tile.cell, cy = tile.y + (q + 0.5) * tile.cell;
        ctx.fillText(w.toFixed(2), cx, cy);
      }
    }
  }
}

// a tile's cells as one image, a pixel per weight, scaled up without smoothing
function drawPixels(ctx, maps, head, tile, colormap, dimmed) {
  const image = new ImageData(maps.tk, maps.tq);
  for (let q = 0; q < maps.tq; q++) {
    for (let k = 0; k < maps.tk; k++) {
      const w = maps.at(head, q, k);
      const c = cellColour(colormap, w, dimmed(q));
      const p = 4 * (q * maps.tk + k);
      image.data[p] = c[0];
      image.data[p + 1] = c[1];
      image.data[p + 2] = c[2];
      image.data[p + 3] = Number.isFinite(w) ? 255 : 0;
    }
  }
  const small = scratch(maps.tk, maps.tq);
  small.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, tile.x, tile.y, tile.cell * maps.tk, tile.cell * maps.tq);
}

// the same cells one rectangle each (an SVG export: cells stay sharp at any size), each a little
// wider than its place so that no seam of background shows between two cells
function drawCells(ctx, maps, head, tile, colormap, dimmed) {
  const overlap = 0.5;
  for (let q = 0; q < maps.tq; q++) {
    for (let k = 0; k < maps.tk; k++) {
      const w = maps.at(head, q, k);
      if (!Number.isFinite(w)) continue;
      ctx.fillStyle = `rgb(${cellColour(colormap, w, dimmed(q)).join(",")})`;
      const right = k < maps.tk - 1 ? overlap : 0, below = q < maps.tq - 1 ? overlap : 0;
      ctx.fillRect(tile.x + k * tile.cell, tile.y + q * tile.cell, tile.cell + right, tile.cell + below);
    }
  }
}

// A tile's title in dark text (readable on a projector) over a bar of the head's colour.
// The shortest form (0 full, 1 "head 12" -> "12", 2 "ONE head" -> "ONE") every title fits in.
function titleForm(ctx, titles, width) {
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`;
  const fits = (form) => titles.every((t) => ctx.measureText(shorten(t, form)).width <= width + GAP - 2);
  return [0, 1].find(fits) ?? 2;
}

function shorten(title, form) {
  return [title, title.replace(/^head /, ""), title.split(" ")[0]][form];
}

function drawTitle(ctx, title, tile, width, colour, form = 0) {
  ctx.fillStyle = colour;
  ctx.fillRect(tile.x, tile.y - 7, width, 5);
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#1f2328";
  ctx.textAlign = "center";
  ctx.textBaseline = "bottom";
  const text = shorten(title, form); // one form for the whole grid
  ctx.fillText(fitLabel(ctx, text, width + GAP - 2), tile.x + width / 2, tile.y - 9);
}

function drawQueryLabels(ctx, rows, tile, labelW, selected) {
  const step = labelStep(tile.cell);
  ctx.labelStep = Math.max(ctx.labelStep || 1, step);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  rows.forEach((word, q) => {
    if (q % step !== 0 && q !== selected) return;
    if (q !== selected && selected >= 0 && Math.abs(q - selected) < step) return;
    ctx.font = `${q === selected ? "bold " : ""}${FONT}px ${FONT_FAMILY}`;
    ctx.fillStyle = q === selected ? "#000" : "#333";
    ctx.fillText(fitLabel(ctx, word, labelW - 8), tile.x - 6, tile.y + (q + 0.5) * tile.cell);
  });
}

function drawKeyLabels(ctx, cols, tile, tq, labelH) {
  const step = labelStep(tile.cell);
  ctx.labelStep = Math.max(ctx.labelStep || 1, step);
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#333";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  cols.forEach((word, k) => {
    if (k % step !== 0) return;
    ctx.save();
    ctx.translate(tile.x + (k + 0.5) * tile.cell, tile.y + tq * tile.cell + 6);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(fitLabel(ctx, word, labelH - 8), 0, 0);
    ctx.restore();
  });
}

function drawColorbar(ctx, x, y, height, colormap) {
  const w = 14;
  for (let i = 0; i < 256; i++) {
    const c = colormap[255 - i];
    ctx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`;
    ctx.fillRect(x, y + (i * height) / 256, w, height / 256 + 0.5);
  }
  ctx.strokeStyle = "#666";
  ctx.lineWidth = 1;
  ctx.strokeRect(x, y, w, height);
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#333";
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  for (const v of [0, 0.5, 1]) ctx.fillText(String(v), x + w + 4, y + (1 - v) * height);
}

// The maps mode: one tile per head, rows = queries, columns = keys.
function drawMaps(ctx, area, frame, block, maps, view) {
  const { palette, colormap, selected, focus, enlarge } = view;
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  const grid = layoutGrid(ctx, area, maps, block.rows, block.cols, enlarge);
  const titles = block.titles;
  const form = titleForm(ctx, titles, grid.tileW);
  for (const tile of grid.tiles) {
    ctx.group?.(tile.head, titles[tile.head]); // an SVG export: one group per head
    drawTile(ctx, maps, tile.head, tile, colormap, selected);
    drawTitle(ctx, titles[tile.head], tile, grid.tileW, headColour(block, palette, tile.head), form);
    if (tile.head === focus) {
      ctx.strokeStyle = "#000";
      ctx.lineWidth = 3;
      ctx.strokeRect(tile.x - 2.5, tile.y - 2.5, grid.tileW + 5, grid.tileH + 5);
    }
    ctx.ungroup?.();
  }
  // labels: queries left of the first column, keys under the lowest tile of each column
  for (const tile of grid.big ? [] : grid.tiles) {
    if (tile.head % grid.ncol === 0) drawQueryLabels(ctx, block.rows, tile, grid.labelW, selected);
    if (tile.head + grid.ncol >= maps.h) drawKeyLabels(ctx, block.cols, tile, maps.tq, grid.labelH);
  }
  if (grid.big) {
    const big = { head: focus, ...grid.big };
    const title = `${titles[focus]} (enlarged)`;
    ctx.group?.(focus, title, "enlarged");
    drawTile(ctx, maps, focus, big, colormap, selected);
    drawTitle(ctx, title, big, big.cell * maps.tk, headColour(block, palette, focus));
    drawQueryLabels(ctx, block.rows, big, grid.labelW, selected);
    drawKeyLabels(ctx, block.cols, big, maps.tq, grid.labelH);
    ctx.ungroup?.();
    grid.tiles.push(big);
    grid.labelled = big;
  }
  if (selected >= 0 && selected < maps.tq) {
    for (const tile of grid.tiles) {
      const w = tile.cell * maps.tk; // the other rows are faded (drawTile): outline the followed one
      ctx.strokeStyle = "#000";
      ctx.lineWidth = 2;
      ctx.strokeRect(tile.x - 1, tile.y + selected * tile.cell - 1, w + 2, tile.cell + 2);
    }
  }
  // the bar starts below its label, so the label never meets the "1" beside the bar
  const barTop = TITLE + 14;
  drawColorbar(ctx, grid.colorbarX, barTop, Math.min(area.height - grid.labelH - barTop, 230), colormap);
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#333";
  ctx.textAlign = "left";
  ctx.textBaseline = "bottom";
  ctx.fillText("weight", grid.colorbarX, barTop - 8);
  return grid;
}

// The lines mode (after bertviz's head view): queries on the left, keys on the right, one line per
// (query, key) per head in the head's line colour. Heads between the same two words bend apart
// (each head its own arc); a line's width grows with its weight, every line opaque and at least
// 3:1 against the page (heavier lines drawn last, on top), and the legend has one entry per colour
// drawn (heads that share a colour share an entry); a click on an entry shows that head alone, a
// second click all of them.
const LINE_WIDTH = [1, 7]; // px at weight 0.01 (the lightest drawn) and at weight 1

function legendEntries(block, palette, heads) {
  const entries = [];
  for (const i of heads) {
    const colour = lineColour(headColour(block, palette, i));
    const same = entries.find((e) => e.colour === colour);
    if (same) same.heads.push(i);
    else entries.push({ colour, heads: [i] });
  }
  return entries;
}

function entryLabel(block, heads, short) {
  if (heads.length === 1) return short ? String(heads[0]) : block.titles[heads[0]];
  const contiguous = heads.every((i, n) => i === heads[0] + n); // a palette that wraps: not
  const range = contiguous ? `${heads[0]}–${heads[heads.length - 1]}` : heads.join(", ");
  return short ? range : `heads ${range}`;
}

// The legend's entries in rows of LEGEND_ROW px: full titles when they all fit on one row, else
// "heads" and the numbers alone, on as many rows as they need (16 heads: every one clickable).
const LEGEND_ROW = 26;

function legendLayout(ctx, block, entries, left, width) {
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`;
  for (const short of [false, true]) {
    const start = short ? left + ctx.measureText("heads").width + 10 : left;
    const rows = [[]];
    let x = start;
    for (const e of entries) {
      const label = entryLabel(block, e.heads, short);
      const w = ctx.measureText(label).width;
      if (x + w + 18 > width && rows[rows.length - 1].length) {
        rows.push([]);
        x = start;
      }
      rows[rows.length - 1].push({ e, label, x, w });
      x += w + 30;
    }
    if (short || rows.length === 1) return { short, rows, height: rows.length * LEGEND_ROW };
  }
}

function drawLines(ctx, area, frame, block, maps, view) {
  const { palette, selected, focus, only } = view;
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`; // the followed query's label is bold: room for it
  const labelW = Math.min(Math.max(widest(ctx, block.rows), widest(ctx, block.cols)), 120) + 10;
  const all = focus >= 0 && focus < maps.h ? [focus] : [...Array(maps.h).keys()];
  const entries = legendEntries(block, palette, all);
  const key = legendLayout(ctx, block, entries, labelW + 4, area.width);
  const legend = key.height;
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  const top = legend + 12;
  const pitchQ = (area.height - top - 4) / Math.max(maps.tq, 1);
  const pitchK = (area.height - top - 4) / Math.max(maps.tk, 1);
  const span = Math.min(area.width - 2 * labelW - 20, 380);
  const left = labelW + 4, right = left + span;
  const yq = (q) => top + (q + 0.5) * pitchQ;
  const yk = (k) => top + (k + 0.5) * pitchK;
  const chosen = only ? all.filter((i) => only.includes(i)) : [];
  const heads = chosen.length ? chosen : all; // heads shown alone that a new setting lacks: all
  const bend = Math.min(14, 60 / Math.max(heads.length, 1)); // px between two heads' arcs, mid-way
  const drawn = [];
  for (const [n, i] of heads.entries()) {
    const colour = lineColour(headColour(block, palette, i));
    const offset = (n - (heads.length - 1) / 2) * bend;
    for (let q = 0; q < maps.tq; q++) {
      if (selected >= 0 && q !== selected) continue;
      for (let k = 0; k < maps.tk; k++) {
        const w = maps.at(i, q, k);
        if (w > 0.01) drawn.push({ w, q, k, colour, offset, head: i });
      }
    }
  }
  // the heaviest on top; an SVG export keeps each head's lines in its own group (head by head)
  drawn.sort((a, b) => (ctx.group ? a.head - b.head : 0) || a.w - b.w);
  for (const [n, { w, q, k, colour, offset, head }] of drawn.entries()) {
    if (ctx.group && (n === 0 || drawn[n - 1].head !== head)) {
      if (n > 0) ctx.ungroup();
      ctx.group(head, block.titles[head]);
    }
    ctx.strokeStyle = colour;
    ctx.lineWidth = LINE_WIDTH[0] + ((LINE_WIDTH[1] - LINE_WIDTH[0]) * (Math.min(1, w) - 0.01)) / 0.99;
    ctx.beginPath();
    ctx.moveTo(left, yq(q));
    // the control point 2 × offset off the straight line: the arc passes `offset` off it
    ctx.quadraticCurveTo((left + right) / 2, (yq(q) + yk(k)) / 2 + 2 * offset, right, yk(k));
    ctx.stroke();
  }
  if (ctx.group && drawn.length) ctx.ungroup();
  const count = drawn.length;
  const stepQ = Math.max(1, Math.ceil(LABEL_PITCH / pitchQ));
  const stepK = Math.max(1, Math.ceil(LABEL_PITCH / pitchK));
  ctx.labelStep = Math.max(ctx.labelStep || 1, stepQ, stepK);
  ctx.textBaseline = "middle";
  block.rows.forEach((word, q) => {
    if (q % stepQ !== 0 && q !== selected) return;
    ctx.font = `${q === selected ? "bold " : ""}${FONT}px ${FONT_FAMILY}`;
    ctx.fillStyle = selected < 0 || q === selected ? "#000" : "#595959";
    ctx.textAlign = "right";
    ctx.fillText(fitLabel(ctx, word, labelW - 8), left - 6, yq(q));
  });
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#000";
  ctx.textAlign = "left";
  block.cols.forEach((word, k) => {
    if (k % stepK === 0) ctx.fillText(fitLabel(ctx, word, labelW - 8), right + 6, yk(k));
  });
  // legend: one entry per colour of the heads that can be drawn (a shown-alone head's outlined)
  ctx.textBaseline = "middle";
  ctx.textAlign = "left";
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`;
  if (key.short) {
    ctx.fillStyle = "#1f2328";
    ctx.fillText("heads", labelW + 4, LEGEND_ROW / 2 + 1);
  }
  const hits = [];
  for (const [r, row] of key.rows.entries()) {
    const y0 = r * LEGEND_ROW, middle = y0 + LEGEND_ROW / 2;
    for (const { e, label, x, w } of row) {
      const alone = heads.length < all.length && e.heads.every((i) => heads.includes(i));
      const dim = heads.length < all.length && !alone;
      ctx.globalAlpha = dim ? 0.35 : 1; // a hidden head's swatch faded, its label still dark
      ctx.fillStyle = e.colour;
      ctx.fillRect(x, middle - 5, 12, 12);
      ctx.globalAlpha = 1;
      ctx.fillStyle = "#1f2328";
      ctx.fillText(label, x + 16, middle + 1);
      if (alone) {
        ctx.strokeStyle = "#000";
        ctx.lineWidth = 2;
        ctx.strokeRect(x - 3, y0 + 1, w + 22, LEGEND_ROW - 2);
      }
      hits.push({ x0: x - 3, x1: x + w + 19, y0, y1: y0 + LEGEND_ROW, heads: e.heads });
    }
  }
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#555";
  ctx.textAlign = "center";
  return { lines: { left, right, yq, yk, pitchQ, pitchK, labelW, count, legend, hits, heads, bend } };
}

// A weight matrix in the x·W layout (rows = input features, columns = output features), grey
// from -limit (black) to +limit (white), each head's d_k columns tinted in its colour.
function drawMatrix(ctx, area, frame, block, palette) {
  const { data, n_in, n_out, limit } = block;
  const h = frame.bands, dk = n_out / h;
  const left = 44, top = 2 * TITLE, bottom = 30;
  const cell = Math.min((area.width - left - 10) / n_out, (area.height - top - bottom) / n_in, MAX_CELL);
  const x0 = left, y0 = top, w = cell * n_out, hgt = cell * n_in;
  const image = new ImageData(n_out, n_in);
  for (let i = 0; i < n_in * n_out; i++) {
    const g = Math.round(255 * Math.max(0, Math.min(1, 0.5 + data[i] / (2 * limit))));
    image.data.set([g, g, g, 255], 4 * i);
  }
  const small = scratch(n_out, n_in);
  small.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, x0, y0, w, hgt);
  const widestLabel = drawIndexed(ctx, frame.name, h - 1, 0, 0, false);
  const step = Math.max(1, Math.ceil((widestLabel + 8) / (dk * cell))); // labels never touch
  for (let i = 0; i < h; i++) {
    const x = x0 + i * dk * cell;
    ctx.globalAlpha = 0.35;
    ctx.fillStyle = palette[i % palette.length];
    ctx.fillRect(x, y0, dk * cell, hgt);
    ctx.globalAlpha = 1;
    ctx.fillRect(x, y0 - 7, dk * cell, 5);
    ctx.fillStyle = "#000";
    ctx.fillRect(x - 1, y0 - 2, 2, hgt + 2);
    if (i % step === 0) {
      ctx.fillStyle = "#1f2328";
      drawIndexed(ctx, frame.name, i, x + (dk * cell) / 2, y0 - 14); // W^Q -> W with 0 below, Q above
    }
  }
  ctx.fillStyle = "#000";
  ctx.fillRect(x0 + w - 1, y0 - 2, 2, hgt + 2);
  ctx.font = `${FONT}px ${FONT_FAMILY}`;
  ctx.fillStyle = "#333";
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  ctx.fillText(block.col_label, x0 + w / 2, y0 + hgt + 6);
  ctx.save();
  ctx.translate(x0 - 10, y0 + hgt / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = "bottom";
  ctx.fillText(block.row_label, 0, 0);
  ctx.restore();
  return { matrix: { x0, y0, cell, n_in, n_out, dk } };
}

// "W^Q" with head i drawn as the formulas write it, W_i^Q: the index below and the letter above,
// both at FONT (the smallest text), the W larger; centred on x, on the baseline y. Returns the
// width; draw = false only measures.
function drawIndexed(ctx, name, i, x, y, draw = true) {
  const [base, upper = ""] = name.split("^");
  const lower = String(i);
  ctx.font = `bold ${FONT + 4}px ${FONT_FAMILY}`;
  const wBase = ctx.measureText(base).width;
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`;
  const wUpper = ctx.measureText(upper).width, wLower = ctx.measureText(lower).width;
  const width = wBase + 1 + Math.max(wUpper, wLower);
  if (!draw) return width;
  const left = x - width / 2;
  ctx.textAlign = "left";
  ctx.textBaseline = "alphabetic";
  ctx.font = `bold ${FONT + 4}px ${FONT_FAMILY}`;
  ctx.fillText(base, left, y);
  ctx.font = `bold ${FONT}px ${FONT_FAMILY}`;
  ctx.fillText(upper, left + wBase + 1, y - 7);
  ctx.fillText(lower, left + wBase + 1, y + 4);
  return width;
}

// ---------------------------------------------------------------------------------------------
// One view: its DOM, its state and its handlers. Several views share a page, so everything a view
// needs lives in one object `v`, passed to the functions below; nothing is kept at module level.

// Layout: the message line, the toolbar (maps / lines and a hint), the canvas and the side table.
function buildView(model, el) {
  el.classList.add("attention-view");
  const message = element("div", "av-message", el);
  const toolbar = element("div", "av-toolbar", el);
  const body = element("div", "av-body", el);
  const mapsBox = element("div", "av-maps", body);
  const v = {
    model, el, message, toolbar, body, mapsBox,
    canvas: element("canvas", "av-canvas", mapsBox),
    side: element("div", "av-side", body),
    tooltip: element("div", "av-tooltip", mapsBox),
    ring: element("div", "av-ring", mapsBox), // the keyboard's cell
    live: element("div", "av-live", el), // what the keyboard's cell holds, for a screen reader
    keyboard: false, // the keyboard's cell is on show
    cursor: null, // the keyboard's place: { tile, q, k }, { q } on lines, { row, col } on a matrix
    buttons: {},
    store: newStore(),
    shown: null, // { key, frame, block, maps, geometry } of the last frame drawn with maps
    only: null, // the heads the lines mode shows alone, after a click on their legend entry
    lastSide: null,
  };
  for (const [mode, label] of [["maps", "maps"], ["lines", "lines (query → key)"]]) {
    const b = element("button", "av-mode", toolbar);
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", () => {
      model.set("mode", mode);
      model.save_changes();
    });
    v.buttons[mode] = b;
  }
  const save = element("span", "av-save", toolbar);
  for (const format of ["svg", "png"]) {
    const b = element("button", "av-mode", save);
    b.type = "button";
    b.textContent = `save ${format.toUpperCase()}`;
    b.title = format === "svg" ? "save this view as SVG (vector, one group per head)" : "save this view as PNG, twice the size drawn";
    b.addEventListener("click", () => saveView(v, format));
  }
  if (!model.get("toolbar")) for (const b of Object.values(v.buttons)) b.style.display = "none";
  v.canvas.tabIndex = 0;
  v.canvas.setAttribute("role", "application");
  v.canvas.setAttribute("aria-label", KEYS_HELP);
  v.live.setAttribute("aria-live", "polite");
  v.hint = element("span", "av-hint", toolbar);
  if (!model.get("toolbar")) v.hint.style.display = "none"; // a weight matrix: only the saving
  v.hint.textContent = MAPS_HINT;
  loadTraits(v.store, model);
  return v;
}

const MAPS_HINT = "hover a cell for its weight · click a query (row or word) to follow it";
const KEYS_HINT = "arrow keys: query, key · Page Up/Down: head · Enter: follow the query · Esc: leave";
const KEYS_HELP = "Attention maps. Arrow keys: query up and down, key left and right, on into the next head; "
  + "Page Up and Page Down: head; Enter or Space: follow the query; Escape: leave the maps.";

// Messages: the line above the maps says what is shown, what is coming, or what went wrong.
function setMessage(v, kind, text) {
  v.message.className = `av-message av-${kind}`;
  v.message.textContent = text;
}

function showState(v, key, frame, state, drawFrame) {
  const { model, el } = v;
  // a tooltip names the cell of the frame it was shown on: a new setting takes it away
  if (key !== el.dataset.key || state !== "ok") v.tooltip.style.display = "none";
  el.dataset.key = key;
  el.dataset.state = state;
  el.classList.toggle("av-stale", state !== "ok");
  const what = model.get("key_by").map((n) => `${n} = ${model.get(n)}`).join(", ");
  const notice = model.get("notice");
  if (state === "pending") setMessage(v, "pending", `computing ${what} …`);
  else if (state === "error") {
    const stale = drawFrame ? " (Greyed: the last setting that worked.)" : "";
    setMessage(v, "error", `✗ ${frame.error}${stale}`);
  } else if (notice) setMessage(v, "error", `✗ ${notice}`);
  else setMessage(v, "ok", frame.note || "");
  for (const [mode, b] of Object.entries(v.buttons)) b.classList.toggle("av-on", model.get("mode") === mode);
  showHint(v);
}

function showHint(v) {
  const { model } = v;
  const queryIsControl = model.get("key_by").includes("query");
  if (v.keyboard) v.hint.textContent = KEYS_HINT;
  else v.hint.textContent = model.get("mode") === "lines"
    ? `click a query word for its lines only${queryIsControl ? "" : " (again: all)"} · a head in the legend to see it alone`
    : MAPS_HINT;
  // too little room for every word: say so, and how to see the others (as short as the hint
  // it replaces, so that the toolbar keeps its height)
  if (v.labelStep > 1 && !v.keyboard && model.get("mode") !== "lines") {
    const nth = { 2: "2nd", 3: "3rd" }[v.labelStep] || `${v.labelStep}th`;
    v.hint.textContent = `every ${nth} word labelled: hover a cell for the rest · click a query to follow it`;
  }
}

// for tests and `make bench`: which frame is on screen, and when it was drawn
function announce(v, key, state) {
  const { model, el } = v;
  el.dataset.drawn = String((Number(el.dataset.drawn) || 0) + 1);
  el.dataset.query = String(model.get("query"));
  el.dataset.mode = model.get("mode");
  const detail = { key, state, note: v.message.textContent };
  // the time of the animation frame that paints the drawing
  requestAnimationFrame(() => {
    const t = performance.now();
    window.dispatchEvent(new CustomEvent("attention-view:drawn", { detail: { ...detail, t } }));
  });
}

// Drawing: the frame for the controls' values, or the last good one greyed while it is missing.
function frameForControls(v, key) {
  const frame = v.store.frames[key];
  const block = frame && v.store.blocks[frame.block];
  let state = "ok";
  if (!frame || (!frame.error && !block)) state = "pending";
  else if (frame.error) state = "error";
  if (state === "ok") return { frame, state, drawFrame: frame, block };
  // grey the last good frame; its block is kept here even when the kernel dropped it
  const shown = v.shown;
  return { frame, state, drawFrame: shown && shown.frame, block: shown && shown.block };
}

// The panel's text scale: 1, or more where the notebook's text is larger (view.css).
function textScale(el) {
  const scale = parseFloat(getComputedStyle(el).getPropertyValue("--av-scale"));
  return scale > 0 ? scale : 1;
}

// The maps' height: the panel's own (the model's `height`), or less where the notebook's window is
// too short to show the whole panel (a projector's 1280x720, Presentation Mode's larger text):
// the controls, the message and the toolbar keep their size, the maps give up what is missing,
// down to MIN_FIT_HEIGHT. A side column beside the maps taller than them scrolls. In JupyterLab's
// notebook the panel fits the window; on a slide (RISE) it fits what its slide leaves below what
// comes before it on that slide; elsewhere (the site) the panel keeps its height.
const MIN_FIT_HEIGHT = 220;
function fitHeight(v) {
  const wanted = v.model.get("height");
  const slide = v.el.closest(".reveal .slides section");
  const scroller = slide || v.el.closest(".jp-WindowedPanel-outer");
  if (!scroller) return { height: wanted, sideMax: "" };
  if (v.resize && v.watched !== scroller) {
    v.resize.observe(scroller);
    v.watched = scroller;
  }
  const panel = v.el.closest(".course-panel") || v.el;
  const box = panel.getBoundingClientRect();
  const around = box.height - v.body.getBoundingClientRect().height;
  // on a slide: the screen less RISE's margins (a slide is as tall as its content, up to that,
  // and centred), less what is above the panel on it (its heading, text and code)
  let window_ = scroller.clientHeight;
  let above = 0;
  if (slide) {
    window_ = window.innerHeight - 36; // 36: RISE's margins around a slide (684 of 720 px)
    above = box.top - slide.getBoundingClientRect().top + slide.scrollTop;
  }
  const room = Math.floor(window_ - above - around - 16); // 16: the output's own margins
  const height = Math.max(Math.min(wanted, room), Math.min(wanted, MIN_FIT_HEIGHT));
  const beside = v.side.offsetTop < v.mapsBox.offsetTop + 10; // not wrapped below the maps
  return { height, sideMax: beside ? `${Math.max(height, room)}px` : "" };
}

// Every size read first, then written: one layout per move, not one per read after a write
// (each forced layout of JupyterLab's page costs milliseconds on a long notebook).
function sizeCanvas(v) {
  const width = Math.max(v.mapsBox.clientWidth, 240);
  const { height, sideMax } = fitHeight(v);
  v.scale = textScale(v.el);
  const dpr = window.devicePixelRatio || 1;
  if (v.side.style.maxHeight !== sideMax) v.side.style.maxHeight = sideMax;
  if (v.canvas.style.width !== `${width}px`) v.canvas.style.width = `${width}px`;
  if (v.canvas.style.height !== `${height}px`) v.canvas.style.height = `${height}px`;
  v.canvas.width = Math.round(width * dpr);
  v.canvas.height = Math.round(height * dpr);
  const ctx = v.canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  return { ctx, area: { width, height } };
}

function colormapOf(model) {
  return model.get("colormap").map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
}

// Paint one frame; returns what was drawn where (for hover, click and the tests).
function paint(v, ctx, area, frame, block) {
  const model = v.model;
  FONT = Math.round(BASE_FONT * (v.scale || textScale(v.el)));
  v.el.dataset.font = String(FONT); // for the tests
  if (block.kind === "matrix") {
    return { maps: null, geometry: drawMatrix(ctx, area, frame, block, model.get("palette")) };
  }
  const maps = mapsOf(block);
  ctx.labelStep = 1; // the drawing below raises it when it labels only every n-th word
  const options = {
    palette: model.get("palette"),
    colormap: colormapOf(model),
    selected: model.get("query"),
    focus: model.get("focus_by") ? model.get(model.get("focus_by")) : -1,
    only: v.only, // heads shown alone in the lines mode (a legend entry clicked), or null
    enlarge: model.get("enlarge"),
  };
  const geometry = model.get("mode") === "lines"
    ? drawLines(ctx, area, frame, block, maps, options)
    : drawMaps(ctx, area, frame, block, maps, options);
  return { maps, geometry };
}

function drawFrameForControls(v) {
  const key = currentKey(v.model);
  const { frame, state, drawFrame, block } = frameForControls(v, key);
  showState(v, key, frame, state, drawFrame);
  const { ctx, area } = sizeCanvas(v);
  if (!drawFrame) {
    v.side.innerHTML = "";
    v.lastSide = null;
    v.shown = null;
  } else {
    const { maps, geometry } = paint(v, ctx, area, drawFrame, block);
    v.labelStep = ctx.labelStep || 1;
    v.el.dataset.labelStep = String(v.labelStep); // for the tests
    showHint(v);
    if (drawFrame.side !== v.lastSide) v.side.innerHTML = v.lastSide = drawFrame.side;
    v.shown = { key: state === "ok" ? key : v.shown.key, frame: drawFrame, block, maps, geometry };
  }
  if (v.keyboard) showCursor(v); // the keyboard's cell, on the new frame
  guardPanelKeys(v);
  announce(v, key, state);
}

// A drawing error must not stop the view: say it, and draw again on the next change.
function draw(v) {
  try {
    drawFrameForControls(v);
  } catch (err) {
    v.el.dataset.state = "broken";
    setMessage(v, "error", `✗ The view could not draw this setting (${err}). Move a control to retry.`);
  }
}

// --- saving the view: SVG (vector, one group per head) and PNG (twice the drawn size) ---------

const escapeXml = (text) => String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const round2 = (x) => Math.round(x * 100) / 100;
const ANCHOR = { left: "start", start: "start", center: "middle", right: "end", end: "end" };
const BASELINE = { top: "text-before-edge", middle: "central", bottom: "text-after-edge", alphabetic: "alphabetic" };

// A drawing context that writes SVG: the part of CanvasRenderingContext2D the panel draws with.
// Text widths come from a real canvas context, so the layout is the one on screen.
class SvgContext {
  constructor(width, height, measure) {
    Object.assign(this, { width, height, measure, parts: [], path: [], saved: [], vector: true });
    this.state = { matrix: new DOMMatrix(), fillStyle: "#000", strokeStyle: "#000", lineWidth: 1,
      globalAlpha: 1, font: `${FONT}px ${FONT_FAMILY}`, textAlign: "start", textBaseline: "alphabetic" };
    for (const name of ["fillStyle", "strokeStyle", "lineWidth", "globalAlpha", "font", "textAlign", "textBaseline"]) {
      Object.defineProperty(this, name, { get: () => this.state[name], set: (x) => { this.state[name] = x; } });
    }
    this.imageSmoothingEnabled = false;
  }
  save() { this.saved.push({ ...this.state }); }
  restore() { if (this.saved.length) this.state = this.saved.pop(); }
  translate(x, y) { this.state.matrix = this.state.matrix.translate(x, y); }
  rotate(angle) { this.state.matrix = this.state.matrix.rotate((angle * 180) / Math.PI); }
  setTransform(a, b, c, d, e, f) { this.state.matrix = new DOMMatrix([a, b, c, d, e, f]); }
  clearRect() {}
  measureText(text) { this.measure.font = this.font; return this.measure.measureText(text); }
  group(head, title, part = "") {
    const label = part ? `${title} (${part})` : title;
    this.parts.push(`<g class="head${part ? ` ${part}` : ""}" data-head="${head}"><title>${escapeXml(label)}</title>`);
  }
  ungroup() { this.parts.push("</g>"); }
  attrs() {
    const m = this.state.matrix;
    const alpha = this.globalAlpha < 1 ? ` opacity="${round2(this.globalAlpha)}"` : "";
    return alpha + (m.isIdentity ? "" : ` transform="matrix(${[m.a, m.b, m.c, m.d, m.e, m.f].map(round2).join(" ")})"`);
  }
  rect(x, y, w, h, paint) { this.parts.push(`<rect x="${round2(x)}" y="${round2(y)}" width="${round2(w)}" height="${round2(h)}" ${paint}${this.attrs()}/>`); }
  fillRect(x, y, w, h) { this.rect(x, y, w, h, `fill="${escapeXml(this.fillStyle)}"`); }
  strokeRect(x, y, w, h) { this.rect(x, y, w, h, `fill="none" stroke="${escapeXml(this.strokeStyle)}" stroke-width="${round2(this.lineWidth)}"`); }
  beginPath() { this.path = []; }
  moveTo(x, y) { this.path.push(`M${round2(x)} ${round2(y)}`); }
  lineTo(x, y) { this.path.push(`L${round2(x)} ${round2(y)}`); }
  quadraticCurveTo(cx, cy, x, y) { this.path.push(`Q${round2(cx)} ${round2(cy)} ${round2(x)} ${round2(y)}`); }
  closePath() { this.path.push("Z"); }
  stroke() { this.parts.push(`<path d="${this.path.join("")}" fill="none" stroke="${escapeXml(this.strokeStyle)}" stroke-width="${round2(this.lineWidth)}"${this.attrs()}/>`); }
  fill() { this.parts.push(`<path d="${this.path.join("")}" fill="${escapeXml(this.fillStyle)}"${this.attrs()}/>`); }
  fillText(text, x, y) {
    const size = (/([\d.]+)px/.exec(this.font) || [0, FONT])[1];
    const family = this.font.slice(this.font.indexOf("px ") + 3);
    const weight = /\bbold\b/.test(this.font) ? ` font-weight="bold"` : "";
    this.parts.push(`<text x="${round2(x)}" y="${round2(y)}" font-size="${size}" font-family="${escapeXml(family)}"${weight} text-anchor="${ANCHOR[this.textAlign] || "start"}" dominant-baseline="${BASELINE[this.textBaseline] || "alphabetic"}" fill="${escapeXml(this.fillStyle)}"${this.attrs()}>${escapeXml(text)}</text>`);
  }
  drawImage(image, x, y, w, h) {
    this.parts.push(`<image href="${image.toDataURL()}" x="${round2(x)}" y="${round2(y)}" width="${round2(w)}" height="${round2(h)}" preserveAspectRatio="none" style="image-rendering:pixelated"${this.attrs()}/>`);
  }
  toString() {
    const { width, height } = this;
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
      `<rect width="${width}" height="${height}" fill="#fff"/>${this.parts.join("")}</svg>\n`;
  }
}

// The file name: the notebook (or panel), the setting and the mode, e.g.
// 03_per_head_projections_d_model64_h4_lines.svg
function exportName(v, extension) {
  const setting = v.shown.key.replace(/=/g, "").replace(/\|/g, "_");
  const followed = v.model.get("query") >= 0 && !v.model.get("key_by").includes("query");
  const query = followed ? `_query${v.model.get("query")}` : ""; // not twice when it is the setting
  const mode = v.shown.block.kind === "matrix" ? "matrix" : v.model.get("mode");
  return `${v.model.get("name") || "attention"}_${setting}${query}_${mode}.${extension}`;
}

// The view as it is drawn now, as an SVG text or a PNG blob (scale × the CSS size, on white).
function exportView(v, format, scale = 2) {
  if (!v.shown) return null;
  const area = { width: v.canvas.clientWidth || 320, height: v.canvas.clientHeight || v.model.get("height") };
  const { frame, block } = v.shown;
  if (format === "svg") {
    const svg = new SvgContext(area.width, area.height, scratch(1, 1).getContext("2d"));
    paint(v, svg, area, frame, block);
    return svg.toString();
  }
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(area.width * scale);
  canvas.height = Math.round(area.height * scale);
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  paint(v, ctx, area, frame, block);
  return canvas;
}

function download(name, blob) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

function saveView(v, format) {
  try {
    const made = exportView(v, format);
    if (!made) return;
    if (format === "svg") download(exportName(v, "svg"), new Blob([made], { type: "image/svg+xml" }));
    else made.toBlob((blob) => download(exportName(v, "png"), blob), "image/png");
  } catch (err) {
    setMessage(v, "error", `✗ Could not save the view (${err}).`);
  }
}

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

// The h slider's working stops. With `every_h` off, h stops only where d_model / h is whole: the
// kernel sends those h for each d_model (`h_stops`); the rule is helpers/panels/base.py's
// `_working_h`. A key press goes on the way it moved (4 → 5 goes on to 8 at d_model = 64), a drag,
// a new d_model or the switch turned off go to the nearest (the larger on a tie).
function workingH(stops, h, previous) {
  if (!stops || !stops.length || stops.includes(h)) return h;
  const up = stops.filter((s) => s > h), down = stops.filter((s) => s < h);
  if (previous !== null && h > previous && up.length) return up[0];
  if (previous !== null && h < previous && down.length) return down[down.length - 1];
  if (up.length && (!down.length || up[0] - h <= h - down[down.length - 1])) return up[0];
  return down[down.length - 1];
}

// Moves h on to a working stop; true if it did (the view then draws on that change, not this one).
// After jslink's update of this very change, so that jslink carries the new h to the slider too.
function keepHWorking(v, changed) {
  const { model } = v;
  const stops = (model.get("h_stops") || {})[String(model.get("d_model"))];
  const h = model.get("h");
  const previous = changed === "h" && v.byKeys ? v.h : null;
  v.h = model.get("every_h") ? h : workingH(stops, h, previous);
  if (v.h === h) return false;
  const next = v.h;
  Promise.resolve().then(() => {
    model.set("h", next);
    model.save_changes();
  });
  return true;
}

// Whether the last move in this panel came from the keyboard (a key steps on) or the pointer
function watchHowControlsMove(v) {
  const inPanel = (event) => {
    const panel = v.el.closest(".course-panel");
    return panel && event.target instanceof Node && panel.contains(event.target);
  };
  const onKey = (event) => { if (inPanel(event)) v.byKeys = MOVES.includes(event.key); };
  const onPointer = (event) => { if (inPanel(event)) v.byKeys = false; };
  window.addEventListener("keydown", onKey, true);
  window.addEventListener("pointerdown", onPointer, true);
  return () => {
    window.removeEventListener("keydown", onKey, true);
    window.removeEventListener("pointerdown", onPointer, true);
  };
}

// Events: the mouse, the keyboard, the model's traits and messages, size and zoom. Returns the clean-up.
function listen(v) {
  const { model, canvas } = v;
  canvas.addEventListener("mousemove", (event) => showTooltip(v, event));
  canvas.addEventListener("mouseleave", () => (v.tooltip.style.display = "none"));
  canvas.addEventListener("click", (event) => selectQuery(v, event));
  canvas.addEventListener("keydown", (event) => onKey(v, event));
  // the keyboard's cell shows when the keyboard brought the focus (or is used), not on a click
  const byKeyboard = (on) => {
    v.keyboard = on;
    if (on) showCursor(v);
    else hideCursor(v);
    showHint(v);
  };
  canvas.addEventListener("focus", () => byKeyboard(canvas.matches(":focus-visible")));
  canvas.addEventListener("blur", () => byKeyboard(false));
  canvas.addEventListener("mousedown", () => byKeyboard(false));
  const traits = ["mode", "query", "notice", "height", "palette", "colormap"];
  const controls = [...new Set([...model.get("key_by"), model.get("focus_by")].filter(Boolean))];
  const redraw = () => draw(v);
  for (const name of [...traits, ...controls]) model.on(`change:${name}`, redraw);
  // h, d_model and the switch first move h to a working stop; the view draws once h is there
  const stopping = Object.keys(model.get("h_stops") || {}).length ? ["h", "d_model", "every_h"] : [];
  const stops = Object.fromEntries(stopping.map((name) => [name, () => keepHWorking(v, name) || redraw()]));
  for (const name of stopping) {
    if (controls.includes(name)) model.off(`change:${name}`, redraw);
    model.on(`change:${name}`, stops[name]);
  }
  const stopWatching = watchHowControlsMove(v);
  v.h = model.get("h"); // where h was before a move
  const reload = () => {
    loadTraits(v.store, model); // a first set, or a whole new one (a new text)
    draw(v);
  };
  const onDelta = (msg, buffers) => {
    if (!msg || msg.type !== "delta") return;
    applyDelta(v.store, msg, buffers); // a step: what it adds and drops
    draw(v);
  };
  for (const name of ["frames", "blocks", "buffer"]) model.on(`change:${name}`, reload);
  model.on("msg:custom", onDelta);
  // a new width, a new window height (fitHeight), or new text sizes (Presentation Mode) redraw
  const resize = new ResizeObserver(redraw);
  resize.observe(v.mapsBox);
  resize.observe(v.toolbar);
  v.resize = resize; // fitHeight adds the notebook's window once the view is in it
  const stopZoom = watchZoom(redraw);
  return () => {
    resize.disconnect();
    stopZoom();
    stopWatching();
    for (const name of stopping) model.off(`change:${name}`, stops[name]);
    for (const name of [...traits, ...controls]) model.off(`change:${name}`, redraw);
    for (const name of ["frames", "blocks", "buffer"]) model.off(`change:${name}`, reload);
    model.off("msg:custom", onDelta);
  };
}

// a zoom changes devicePixelRatio: redraw so the canvas stays sharp
function watchZoom(redraw) {
  let zoom = null;
  const onZoom = () => {
    redraw();
    watch();
  };
  const watch = () => {
    zoom = matchMedia(`(resolution: ${window.devicePixelRatio}dppx)`);
    zoom.addEventListener("change", onZoom, { once: true });
  };
  watch();
  return () => zoom && zoom.removeEventListener("change", onZoom);
}

// For tests: client coordinates of what is drawn, and what colour it has.
function testHooks(v) {
  const canvas = v.canvas;
  return {
    // client coordinates of a cell's centre, for tests that point at it
    cellCenter(head, q, k) {
      const rect = canvas.getBoundingClientRect();
      const g = v.shown && v.shown.geometry;
      if (g && g.matrix) {
        const m = g.matrix; // (row, column) of the matrix
        return { x: rect.left + m.x0 + (k + 0.5) * m.cell, y: rect.top + m.y0 + (q + 0.5) * m.cell };
      }
      const t = g && g.tiles && g.tiles.find((tile) => tile.head === head);
      if (!t) return null;
      return { x: rect.left + t.x + (k + 0.5) * t.cell, y: rect.top + t.y + (q + 0.5) * t.cell };
    },
    labelCenter(q) {
      const rect = canvas.getBoundingClientRect();
      if (!v.shown) return null;
      const g = v.shown.geometry;
      if (g.lines) return { x: rect.left + g.lines.left - 10, y: rect.top + g.lines.yq(q) };
      const t = g.labelled || g.tiles[0];
      return { x: rect.left + t.x - 10, y: rect.top + t.y + (q + 0.5) * t.cell };
    },
    shape() {
      return v.shown ? [v.shown.maps.h, v.shown.maps.tq] : null;
    },
    // the colour drawn inside a cell, a fifth of the way in (clear of the number printed there)
    pixelOf(head, q, k) {
      const g = v.shown && v.shown.geometry;
      const t = g && (g.matrix ? { x: g.matrix.x0, y: g.matrix.y0, cell: g.matrix.cell }
        : g.tiles && g.tiles.find((tile) => tile.head === head));
      if (!t) return null;
      const dpr = canvas.width / canvas.clientWidth;
      const x = (t.x + (k + 0.2) * t.cell) * dpr, y = (t.y + (q + 0.2) * t.cell) * dpr;
      return [...canvas.getContext("2d").getImageData(Math.round(x), Math.round(y), 1, 1).data];
    },
    // a cell's weight as printed inside it: [text colour, cell colour] (null if not printed)
    numberColours(head, q, k) {
      const g = v.shown && v.shown.geometry;
      const t = g && g.tiles && g.tiles.find((tile) => tile.head === head);
      if (!t || t.cell < MIN_NUMBER_CELL) return null;
      const { maps, model } = { maps: v.shown.maps, model: v.model };
      const selected = model.get("query");
      const dimmed = selected >= 0 && selected < maps.tq && q !== selected;
      const cell = cellColour(colormapOf(model), maps.at(head, q, k), dimmed);
      return [textOn(cell), cell];
    },
    // the lines mode: for each head drawn, how many pixels between the words hold its line
    // colour (within 12 levels), and where its legend is
    headPixels() {
      const L = v.shown && v.shown.geometry.lines;
      if (!L) return null;
      const dpr = canvas.width / canvas.clientWidth;
      const x0 = Math.round((L.left + 4) * dpr), x1 = Math.round((L.right - 4) * dpr);
      const y0 = Math.round((L.legend + 12) * dpr);
      const img = canvas.getContext("2d").getImageData(x0, y0, x1 - x0, canvas.height - y0).data;
      const colours = L.heads.map((i) => [1, 3, 5].map((j) => parseInt(this.lineColour(i).slice(j, j + 2), 16)));
      const counts = L.heads.map(() => 0);
      for (let p = 0; p < img.length; p += 4) {
        colours.forEach((c, n) => {
          if (c.every((x, j) => Math.abs(img[p + j] - x) <= 12)) counts[n] += 1;
        });
      }
      return Object.fromEntries(L.heads.map((i, n) => [i, counts[n]]));
    },
    lineColour(i) {
      return lineColour(headColour(v.shown.block, v.model.get("palette"), i));
    },
    legendCenter(n) {
      const L = v.shown && v.shown.geometry.lines;
      const rect = canvas.getBoundingClientRect();
      const hit = L && L.hits[n];
      return hit ? { x: rect.left + (hit.x0 + hit.x1) / 2, y: rect.top + (hit.y0 + hit.y1) / 2 } : null;
    },
    legendSize() {
      const L = v.shown && v.shown.geometry.lines;
      return L ? L.hits.length : 0;
    },
    exportSvg() {
      return exportView(v, "svg");
    },
    exportPng(scale = 2) {
      const canvas = exportView(v, "png", scale);
      return canvas && { width: canvas.width, height: canvas.height, url: canvas.toDataURL("image/png") };
    },
    exportName(extension) {
      return exportName(v, extension);
    },
    linesDrawn() {
      return v.shown && v.shown.geometry.lines ? v.shown.geometry.lines.count : 0;
    },
  };
}

function render({ model, el }) {
  const v = buildView(model, el);
  const stop = listen(v);
  // a view rendered late (or again) may have missed deltas: ask the kernel for everything
  model.send({ type: "snapshot" });
  el.attentionView = testHooks(v);
  draw(v);
  return stop;
}

export default { render };
