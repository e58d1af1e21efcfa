"use strict";
// The "set your password" page of a one-time invite link (/invite#TOKEN). The token stays in
// the URL fragment, which browsers never send to a server, a proxy or a Referer.
(async () => {
  const token = location.hash.slice(1);
  const who = document.getElementById("invite-who");
  const errorBox = document.getElementById("invite-error");
  const button = document.getElementById("invite-button");
  if (!token) {
    who.textContent = "这个链接不完整 / This link is incomplete: copy the whole link you were given.";
    return;
  }
  const check = await fetch(`/api/v1/invite?token=${encodeURIComponent(token)}`);
  const info = await check.json().catch(() => ({error: check.statusText}));
  if (!check.ok) {
    who.textContent = info.error || "this invite link cannot be used";
    return;
  }
  who.textContent = `你好 ${info.person}，请设置你的网页登录密码 / Hello ${info.person}, choose your web UI password.`;
  document.getElementById("invite-username").value = info.person;
  button.disabled = false;
  document.getElementById("invite-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.textContent = "";
    const password = document.getElementById("invite-password").value;
    if (password !== document.getElementById("invite-repeat").value) {
      errorBox.textContent = "两次输入的密码不一致 / The two passwords differ.";
      return;
    }
    const response = await fetch("/api/v1/invite", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({token, password}),
    });
    const body = await response.json().catch(() => ({error: response.statusText}));
    if (!response.ok) {
      errorBox.textContent = body.error || "failed";
      return;
    }
    history.replaceState(null, "", "/invite");
    window.location.href = `/login#${encodeURIComponent(body.username)}`;
  });
})();
