"use strict";
// People (#people, the owner's): persons, roles, linked accounts, API keys, web logins, invite
// links, the audit log, the calls waiting for the owner's approval and the approval history. Approvals also pop up as
// notifications with Approve / Deny on every page of the owner's open tabs (pushed over SSE).
// Account (#account, everyone's): change one's own password. Someone who is not the owner sees
// only the pages meant for them (their chat and Account). Uses api(), el() and sessionReady from app.js.

(() => {
  const section = $("#page-people");
  const account = $("#page-account");
  const result = $("#people-result");
  const secret = $("#people-secret");
  const toasts = $("#approval-toasts");
  let me = null;
  let roles = [];
  let timer = null;

  const post = (path, body, method = "POST") => api(path, {
    method, headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {}),
  });
  const enc = encodeURIComponent;

  function age(seconds) {
    const s = Math.max(0, Math.round(Date.now() / 1000 - seconds));
    return s < 60 ? t("people.seconds", {n: s}) : t("people.minutes", {n: Math.floor(s / 60)});
  }

  function showSecret(title, value, note) {
    secret.replaceChildren(el("strong", {}, title), el("pre", {id: "people-secret-value"}, value), el("p", {class: "hint"}, note));
    secret.hidden = false;
  }

  async function act(label, run) {
    result.textContent = "";
    try {
      const answer = await run();
      result.textContent = `${label}: ${answer && answer.status ? answer.status : "ok"}`;
    } catch (err) {
      result.textContent = t("common.failed", {error: err.message});
    }
    load();
  }

  // ---------------------------------------------------------------- approvals

  async function decide(id, approve) {
    try {
      const answer = await post(`/api/v1/approvals/${id}`, {approve});
      result.textContent = `#${id} ${tStatus(answer.status === "approved" ? "approved" : "denied")}`;
    } catch (err) {
      result.textContent = `#${id} ${t("common.failed", {error: err.message})}`;
    }
    refreshApprovals();
  }

  function describe(a) {
    return [`${a.person} (${a.role}, ${a.door})`, a.tool, JSON.stringify(a.arguments)];
  }

  function buttons(a) {
    return el("span", {class: "actions"},
      el("button", {type: "button", "data-approve": a.id, onclick: () => decide(a.id, true)}, t("pairing.approve")),
      el("button", {type: "button", class: "deny", "data-deny": a.id, onclick: () => decide(a.id, false)}, t("pairing.deny")));
  }

  let shownIds = "";
  async function refreshApprovals() {
    let data;
    try {
      data = await api("/api/v1/approvals");
    } catch {
      return;
    }
    const list = data.approvals;
    const ids = list.map((a) => a.id).join(",");
    if (ids !== shownIds) {
      const fresh = list.filter((a) => !shownIds.split(",").includes(String(a.id)));
      shownIds = ids;
      toasts.replaceChildren(...list.map((a) => {
        const [who, tool, args] = describe(a);
        return el("div", {class: "toast", "data-approval": a.id},
          el("strong", {}, t("people.approval", {id: a.id, who})), el("div", {}, `${tool} `, el("code", {}, args)), buttons(a));
      }));
      if (document.hidden && "Notification" in window && Notification.permission === "granted") {
        for (const a of fresh) new Notification("HomeAgent", {body: `#${a.id} ${a.person}: ${a.tool}`, tag: `approval-${a.id}`});
      }
    }
    const body = $("#people-approvals tbody");
    body.replaceChildren(...list.map((a) => {
      const [who, tool, args] = describe(a);
      return el("tr", {}, el("td", {}, `#${a.id}`), el("td", {}, who), el("td", {}, tool),
        el("td", {}, el("code", {}, args)), el("td", {}, age(a.created)), el("td", {}, buttons(a)));
    }));
    if (!list.length) body.append(el("tr", {}, el("td", {colspan: "6", class: "hint"}, t("people.nothing_waits"))));
  }

  // Every approval with its outcome, earlier runs of the daemon included (kept in people.db).
  async function refreshHistory() {
    let data;
    try {
      data = await api("/api/v1/approvals?history=1&limit=50");
    } catch {
      return;
    }
    const body = $("#people-approval-history tbody");
    body.replaceChildren(...data.approvals.map((a) => {
      const [who, tool, args] = describe(a);
      return el("tr", {"data-history": a.id}, el("td", {}, `#${a.id}`), el("td", {}, who), el("td", {}, tool),
        el("td", {}, el("code", {}, args)), el("td", {"data-status": a.status}, tStatus(a.status)),
        el("td", {}, a.decided_by || ""));
    }));
    if (!data.approvals.length) body.append(el("tr", {}, el("td", {colspan: "6", class: "hint"}, t("people.no_history"))));
  }

  function listenForApprovals() {
    const source = new EventSource("/api/v1/events");
    for (const type of ["approval_requested", "approval_decided"]) {
      source.addEventListener(type, refreshApprovals);
      source.addEventListener(type, () => { if (me && me.owner && !section.hidden) refreshHistory(); });
    }
    source.addEventListener("sync_required", refreshApprovals);
  }

  // ---------------------------------------------------------------- people

  function roleSelect(person) {
    const select = el("select", {"aria-label": t("people.role_of", {name: person.name}), "data-role-of": person.name});
    for (const r of roles) select.append(el("option", {value: r.name}, r.name));
    select.value = person.role;
    select.addEventListener("change", () => act(`${person.name} → ${select.value}`,
      () => post(`/api/v1/people/${enc(person.name)}/role`, {role: select.value}, "PUT")));
    return select;
  }

  function personActions(p) {
    const name = enc(p.name);
    const button = (label, run, attrs = {}) => el("button", {type: "button", class: "secondary", ...attrs, onclick: run}, label);
    return el("td", {class: "actions"},
      button(t("people.invite"), async () => {
        try {
          const made = await post(`/api/v1/people/${name}/invite`);
          showSecret(t("people.invite_title", {name: p.name}), made.url, t("people.invite_note"));
        } catch (err) { result.textContent = t("common.failed", {error: err.message}); }
      }, {"data-invite": p.name}),
      button(t("people.reset"), async () => {
        if (!confirm(t("people.confirm_reset", {name: p.name}))) return;
        try {
          const reset = await post(`/api/v1/people/${name}/password`);
          showSecret(t("people.reset_title", {name: p.name}), reset.password, t("people.reset_note"));
        } catch (err) { result.textContent = t("common.failed", {error: err.message}); }
        load();
      }),
      button(t("people.end_sessions"), () => act(t("people.sessions_ended", {name: p.name}),
        () => api(`/api/v1/people/${name}/sessions`, {method: "DELETE"}))),
      button(t("people.new_key"), async () => {
        try {
          const made = await post(`/api/v1/people/${name}/key`);
          showSecret(t("people.key_title", {name: p.name}), made.api_key, t("people.key_note"));
        } catch (err) { result.textContent = t("common.failed", {error: err.message}); }
        load();
      }),
      button(t("people.remove"), () => {
        if (confirm(t("people.confirm_remove", {name: p.name}))) {
          act(t("people.removed", {name: p.name}), () => api(`/api/v1/people/${name}`, {method: "DELETE"}));
        }
      }, {class: "deny", "data-remove": p.name}));
  }

  async function loadAudit() {
    const person = $("#audit-person").value.trim();
    const data = await api(`/api/v1/people/audit?limit=50${person ? `&person=${enc(person)}` : ""}`);
    $("#people-audit tbody").replaceChildren(...data.audit.map((r) => el("tr", {},
      el("td", {}, new Date(r.ts * 1000).toLocaleString()), el("td", {}, `${r.person} (${r.role})`), el("td", {}, r.door),
      el("td", {}, r.action), el("td", {}, r.outcome), el("td", {}, r.detail))));
  }

  async function load() {
    let data;
    try {
      data = await api("/api/v1/people");
    } catch (err) {
      result.textContent = t("common.cannot_load", {error: err.message});
      return;
    }
    roles = data.roles;
    const add = $("#people-role");
    const wanted = add.value || "adult";
    add.replaceChildren(...roles.map((r) => el("option", {value: r.name}, r.name)));
    add.value = wanted;
    $("#people-link-person").replaceChildren(...data.people.map((p) => el("option", {value: p.name}, p.name)));
    $("#people tbody").replaceChildren(...data.people.map((p) => el("tr", {"data-person": p.name},
      el("td", {}, p.name), el("td", {}, roleSelect(p)),
      el("td", {}, ...(p.identities.length ? p.identities.map((i) => el("span", {class: "identity"}, `${i.platform}:${i.account} `,
        el("button", {type: "button", class: "secondary", title: t("people.unlink"), "aria-label": t("people.unlink"), "data-unlink": `${p.name}/${i.platform}/${i.account}`,
          onclick: () => {
            if (!confirm(t("people.confirm_unlink", {platform: i.platform, account: i.account, name: p.name}))) return;
            act(t("people.unlinked", {name: p.name, platform: i.platform, account: i.account}), () => post(`/api/v1/people/${enc(p.name)}/link`,
              {platform: i.platform, account: i.account}, "DELETE"));
          }}, "✕"))) : ["-"])),
      el("td", {}, p.name === data.me.person && data.me.admin_login ? "admin" : p.web_login ? `✓ (${p.sessions})` : "-"),
      el("td", {}, String(p.api_keys)), personActions(p))));
    refreshApprovals();
    refreshHistory();
    loadAudit().catch((err) => { result.textContent = t("people.audit_error", {error: err.message}); });
  }

  $("#people-add").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("#people-name").value.trim();
    act(t("people.added", {name}), async () => {
      await post("/api/v1/people", {name, role: $("#people-role").value});
      $("#people-name").value = "";
    });
  });
  $("#people-link").addEventListener("submit", (event) => {
    event.preventDefault();
    const person = $("#people-link-person").value;
    act(t("people.linked", {name: person}), () => post(`/api/v1/people/${enc(person)}/link`, {
      platform: $("#people-link-platform").value.trim(), account: $("#people-link-account").value.trim(),
    }));
  });
  $("#audit-refresh").addEventListener("click", () => loadAudit().catch((err) => { result.textContent = err.message; }));

  // ---------------------------------------------------------------- account

  $("#account-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const out = $("#account-result");
    out.textContent = "";
    try {
      await post("/api/v1/me/password", {current: $("#account-current").value, new: $("#account-new").value}, "PUT");
      out.textContent = t("account.changed");
      $("#account-current").value = "";
      $("#account-new").value = "";
    } catch (err) {
      out.textContent = t("common.failed", {error: err.message});
    }
  });

  // ---------------------------------------------------------------- routing

  function route() {
    const page = location.hash.slice(1);
    const mine = page === "account" ? account : page === "people" && me && me.owner ? section : null;
    if (mine) {
      document.querySelectorAll("main > .page").forEach((p) => { p.hidden = p !== mine; });
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
    } else {
      section.hidden = true;
      account.hidden = true;
    }
    if (mine === section) {
      load();
      if (timer === null) timer = setInterval(refreshApprovals, 5000);
    } else if (timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }

  (async function start() {
    me = await sessionReady;
    $("#account-who").textContent = t("account.who", {person: me.person, role: me.role});
    $("#account-username").value = me.person;
    if (!me.owner) {
      // Only the pages meant for everyone (app.js shows their chat); the owner's pages answer 403 anyway.
      document.querySelectorAll("nav a:not([data-person])").forEach((a) => { a.hidden = true; });
      $("#first-run").hidden = true;
    } else {
      listenForApprovals();
      refreshApprovals();
    }
    window.addEventListener("hashchange", route);
    route();
  })();
})();
