// The maps' layout (tiles, labels) and drawing one tile: its cells, title, labels, colour bar.
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

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
