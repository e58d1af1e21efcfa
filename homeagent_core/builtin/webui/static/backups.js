"use strict";
// Backups (#backups, the owner's): the last backup's outcome, the schedule (daily/off, hour,
// retention) saved as settings, "back up now" with its progress and result, and the archives
// with download links (a damaged one says so and is not offered). Over the backup built-in's
// routes (/plugins/backup/...) and /api/v1/settings; both answer 403 to anyone but the owner,
// whose nav entry is hidden for them (people.js). Uses api() and el() from app.js.

// Every user-visible string of this module, for the message catalogues.
const BACKUPS_TEXT = {
  last: "上次备份 · Last backup",
  never: "还没有备份过 / No backup has run yet",
  ok: "成功 Succeeded",
  failedRun: "失败 Failed: ",
  started: "开始于 Started",
  took: "用时 Took",
  seconds: " 秒 s",
  archive: "归档 Archive",
  running: "正在备份… / Writing a backup…",
  schedule: "计划 · Schedule",
  scheduleKey: "自动备份 Automatic backup",
  daily: "每天 daily",
  off: "关闭 off",
  hour: "几点开始 From hour (0-23, local)",
  keepDaily: "保留最近几天 Keep the newest of this many days",
  keepWeekly: "再保留几周 Also keep this many weeks before those",
  folder: "存放位置 Folder: ",
  encrypted: "加密 Encrypted",
  plain: "未加密 Not encrypted",
  saved: "✓ 已保存 saved",
  now: "立即备份 Back up now",
  done: "备份完成 Backup written: ",
  busy: "已有备份在进行 / A backup is being written now",
  archives: "备份文件 · Archives",
  name: "文件 File",
  created: "时间 Created",
  size: "大小 Size",
  state: "状态 Status",
  complete: "完好 Complete",
  damaged: "已损坏，不能用来恢复 / Damaged, cannot be restored: ",
  download: "下载 Download",
  none: "还没有备份文件 / No archives yet",
  missing: "备份插件没有运行 / The backup built-in is not running (homeagent plugins enable backup)",
  loadFailed: "无法读取 / Cannot load: ",
  failed: "失败 / Failed: ",
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
      el("thead", {}, el("tr", {}, ...[T.name, T.created, T.size, T.state, ""].map((t) => el("th", {}, t)))), body));
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
        last.ok ? T.ok : T.failedRun + (last.error || "")));
      parts.push(el("p", {}, `${T.started}: ${local(last.started)} · ${T.took}: ${last.duration_s ?? "—"}${T.seconds}`));
      if (last.path) parts.push(el("p", {}, `${T.archive}: ${last.path.split("/").pop()}`));
    }
    lastBox.replaceChildren(...parts);
  }

  function showArchives(archives) {
    body.replaceChildren(...archives.map((a) => {
      const damaged = a.status !== "complete";
      // data-label: the column's name, shown above the value where a table is drawn as cards (phones).
      const state = damaged
        ? el("td", {class: "error", "data-status": "damaged", "data-label": T.state},
          T.damaged + a.status.replace(/^damaged:\s*/, ""))
        : el("td", {"data-status": "complete", "data-label": T.state},
          `${T.complete} · ${a.encrypted ? T.encrypted : T.plain}`);
      const link = damaged ? el("td", {"data-label": ""}) : el("td", {"data-label": ""}, el("a", {class: "download",
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
      lastBox.replaceChildren(el("p", {class: "error"}, err.message === "not found" ? T.missing : T.loadFailed + err.message));
      return;
    }
    showLast(status);
    showArchives(status.archives);
    folder.textContent = T.folder + status.folder;
    if (!creating) nowButton.disabled = Boolean(status.running);
    if (schedule) {
      try {
        showSchedule((await api("/api/v1/settings?prefix=plugin.backup.")).settings);
      } catch (err) {
        scheduleForm.replaceChildren(el("p", {class: "error"}, T.loadFailed + err.message));
      }
    }
  }

  nowButton.addEventListener("click", async () => {
    creating = true;
    nowButton.disabled = true;
    const began = Date.now();
    const tick = setInterval(() => {
      progress.textContent = `${T.running} ${Math.round((Date.now() - began) / 1000)}${T.seconds}`;
    }, 500);
    progress.className = "";
    progress.textContent = T.running;
    try {
      const done = await api("/plugins/backup/create", {method: "POST"});
      progress.textContent = `${T.done}${done.path.split("/").pop()} (${done.duration_s}${T.seconds})`;
      progress.className = "saved";
    } catch (err) {
      progress.textContent = T.failed + err.message;
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
