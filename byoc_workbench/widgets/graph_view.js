// The workbench diagram: a Graphviz SVG with pan (drag), zoom (wheel and
// buttons) and node clicks. Python owns every decision; this file only
// reports clicks (traitlet `selected`) and double-clicks (a "toggle" message).

const MIN_SCALE = 0.05;
const MAX_SCALE = 8;
const DRAG_SLOP = 4; // pixels a press may move and still count as a click

function render({ model, el }) {
  el.classList.add("byoc-graph-root");
  const toolbar = document.createElement("div");
  toolbar.className = "byoc-graph-toolbar";
  const frame = document.createElement("div");
  frame.className = "byoc-graph";
  const viewport = document.createElement("div");
  viewport.className = "byoc-viewport";
  frame.appendChild(viewport);
  el.appendChild(toolbar);
  el.appendChild(frame);

  let view = { x: 0, y: 0, s: 1 };
  let size = { w: 0, h: 0 };
  let userMoved = false;
  let drag = null;
  let suppressClick = false;

  const apply = () => {
    viewport.style.transform = `translate(${view.x}px, ${view.y}px) scale(${view.s})`;
    frame.dataset.scale = view.s.toFixed(3);
  };

  const fit = () => {
    const cw = frame.clientWidth;
    const ch = frame.clientHeight;
    if (!cw || !ch || !size.w || !size.h) return false;
    const s = Math.min(cw / size.w, ch / size.h, 1.5) * 0.96;
    view = { s, x: (cw - size.w * s) / 2, y: (ch - size.h * s) / 2 };
    apply();
    return true;
  };

  const zoomAt = (factor, px, py) => {
    const s = Math.min(MAX_SCALE, Math.max(MIN_SCALE, view.s * factor));
    const k = s / view.s;
    view = { s, x: px - (px - view.x) * k, y: py - (py - view.y) * k };
    userMoved = true;
    apply();
  };

  const button = (text, title, cls, action) => {
    const b = document.createElement("button");
    b.textContent = text;
    b.title = title;
    b.className = `byoc-zoom ${cls}`;
    b.addEventListener("click", (e) => {
      e.stopPropagation();
      action();
    });
    toolbar.appendChild(b);
  };
  const centre = () => [frame.clientWidth / 2, frame.clientHeight / 2];
  button("+", "zoom in", "byoc-zoom-in", () => zoomAt(1.25, ...centre()));
  button("−", "zoom out", "byoc-zoom-out", () => zoomAt(0.8, ...centre()));
  button("reset", "fit the whole diagram", "byoc-zoom-reset", () => {
    userMoved = false;
    fit();
  });
  const hint = document.createElement("span");
  hint.className = "byoc-graph-hint";
  hint.textContent = "drag to pan · wheel to zoom · click a node · double-click a composite or subgraph to open it";
  toolbar.appendChild(hint);

  const highlight = () => {
    for (const g of viewport.querySelectorAll("g.byoc-selected")) g.classList.remove("byoc-selected");
    const id = model.get("selected");
    if (!id) return;
    const g = viewport.querySelector(`g.node[id="${CSS.escape(id)}"]`);
    if (g) g.classList.add("byoc-selected");
  };

  const draw = () => {
    viewport.innerHTML = model.get("svg") || "";
    frame.style.height = `${model.get("height")}px`;
    const svg = viewport.querySelector("svg");
    size = { w: 0, h: 0 };
    if (svg) {
      const vb = svg.viewBox && svg.viewBox.baseVal;
      size = { w: vb && vb.width ? vb.width : svg.getBBox().width, h: vb && vb.height ? vb.height : svg.getBBox().height };
      // Graphviz writes sizes in pt; draw one SVG unit as one CSS pixel so zoom is exact.
      svg.setAttribute("width", `${size.w}px`);
      svg.setAttribute("height", `${size.h}px`);
      // Native tooltips from <title> would hide the details panel's job and flicker while panning.
      for (const t of svg.querySelectorAll("g.node > title, g.cluster > title")) t.remove();
    }
    if (!userMoved) fit();
    highlight();
  };

  const onWheel = (e) => {
    e.preventDefault();
    const r = frame.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  };
  const onDown = (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
    suppressClick = false;
  };
  const onMove = (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < DRAG_SLOP) return;
    drag.moved = true;
    frame.classList.add("byoc-dragging");
    view = { ...view, x: drag.vx + dx, y: drag.vy + dy };
    userMoved = true;
    apply();
  };
  const onUp = () => {
    if (!drag) return;
    suppressClick = drag.moved;
    drag = null;
    frame.classList.remove("byoc-dragging");
  };
  const onClick = (e) => {
    if (suppressClick) {
      suppressClick = false;
      return;
    }
    const g = e.target.closest && e.target.closest("g.node");
    if (!g || !g.id || g.id === "legend") return;
    model.set("selected", g.id);
    model.save_changes();
    highlight();
  };
  const onDblClick = (e) => {
    const g = e.target.closest && e.target.closest("g.node, g.cluster");
    if (!g || !g.id) return;
    e.preventDefault();
    model.send({ event: "toggle", id: g.id });
  };

  frame.addEventListener("wheel", onWheel, { passive: false });
  frame.addEventListener("pointerdown", onDown);
  window.addEventListener("pointermove", onMove);
  window.addEventListener("pointerup", onUp);
  frame.addEventListener("click", onClick);
  frame.addEventListener("dblclick", onDblClick);
  // The output area may have no width yet when the widget first renders.
  const resize = new ResizeObserver(() => {
    if (!userMoved) fit();
  });
  resize.observe(frame);

  const onSvg = () => draw();
  model.on("change:svg", onSvg);
  model.on("change:selected", highlight);
  model.on("change:height", onSvg);
  draw();

  return () => {
    resize.disconnect();
    window.removeEventListener("pointermove", onMove);
    window.removeEventListener("pointerup", onUp);
    model.off("change:svg", onSvg);
    model.off("change:selected", highlight);
    model.off("change:height", onSvg);
  };
}

export default { render };
