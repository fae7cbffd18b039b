// The course's panels on a page with no kernel (course.site). Each panel gets its controls and
// its view, drawn by the course's own attention_view.js from the frames the page carries
// (window.COURSE_PANELS, written by the build with the same code and checks as the notebook).
// A control moves the view's trait as jslink does in JupyterLab; nothing is computed here.
(function () {
  "use strict";

  function bytes(base64) {
    const text = atob(base64);
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return new DataView(out.buffer);
  }

  // What attention_view.js asks of its model: get, set + save_changes, on/off, send.
  function pageModel(traits, buffer) {
    const state = { ...traits, buffer };
    const listeners = {};
    return {
      get: (name) => state[name],
      set(name, value) {
        if (state[name] === value) return;
        state[name] = value;
        for (const f of (listeners[`change:${name}`] || []).slice()) f();
      },
      save_changes() {},
      send() {}, // no kernel to ask: every frame is on the page already
      on(event, f) {
        (listeners[event] = listeners[event] || []).push(f);
      },
      off(event, f) {
        listeners[event] = (listeners[event] || []).filter((g) => g !== f);
      },
      // several traits at once, then their change events: the view never sees half of them
      update(changes) {
        const changed = Object.keys(changes).filter((name) => state[name] !== changes[name]);
        Object.assign(state, changes);
        for (const name of changed) for (const f of (listeners[`change:${name}`] || []).slice()) f();
      },
    };
  }

  function element(tag, className, parent) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (parent) parent.appendChild(e);
    return e;
  }

  function labelled(control, row) {
    const box = element("div", "widget-inline-hbox course-site-control", row);
    const label = element("label", "widget-label", box);
    label.textContent = control.description;
    return box;
  }

  // a slider (IntSlider, or SelectionSlider over its options' indices) with its readout
  function slider(control, model, row) {
    const box = labelled(control, row);
    box.classList.add("widget-slider");
    const input = element("input", "course-site-range", box);
    const options = control.options;
    Object.assign(input, {
      type: "range",
      min: options ? 0 : control.min,
      max: options ? options.length - 1 : control.max,
      step: options ? 1 : control.step,
      value: control.value,
    });
    input.setAttribute("aria-label", control.description);
    input.dataset.control = control.name;
    const readout = element("output", "widget-readout", box);
    const show = (value) => {
      readout.textContent = options ? options[value] : String(value);
      input.setAttribute("aria-valuetext", readout.textContent);
    };
    show(control.value);
    input.addEventListener("input", () => {
      show(Number(input.value));
      model.set(control.name, Number(input.value));
    });
    // the view can move it too (a head picked with the keys): the slider follows, as jslink does
    model.on(`change:${control.name}`, () => {
      const value = model.get(control.name);
      if (Number(input.value) !== value) input.value = value;
      show(value);
    });
  }

  function buttons(control, model, row) {
    const box = labelled(control, row);
    const group = element("div", "widget-toggle-buttons", box);
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", control.description);
    const press = (i) =>
      all.forEach((b, j) => {
        b.classList.toggle("mod-active", j === i);
        b.setAttribute("aria-pressed", String(j === i));
      });
    const all = control.options.map((text, i) => {
      const b = element("button", "widget-toggle-button jupyter-button", group);
      b.type = "button";
      b.textContent = text;
      b.dataset.control = control.name;
      b.addEventListener("click", () => model.set(control.name, i));
      return b;
    });
    press(control.value);
    // a click on the map (a query row) moves it too: the buttons follow, as jslink does
    model.on(`change:${control.name}`, () => press(model.get(control.name)));
  }

  // a switch (a Checkbox: 03's "every h"), a trait of the view as jslink ties it in JupyterLab
  function checkbox(control, model, row) {
    const box = element("div", "widget-inline-hbox widget-checkbox course-site-control", row);
    const label = element("label", "widget-label-basic", box);
    const input = element("input", "", label);
    Object.assign(input, { type: "checkbox", checked: Boolean(control.value) });
    input.dataset.control = control.name;
    element("span", "", label).textContent = control.description;
    input.addEventListener("change", () => model.set(control.name, input.checked));
    model.on(`change:${control.name}`, () => {
      input.checked = Boolean(model.get(control.name));
    });
  }

  // an input that needs Python (12's text box): shown as it was, with where it works; where the
  // build computed other sentences' frames (presets), a button for each
  function needsPython(control, row, live, model, presets) {
    const box = labelled(control, row);
    const input = element("input", "course-site-frozen", box);
    Object.assign(input, { type: "text", value: control.value, disabled: true });
    const note = element("span", "course-site-note", box);
    const other = presets && presets.length > 1 ? "a text of your own" : `another ${control.description || "input"}`;
    note.innerHTML = `${other} needs the live notebook (${live})`;
    if (!presets || presets.length < 2) return;
    const choices = element("div", "widget-inline-hbox course-site-control course-site-presets", row);
    element("label", "widget-label", choices).textContent = "or";
    const group = element("div", "widget-toggle-buttons", choices);
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "the notebook's sentences");
    const all = presets.map((preset, i) => {
      const b = element("button", "widget-toggle-button jupyter-button", group);
      b.type = "button";
      b.textContent = `sentence ${i + 1}`;
      b.title = preset.text;
      b.dataset.preset = String(i);
      b.addEventListener("click", () => {
        input.value = preset.text;
        model.update({ query: -1, notice: "", buffer: bytes(preset.buffer), blocks: preset.blocks, frames: preset.frames });
        all.forEach((other, j) => {
          other.classList.toggle("mod-active", j === i);
          other.setAttribute("aria-pressed", String(j === i));
        });
      });
      b.classList.toggle("mod-active", i === 0);
      b.setAttribute("aria-pressed", String(i === 0));
      return b;
    });
  }

  function mountPanel(host, data) {
    const panel = element("div", "course-panel course-site-panel-body", host);
    const model = pageModel(data.traits, bytes(data.buffer));
    for (const items of data.rows) {
      const row = element("div", "widget-hbox course-site-row", panel);
      for (const control of items) {
        if (control.kind === "slider" || control.kind === "selection") slider(control, model, row);
        else if (control.kind === "buttons") buttons(control, model, row);
        else if (control.kind === "switch") checkbox(control, model, row);
        else needsPython(control, row, window.COURSE_LIVE || "run it with `make lab`", model, data.presets);
      }
    }
    const el = element("div", "course-site-view", panel);
    window.CourseAttentionView.render({ model, el });
    host.model = model;
  }

  // a training curve: its last line and picture, as the notebook showed them when it finished
  function mountPicture(host, data) {
    const body = element("div", "course-site-picture", host);
    element("div", "course-site-line", body).textContent = data.line;
    const img = element("img", "", body);
    img.src = `data:image/png;base64,${data.png}`;
    img.alt = data.alt;
    img.style.width = data.width;
  }

  // "Predict, then run" (helpers/panels/predict.py): the same reading of a typed answer as
  // judge() there, and the same messages; tests/browser/test_site.py types into one
  const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
  const SHAPE_TEXT = /^[\s\d(),\[\]x×*]*$/;
  const shapeText = (shape) => (shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`);
  const numberText = (x) => String(Number(x.toPrecision(4)));
  function judge(data, text) {
    text = text.trim();
    const hint = data.hint ? ` ${data.hint}` : "";
    const answer = data.answer;
    if (data.answer_kind === "shape") {
      const numbers = text.match(/\d+/g);
      if (!numbers || !SHAPE_TEXT.test(text)) return [null, "Type the shape as whole numbers, like (2, 3)."];
      const guess = numbers.map(Number);
      if (guess.length === answer.length && guess.every((n, i) => n === answer[i])) return [true, `✓ Right: ${shapeText(answer)}.`];
      if (guess.length !== answer.length) {
        return [false, `✗ Not ${shapeText(guess)}: the answer has ${answer.length} dims, not ${guess.length}.${hint}`];
      }
      return [false, `✗ Not ${shapeText(guess)}.${hint}`];
    }
    if (data.answer_kind === "number") {
      if (!NUMBER.test(text)) return [null, "Type a number, like 0.5."];
      const guess = Number(text);
      if (Math.abs(guess - answer) <= data.tolerance * Math.max(1, Math.abs(answer))) return [true, `✓ Right: ${numberText(answer)}.`];
      return [false, `✗ Not ${numberText(guess)}.${hint}`];
    }
    if (text === answer) return [true, `✓ Right: ${answer}.`];
    return [false, `✗ Not ${text}.${hint}`];
  }

  function mountPredict(host, data) {
    const body = element("div", "course-panel course-predict", host);
    element("div", "", body).innerHTML = data.question; // built and escaped by the course's Python
    const row = element("div", "widget-hbox course-site-row", body);
    const feedback = element("div", "course-predict-feedback", body);
    feedback.setAttribute("aria-live", "polite");
    const say = (text) => { feedback.textContent = text; };
    const check = (text) => say(text.trim() ? judge(data, text)[1] : "");
    const button = (label, onClick) => {
      const b = element("button", "jupyter-button widget-button", row);
      b.type = "button";
      b.textContent = label;
      b.addEventListener("click", onClick);
      return b;
    };
    if (data.answer_kind === "choice") {
      for (const option of data.options) button(option, () => check(option)).dataset.option = option;
    } else {
      const input = element("input", "course-predict-input", row);
      Object.assign(input, { type: "text", placeholder: `your prediction, like ${data.answer_kind === "shape" ? "(2, 3)" : "0.5"}` });
      input.setAttribute("aria-label", "your prediction");
      input.addEventListener("keydown", (event) => { if (event.key === "Enter") check(input.value); });
      button("check", () => check(input.value));
    }
    button("show the answer", () => say(`The answer: ${data.answer_text}.`));
  }

  function mount() {
    for (const host of document.querySelectorAll("[data-course-panel]")) {
      const data = (window.COURSE_PANELS || [])[Number(host.dataset.coursePanel)];
      const waiting = host.querySelector(".course-site-waiting");
      try {
        if (!data) throw new Error("its frames are missing from this page");
        if (data.kind === "picture") mountPicture(host, data);
        else if (data.kind === "predict") mountPredict(host, data);
        else mountPanel(host, data);
        if (waiting) waiting.remove();
      } catch (err) {
        if (waiting) waiting.textContent = `✗ This panel could not be drawn here (${err}); it works in the live notebook.`;
      }
    }
    window.COURSE_PANELS_READY = performance.now();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mount);
  else mount();
})();
