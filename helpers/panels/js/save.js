// Saving the view as SVG or PNG.
// (One part of the panels' view: helpers/panels/view.py joins panels/js/ into one module.)

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
