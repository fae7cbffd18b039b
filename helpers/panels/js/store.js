// The browser half of helpers/panels/view.py: it draws attention maps the kernel computed. It is
// one ES module kept in parts in panels/js/, joined in the order view.py's VIEW_JS gives (no
// build step); this part holds the constants and the frames' store.
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
