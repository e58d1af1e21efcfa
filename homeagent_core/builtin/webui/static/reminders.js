"use strict";
// Reminders (#reminders, everyone's): the logged-in person's pending reminders (the owner sees
// everyone's, marked by person) with the next due time in the household's time zone and the
// repeat rule in words; add one in the words people say ("明天早上7点 吃药"), cancel, snooze.
// Uses api() and el() from app.js; refreshes every 15 s while shown.

// Every fixed user-visible string of this module, from the message catalogue (i18n.js).
const REMINDERS_TEXT = {
  placeholder: t("reminders.placeholder"),
  add: t("reminders.add"),
  hint: t("reminders.hint"),
  cannotRead: t("reminders.cannot_read"),
  askBack: t("reminders.ask_back"),
  who: t("reminders.who"),
  what: t("reminders.what"),
  due: t("reminders.due"),
  repeat: t("reminders.repeat"),
  once: t("reminders.once"),
  nobody: t("reminders.nobody"),
  empty: t("reminders.empty"),
  snoozeBy: t("reminders.snooze_by"),
  snooze: t("reminders.snooze"),
  cancel: t("reminders.cancel"),
  actions: t("common.actions"),
  weekdays: t("reminders.weekdays").split(" "), // Sunday first
};

(() => {
  const T = REMINDERS_TEXT;
  const section = $("#page-reminders");
  const snoozeOptions = el("datalist", {id: "reminder-snooze-options"},
    ...t("reminders.snooze_examples").split(" ").map((v) => el("option", {value: v})));
  const said = el("input", {id: "reminder-said", placeholder: T.placeholder, autocomplete: "off", maxlength: "500",
    "aria-label": T.placeholder});
  const form = el("form", {id: "reminder-form", class: "row"}, said, el("button", {type: "submit"}, T.add));
  const problem = el("div", {id: "reminder-error", class: "card notice error", role: "alert", hidden: ""});
  const zone = el("p", {id: "reminders-zone", class: "hint"});
  const head = el("tr", {});
  const body = el("tbody", {});
  const result = el("p", {id: "reminders-result", role: "status"});
  section.append(form, el("p", {class: "hint"}, T.hint), problem, zone,
    el("table", {id: "reminders", class: "table"}, el("thead", {}, head), body), result, snoozeOptions);
  let timer = null;

  // "2026-12-08T07:00:00+08:00" (already in the household's zone) → "2026-12-08 07:00 Tue" (周二 in Chinese).
  function when(iso) {
    const [day, rest] = iso.split("T");
    const [y, m, d] = day.split("-").map(Number);
    return `${day} ${rest.slice(0, 5)} ${T.weekdays[new Date(Date.UTC(y, m - 1, d)).getUTCDay()]}`;
  }

  function showProblem(message) {
    problem.replaceChildren(el("strong", {}, T.cannotRead), el("p", {}, message), el("p", {class: "hint"}, T.askBack));
    problem.hidden = false;
  }

  async function act(run, done) {
    result.textContent = "";
    try {
      result.textContent = done(await run());
    } catch (err) {
      result.textContent = t("common.failed", {error: err.message});
    }
    load();
  }

  function row(r, owner) {
    const id = encodeURIComponent(r.id);
    const by = el("input", {class: "snooze-by", list: "reminder-snooze-options", placeholder: T.snoozeBy,
      "aria-label": T.snoozeBy, value: "10m"});
    // data-label: the column's name, shown above the value where a table is drawn as cards (phones).
    const cells = [
      el("td", {class: "what", "data-label": T.what}, r.text),
      el("td", {class: "due", "data-due": r.due, "data-label": T.due}, when(r.due)),
      el("td", {class: "repeat", "data-label": T.repeat}, r.repeat_words || T.once),
      el("td", {class: "actions", "data-label": T.actions}, by,
        el("button", {type: "button", class: "secondary snooze", onclick: () => act(
          () => api(`/api/v1/reminders/${id}/snooze`, {method: "POST", headers: {"Content-Type": "application/json"},
            body: JSON.stringify({by: by.value})}),
          (a) => t("reminders.snoozed", {due: when(a.reminder.due)}))}, T.snooze),
        el("button", {type: "button", class: "secondary cancel", onclick: () => {
          if (confirm(t("reminders.confirm_cancel", {text: r.text}))) {
            act(() => api(`/api/v1/reminders/${id}`, {method: "DELETE"}), () => t("reminders.cancelled", {text: r.text}));
          }
        }}, T.cancel)),
    ];
    if (owner) cells.unshift(el("td", {class: "who", "data-label": T.who}, r.person || T.nobody));
    return el("tr", {"data-reminder": r.id, "data-person": r.person}, ...cells);
  }

  async function load() {
    let data;
    try {
      data = await api("/api/v1/reminders");
    } catch (err) {
      result.textContent = t("common.cannot_load", {error: err.message});
      return;
    }
    zone.textContent = t("reminders.zone", {zone: data.zone});
    head.replaceChildren(...(data.owner ? [T.who] : []).concat([T.what, T.due, T.repeat, T.actions]).map((word) => el("th", {}, word)));
    body.replaceChildren(...data.reminders.map((r) => row(r, data.owner)));
    if (!data.reminders.length) body.append(el("tr", {}, el("td", {colspan: data.owner ? "5" : "4"}, T.empty)));
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = said.value.trim();
    if (!text) return;
    problem.hidden = true;
    result.textContent = "";
    try {
      const answer = await api("/api/v1/reminders", {method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({said: text})});
      said.value = "";
      result.textContent = t("reminders.added", {text: answer.reminder.text, due: when(answer.reminder.due)});
    } catch (err) {
      showProblem(err.message);
    }
    load();
  });

  function route() {
    const shown = location.hash === "#reminders";
    if (shown) {
      document.querySelectorAll("main > .page").forEach((page) => { page.hidden = page !== section; });
      document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === "reminders"));
      load();
      if (timer === null) timer = setInterval(load, 15000);
    } else {
      section.hidden = true;
      if (timer !== null) { clearInterval(timer); timer = null; }
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
