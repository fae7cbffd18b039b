// One view: its DOM, its messages, its fit to the window or the slide, and painting a frame.
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

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
