// The three ways a frame is drawn: maps (a tile per head), lines (a query's weights as lines),
// and a weight matrix (04's block matrix).
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

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
