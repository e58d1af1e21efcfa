"use strict";
// The page's language. /i18n/catalogue.js (loaded just before this file) sets window.I18N: the
// language picked for this browser and the core catalogue's messages in it — the same JSON file
// the Python side reads (homeagent_core/i18n/<lang>.json). t(key, {fields}) fills {fields};
// elements marked data-i18n (text) or data-i18n-placeholder / -title / -aria-label are
// translated here, once, before the page's own scripts run.

const I18N_DATA = window.I18N || {lang: "en", setting: "auto", choice: "auto", messages: {}};

function t(key, fields = {}) {
  const template = Object.prototype.hasOwnProperty.call(I18N_DATA.messages, key) ? I18N_DATA.messages[key] : key;
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g,
    (whole, name) => (Object.prototype.hasOwnProperty.call(fields, name) ? String(fields[name]) : whole));
}

// A status word from the server (started, ready, idle, …) in the page's language; unknown ones as they are.
function tStatus(word) {
  const key = `status.${String(word).replace(/ /g, "_")}`;
  return Object.prototype.hasOwnProperty.call(I18N_DATA.messages, key) ? I18N_DATA.messages[key] : String(word);
}

function applyI18n(root = document) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const attr of ["placeholder", "title", "aria-label"]) {
    for (const node of root.querySelectorAll(`[data-i18n-${attr}]`)) node.setAttribute(attr, t(node.getAttribute(`data-i18n-${attr}`)));
  }
  document.documentElement.lang = I18N_DATA.lang === "zh" ? "zh-CN" : "en";
  document.documentElement.classList.remove("i18n-pending"); // shown only once it speaks its language
}

applyI18n();
