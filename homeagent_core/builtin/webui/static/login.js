"use strict";
// /login#NAME (where an invite link leads) fills in the user name.
if (location.hash.length > 1) document.getElementById("username").value = decodeURIComponent(location.hash.slice(1));
document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const errorBox = document.getElementById("login-error");
  errorBox.textContent = "";
  const response = await fetch("/api/v1/login", {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({
      username: document.getElementById("username").value,
      password: document.getElementById("password").value,
    }),
  });
  if (response.ok) {
    window.location.href = "/";
    return;
  }
  const body = await response.json().catch(() => ({error: response.statusText}));
  errorBox.textContent = body.error || t("login.failed");
});
