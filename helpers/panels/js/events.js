// The controls: h kept on values that work, and what each trait or message redraws; `render`.
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

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
