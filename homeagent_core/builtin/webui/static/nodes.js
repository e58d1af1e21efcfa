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
      codeLine.textContent = t("nodes.code", {code: answer.code, until, origin: location.origin});
      $("#node-name").value = "";
    } catch (err) {
      codeLine.textContent = t("common.failed", {error: err.message});
    }
    load();
  });

  async function revoke(name) {
    if (!confirm(t("nodes.confirm_revoke", {name}))) return;
    try {
      const answer = await api("/api/v1/nodes/revoke", {
        method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({name}),
      });
      result.textContent = answer.message;
    } catch (err) {
      result.textContent = t("common.failed", {error: err.message});
    }
    load();
  }

  async function load() {
    let nodes;
    try {
      nodes = await api("/api/v1/nodes");
    } catch (err) {
      result.textContent = t("common.cannot_load", {error: err.message});
      return;
    }
    rows.replaceChildren();
    if (!nodes.length) {
      rows.append(el("tr", {}, el("td", {colspan: "6"}, t("nodes.empty"))));
    }
    for (const n of nodes) {
      // data-label: the column's name, shown above the value where a table is drawn as cards (phones).
      rows.append(el("tr", {"data-node": n.name},
        el("td", {"data-label": t("nodes.name")}, n.name),
        el("td", {class: "state", "data-label": t("nodes.state")}, n.online ? t("nodes.online") : t("nodes.offline")),
        el("td", {"data-label": t("nodes.last_seen")}, when(n.last_seen)),
        el("td", {"data-label": t("nodes.capabilities")}, n.capabilities.join(", ") || "—"),
        el("td", {"data-label": t("nodes.problem")}, n.problem || "—"),
        el("td", {"data-label": t("common.actions")},
          el("button", {class: "secondary revoke", onclick: () => revoke(n.name)}, t("nodes.revoke")))));
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
