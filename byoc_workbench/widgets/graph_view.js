// The workbench diagram: a Graphviz SVG with pan (drag), zoom (Ctrl/⌘ + wheel,
// pinch, buttons) and node clicks. Python owns every decision; this file only
// reports clicks (traitlet `selected`) and double-clicks (a "toggle" message).
//
// Like an embedded map, a plain wheel scrolls the page and only Ctrl/⌘ + wheel
// zooms (browsers deliver a trackpad pinch as Ctrl + wheel), so scrolling a
// notebook past a diagram never gets caught in it.

const MIN_SCALE = 0.02;
const MAX_SCALE = 8;
const MAX_FIRST_SCALE = 1.5; // a small graph is not blown up past this at its first view or at "fit"
const FIT_MARGIN = 0.98; // of the box that "fit" fills: the diagram's edges stay clear of the box's border
const MAX_BOX_PX = 720; // the box takes the screen's height up to this, less the toolbar above it
const OPEN_WAIT_MS = 30000; // how long a double-clicked node waits for its opened drawing
const OPEN_MARGIN = 8; // px between the box's edge and an opened group's top or left
const READABLE_PX = 11; // on-screen height of a node label at the first view
const DRAG_SLOP = 4; // pixels a press may move and still count as a click
const HINT_MS = 1500;
const IS_MAC = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
const MOD_KEY = IS_MAC ? "⌘" : "Ctrl";

function median(values) {
  const v = values.filter((x) => x > 0).sort((a, b) => a - b);
  return v.length ? v[v.length >> 1] : 0;
}

// The median height of node labels in SVG units: measured where the SVG is laid
// out, else guessed from the font size (a line is about 1.15 of it).
function labelHeight(svg) {
  const labels = [...svg.querySelectorAll("g.node text")].slice(0, 400);
  let measured = 0;
  try {
    measured = median(labels.map((t) => t.getBBox().height));
  } catch {
    measured = 0; // Firefox throws for an SVG that is not laid out yet
  }
  return measured || 1.15 * median(labels.map((t) => parseFloat(t.getAttribute("font-size"))));
}

// Where the box may show empty space: `slack` of its width (0 for a fresh view,
// more while the user drags) beyond the graph's edge; a graph smaller than the
// box stays wholly inside it.
function clampAxis(pos, len, box, slack) {
  if (len <= box) return Math.min(Math.max(pos, 0), box - len);
  return Math.min(Math.max(pos, box * (1 - slack) - len), box * slack);
}

function render({ model, el }) {
  el.classList.add("byoc-graph-root");
  const toolbar = document.createElement("div");
  toolbar.className = "byoc-graph-toolbar";
  const frame = document.createElement("div");
  frame.className = "byoc-graph";
  const viewport = document.createElement("div");
  viewport.className = "byoc-viewport";
  const overlay = document.createElement("div");
  overlay.className = "byoc-graph-overlay";
  overlay.textContent = `${MOD_KEY} + scroll to zoom · drag to move`;
  const corner = document.createElement("div"); // the time map's legend, held in view (see placeLegend)
  corner.className = "byoc-legend-corner";
  corner.title = "the legend: click to fold or unfold it";
  corner.hidden = true;
  frame.append(viewport, overlay);
  const stage = document.createElement("div"); // the box and, beside it, the legend
  stage.className = "byoc-graph-stage";
  stage.append(frame, corner);
  // In the toolbar's row, not under it: on a 768 px screen the box needs every line of height.
  const hint = document.createElement("span");
  hint.className = "byoc-graph-hint";
  hint.textContent =
    `${MOD_KEY} + scroll or pinch: zoom · drag: move · click a node: details · double-click a group: open it`;
  el.append(toolbar, stage);

  let view = { x: 0, y: 0, s: 1 };
  let size = { w: 0, h: 0 };
  let readable = 1; // the scale at which labels are READABLE_PX tall, set by firstView
  let mode = "first"; // "first": the first view, redone on resize; "fit": the whole diagram; "free": user moved
  let drag = null;
  let suppressClick = false;
  let hintTimer = 0;
  // A double-clicked node waiting for its opened drawing: { id, at }.
  let opening = null;

  const level = document.createElement("span");
  level.className = "byoc-zoom-level";

  const apply = (slack = 0.5) => {
    view = {
      s: view.s,
      x: clampAxis(view.x, size.w * view.s, frame.clientWidth, slack),
      y: clampAxis(view.y, size.h * view.s, frame.clientHeight, slack),
    };
    viewport.style.transform = `translate(${view.x}px, ${view.y}px) scale(${view.s})`;
    frame.dataset.scale = view.s.toFixed(3);
    frame.dataset.mode = mode;
    level.textContent = `${Math.round(view.s * 100)}%`;
  };

  const svgEl = () => viewport.querySelector("svg");
  const nodes = () => [...viewport.querySelectorAll("g.node")].filter((g) => g.id && g.id !== "legend");
  const findNode = (id) => (id ? viewport.querySelector(`g.node[id="${CSS.escape(id)}"]`) : null);

  // A node's centre in SVG units (one unit is one CSS pixel at scale 1).
  const centreOf = (g) => {
    const r = g.getBoundingClientRect();
    const o = svgEl().getBoundingClientRect();
    if (!r.width && !r.height) return null;
    return { x: (r.left + r.width / 2 - o.left) / view.s, y: (r.top + r.height / 2 - o.top) / view.s };
  };

  // "fit": the whole diagram in the box, centred, however small its labels get (the box takes the screen's
  // height to keep them readable, see sizeBox); only absurd zooms are clamped.
  const fitWhole = () => {
    const cw = frame.clientWidth;
    const ch = frame.clientHeight;
    if (!cw || !ch || !size.w || !size.h) return false;
    const s = Math.max(MIN_SCALE, Math.min(cw / size.w, ch / size.h, MAX_FIRST_SCALE) * FIT_MARGIN);
    view = { s, x: (cw - size.w * s) / 2, y: (ch - size.h * s) / 2 };
    apply(0);
    return true;
  };

  // The middle of the offloaded nodes in SVG units, when they fit the box at
  // scale s together; else the middle of the first one; null when there is none.
  const offloadCentre = (s) => {
    const found = [...viewport.querySelectorAll("g.node.byoc-offload")].map((g) => g.getBoundingClientRect());
    const o = svgEl().getBoundingClientRect();
    if (!found.length || !o.width) return null;
    const all = found.reduce((a, r) => ({
      left: Math.min(a.left, r.left),
      top: Math.min(a.top, r.top),
      right: Math.max(a.right, r.right),
      bottom: Math.max(a.bottom, r.bottom),
    }));
    const k = s / view.s; // found is measured at the current scale
    const fits = (all.right - all.left) * k <= frame.clientWidth && (all.bottom - all.top) * k <= frame.clientHeight;
    const r = fits ? all : found[0];
    return { x: ((r.left + r.right) / 2 - o.left) / view.s, y: ((r.top + r.bottom) / 2 - o.top) / view.s };
  };

  // Readable first: the whole diagram when it fits at a readable scale, else the
  // width when that is readable, else the readable scale. Then the top of the
  // diagram, moved over to the selected node or the offloaded ones when they
  // would be out of sight.
  const firstView = () => {
    const cw = frame.clientWidth;
    const ch = frame.clientHeight;
    if (!cw || !ch || !size.w || !size.h) return false;
    const unit = labelHeight(svgEl());
    readable = unit ? READABLE_PX / unit : 1;
    const whole = Math.min(cw / size.w, ch / size.h) * 0.96;
    if (whole >= readable) return fitWhole();
    const s = Math.max(readable, Math.min((cw / size.w) * 0.98, MAX_FIRST_SCALE));
    view = { s, x: (cw - size.w * s) / 2, y: 0 };
    const sel = findNode(model.get("selected"));
    const c = sel ? centreOf(sel) : offloadCentre(s);
    if (c && size.w * s > cw) view.x = cw / 2 - c.x * s;
    if (c && c.y * s > ch * 0.6) view.y = ch * 0.4 - c.y * s;
    apply(0);
    return true;
  };

  const zoomAt = (factor, px, py) => {
    const s = Math.min(MAX_SCALE, Math.max(MIN_SCALE, view.s * factor));
    const k = s / view.s;
    view = { s, x: px - (px - view.x) * k, y: py - (py - view.y) * k };
    mode = "free";
    apply();
    ensureNodes();
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
  button("fit", "the whole diagram in the box (+ or 100% for larger labels)", "byoc-zoom-fit", () => {
    mode = "fit";
    fitWhole();
  });
  button("100%", "labels at their full size", "byoc-zoom-100", () => zoomAt(1 / view.s, ...centre()));
  button("−", "zoom out", "byoc-zoom-out", () => zoomAt(0.8, ...centre()));
  button("+", "zoom in", "byoc-zoom-in", () => zoomAt(1.25, ...centre()));
  toolbar.append(level, hint);

  const highlight = () => {
    for (const g of viewport.querySelectorAll("g.byoc-selected")) g.classList.remove("byoc-selected");
    const g = findNode(model.get("selected"));
    if (g) g.classList.add("byoc-selected");
  };

  // What the view holds on to across a redraw: the selected node, then the nodes
  // nearest the middle of the box (one of them may be gone from the new drawing),
  // each with where on screen it is.
  const anchors = () => {
    if (!svgEl() || !frame.clientWidth) return [];
    const fr = frame.getBoundingClientRect();
    const [mx, my] = [fr.left + fr.width / 2, fr.top + fr.height / 2];
    const sel = findNode(model.get("selected"));
    const held = nodes().map((g) => {
      const r = g.getBoundingClientRect();
      const [cx, cy] = [r.left + r.width / 2, r.top + r.height / 2];
      return { id: g.id, sx: cx - fr.left, sy: cy - fr.top, d: g === sel ? -1 : Math.hypot(cx - mx, cy - my) };
    });
    return held.sort((a, b) => a.d - b.d).slice(0, 24);
  };

  const showsNodes = () => {
    const fr = frame.getBoundingClientRect();
    return nodes().some((g) => {
      const r = g.getBoundingClientRect();
      return r.right > fr.left && r.left < fr.right && r.bottom > fr.top && r.top < fr.bottom;
    });
  };

  // Never an empty box: when a zoom or a redraw leaves no node in sight (the blank middle of a wide
  // diagram at 100%), the node nearest the middle of the box is moved to the middle, at the same scale.
  function ensureNodes() {
    if (!frame.clientWidth || !svgEl() || showsNodes()) return;
    const fr = frame.getBoundingClientRect();
    const [mx, my] = [fr.left + fr.width / 2, fr.top + fr.height / 2];
    let best = null;
    for (const g of nodes()) {
      const r = g.getBoundingClientRect();
      if (!r.width && !r.height) continue;
      const [cx, cy] = [r.left + r.width / 2, r.top + r.height / 2];
      const d = Math.hypot(cx - mx, cy - my);
      if (!best || d < best.d) best = { d, dx: mx - cx, dy: my - cy };
    }
    if (!best) return;
    view = { ...view, x: view.x + best.dx, y: view.y + best.dy };
    apply(0.5);
  }

  // After a double-click opens a group: its cluster's top at the top of the box, at
  // a readable scale; across, its first rows (the nodes inside it that the box's
  // height takes in) centred when they fit, else their left edge at the left of the
  // box, wherever Graphviz put them in a wide cluster. False when the drawing holds
  // no group opened by a double-click.
  const showOpened = (scale) => {
    const o = opening;
    if (!o || performance.now() - o.at > OPEN_WAIT_MS) {
      opening = null;
      return false;
    }
    const cl = viewport.querySelector(`g.cluster[id="${CSS.escape(`cluster_x_${o.id}`)}"]`);
    if (!cl) return false;
    opening = null;
    const r = cl.getBoundingClientRect();
    const sv = svgEl().getBoundingClientRect();
    if (!r.width || !r.height) return false;
    const cw = frame.clientWidth;
    const s = Math.max(scale, readable);
    const top = (r.top - sv.top) / view.s;
    const band = r.top + ((frame.clientHeight - OPEN_MARGIN) / s) * view.s; // the box's height, on screen now
    const rows = [...viewport.querySelectorAll("g.node")]
      .map((g) => g.getBoundingClientRect())
      .filter((n) => n.left >= r.left && n.right <= r.right && n.top >= r.top && n.bottom <= band);
    const [x0, x1] = rows.length
      ? [Math.min(...rows.map((n) => n.left)), Math.max(...rows.map((n) => n.right))]
      : [r.left, r.right];
    const [left, w] = [(x0 - sv.left) / view.s, (x1 - x0) / view.s];
    const x = w * s <= cw ? (cw - w * s) / 2 - left * s : OPEN_MARGIN - left * s;
    view = { s, x, y: OPEN_MARGIN - top * s };
    mode = "free";
    apply();
    return true;
  };

  // A drawing's legend (the time map's) is drawn again beside the box, where it covers no node, at the
  // first view's label size whatever the pan and zoom: Graphviz places it beside a graph that may be metres
  // long. A drawing not laid out yet (a page reloaded) measures 0 x 0: the legend waits for the box's size.
  let legendWaits = false;
  const placeLegend = () => {
    const g = viewport.querySelector('g.node[id="legend"]');
    corner.replaceChildren();
    corner.hidden = !g;
    legendWaits = false;
    if (!g) return;
    const b = g.getBBox();
    if (!frame.clientWidth || !b.width || !b.height) {
      legendWaits = true;
      return;
    }
    const s = Math.max(1, readable);
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", `${b.x} ${b.y} ${b.width} ${b.height}`);
    svg.setAttribute("width", `${b.width * s}px`);
    svg.setAttribute("height", `${b.height * s}px`);
    const copy = g.cloneNode(true);
    copy.removeAttribute("id"); // the drawing's node keeps its id, and is hidden
    svg.appendChild(copy);
    corner.appendChild(svg);
    g.style.visibility = "hidden";
  };
  corner.addEventListener("pointerdown", (e) => e.stopPropagation()); // a click here is not a drag
  corner.addEventListener("click", (e) => {
    e.stopPropagation();
    corner.classList.toggle("byoc-folded");
  });

  // The box takes the height of what scrolls the page (Lab's notebook panel, else the window), less the
  // toolbar above it, between the widget's `height` and MAX_BOX_PX: "fit" then has the room of the screen it
  // is on. The legend beside it is as tall at most.
  const sizeBox = () => {
    let room = window.innerHeight;
    for (let e = stage.parentElement; e; e = e.parentElement) {
      const y = getComputedStyle(e).overflowY;
      if ((y === "auto" || y === "scroll") && e.scrollHeight > e.clientHeight + 1) {
        room = e.clientHeight;
        break;
      }
    }
    const h = Math.round(Math.min(MAX_BOX_PX, Math.max(model.get("height"), room - toolbar.offsetHeight - 12)));
    if (frame.style.height !== `${h}px`) frame.style.height = corner.style.maxHeight = `${h}px`;
  };

  const draw = () => {
    // A view the user has not moved is redone for the new drawing (a toggle changes its size); a
    // moved one holds on to its nodes; "fit" fits again.
    const sel = findNode(model.get("selected"));
    const held = mode === "fit" || (mode === "first" && !sel) ? [] : anchors();
    const scale = view.s;
    viewport.innerHTML = model.get("svg") || "";
    sizeBox();
    const svg = svgEl();
    size = { w: 0, h: 0 };
    if (!svg) return;
    const vb = svg.viewBox && svg.viewBox.baseVal;
    size = { w: vb && vb.width ? vb.width : svg.getBBox().width, h: vb && vb.height ? vb.height : svg.getBBox().height };
    // Graphviz writes sizes in pt; draw one SVG unit as one CSS pixel so zoom is exact.
    svg.setAttribute("width", `${size.w}px`);
    svg.setAttribute("height", `${size.h}px`);
    // Native tooltips from <title> would hide the details panel's job and flicker while panning.
    for (const t of svg.querySelectorAll("g.node > title, g.cluster > title")) t.remove();
    highlight();
    const a = held.find((h) => findNode(h.id));
    const c = a && centreOf(findNode(a.id));
    if (showOpened(scale)) {
      // placed on the opened group
    } else if (mode === "fit") fitWhole();
    else if (c) {
      view = { s: scale, x: a.sx - c.x * scale, y: a.sy - c.y * scale };
      apply();
    } else firstView();
    // Never an empty box: when the held place shows no node, start afresh.
    if (frame.clientWidth && !showsNodes()) firstView();
    placeLegend();
    ensureNodes();
  };

  const onWheel = (e) => {
    if (!(e.ctrlKey || e.metaKey)) {
      // The page scrolls; say once in a while how to zoom instead.
      overlay.classList.add("byoc-show");
      clearTimeout(hintTimer);
      hintTimer = setTimeout(() => overlay.classList.remove("byoc-show"), HINT_MS);
      return;
    }
    e.preventDefault(); // no browser page zoom
    const lines = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? frame.clientHeight : 1;
    const dy = e.deltaY * lines;
    // A pinch arrives as many small deltas, a wheel notch as one of about 100.
    const rate = Math.abs(dy) < 40 ? 0.01 : 0.0015;
    const r = frame.getBoundingClientRect();
    zoomAt(Math.exp(-dy * rate), e.clientX - r.left, e.clientY - r.top);
  };
  // Safari reports a trackpad pinch as gesture events.
  let gestureScale = 1;
  const onGestureStart = (e) => {
    e.preventDefault();
    gestureScale = 1;
  };
  const onGestureChange = (e) => {
    e.preventDefault();
    const r = frame.getBoundingClientRect();
    zoomAt(e.scale / gestureScale, e.clientX - r.left, e.clientY - r.top);
    gestureScale = e.scale;
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
    mode = "free";
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
    if (g.matches("g.node")) opening = { id: g.id, at: performance.now() };
    model.send({ event: "toggle", id: g.id });
  };

  frame.addEventListener("wheel", onWheel, { passive: false });
  frame.addEventListener("gesturestart", onGestureStart);
  frame.addEventListener("gesturechange", onGestureChange);
  frame.addEventListener("pointerdown", onDown);
  window.addEventListener("pointermove", onMove);
  window.addEventListener("pointerup", onUp);
  frame.addEventListener("click", onClick);
  frame.addEventListener("dblclick", onDblClick);
  // The output area may have no width yet when the widget first renders.
  let sizing = 0;
  const resize = new ResizeObserver(() => {
    if (mode === "first") firstView();
    else if (mode === "fit") fitWhole();
    else apply();
    if (legendWaits) placeLegend();
    // On the next frame: a height set while this observer reports would be reported again at once.
    cancelAnimationFrame(sizing);
    sizing = requestAnimationFrame(sizeBox);
  });
  resize.observe(frame);
  window.addEventListener("resize", sizeBox);

  // A kernel restarted or shut down leaves the page's controls wired to nothing: ipywidgets marks each
  // one with a broken-link icon, and a click does nothing. The widget says so in one line instead, in place
  // of the whole workbench it sits in (else of its output). ipywidgets reports a restart as the model's
  // comm going dead; Lab's kernel connection reports a shutdown as its disposal.
  const kernel = model.widget_manager && model.widget_manager.kernel; // Lab's and Notebook 7's; else none
  const gone = () => {
    const host = el.closest(".byoc-workbench") || el.closest(".jp-OutputArea-output") || el;
    if (host.querySelector(":scope > .byoc-gone-line")) return;
    const line = document.createElement("div");
    line.className = "byoc-gone-line";
    line.textContent = model.get("gone");
    host.prepend(line);
    host.classList.add("byoc-kernel-gone");
  };
  const onStatus = (_kernel, status) => status === "dead" && gone();
  if (kernel && kernel.disposed) kernel.disposed.connect(gone);
  if (kernel && kernel.statusChanged) kernel.statusChanged.connect(onStatus);

  const onSvg = () => draw();
  model.on("change:svg", onSvg);
  model.on("change:selected", highlight);
  model.on("change:height", onSvg);
  model.on("comm_live_update", gone);
  draw();

  return () => {
    resize.disconnect();
    cancelAnimationFrame(sizing);
    window.removeEventListener("resize", sizeBox);
    clearTimeout(hintTimer);
    window.removeEventListener("pointermove", onMove);
    window.removeEventListener("pointerup", onUp);
    model.off("change:svg", onSvg);
    model.off("change:selected", highlight);
    model.off("change:height", onSvg);
    model.off("comm_live_update", gone);
    if (kernel && kernel.disposed) kernel.disposed.disconnect(gone);
    if (kernel && kernel.statusChanged) kernel.statusChanged.disconnect(onStatus);
  };
}

export default { render };
