"use strict";
// HomeAgent's service worker: shows Web Push notifications (reminders, approval requests,
// residents' reports) while no page is open, and opens the app when one is tapped. It caches
// nothing: every page and API call goes to the daemon as before.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let message = {title: "HomeAgent", body: ""};
  try { message = {...message, ...event.data.json()}; } catch (err) { if (event.data) message.body = event.data.text(); }
  event.waitUntil(self.registration.showNotification(message.title, {
    body: message.body, tag: message.tag || undefined, data: {url: message.url || "/"},
    icon: "/static/icon-192.png", badge: "/static/icon-192.png",
  }));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = (event.notification.data && event.notification.data.url) || "/";
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({type: "window", includeUncontrolled: true});
    for (const client of windows) {
      if ("focus" in client) { await client.focus(); if ("navigate" in client) await client.navigate(url); return; }
    }
    await self.clients.openWindow(url);
  })());
});

// A fetch handler makes the app installable; it passes every request through unchanged.
self.addEventListener("fetch", () => {});
