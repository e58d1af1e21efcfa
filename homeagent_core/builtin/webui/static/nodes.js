"use strict";
// Nodes panel (#nodes): remote devices of this home. Pair a new one (a one-time code and the
// command to run on the device), see which are online and what they offer, revoke one (its token
// dies and its link is closed at once). Uses api() and el() from app.js; refreshes every 3 s while shown.

(() => {
  const section = $("#page-nodes");
  const rows = $("#nodes tbody");
  const result = $("#nodes-result");
  const codeLine = $("#node-code");
  let timer = null;

  function when(seconds) {
    return seconds ? new Date(seconds * 1000).toLocaleString() : "—";
  }

  $("#node-pair").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = $("#node-name").value.trim().toLowerCase();
    try {
      const answer = await api("/api/v1/nodes/pair", {
        method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({name}),
      });
      const until = new Date(answer.expires * 1000).toLocaleTimeString();
      codeLine.textContent = `配对码 code ${answer.code} (until ${until}, once) — on the device: ` +
        `homeagent node join ${location.origin} ${answer.code}`;
      $("#node-name").value = "";
    } catch (err) {
      codeLine.textContent = `失败 / failed: ${err.message}`;
    }
    load();
  });

  async function revoke(name) {
    if (!confirm(`撤销 ${name}？它的令牌立即失效 / Revoke ${name}? Its token stops working now.`)) return;
    try {
      const answer = await api("/api/v1/nodes/revoke", {
        method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({name}),
      });
      result.textContent = answer.message;
    } catch (err) {
      result.textContent = `失败 / failed: ${err.message}`;
    }
    load();
  }

  async function load() {
    let nodes;
    try {
      nodes = await api("/api/v1/nodes");
    } catch (err) {
      result.textContent = `无法读取 / cannot load: ${err.message}`;
      return;
    }
    rows.replaceChildren();
    if (!nodes.length) {
      rows.append(el("tr", {}, el("td", {colspan: "6"}, "还没有设备 / no nodes paired yet: pair one above")));
    }
    for (const n of nodes) {
      rows.append(el("tr", {"data-node": n.name},
        el("td", {}, n.name),
        el("td", {class: "state"}, n.online ? "在线 online" : "离线 offline"),
        el("td", {}, when(n.last_seen)),
        el("td", {}, n.capabilities.join(", ") || "—"),
        el("td", {}, n.problem || "—"),
        el("td", {}, el("button", {class: "secondary revoke", onclick: () => revoke(n.name)}, "撤销 Revoke"))));
    }
  }

  function route() {
    const shown = location.hash === "#nodes";
    if (shown) {
      document.querySelectorAll("main > .page").forEach((page) => { page.hidden = page !== section; });
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === "nodes"));
      load();
      if (timer === null) timer = setInterval(load, 3000);
    } else {
      section.hidden = true;
      if (timer !== null) { clearInterval(timer); timer = null; }
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
