"use strict";
// The "set your password" page of a one-time invite link (/invite#TOKEN). The token stays in
// the URL fragment, which browsers never send to a server, a proxy or a Referer.
(async () => {
  const token = location.hash.slice(1);
  const who = document.getElementById("invite-who");
  const errorBox = document.getElementById("invite-error");
  const button = document.getElementById("invite-button");
  if (!token) {
    who.textContent = t("invite.incomplete");
    return;
  }
  const check = await fetch(`/api/v1/invite?token=${encodeURIComponent(token)}`);
  const info = await check.json().catch(() => ({error: check.statusText}));
  if (!check.ok) {
    who.textContent = info.error || t("invite.unusable");
    return;
  }
  who.textContent = t("invite.hello", {person: info.person});
  document.getElementById("invite-username").value = info.person;
  button.disabled = false;
  document.getElementById("invite-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.textContent = "";
    const password = document.getElementById("invite-password").value;
    if (password !== document.getElementById("invite-repeat").value) {
      errorBox.textContent = t("invite.differ");
      return;
    }
    const response = await fetch("/api/v1/invite", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({token, password}),
    });
    const body = await response.json().catch(() => ({error: response.statusText}));
    if (!response.ok) {
      errorBox.textContent = body.error || t("invite.failed");
      return;
    }
    history.replaceState(null, "", "/invite");
    window.location.href = `/login#${encodeURIComponent(body.username)}`;
  });
})();
