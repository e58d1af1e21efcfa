"use strict";
// HomeAgent web UI: a dependency-free single-page app over /api/v1.

const $ = (selector) => document.querySelector(selector);
const HIDDEN_CHANNELS = new Set(["_consolidation_", "http"]);

// A logged-in session must echo its CSRF token on every change (POST/PUT/DELETE); the server
// hands it out only to this origin (GET /api/v1/session), so other sites cannot forge changes.
let csrfToken = null;
async function csrf() {
  if (csrfToken === null) {
    const response = await fetch("/api/v1/session", {credentials: "same-origin"});
    const body = response.ok ? await response.json() : {};
    csrfToken = body.csrf_token || "";
  }
  return csrfToken;
}

async function api(path, options = {}) {
  const method = (options.method || "GET").toUpperCase();
  const headers = {...(options.headers || {})};
  if (!["GET", "HEAD", "OPTIONS"].includes(method)) headers["X-CSRF-Token"] = await csrf();
  const response = await fetch(path, {credentials: "same-origin", ...options, headers});
  if (response.status === 401) {
    window.location.href = "/login";
    throw new Error("unauthorized");
  }
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new Error((body && body.error) || response.statusText);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

// ------------------------------------------------------------------ navigation

// Who is logged in (GET /api/v1/session), asked once for every script of the page.
const sessionReady = api("/api/v1/session");
// The owner sees every page; anyone else the chat (their own conversations) and their Account,
// the nav links marked data-person. The owner's APIs answer them 403 anyway.
let ownerUI = null; // null: not known yet

function ownerPage(page) {
  return Boolean(document.querySelector(`nav a[data-page="${page}"]:not([data-person])`));
}

const pages = ["chat", "memory", "plugins", "settings"];
function show(page) {
  if (ownerUI !== true && ownerPage(page)) {
    $("#owner-only").textContent = t("chat.owner_only");
    $("#owner-only").hidden = ownerUI === null;
    page = "chat";
  } else $("#owner-only").hidden = true;
  if (!pages.includes(page)) {
    if (document.querySelector(`nav a[data-page="${page}"]`)) return; // residents.js, pairing.js, people.js draw it
    page = "chat";
  }
  for (const name of pages) $(`#page-${name}`).hidden = name !== page;
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  if (page === "memory") loadMemory();
  if (page === "plugins") loadPlugins();
  if (page === "settings") loadSettings();
}
window.addEventListener("hashchange", () => show(location.hash.slice(1)));

// ------------------------------------------------------------------ chat

const messages = $("#messages");
let pending = null; // the assistant bubble being streamed (ours or another tab's/channel's)
let turn = null; // this tab's own send in flight: {text, file, node, user, seen, failed}
let lastEventId = "";

function nearBottom() {
  const doc = document.scrollingElement || document.documentElement;
  return doc.scrollHeight - doc.scrollTop - window.innerHeight < 160;
}

function reveal(node, force = false) {
  // scroll-margin-bottom (style.css) keeps the node above the sticky input bar.
  if (force || nearBottom()) node.scrollIntoView({block: "end"});
}

function setBody(node, text) {
  node.raw = text;
  node.body.textContent = "";
  if (node.classList.contains("assistant")) node.body.append(Markdown.render(text));
  else node.body.textContent = text;
}

let renderQueued = new Set();
function streamInto(node, text) {
  // Deltas arrive faster than frames: render the Markdown once per frame.
  node.raw = text;
  if (renderQueued.has(node)) return;
  renderQueued.add(node);
  requestAnimationFrame(() => {
    renderQueued.delete(node);
    const stick = nearBottom();
    setBody(node, node.raw);
    if (stick) reveal(node, true);
  });
}

function bubble(role, text = "") {
  const node = el("div", {class: `msg ${role}`});
  node.reasoning = el("div", {class: "reasoning", hidden: ""});
  node.tools = el("div", {class: "tools"});
  node.media = el("div", {class: "media"});
  node.body = el("div", {class: "body"});
  node.append(node.media, node.reasoning, node.tools, node.body);
  setBody(node, text);
  messages.append(node);
  reveal(node, true);
  return node;
}

function thinking(node) {
  node.classList.add("streaming", "thinking");
  node.body.textContent = "";
  node.body.append(el("span", {class: "typing", "aria-label": t("chat.thinking")}, el("i"), el("i"), el("i")));
}

function addTool(node, payload) {
  const status = payload.rejected ? "rejected" : payload.success ? "ok" : "failed";
  node.tools.append(el("div", {class: "tool"}, t("chat.tool", {name: payload.name, status: tStatus(status)})));
}

function addAttachment(node, att) {
  const url = att.url || `/uploads/${encodeURIComponent(att.name)}`;
  if ((att.mime || att.type || "").startsWith("image/")) {
    node.media.append(el("img", {src: url, alt: att.name, loading: "lazy"}));
  } else {
    node.media.append(el("a", {href: url, target: "_blank", rel: "noopener", class: "file"}, `📎 ${att.name}`));
  }
}

function finish(node, text, reasoning) {
  if (text !== undefined) setBody(node, text);
  if (reasoning) { node.reasoning.hidden = false; node.reasoning.textContent = reasoning; }
  node.classList.remove("streaming", "thinking");
  node.dataset.done = "1";
  if (pending === node) pending = null;
  busy(false);
}

function showError(node, message) {
  // One bubble per failed turn, whether the error came over SSE, from the POST, or both.
  node.classList.remove("streaming", "thinking");
  node.classList.add("error");
  node.dataset.done = "1";
  node.body.textContent = "";
  node.body.append(el("span", {class: "error-text"}, t("chat.error", {message})));
  if (node.retry) {
    node.body.append(el("button", {type: "button", class: "retry secondary", onclick: () => {
      const retry = node.retry;
      node.remove();
      send(retry.text, retry.file, {redraw: false});
    }}, t("chat.retry")));
  }
  if (pending === node) pending = null;
  busy(false);
  reveal(node, true);
}

function busy(on) {
  $("#send").hidden = on;
  $("#stop").hidden = !on;
}

function renderHistory(data) {
  messages.textContent = "";
  pending = null;
  for (const m of data.messages) {
    if (HIDDEN_CHANNELS.has(m.channel)) continue;
    const node = bubble(m.role, m.content || "");
    for (const att of m.attachments || []) addAttachment(node, att);
    if (m.reasoning) { node.reasoning.hidden = false; node.reasoning.textContent = m.reasoning; }
    for (const tool of m.tools || []) addTool(node, tool);
    if (m.role === "assistant") node.dataset.done = "1";
  }
  if (messages.lastChild) reveal(messages.lastChild, true);
}

// Each person has their own conversations: the list shows only the logged-in person's, the
// chat view and the live events only the one picked.
let currentThread = "";
let me = "";

function threadLabel(thread) {
  if (thread.title) return thread.title;
  if (thread.id === "main" || thread.id.startsWith("person:")) return t("chat.default_thread");
  if (thread.id.startsWith("web:")) return t("chat.new");
  return thread.id;
}

async function loadThreads() {
  const data = await api("/api/v1/threads");
  me = data.person || "";
  if (!currentThread || !data.threads.some((thread) => thread.id === currentThread)) currentThread = data.default;
  const select = $("#thread");
  select.textContent = "";
  for (const thread of data.threads) {
    const when = thread.updated ? ` · ${new Date(thread.updated * 1000).toLocaleDateString()}` : "";
    select.append(el("option", {value: thread.id}, threadLabel(thread) + when));
  }
  select.value = currentThread;
}

function historyPath(query = "") {
  return `/api/v1/threads/${encodeURIComponent(currentThread)}/history${query}`;
}

async function loadHistory() {
  if (!currentThread) await loadThreads();
  const data = await api(historyPath("?limit=100"));
  renderHistory(data);
  lastEventId = data.last_event_id || "";
}

$("#thread").addEventListener("change", async () => {
  currentThread = $("#thread").value;
  await loadHistory();
});

$("#new-chat").addEventListener("click", async () => {
  if (turn) return; // one message at a time from this tab
  const data = await api("/api/v1/threads", {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({}),
  });
  currentThread = data.thread.id;
  await loadThreads();
  await loadHistory();
  $("#input").focus();
});

function onEvent(type, event, id) {
  if (id) lastEventId = id;
  const payload = event.payload || {};
  if (HIDDEN_CHANNELS.has(payload.channel)) return;
  // Another of this person's conversations: shown when they switch to it.
  if (payload.thread && payload.thread !== currentThread) return;
  if (type === "raw_input" && !payload.interrupt) {
    if (turn && !turn.seen && payload.channel === "webui") {
      turn.seen = true; // our own message, already drawn when it was sent
      pending = turn.node;
      return;
    }
    const user = bubble("user", payload.text || "");
    for (const att of payload.attachments || []) addAttachment(user, att);
    pending = bubble("assistant");
    thinking(pending);
  } else if (type === "content_delta" && pending) {
    pending.classList.remove("thinking");
    const text = payload.reset ? "" : pending.raw || "";
    streamInto(pending, text + (payload.content || ""));
  } else if (type === "reasoning_delta" && pending) {
    pending.reasoning.hidden = false;
    pending.reasoning.textContent += payload.reasoning_content || "";
  } else if (type === "tool_call" && pending) {
    addTool(pending, payload);
  } else if (type === "agent_output" && payload.kind === "channel_output") {
    // Sent to the browser on the agent's own initiative (output_send__webui, a timer's reply).
    const node = bubble("assistant", payload.content || "");
    node.classList.add("push");
    node.dataset.done = "1";
    if (payload.url) {
      addAttachment(node, {name: payload.name || "file", url: payload.url, mime: payload.output_type === "image" ? "image/" : ""});
    }
    reveal(node);
    if (document.hidden) notify(payload.content || payload.name || "");
  } else if (type === "agent_output" && !pending && payload.delivered_to) {
    // A proactive reply routed to the channel the person last used; on the web UI it arrives
    // as its own channel_output event above.
  } else if (type === "agent_output") {
    $("#first-run").hidden = true; // a model answered: the setup notice has done its job
    const node = pending || bubble("assistant");
    const stick = nearBottom() || (turn && turn.node === node);
    finish(node, payload.content || "", payload.reasoning_content);
    if (stick) reveal(node, true);
    if (document.hidden && !(turn && turn.node === node)) notify(payload.content || "");
  } else if (type === "agent_error" && pending) {
    showError(pending, payload.error);
    if (turn && turn.node) turn.failed = true;
  }
}

function connectEvents() {
  // Start after the newest event the history already shows: nothing is drawn twice. Later
  // reconnects send Last-Event-ID themselves.
  const source = new EventSource(`/api/v1/events?last_event_id=${encodeURIComponent(lastEventId)}`);
  const types = ["raw_input", "content_delta", "reasoning_delta", "tool_call", "agent_output", "agent_error", "stage"];
  for (const type of types) source.addEventListener(type, (e) => onEvent(type, JSON.parse(e.data), e.lastEventId));
  source.addEventListener("sync_required", () => loadHistory());
  source.onerror = () => { /* EventSource reconnects by itself with Last-Event-ID */ };
  return source;
}

function notify(text) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  new Notification("HomeAgent", {body: text.slice(0, 200), tag: "homeagent"});
}

async function send(text, file, {redraw = true} = {}) {
  let user = null;
  if (redraw) {
    user = bubble("user", text);
    if (file) addAttachment(user, {name: file.name, mime: file.type, url: URL.createObjectURL(file)});
  }
  const node = bubble("assistant");
  thinking(node);
  node.retry = {text, file};
  turn = {text, file, node, user, seen: false, failed: false};
  const mine = turn;
  pending = node;
  busy(true);
  try {
    let result;
    if (file) {
      const form = new FormData();
      form.append("file", file);
      form.append("message", text);
      form.append("thread", currentThread);
      result = await api("/api/v1/chat/file", {method: "POST", body: form});
    } else {
      result = await api("/api/v1/chat", {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify({message: text, client_msg_id: crypto.randomUUID(), thread: currentThread}),
      });
    }
    if (!node.dataset.done) {
      finish(node, result.response || "");
      reveal(node, true);
    }
    if (result.skipped) {
      node.append(el("div", {class: "note"}, t("chat.same_as_before")));
    }
    if (!node.raw && !node.classList.contains("error")) setBody(node, t("chat.stopped"));
  } catch (err) {
    showError(node, err.message);
  } finally {
    if (turn === mine) turn = null;
    busy(false);
  }
}

// A message sent while the page still loads its conversation waits for it: drawing the history
// afterwards would otherwise wipe the message's bubble and its reply.
let chatLoaded;
const chatReady = new Promise((resolve) => { chatLoaded = resolve; });

$("#chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("#input");
  const file = $("#file").files[0];
  const text = input.value.trim();
  if (!text && !file) return;
  if (turn) return; // one message at a time from this tab; Stop ends the current one
  input.value = "";
  $("#file").value = "";
  $("#file-name").textContent = "";
  if ("Notification" in window && Notification.permission === "default") Notification.requestPermission().catch(() => {});
  await chatReady;
  await send(text, file);
});

$("#stop").addEventListener("click", async () => {
  try { await api("/api/v1/chat/stop", {method: "POST"}); } catch (err) { /* the reply or error still arrives */ }
});

$("#file").addEventListener("change", () => {
  const file = $("#file").files[0];
  $("#file-name").textContent = file ? file.name : "";
});

$("#export").addEventListener("click", async () => {
  const data = await api(historyPath());
  const lines = [`# ${t("chat.export_heading", {date: new Date().toISOString().slice(0, 10)})}`, ""];
  for (const m of data.messages) {
    if (HIDDEN_CHANNELS.has(m.channel)) continue;
    const when = m.time ? new Date(m.time * 1000).toLocaleString() : "";
    // Each message is labelled with who said it: the person's name, or HomeAgent.
    const speaker = m.role === "user" ? m.speaker || me || t("chat.you") : "HomeAgent";
    lines.push(`## ${speaker}${when ? ` · ${when}` : ""}`, "");
    for (const att of m.attachments || []) lines.push(`[${att.name}](/uploads/${encodeURIComponent(att.name)})`, "");
    lines.push(m.content || "", "");
  }
  const blob = new Blob([lines.join("\n")], {type: "text/markdown"});
  const link = el("a", {href: URL.createObjectURL(blob), download: `homeagent-chat-${new Date().toISOString().slice(0, 10)}.md`});
  document.body.append(link);
  link.click();
  link.remove();
});

$("#input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("#chat-form").requestSubmit();
  }
});

// ------------------------------------------------------------------ memory

// A small force layout in SVG: drag the background to pan, wheel or +/− to zoom, click an
// entity to list its relations (no library; a few hundred nodes at most).
const view = {x: 0, y: 0, k: 1};
let graphData = {nodes: [], edges: []};

function layout(nodes, edges) {
  const pos = new Map();
  nodes.forEach((n, i) => {
    const angle = (2 * Math.PI * i) / Math.max(1, nodes.length);
    pos.set(n.id, {x: 300 + 150 * Math.cos(angle), y: 200 + 150 * Math.sin(angle), vx: 0, vy: 0});
  });
  const links = edges.filter((e) => pos.has(e.source) && pos.has(e.target));
  for (let step = 0; step < 200; step++) {
    const cool = 1 - step / 200;
    for (const a of pos.values()) {
      for (const b of pos.values()) {
        if (a === b) continue;
        const dx = a.x - b.x, dy = a.y - b.y;
        const d2 = Math.max(25, dx * dx + dy * dy);
        a.vx += (dx / d2) * 2500 * cool;
        a.vy += (dy / d2) * 2500 * cool;
      }
      a.vx += (300 - a.x) * 0.01;
      a.vy += (200 - a.y) * 0.01;
    }
    for (const e of links) {
      const a = pos.get(e.source), b = pos.get(e.target);
      const dx = b.x - a.x, dy = b.y - a.y;
      const dist = Math.sqrt(dx * dx + dy * dy) || 1;
      const pull = (dist - 150) * 0.02;
      a.vx += (dx / dist) * pull; a.vy += (dy / dist) * pull;
      b.vx -= (dx / dist) * pull; b.vy -= (dy / dist) * pull;
    }
    for (const p of pos.values()) {
      p.x += Math.max(-20, Math.min(20, p.vx)); p.y += Math.max(-20, Math.min(20, p.vy));
      p.vx *= 0.5; p.vy *= 0.5;
    }
  }
  return {pos, links};
}

function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function applyView() {
  const layer = $("#graph-layer");
  if (layer) layer.setAttribute("transform", `translate(${view.x} ${view.y}) scale(${view.k})`);
}

function showEntity(node) {
  const names = new Map(graphData.nodes.map((n) => [n.id, n.name]));
  const box = $("#entity-detail");
  box.textContent = "";
  box.hidden = false;
  box.append(el("h4", {}, `${node.name}${node.type ? ` (${node.type})` : ""}`));
  const rel = graphData.edges.filter((e) => e.source === node.id || e.target === node.id);
  const list = el("ul", {class: "list"});
  for (const e of rel) list.append(el("li", {}, `${names.get(e.source) || "?"} —${e.type}→ ${names.get(e.target) || "?"}`));
  if (!rel.length) list.append(el("li", {class: "empty"}, t("memory.no_relations")));
  box.append(list);
  document.querySelectorAll("#graph circle").forEach((c) => c.classList.toggle("selected", c.dataset.id === node.id));
}

function drawGraph(data) {
  graphData = {nodes: data.nodes || [], edges: data.edges || []};
  const svg = $("#graph");
  svg.textContent = "";
  const layer = svgEl("g", {id: "graph-layer"});
  svg.append(layer);
  const {pos, links} = layout(graphData.nodes, graphData.edges);
  for (const e of links) {
    const a = pos.get(e.source), b = pos.get(e.target);
    const line = svgEl("line", {x1: a.x, y1: a.y, x2: b.x, y2: b.y, stroke: "#9bb8ae"});
    const title = svgEl("title", {});
    title.textContent = e.type;
    line.append(title);
    const label = svgEl("text", {x: (a.x + b.x) / 2, y: (a.y + b.y) / 2, class: "edge-label"});
    label.textContent = e.type;
    layer.append(line, label);
  }
  for (const n of graphData.nodes) {
    const p = pos.get(n.id);
    const circle = svgEl("circle", {cx: p.x, cy: p.y, r: 5 + Math.min(8, n.mention_count || 1), fill: "#2f6f5e", "data-id": n.id});
    circle.addEventListener("click", (ev) => { ev.stopPropagation(); showEntity(n); });
    const label = svgEl("text", {x: p.x + 9, y: p.y + 4, "data-id": n.id});
    label.textContent = n.name;
    label.addEventListener("click", (ev) => { ev.stopPropagation(); showEntity(n); });
    layer.append(circle, label);
  }
  applyView();
}

(function graphControls() {
  const svg = $("#graph");
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => { drag = {x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y}; });
  window.addEventListener("pointerup", () => { drag = null; });
  svg.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const scale = 600 / svg.getBoundingClientRect().width;
    view.x = drag.vx + (ev.clientX - drag.x) * scale;
    view.y = drag.vy + (ev.clientY - drag.y) * scale;
    applyView();
  });
  const zoom = (factor) => {
    const k = Math.max(0.3, Math.min(4, view.k * factor));
    view.x = 300 - (300 - view.x) * (k / view.k);
    view.y = 200 - (200 - view.y) * (k / view.k);
    view.k = k;
    applyView();
  };
  svg.addEventListener("wheel", (ev) => { ev.preventDefault(); zoom(ev.deltaY < 0 ? 1.2 : 1 / 1.2); }, {passive: false});
  $("#zoom-in").addEventListener("click", () => zoom(1.25));
  $("#zoom-out").addEventListener("click", () => zoom(0.8));
  $("#zoom-reset").addEventListener("click", () => { view.x = 0; view.y = 0; view.k = 1; applyView(); });
})();

// One document of the memory page: its text, whose it is and who may see it, and the owner's
// button that makes it the household's (or private to its person again).
function documentItem(d, reload) {
  const item = el("li", {});
  if (d.title) item.append(el("strong", {}, d.title), " ");
  item.append((d.content || "").slice(0, 160));
  const shared = d.visibility === "household";
  const label = shared ? t("memory.visibility_household")
    : d.visibility === "private" ? t("memory.visibility_private", {person: d.person}) : d.visibility;
  item.append(" ", el("small", {class: "visibility"}, `[${label}]`), " ", el("button", {
    type: "button",
    class: "share",
    onclick: async () => {
      try {
        await api("/api/v1/memory/visibility", {
          method: "POST", headers: {"Content-Type": "application/json"},
          body: JSON.stringify({ids: [d.id], visibility: shared ? "private" : "household"}),
        });
        reload();
      } catch (err) { item.append(" ", err.message); }
    },
  }, shared ? t("memory.unshare") : t("memory.share")));
  return item;
}

async function loadMemory(query = "") {
  const entities = $("#entities");
  try {
    const graph = await api("/api/v1/memory/graph?limit=60");
    drawGraph(graph.data);
    entities.textContent = "";
    for (const n of graph.data.nodes || []) entities.append(el("li", {class: "entity"}, `${n.name}${n.type ? ` (${n.type})` : ""}`));
    if (!(graph.data.nodes || []).length) entities.append(el("li", {class: "empty"}, t("memory.empty_graph")));
  } catch (err) { entities.textContent = err.message; }
  try {
    const docs = await api(`/api/v1/memory/documents?limit=30${query ? `&q=${encodeURIComponent(query)}` : ""}`);
    const list = $("#documents");
    list.textContent = "";
    for (const d of docs.documents) list.append(documentItem(d, () => loadMemory(query)));
    if (!docs.documents.length) list.append(el("li", {class: "empty"}, query ? t("memory.no_results") : t("memory.no_documents")));
  } catch (err) { $("#documents").textContent = err.message; }
  try {
    const ctx = await api("/api/v1/memory/context");
    const list = $("#context");
    list.textContent = "";
    for (const e of ctx.events) list.append(el("li", {}, `[${e.kind || e.role || ""}] ${(e.text || "").slice(0, 200)}`));
  } catch (err) { $("#context").textContent = err.message; }
}

$("#memory-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const q = $("#memory-query").value.trim();
  if (!q) return loadMemory();
  try {
    const result = await api(`/api/v1/memory?q=${encodeURIComponent(q)}&depth=2`);
    const list = $("#entities");
    list.textContent = "";
    const names = new Map((result.entities || []).map((e) => [e.id, e.name]));
    for (const e of result.entities || []) list.append(el("li", {class: "entity"}, `${e.name}${e.type ? ` (${e.type})` : ""}`));
    for (const r of result.relations || []) {
      list.append(el("li", {}, `${names.get(r.source) || r.source_name || r.source} —${r.type}→ ${names.get(r.target) || r.target_name || r.target}`));
    }
    if (!list.children.length) list.append(el("li", {class: "empty"}, t("memory.not_found", {query: q})));
    const docs = await api(`/api/v1/memory/documents?limit=30&q=${encodeURIComponent(q)}`);
    const docList = $("#documents");
    docList.textContent = "";
    for (const d of docs.documents) docList.append(documentItem(d, () => loadMemory(q)));
    if (!docs.documents.length) docList.append(el("li", {class: "empty"}, t("memory.no_results")));
  } catch (err) { $("#entities").textContent = err.message; }
});

// ------------------------------------------------------------------ plugins

let settingsScopes = new Set();
let pendingScope = null; // a plugin's settings opened from its row

async function loadPlugins() {
  const body = $("#plugins tbody");
  const [data, settings] = await Promise.all([api("/api/v1/plugins"), api("/api/v1/settings?prefix=plugin.")]);
  settingsScopes = new Set(settings.plugins);
  body.textContent = "";
  for (const p of data.plugins) {
    const contributions = Object.entries(p.contributions || {}).map(([k, v]) => `${k}: ${v.length}`).join(", ");
    const actions = el("td", {});
    actions.append(p.disabled
      ? el("button", {class: "secondary", onclick: () => toggle(p.name, "enable")}, t("plugins.enable"))
      : el("button", {class: "secondary", onclick: () => toggle(p.name, "disable")}, t("plugins.disable")));
    if (p.package && !p.disabled && (p.restart_required || p.status === "failed")) {
      actions.append(el("button", {class: "start", onclick: () => startPlugin(p.name)}, t("plugins.start")));
    }
    if (p.package) actions.append(el("button", {class: "secondary remove", onclick: () => removePlugin(p.name)}, t("plugins.remove")));
    let label = p.disabled ? (p.package && p.status !== "started" ? tStatus("disabled") : t("plugins.disabled_restart")) : tStatus(p.status);
    if (p.restart_required && !p.disabled) label = t("plugins.not_running");
    const status = el("td", {class: `status-${p.status}`}, label);
    if (p.error) status.append(el("div", {class: "plugin-error"}, p.error));
    const name = el("td", {}, p.version ? `${p.name} ${p.version}` : p.name);
    if (settingsScopes.has(`plugin.${p.name}`)) {
      actions.append(el("a", {class: "plugin-settings", href: "#settings", onclick: () => { pendingScope = `plugin.${p.name}`; }}, t("plugins.settings")));
    }
    body.append(el("tr", {"data-plugin": p.name}, name, el("td", {}, p.kind), status,
      el("td", {}, contributions), actions));
  }
}

function installNote(text, failed) {
  const out = $("#install-result");
  out.textContent = text;
  out.className = failed ? "error" : "";
}

async function toggle(name, what) {
  try {
    const result = await api(`/api/v1/plugins/${encodeURIComponent(name)}/${what}`, {method: "POST"});
    if (result.action === "start_failed") installNote(t("plugins.enabled_not_started", {name, error: result.start_error}), true);
    else if (result.action === "started") installNote(t("plugins.enabled_started", {name}), false);
    else if (result.action === "stopped") installNote(t("plugins.disabled_stopped", {name}), false);
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
}

async function startPlugin(name) {
  try {
    const result = await api(`/api/v1/plugins/${encodeURIComponent(name)}/start`, {method: "POST"});
    installNote(t("plugins.started_tools", {status: tStatus(result.status), name, tools: result.tools.join(", ") || t("common.none")}), false);
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
}

async function removePlugin(name) {
  try {
    await api(`/api/v1/plugins/${encodeURIComponent(name)}`, {method: "DELETE"});
    installNote(t("plugins.removed", {name}), false);
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
}

$("#install-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = $("#hmap").files[0];
  if (!file) {
    installNote(t("plugins.choose_file"), true);
    return;
  }
  const query = $("#hmap-overwrite").checked ? "?overwrite=true" : "";
  try {
    const result = await api(`/api/v1/plugins${query}`, {method: "POST", headers: {"Content-Type": "application/zip"}, body: file});
    if (result.action === "start_failed") {
      installNote(t("plugins.installed_not_started", {name: result.name, version: result.version, error: result.start_error}), true);
    } else {
      const known = ["started", "reloaded", "rescanned", "disabled", "reload_required"];
      const after = known.includes(result.action) ? t(`plugins.after.${result.action}`) : result.action;
      const tools = result.tools && result.tools.length ? t("plugins.tools_suffix", {tools: result.tools.join(", ")}) : "";
      installNote(t("plugins.installed", {name: result.name, version: result.version, after, tools}), false);
    }
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
});

$("#plugins-reload").addEventListener("click", async () => {
  try {
    const result = await api("/api/v1/plugins/reload", {method: "POST"});
    const parts = [t("plugins.reloaded", {names: result.reloaded.join(", ") || t("common.none")})];
    if ((result.started || []).length) parts.push(t("plugins.reload_started", {names: result.started.join(", ")}));
    const failed = Object.entries(result.failed || {});
    for (const [name, why] of failed) parts.push(t("plugins.reload_failed", {name, error: why}));
    if (result.restart_required.length) parts.push(t("plugins.restart_needed", {names: result.restart_required.join(", ")}));
    installNote(parts.join("; "), failed.length > 0);
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
});

// ------------------------------------------------------------------ settings

let settingsData = null;

function settingInput(key, meta, value) {
  const type = meta.type || "string";
  let input;
  if (type === "bool") {
    input = el("select", {}, el("option", {value: "true"}, "true"), el("option", {value: "false"}, "false"));
    input.value = value ? "true" : "false";
  } else if (type === "select") {
    input = el("select", {}, ...(meta.options || []).map((o) => el("option", {value: o}, o)));
    input.value = value;
  } else if (type === "text") {
    input = el("textarea", {rows: 3});
    input.value = value ?? "";
  } else {
    // A secret (a password, or a JSON setting such as plugin.calendar.passwords) is never shown: typing replaces it.
    const hidden = type === "password" || Boolean(meta.secret);
    input = el("input", {type: hidden ? "password" : type === "int" || type === "float" ? "number" : "text"});
    if (type === "float") input.step = meta.step || "any";
    input.value = hidden ? "" : typeof value === "object" && value !== null ? JSON.stringify(value) : value ?? "";
    if (hidden) input.placeholder = value ? t("settings.password_set") : t("settings.password_unset");
  }
  input.dataset.key = key;
  input.addEventListener("change", async () => {
    const out = $("#settings-result");
    let v = input.value;
    if (type === "int") v = parseInt(v, 10);
    try {
      const result = await api("/api/v1/settings", {method: "PUT", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({key, value: v})});
      out.textContent = t("settings.saved_key", {key}) + (result.restart_required ? t("settings.restart_note") : "");
      out.className = "";
      const row = input.closest(".setting");
      if (row) {
        row.querySelector(".saved")?.remove();
        row.append(el("span", {class: "saved"}, result.restart_required ? t("settings.saved_restart") : t("settings.saved")));
      }
    } catch (err) {
      out.textContent = err.message;
      out.className = "error";
      const row = input.closest(".setting");
      if (row) {
        row.querySelector(".saved")?.remove();
        row.append(el("span", {class: "saved error"}, err.message));
      }
    }
  });
  return input;
}

// Settings are shown in one collapsible group per plugin ("core" first); the search box filters
// every group at once by key, display name and description, and opens the groups that match.
const openGroups = new Set(["core"]);

function settingScope(key) {
  const parts = key.split(".");
  return parts[0] === "plugin" && parts.length > 2 ? `plugin.${parts[1]}` : "core";
}

function renderSettings() {
  const filter = $("#settings-filter").value.trim().toLowerCase();
  const form = $("#settings-form");
  form.textContent = "";
  const groups = new Map(settingsData.plugins.map((scope) => [scope, []]));
  let shown = 0;
  for (const [key, value] of Object.entries(settingsData.settings)) {
    const meta = settingsData.meta[key] || {type: "string"};
    const text = `${key} ${meta.display_name || ""} ${meta.description_en || ""} ${meta.description_zh || meta.description || ""}`.toLowerCase();
    if (filter && !text.includes(filter)) continue;
    const scope = settingScope(key);
    if (!groups.has(scope)) groups.set(scope, []);
    groups.get(scope).push(el("div", {class: "setting"},
      meta.display_name ? el("span", {class: "label"}, meta.display_name) : "",
      el("span", {class: "key"}, key), el("span", {class: "desc"}, meta.description || ""), settingInput(key, meta, value)));
    shown += 1;
  }
  for (const [scope, rows] of groups) {
    if (!rows.length) continue;
    const group = el("details", {class: "settings-group", id: `settings-${scope}`, "data-scope": scope},
      el("summary", {}, el("span", {class: "group-name"}, scope === "core" ? t("settings.core") : scope.slice(7)),
        el("span", {class: "group-count"}, rows.length === 1 ? t("settings.count_one") : t("settings.count", {n: rows.length}))),
      el("div", {class: "group-body"}, ...rows));
    group.open = Boolean(filter) || openGroups.has(scope);
    group.addEventListener("toggle", () => {
      if (!filter) group.open ? openGroups.add(scope) : openGroups.delete(scope);
    });
    form.append(group);
  }
  $("#settings-count").textContent = filter ? t("settings.matches", {n: shown}) : "";
  if (!shown) form.append(el("p", {class: "empty"}, t("settings.no_match", {filter})));
}

function revealSettingsGroup(scope) {
  const group = document.getElementById(`settings-${scope}`);
  if (!group) return;
  openGroups.add(scope);
  group.open = true;
  group.classList.add("highlight");
  group.scrollIntoView({block: "start"});
}

// LLM sources: add, edit, test and remove without touching the command line.

function sourceNote(text, failed) {
  const out = $("#source-result");
  out.textContent = text;
  out.className = failed ? "error" : "saved";
}

function editSource(row) {
  $("#source-name").value = row.name;
  $("#source-name").readOnly = true;
  $("#source-url").value = row.base_url;
  $("#source-model").value = row.model;
  $("#source-adapter").value = row.adapter;
  $("#source-key").value = "";
  $("#source-key").placeholder = row.has_api_key ? t("sources.key_set") : t("sources.key_unset");
  $("#source-default").checked = row.default;
  $("#source-url").focus();
}

function clearSourceForm() {
  $("#source-form").reset();
  $("#source-name").readOnly = false;
  $("#source-key").placeholder = t("sources.key_ph");
}

async function testSource(name) {
  sourceNote(t("sources.testing", {name}), false);
  const result = await api(`/api/v1/llm/sources/${encodeURIComponent(name)}/test`, {method: "POST"});
  if (result.ok) {
    sourceNote(t("sources.answers", {name, reply: result.reply, seconds: result.seconds}), false);
    $("#first-run").hidden = true;
  } else sourceNote(t("sources.no_answer", {name, error: result.error}), true);
  return result.ok;
}

async function loadSources() {
  const data = await api("/api/v1/llm/sources");
  const body = $("#sources tbody");
  body.textContent = "";
  for (const row of data.sources) {
    const state = row.disabled ? t("sources.disabled", {reason: row.disabled}) : row.last_error ? t("sources.error", {error: row.last_error})
      : tStatus(row.available === false ? "cooling down" : "ready");
    const actions = el("td", {class: "actions"},
      el("button", {type: "button", class: "secondary", onclick: () => editSource(row)}, t("sources.edit")),
      el("button", {type: "button", class: "secondary test", onclick: () => testSource(row.name).catch((e) => sourceNote(e.message, true))}, t("sources.test")),
      el("button", {type: "button", class: "secondary remove", onclick: async () => {
        if (!confirm(t("sources.confirm_remove", {name: row.name}))) return;
        try {
          await api(`/api/v1/llm/sources/${encodeURIComponent(row.name)}`, {method: "DELETE"});
          sourceNote(t("sources.removed", {name: row.name}), false);
        } catch (err) { sourceNote(err.message, true); }
        loadSources();
      }}, t("sources.remove")));
    body.append(el("tr", {"data-source": row.name},
      el("td", {}, row.default ? `${row.name} ★` : row.name), el("td", {}, row.model),
      el("td", {class: "url"}, row.base_url), el("td", {}, row.has_api_key ? "••••••" : "—"),
      el("td", {class: row.last_error || row.disabled ? "status-failed" : ""}, state), actions));
  }
}

$("#source-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const name = $("#source-name").value.trim();
  const body = {base_url: $("#source-url").value.trim(), model: $("#source-model").value.trim(),
    adapter: $("#source-adapter").value.trim(), api_key: $("#source-key").value, default: $("#source-default").checked};
  try {
    await api(`/api/v1/llm/sources/${encodeURIComponent(name)}`, {method: "PUT",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    sourceNote(t("sources.saved", {name}), false);
    clearSourceForm();
    await loadSources();
    await testSource(name);
  } catch (err) { sourceNote(err.message, true); }
});
$("#source-clear").addEventListener("click", clearSourceForm);

async function loadSettings() {
  loadSources().catch((err) => sourceNote(err.message, true));
  settingsData = await api("/api/v1/settings");
  if (pendingScope) $("#settings-filter").value = "";
  renderSettings();
  if (pendingScope) revealSettingsGroup(pendingScope);
  pendingScope = null;
}
$("#settings-filter").addEventListener("input", renderSettings);

// ------------------------------------------------------------------ start

$("#logout").addEventListener("click", async () => {
  await api("/api/v1/logout", {method: "POST"}).catch(() => {});
  window.location.href = "/login";
});

(async function start() {
  try {
    ownerUI = Boolean((await sessionReady).owner);
    if (ownerUI) {
      const status = await api("/api/v1/status");
      $("#first-run").hidden = status.llm_configured;
    }
    await loadThreads();
    await loadHistory();
  } finally {
    chatLoaded(); // a message sent meanwhile goes now; a failed load shows its error as before
  }
  connectEvents();
  show(location.hash.slice(1) || "chat");
})();
