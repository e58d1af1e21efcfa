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

const pages = ["chat", "memory", "plugins", "settings"];
function show(page) {
  if (!pages.includes(page)) page = "chat";
  for (const name of pages) $(`#page-${name}`).hidden = name !== page;
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  if (page === "memory") loadMemory();
  if (page === "plugins") loadPlugins();
  if (page === "settings") loadSettings();
}
window.addEventListener("hashchange", () => show(location.hash.slice(1)));

// ------------------------------------------------------------------ chat

const messages = $("#messages");
let pending = null; // the assistant bubble being streamed

function bubble(role, text = "") {
  const node = el("div", {class: `msg ${role}`});
  node.reasoning = el("div", {class: "reasoning", hidden: ""});
  node.tools = el("div", {class: "tools"});
  node.body = el("div", {class: "body"}, text);
  node.append(node.reasoning, node.tools, node.body);
  messages.append(node);
  node.scrollIntoView({block: "end"});
  return node;
}

function addTool(node, payload) {
  const status = payload.rejected ? "rejected" : payload.success ? "ok" : "failed";
  node.tools.append(el("div", {class: "tool"}, `工具 ${payload.name} · ${status}`));
}

function renderHistory(data) {
  messages.textContent = "";
  pending = null;
  for (const m of data.messages) {
    const node = bubble(m.role, m.content || "");
    if (m.reasoning) { node.reasoning.hidden = false; node.reasoning.textContent = m.reasoning; }
    for (const tool of m.tools || []) addTool(node, tool);
  }
}

async function loadHistory() {
  renderHistory(await api("/api/v1/chat/history?limit=100"));
}

function onEvent(type, event) {
  const payload = event.payload || {};
  if (HIDDEN_CHANNELS.has(payload.channel)) return;
  if (type === "raw_input" && !payload.interrupt) {
    bubble("user", payload.text || "");
    pending = bubble("assistant");
    pending.classList.add("streaming");
  } else if (type === "content_delta" && pending) {
    if (payload.reset) pending.body.textContent = "";
    pending.body.textContent += payload.content || "";
    pending.scrollIntoView({block: "end"});
  } else if (type === "reasoning_delta" && pending) {
    pending.reasoning.hidden = false;
    pending.reasoning.textContent += payload.reasoning_content || "";
  } else if (type === "tool_call" && pending) {
    addTool(pending, payload);
  } else if (type === "agent_output") {
    const node = pending || bubble("assistant");
    node.body.textContent = payload.content || "";
    if (payload.reasoning_content) { node.reasoning.hidden = false; node.reasoning.textContent = payload.reasoning_content; }
    node.classList.remove("streaming");
    node.dataset.done = "1";
    pending = null;
  } else if (type === "agent_error" && pending) {
    pending.body.textContent = `出错了: ${payload.error}`;
    pending.classList.add("error");
    pending = null;
  }
}

function connectEvents() {
  const source = new EventSource("/api/v1/events");
  const types = ["raw_input", "content_delta", "reasoning_delta", "tool_call", "agent_output", "agent_error", "stage"];
  for (const type of types) source.addEventListener(type, (e) => onEvent(type, JSON.parse(e.data)));
  source.addEventListener("sync_required", () => loadHistory());
  source.onerror = () => { /* EventSource reconnects by itself with Last-Event-ID */ };
  return source;
}

$("#chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("#input");
  const file = $("#file").files[0];
  const text = input.value.trim();
  if (!text && !file) return;
  input.value = "";
  $("#send").disabled = true;
  try {
    if (file) {
      const form = new FormData();
      form.append("file", file);
      form.append("message", text);
      $("#file").value = "";
      const result = await api("/api/v1/chat/file", {method: "POST", body: form});
      const node = bubble("user");
      node.body.append(el("img", {src: result.file.url, alt: result.file.name}));
    } else {
      await api("/api/v1/chat", {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify({message: text, client_msg_id: crypto.randomUUID()}),
      });
    }
  } catch (err) {
    bubble("assistant", `出错了: ${err.message}`).classList.add("error");
  } finally {
    $("#send").disabled = false;
  }
});

$("#input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("#chat-form").requestSubmit();
  }
});

// ------------------------------------------------------------------ memory

function drawGraph(data) {
  const svg = $("#graph");
  svg.textContent = "";
  const nodes = data.nodes || [];
  const edges = data.edges || [];
  const ns = "http://www.w3.org/2000/svg";
  const pos = new Map();
  const cx = 300, cy = 200, r = Math.min(170, 100 + nodes.length * 4);
  nodes.forEach((n, i) => {
    const angle = (2 * Math.PI * i) / Math.max(1, nodes.length);
    pos.set(n.id, [cx + r * Math.cos(angle), cy + r * Math.sin(angle)]);
  });
  for (const e of edges) {
    const a = pos.get(e.source), b = pos.get(e.target);
    if (!a || !b) continue;
    const line = document.createElementNS(ns, "line");
    Object.entries({x1: a[0], y1: a[1], x2: b[0], y2: b[1], stroke: "#9bb8ae"}).forEach(([k, v]) => line.setAttribute(k, v));
    const title = document.createElementNS(ns, "title");
    title.textContent = e.type;
    line.append(title);
    svg.append(line);
  }
  for (const n of nodes) {
    const [x, y] = pos.get(n.id);
    const circle = document.createElementNS(ns, "circle");
    Object.entries({cx: x, cy: y, r: 4 + Math.min(8, n.mention_count || 1), fill: "#2f6f5e"}).forEach(([k, v]) => circle.setAttribute(k, v));
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", x + 8);
    label.setAttribute("y", y + 4);
    label.textContent = n.name;
    svg.append(circle, label);
  }
}

async function loadMemory(query = "") {
  const entities = $("#entities");
  try {
    const graph = await api("/api/v1/memory/graph?limit=60");
    drawGraph(graph.data);
    entities.textContent = "";
    for (const n of graph.data.nodes || []) entities.append(el("li", {class: "entity"}, `${n.name}${n.type ? ` (${n.type})` : ""}`));
  } catch (err) { entities.textContent = err.message; }
  try {
    const docs = await api(`/api/v1/memory/documents?limit=30${query ? `&q=${encodeURIComponent(query)}` : ""}`);
    const list = $("#documents");
    list.textContent = "";
    for (const d of docs.documents) list.append(el("li", {}, `${d.title || d.id}: ${(d.content || "").slice(0, 160)}`));
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
    for (const e of result.entities || []) list.append(el("li", {class: "entity"}, `${e.name}${e.type ? ` (${e.type})` : ""}`));
    for (const r of result.relations || []) list.append(el("li", {}, `${r.source} —${r.type}→ ${r.target}`));
  } catch (err) { $("#entities").textContent = err.message; }
});

// ------------------------------------------------------------------ plugins

async function loadPlugins() {
  const body = $("#plugins tbody");
  const data = await api("/api/v1/plugins");
  body.textContent = "";
  for (const p of data.plugins) {
    const contributions = Object.entries(p.contributions || {}).map(([k, v]) => `${k}: ${v.length}`).join(", ");
    const actions = el("td", {});
    actions.append(p.disabled
      ? el("button", {class: "secondary", onclick: () => toggle(p.name, "enable")}, "启用 Enable")
      : el("button", {class: "secondary", onclick: () => toggle(p.name, "disable")}, "停用 Disable"));
    if (p.package) actions.append(el("button", {class: "secondary remove", onclick: () => removePlugin(p.name)}, "删除 Remove"));
    let label = p.disabled ? "disabled (restart)" : p.status;
    if (p.restart_required && !p.disabled) label = "installed (restart to load)";
    const status = el("td", {class: `status-${p.status}`}, label);
    if (p.error) status.title = p.error;
    const name = el("td", {}, p.version ? `${p.name} ${p.version}` : p.name);
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
  await api(`/api/v1/plugins/${encodeURIComponent(name)}/${what}`, {method: "POST"});
  loadPlugins();
}

async function removePlugin(name) {
  try {
    await api(`/api/v1/plugins/${encodeURIComponent(name)}`, {method: "DELETE"});
    installNote(`removed ${name}`, false);
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
}

$("#install-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = $("#hmap").files[0];
  if (!file) return;
  const query = $("#hmap-overwrite").checked ? "?overwrite=true" : "";
  try {
    const result = await api(`/api/v1/plugins${query}`, {method: "POST", headers: {"Content-Type": "application/zip"}, body: file});
    const after = {reloaded: "running the new version", reload_required: "restart to load it"}[result.action] || result.action;
    installNote(`installed ${result.name} ${result.version} (${after})`, false);
  } catch (err) { installNote(err.message, true); }
  loadPlugins();
});

$("#plugins-reload").addEventListener("click", async () => {
  try {
    const result = await api("/api/v1/plugins/reload", {method: "POST"});
    const parts = [`reloaded: ${result.reloaded.join(", ") || "none"}`];
    if (result.restart_required.length) parts.push(`restart needed for: ${result.restart_required.join(", ")}`);
    installNote(parts.join("; "), false);
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
    input = el("input", {type: type === "password" ? "password" : type === "int" || type === "float" ? "number" : "text"});
    if (type === "float") input.step = meta.step || "any";
    input.value = type === "password" ? "" : value ?? "";
    if (type === "password") input.placeholder = value ? "(set — type to replace)" : "(not set)";
  }
  input.dataset.key = key;
  input.addEventListener("change", async () => {
    const out = $("#settings-result");
    let v = input.value;
    if (type === "int") v = parseInt(v, 10);
    try {
      const result = await api("/api/v1/settings", {method: "PUT", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({key, value: v})});
      out.textContent = `${key} saved${result.restart_required ? " (restart to apply)" : ""}`;
      out.className = "";
    } catch (err) {
      out.textContent = err.message;
      out.className = "error";
    }
  });
  return input;
}

function renderSettings() {
  const scope = $("#settings-scope").value;
  const filter = $("#settings-filter").value.toLowerCase();
  const form = $("#settings-form");
  form.textContent = "";
  const prefix = scope === "core" ? "core." : `${scope}.`;
  for (const [key, value] of Object.entries(settingsData.settings)) {
    if (!key.startsWith(prefix) || (filter && !key.toLowerCase().includes(filter))) continue;
    const meta = settingsData.meta[key] || {type: "string"};
    form.append(el("div", {class: "setting"}, el("span", {class: "key"}, key),
      el("span", {class: "desc"}, meta.description || ""), settingInput(key, meta, value)));
  }
}

async function loadSettings() {
  settingsData = await api("/api/v1/settings");
  const select = $("#settings-scope");
  const current = select.value || "core";
  select.textContent = "";
  for (const scope of settingsData.plugins) select.append(el("option", {value: scope}, scope));
  select.value = current;
  renderSettings();
}
$("#settings-scope").addEventListener("change", renderSettings);
$("#settings-filter").addEventListener("input", renderSettings);

// ------------------------------------------------------------------ start

$("#logout").addEventListener("click", async () => {
  await api("/api/v1/logout", {method: "POST"}).catch(() => {});
  window.location.href = "/login";
});

(async function start() {
  const status = await api("/api/v1/status");
  $("#first-run").hidden = status.llm_configured;
  await loadHistory();
  connectEvents();
  show(location.hash.slice(1) || "chat");
})();
