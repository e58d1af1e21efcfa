"use strict";
// Installable app and Web Push: registers the service worker (/sw.js) and lets the person
// logged in get reminders, approval requests and residents' reports on this device while the
// page is closed (Account page → Notifications). Uses api() from app.js.

// Every user-visible string of this module, for the message catalogues.
const PUSH_TEXT = {
  title: "通知 · Notifications",
  enable: "在此设备接收通知 / Notify this device",
  disable: "停止此设备的通知 / Stop notifications here",
  test: "发送测试通知 / Send a test",
  on: "此设备会收到提醒、审批请求和助手汇报 / This device gets reminders, approval requests and reports",
  off: "此设备未开启通知 / Notifications are off on this device",
  unsupported: "此浏览器不支持推送通知（iPhone 需先“添加到主屏幕”）/ This browser cannot receive push "
    + "notifications (on an iPhone, add the app to the home screen first)",
  denied: "通知权限被拒绝，请在浏览器设置中允许 / Notifications are blocked; allow them in the browser's settings",
  failed: "失败 / Failed: ",
  sent: "已发送 / Sent",
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
