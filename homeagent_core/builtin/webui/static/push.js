"use strict";
// Installable app and Web Push: registers the service worker (/sw.js) and lets the person
// logged in get reminders, approval requests and residents' reports on this device while the
// page is closed (Account page → Notifications). Uses api() from app.js.

// Every user-visible string of this module, from the message catalogue (i18n.js).
const PUSH_TEXT = {
  title: t("push.title"),
  enable: t("push.enable"),
  disable: t("push.disable"),
  test: t("push.test"),
  on: t("push.on"),
  off: t("push.off"),
  unsupported: t("push.unsupported"),
  denied: t("push.denied"),
  failed: t("common.failed", {error: ""}),
  sent: t("push.sent"),
};

const pushSupported = "serviceWorker" in navigator && "PushManager" in window;
const swRegistration = "serviceWorker" in navigator
  ? navigator.serviceWorker.register("/sw.js", {scope: "/"}).catch((err) => { console.warn("service worker:", err); return null; })
  : Promise.resolve(null);

function urlBase64ToBytes(text) {
  const padded = (text + "=".repeat((4 - text.length % 4) % 4)).replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

async function pushSubscription() {
  const registration = await swRegistration;
  return registration ? registration.pushManager.getSubscription() : null;
}

async function pushEnable() {
  if (!pushSupported) throw new Error(PUSH_TEXT.unsupported);
  const permission = await Notification.requestPermission();
  if (permission !== "granted") throw new Error(PUSH_TEXT.denied);
  await swRegistration;
  const registration = await navigator.serviceWorker.ready;
  const {public_key: key} = await api("/api/v1/push/key");
  let subscription = await registration.pushManager.getSubscription();
  if (!subscription) {
    subscription = await registration.pushManager.subscribe({userVisibleOnly: true, applicationServerKey: urlBase64ToBytes(key)});
  }
  await api("/api/v1/push/subscribe", {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(subscription.toJSON()),
  });
}

async function pushDisable() {
  const subscription = await pushSubscription();
  if (!subscription) return;
  await api("/api/v1/push/unsubscribe", {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({endpoint: subscription.endpoint}),
  }).catch(() => {});
  await subscription.unsubscribe();
}

async function pushRender() {
  const card = document.getElementById("push-card");
  if (!card) return;
  const status = document.getElementById("push-status");
  const on = pushSupported && Notification.permission === "granted" && Boolean(await pushSubscription());
  status.textContent = !pushSupported ? PUSH_TEXT.unsupported : on ? PUSH_TEXT.on : PUSH_TEXT.off;
  document.getElementById("push-enable").hidden = !pushSupported || on;
  document.getElementById("push-disable").hidden = !on;
  document.getElementById("push-test").hidden = !on;
}

function pushCard() {
  const account = document.querySelector("#page-account");
  if (!account || document.getElementById("push-card")) return;
  const card = el("div", {class: "card login-card", id: "push-card"},
    el("h3", {}, PUSH_TEXT.title),
    el("p", {id: "push-status", role: "status"}),
    el("button", {id: "push-enable", type: "button"}, PUSH_TEXT.enable),
    el("button", {id: "push-test", type: "button", hidden: ""}, PUSH_TEXT.test),
    el("button", {id: "push-disable", type: "button", class: "link", hidden: ""}, PUSH_TEXT.disable));
  account.appendChild(card);
  const act = (fn, done) => async () => {
    const status = document.getElementById("push-status");
    try { await fn(); await pushRender(); if (done) status.textContent = done; }
    catch (err) { status.textContent = PUSH_TEXT.failed + err.message; }
  };
  document.getElementById("push-enable").addEventListener("click", act(pushEnable));
  document.getElementById("push-disable").addEventListener("click", act(pushDisable));
  document.getElementById("push-test").addEventListener("click", act(() => api("/api/v1/push/test", {method: "POST"}), PUSH_TEXT.sent));
  pushRender();
}

pushCard();
