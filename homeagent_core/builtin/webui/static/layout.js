"use strict";
// The page's frame on any screen: the navigation menu (a ☰ button on a phone), the language
// switch, and tables that become cards on a phone (each cell labelled with its column, from the
// table's header, for style.css to show). Uses api(), t() and $() from app.js / i18n.js.

(() => {
  const header = $(".topbar");
  const toggle = $("#menu-toggle");

  function current() {
    const page = location.hash.slice(1) || "chat";
    const link = document.querySelector(`nav a[data-page="${CSS.escape(page)}"]`) || document.querySelector("nav a");
    $("#menu-current").textContent = link ? link.textContent : "";
  }

  function close() {
    header.classList.remove("open");
    toggle.setAttribute("aria-expanded", "false");
  }

  toggle.addEventListener("click", () => {
    const open = !header.classList.contains("open");
    header.classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
  });
  document.querySelectorAll("nav a").forEach((a) => a.addEventListener("click", close));
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  window.addEventListener("hashchange", () => { close(); current(); });
  current();

  // ---------------------------------------------------------------- language

  const language = $("#language");
  language.value = I18N_DATA.choice !== "auto" ? I18N_DATA.choice : I18N_DATA.setting;
  language.addEventListener("change", async () => {
    try {
      await api("/api/v1/language", {method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({language: language.value})});
      location.reload();
    } catch (err) {
      language.value = I18N_DATA.choice !== "auto" ? I18N_DATA.choice : I18N_DATA.setting;
      alert(t("common.failed", {error: err.message}));
    }
  });

  // ---------------------------------------------------------------- tables as cards

  function label(table) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, index) => {
        const text = cell.colSpan > 1 ? "" : heads[index] || "";
        if (cell.dataset.label !== text) cell.dataset.label = text;
      });
    }
  }

  for (const table of document.querySelectorAll("table.table")) {
    label(table);
    new MutationObserver(() => label(table)).observe(table.tBodies[0] || table, {childList: true, subtree: true});
  }
})();
