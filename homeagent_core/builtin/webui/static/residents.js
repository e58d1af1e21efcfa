"use strict";
// Resident sub-agents panel (#residents): who is running, what they do, their last output,
// stop / destroy buttons. Uses api() and el() from app.js; refreshes every 3 s while shown.

(() => {
  const section = $("#page-residents");
  const body = $("#residents tbody");
  const result = $("#residents-result");
  let timer = null;

  async function act(path, method, done) {
    try {
      const answer = await api(path, {method});
      result.textContent = done(answer);
    } catch (err) {
      result.textContent = t("common.failed", {error: err.message});
    }
    load();
  }

  async function load() {
    let data;
    try {
      data = await api("/api/v1/residents");
    } catch (err) {
      result.textContent = t("common.cannot_load", {error: err.message});
      return;
    }
    body.replaceChildren();
    if (!data.residents.length) {
      body.append(el("tr", {}, el("td", {colspan: "7"}, t("residents.none"))));
    }
    for (const r of data.residents) {
      const name = encodeURIComponent(r.name);
      body.append(el("tr", {"data-name": r.name},
        el("td", {}, r.name),
        el("td", {}, r.role),
        el("td", {class: "status"}, tStatus(r.status)),
        el("td", {}, r.current || "—"),
        el("td", {}, String(r.queued.length)),
        el("td", {class: "last"}, r.last_output || "—"),
        el("td", {},
          el("button", {class: "secondary stop", onclick: () => act(`/api/v1/residents/${name}/stop`, "POST",
            (a) => t("residents.stopped", {name: a.name, dropped: a.dropped}))}, t("residents.stop")),
          el("button", {class: "secondary destroy", onclick: () => {
            if (confirm(t("residents.confirm_destroy", {name: r.name}))) {
              act(`/api/v1/residents/${name}?residual=keep`, "DELETE",
                (a) => t("residents.destroyed", {name: a.name, handed: a.handed_to_main}));
            }
          }}, t("residents.destroy")))));
    }
  }

  function route() {
    const shown = location.hash === "#residents";
    if (shown) {
      document.querySelectorAll("main > .page").forEach((page) => { page.hidden = page !== section; });
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === "residents"));
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
