"use strict";
// Pairing panel (#pairing): chat-app senders waiting for approval (approve, optionally linked to
// a known person, or deny) and the contacts already decided (revoke: forgotten, a new code next
// time). Uses api() and el() from app.js; refreshes every 3 s while shown.

(() => {
  const section = $("#page-pairing");
  const pending = $("#pairing-pending tbody");
  const decided = $("#pairing-decided tbody");
  const people = $("#pairing-people");
  const result = $("#pairing-result");
  let timer = null;
  let shownState = "";

  function age(seconds) {
    const s = Math.max(0, Math.round(Date.now() / 1000 - seconds));
    if (s < 60) return t("pairing.under_minute");
    if (s < 3600) return t("pairing.minutes", {n: Math.floor(s / 60)});
    if (s < 86400) return t("pairing.hours", {n: Math.floor(s / 3600)});
    return t("pairing.days", {n: Math.floor(s / 86400)});
  }

  function sender(r) {
    const who = r.account.startsWith("group:") ? t("pairing.group", {id: r.account.slice(6)}) : `${r.platform} ${r.account}`;
    return r.name && !r.account.startsWith("group:") ? `${r.name} (${who})` : who;
  }

  async function act(action, r, person = "") {
    const body = {plugin: r.plugin, code: r.code};
    if (person) body.person = person;
    try {
      const answer = await api(`/api/v1/pairing/${action}`, {
        method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
      });
      const linked = answer.person ? ` → ${answer.person}` : "";
      const done = tStatus({approve: "approved", deny: "denied", revoke: "revoked"}[action]);
      result.textContent = `${done}: ${sender({...answer, plugin: r.plugin})}${linked}`;
    } catch (err) {
      result.textContent = t("common.failed", {error: err.message});
    }
    load();
  }

  async function load() {
    let data;
    try {
      data = await api("/api/v1/pairing");
    } catch (err) {
      result.textContent = t("common.cannot_load", {error: err.message});
      return;
    }
    // Redraw only when something changed, so a person being typed in is not wiped; ages tick.
    const state = JSON.stringify([data.bridges, data.people, data.requests.map((r) => [r.plugin, r.code, r.status, r.person])]);
    if (state === shownState) {
      section.querySelectorAll("[data-since]").forEach((cell) => {
        cell.textContent = cell.dataset.ago ? t("pairing.ago", {age: age(+cell.dataset.since)}) : age(+cell.dataset.since);
      });
      return;
    }
    shownState = state;
    people.replaceChildren(...data.people.map((name) => el("option", {value: name})));
    const waiting = data.requests.filter((r) => r.status === "pending");
    const others = data.requests.filter((r) => r.status !== "pending");
    pending.replaceChildren();
    decided.replaceChildren();
    if (!waiting.length) {
      const hint = data.bridges.length ? t("pairing.nothing") : t("pairing.no_bridge");
      pending.append(el("tr", {}, el("td", {colspan: "6"}, hint)));
    }
    for (const r of waiting) {
      const person = el("input", {class: "person", list: "pairing-people", placeholder: t("pairing.optional"),
        "aria-label": t("pairing.link_aria", {code: r.code})});
      pending.append(el("tr", {"data-code": r.code},
        el("td", {}, r.plugin),
        el("td", {class: "sender"}, sender(r)),
        el("td", {class: "code"}, r.code),
        el("td", {"data-since": String(r.created_at)}, age(r.created_at)),
        el("td", {}, person),
        el("td", {},
          el("button", {class: "approve", onclick: () => act("approve", r, person.value.trim())}, t("pairing.approve")),
          el("button", {class: "secondary deny", onclick: () => {
            if (confirm(t("pairing.confirm_deny", {sender: sender(r)}))) {
              act("deny", r);
            }
          }}, t("pairing.deny")))));
    }
    if (!others.length) decided.append(el("tr", {}, el("td", {colspan: "6"}, "—")));
    for (const r of others) {
      decided.append(el("tr", {"data-code": r.code},
        el("td", {}, r.plugin),
        el("td", {class: "sender"}, sender(r)),
        el("td", {class: "status"}, tStatus(r.status === "approved" ? "approved" : "denied")),
        el("td", {}, r.person || "—"),
        el("td", {"data-since": String(r.updated_at), "data-ago": "1"}, t("pairing.ago", {age: age(r.updated_at)})),
        el("td", {},
          el("button", {class: "secondary revoke", title: t("pairing.revoke_title"),
            onclick: () => act("revoke", r)}, t("pairing.revoke")))));
    }
  }

  function route() {
    const shown = location.hash === "#pairing";
    if (shown) {
      document.querySelectorAll("main > .page").forEach((page) => { page.hidden = page !== section; });
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === "pairing"));
      load();
      if (timer === null) timer = setInterval(load, 3000);
    } else {
      section.hidden = true;
      if (timer !== null) { clearInterval(timer); timer = null; }
    }
  }
  sessionReady.then((me) => {
    if (!me.owner) return; // the owner's page
    window.addEventListener("hashchange", route);
    route();
  }).catch(() => {});
})();
