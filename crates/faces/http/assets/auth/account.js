// The account page: the signed-in person's authenticator app (TOTP on with
// its QR code and recovery codes, or off), passkeys, sessions and tokens, called with
// the session this tab keeps (sessionStorage, as the sign-in page left it).
// Uses BASE, MESSAGES, show() and the passkey helpers of auth.js.
"use strict";

const SESSION = sessionStorage.getItem("tessera.session");

function toSignIn() {
  location.assign(`${BASE}/admin/auth/sign-in?next=${encodeURIComponent(BASE + "/admin/auth/account")}`);
}

// Calls the API as the signed-in person; answers `data`, throws the
// refusal's message.
async function call(method, path, body) {
  const headers = { Authorization: `Bearer ${SESSION}` };
  if (body) headers["Content-Type"] = "application/json";
  const response = await fetch(BASE + path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const answer = response.status === 204 ? null : await response.json().catch(() => null);
  if (response.status === 401) { toSignIn(); throw new Error("Signed out."); }
  if (!response.ok) {
    const error = answer && answer.errors && answer.errors[0];
    throw new Error((error && (MESSAGES[error.code] || error.message)) || `Request failed (${response.status}).`);
  }
  return answer && answer.data;
}

// Runs `work`, showing its refusal.
async function attempt(work) {
  try { await work(); } catch (error) { show("error", error.message); }
}

function element(id) { return document.getElementById(id); }

function showTotp(on) {
  element("totp-state").textContent = on
    ? "On: signing in asks for a code from your app after your password."
    : "Off: your password alone signs you in.";
  element("totp-start").hidden = on;
  element("totp-off").hidden = !on;
}

async function startTotp() {
  const enrollment = await call("POST", "/api/auth/mfa/totp");
  element("totp-secret").textContent = enrollment.secret;
  const svg = new DOMParser().parseFromString(enrollment.qrSvg, "image/svg+xml").documentElement;
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "QR code of the authenticator app's setup");
  element("totp-qr").replaceChildren(document.importNode(svg, true));
  element("totp-enroll").hidden = false;
  element("totp-code").focus();
}

async function confirmTotp(event) {
  event.preventDefault();
  const answer = await call("POST", "/api/auth/mfa/totp/confirm", { code: element("totp-code").value.trim() });
  element("totp-codes").replaceChildren(...answer.recoveryCodes.map((code) => {
    const item = document.createElement("li");
    item.textContent = code;
    return item;
  }));
  element("totp-enroll").hidden = true;
  element("totp-recovery").hidden = false;
  showTotp(true);
  show("success", "The authenticator app is set up.");
}

async function turnOffTotp(event) {
  event.preventDefault();
  await call("DELETE", "/api/auth/mfa/totp", { code: element("totp-off-code").value.trim() });
  element("totp-off-code").value = "";
  element("totp-recovery").hidden = true;
  showTotp(false);
  show("success", "The authenticator app is turned off.");
}

// One list item: its text and a button doing `act`.
function row(text, label, act) {
  const item = document.createElement("li");
  item.textContent = `${text} `;
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.addEventListener("click", () => attempt(act));
  item.append(button);
  return item;
}

async function listPasskeys() {
  const passkeys = await call("GET", "/api/auth/passkeys");
  element("passkeys").replaceChildren(...passkeys.map((p) => row(
    `${p.name} (added ${new Date(p.createdAt).toLocaleDateString()}` +
      (p.lastUsedAt ? `, last used ${new Date(p.lastUsedAt).toLocaleString()})` : ", never used)"),
    "Remove",
    async () => {
      await call("DELETE", `/api/auth/passkeys/${p.id}`);
      await listPasskeys();
      show("success", `The passkey ${p.name} is removed.`);
    },
  )));
  if (passkeys.length === 0) element("passkeys").textContent = "None.";
}

// Registers a passkey of this device: the browser makes the credential
// from the server's options, the server checks and stores it.
async function addPasskey(event) {
  event.preventDefault();
  const start = await call("POST", "/api/auth/passkeys/register/start");
  let credential;
  try {
    credential = await navigator.credentials.create({ publicKey: passkeyOptions(start.options) });
  } catch (_) {
    throw new Error("No passkey was made: the browser or the device declined.");
  }
  const name = element("passkey-name").value.trim();
  await call("POST", "/api/auth/passkeys/register/finish", {
    challengeId: start.challengeId,
    credential: credentialJson(credential),
    ...(name ? { name } : {}),
  });
  element("passkey-name").value = "";
  await listPasskeys();
  show("success", "The passkey is added.");
}

async function listSessions() {
  const sessions = await call("GET", "/api/auth/sessions");
  element("sessions").replaceChildren(...sessions.map((s) => {
    const text = `${s.current ? "This session" : "Session"} since ${new Date(s.createdAt).toLocaleString()}` +
      (s.ip ? ` from ${s.ip}` : "") + (s.userAgent ? ` (${s.userAgent})` : "");
    return row(text, "End", async () => {
      await call("DELETE", `/api/auth/sessions/${s.id}`);
      if (s.current) { sessionStorage.removeItem("tessera.session"); toSignIn(); return; }
      await listSessions();
    });
  }));
}

async function listTokens() {
  const tokens = await call("GET", "/api/auth/tokens");
  element("tokens").replaceChildren(...tokens.map((t) => row(
    `${t.name} (${t.prefix}…, ${t.plane}, until ${new Date(t.expiresAt).toLocaleDateString()})`,
    "Revoke",
    async () => { await call("DELETE", `/api/auth/tokens/${t.id}`); await listTokens(); },
  )));
  if (tokens.length === 0) element("tokens").textContent = "None.";
}

async function signOut() {
  await call("POST", "/api/auth/logout");
  sessionStorage.removeItem("tessera.session");
  toSignIn();
}

document.addEventListener("DOMContentLoaded", () => attempt(async () => {
  if (!SESSION) { toSignIn(); return; }
  element("totp-start").addEventListener("click", () => attempt(startTotp));
  element("totp-confirm").addEventListener("submit", (event) => attempt(() => confirmTotp(event)));
  element("totp-off").addEventListener("submit", (event) => attempt(() => turnOffTotp(event)));
  element("sign-out").addEventListener("click", () => attempt(signOut));
  element("passkey-add").addEventListener("submit", (event) => attempt(() => addPasskey(event)));
  const me = await call("GET", "/api/auth/me");
  element("who").textContent = `Signed in as ${me.email}.`;
  showTotp(me.mfa.totp);
  const methods = await fetch(BASE + "/api/auth/methods").then((r) => r.json()).catch(() => null);
  element("passkey-add").hidden = !(methods?.data?.passkeys && window.PublicKeyCredential);
  await listPasskeys();
  await listSessions();
  await listTokens();
}));
