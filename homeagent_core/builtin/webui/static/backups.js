"use strict";
// Backups (#backups, the owner's): the last backup's outcome, the schedule (daily/off, hour,
// retention) saved as settings, "back up now" with its progress and result, and the archives
// with download links (a damaged one says so and is not offered). Over the backup built-in's
// routes (/plugins/backup/...) and /api/v1/settings; both answer 403 to anyone but the owner,
// whose nav entry is hidden for them (people.js). Uses api() and el() from app.js.

// Every fixed user-visible string of this module, from the message catalogue (i18n.js).
const BACKUPS_TEXT = {
  last: t("backups.last"),
  never: t("backups.never"),
  ok: t("backups.ok"),
  running: t("backups.running"),
  schedule: t("backups.schedule"),
  scheduleKey: t("backups.schedule_key"),
  daily: t("backups.daily"),
  off: t("backups.off"),
  hour: t("backups.hour"),
  keepDaily: t("backups.keep_daily"),
  keepWeekly: t("backups.keep_weekly"),
  encrypted: t("backups.encrypted"),
  plain: t("backups.plain"),
  saved: t("backups.saved"),
  now: t("backups.now"),
  archives: t("backups.archives"),
  name: t("backups.name"),
  created: t("backups.created"),
  size: t("backups.size"),
  state: t("backups.state"),
  complete: t("backups.complete"),
  download: t("backups.download"),
  actions: t("common.actions"),
  none: t("backups.none"),
  missing: t("backups.missing"),
};

(() => {
  const T = BACKUPS_TEXT;
  const section = $("#page-backups");
  const lastBox = el("div", {id: "backup-last"});
  const scheduleForm = el("form", {id: "backup-schedule", class: "settings"});
  const folder = el("p", {id: "backup-folder", class: "hint"});
  const nowButton = el("button", {type: "button", id: "backup-now"}, T.now);
  const progress = el("p", {id: "backup-progress", role: "status"});
  const body = el("tbody", {});
  section.append(
    el("div", {class: "card"}, el("h3", {}, T.last), lastBox, el("div", {class: "row"}, nowButton), progress),
    el("h3", {}, T.schedule), scheduleForm, folder,
    el("h3", {}, T.archives),
    el("table", {id: "backup-archives", class: "table"},
      el("thead", {}, el("tr", {}, ...[T.name, T.created, T.size, T.state, T.actions].map((word) => el("th", {}, word)))), body));
  let owner = false;
  let timer = null;
  let creating = false;

  const local = (iso) => (iso ? new Date(iso).toLocaleString() : "—");
  const megabytes = (n) => `${(n / 1048576).toFixed(n < 10485760 ? 2 : 0)} MB`;

  function showLast(status) {
    const last = status.last || {};
    const parts = [];
    if (status.running) parts.push(el("p", {class: "saved"}, T.running));
    if (!last.started) {
      parts.push(el("p", {class: "hint"}, T.never));
    } else {
      parts.push(el("p", {"data-ok": String(Boolean(last.ok)), class: last.ok ? "saved" : "error"},
        last.ok ? T.ok : t("backups.failed_run", {error: last.error || ""})));
      parts.push(el("p", {}, t("backups.started_took", {started: local(last.started), seconds: last.duration_s ?? "—"})));
      if (last.path) parts.push(el("p", {}, t("backups.archive", {name: last.path.split("/").pop()})));
    }
    lastBox.replaceChildren(...parts);
  }

  function showArchives(archives) {
    body.replaceChildren(...archives.map((a) => {
      const damaged = a.status !== "complete";
      // data-label: the column's name, shown above the value where a table is drawn as cards (phones).
      const state = damaged
        ? el("td", {class: "error", "data-status": "damaged", "data-label": T.state},
          t("backups.damaged", {reason: a.status.replace(/^damaged:\s*/, "")}))
        : el("td", {"data-status": "complete", "data-label": T.state},
          `${T.complete} · ${a.encrypted ? T.encrypted : T.plain}`);
      const link = damaged ? el("td", {"data-label": T.actions}) : el("td", {"data-label": T.actions}, el("a", {class: "download",
        href: `/plugins/backup/download/${encodeURIComponent(a.name)}`, download: a.name}, T.download));
      return el("tr", {"data-archive": a.name}, el("td", {"data-label": T.name}, a.name),
        el("td", {"data-label": T.created}, local(a.created)), el("td", {"data-label": T.size}, megabytes(a.size)),
        state, link);
    }));
    if (!archives.length) body.append(el("tr", {}, el("td", {colspan: "5"}, T.none)));
  }

  function field(label, key, input, value) {
    input.value = String(value);
    input.dataset.key = key;
    const note = el("span", {class: "saved"});
    input.addEventListener("change", async () => {
      note.className = "saved";
      note.textContent = "";
      const raw = input.type === "number" ? parseInt(input.value, 10) : input.value;
      try {
        await api("/api/v1/settings", {method: "PUT", headers: {"Content-Type": "application/json"},
          body: JSON.stringify({key, value: raw})});
        note.textContent = T.saved;
      } catch (err) {
        note.className = "saved error";
        note.textContent = err.message;
      }
    });
    return el("label", {class: "setting"}, el("span", {class: "label"}, label), input, note);
  }

  function showSchedule(settings) {
    const get = (name) => settings[`plugin.backup.${name}`];
    const schedule = el("select", {id: "backup-schedule-select"},
      el("option", {value: "daily"}, T.daily), el("option", {value: "off"}, T.off));
    const number = (id, min, max) => el("input", {id, type: "number", min: String(min), max: String(max)});
    scheduleForm.replaceChildren(
      field(T.scheduleKey, "plugin.backup.schedule", schedule, get("schedule")),
      field(T.hour, "plugin.backup.hour", number("backup-hour", 0, 23), get("hour")),
      field(T.keepDaily, "plugin.backup.keep_daily", number("backup-keep-daily", 1, 366), get("keep_daily")),
      field(T.keepWeekly, "plugin.backup.keep_weekly", number("backup-keep-weekly", 0, 520), get("keep_weekly")));
  }

  async function load({schedule = false} = {}) {
    let status;
    try {
      status = await api("/plugins/backup/status");
    } catch (err) {
      lastBox.replaceChildren(el("p", {class: "error"}, err.message === "not found" ? T.missing : t("common.cannot_load", {error: err.message})));
      return;
    }
    showLast(status);
    showArchives(status.archives);
    folder.textContent = t("backups.folder", {folder: status.folder});
    if (!creating) nowButton.disabled = Boolean(status.running);
    if (schedule) {
      try {
        showSchedule((await api("/api/v1/settings?prefix=plugin.backup.")).settings);
      } catch (err) {
        scheduleForm.replaceChildren(el("p", {class: "error"}, t("common.cannot_load", {error: err.message})));
      }
    }
  }

  nowButton.addEventListener("click", async () => {
    creating = true;
    nowButton.disabled = true;
    const began = Date.now();
    const tick = setInterval(() => {
      progress.textContent = t("backups.running_for", {seconds: Math.round((Date.now() - began) / 1000)});
    }, 500);
    progress.className = "";
    progress.textContent = T.running;
    try {
      const done = await api("/plugins/backup/create", {method: "POST"});
      progress.textContent = t("backups.done", {name: done.path.split("/").pop(), seconds: done.duration_s});
      progress.className = "saved";
    } catch (err) {
      progress.textContent = t("common.failed", {error: err.message});
      progress.className = "error";
    } finally {
      clearInterval(tick);
      creating = false;
      nowButton.disabled = false;
      load();
    }
  });

  function route() {
    const shown = location.hash === "#backups";
    if (shown && !owner) {
      section.hidden = true;
      location.hash = "#account"; // the owner's page (its API answers 403)
      return;
    }
    if (shown) {
      document.querySelectorAll("main > .page").forEach((page) => { page.hidden = page !== section; });
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === "backups"));
      load({schedule: true});
      if (timer === null) timer = setInterval(load, 5000);
    } else {
      section.hidden = true;
      if (timer !== null) { clearInterval(timer); timer = null; }
    }
  }

  (async function start() {
    try {
      owner = Boolean((await api("/api/v1/session")).owner);
    } catch {
      owner = false;
    }
    window.addEventListener("hashchange", route);
    route();
  })();
})();
