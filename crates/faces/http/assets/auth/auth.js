// Forms of the account pages: each posts JSON to its /api/auth route and shows
// the outcome in #status. The token of an emailed link comes from ?token=.
// The sign-in page also offers the enabled providers and finishes their flow:
// the provider's redirect brings the session in the fragment (#token=, or
// #mfa= with a second-factor challenge), taken
// only back from a sign-in this tab started (a nonce in its sessionStorage).
// An account with a second factor answers the password with a challenge:
// the code form takes over and finishes it, with a code or with one of the
// account's passkeys. A passkey signs in on its own, the browser finding
// the account's credential.
"use strict";

// Where the service is mounted: "" standalone, the host's prefix when embedded.
const BASE = document.documentElement.dataset.base ?? "";

const ROUTES = {
  "sign-in": BASE + "/api/auth/login",
  "mfa": BASE + "/api/auth/mfa/verify",
  "email-code": BASE + "/api/auth/email-code/verify",
  "email-code-typed": BASE + "/api/auth/email-code/verify",
  "reset-password": BASE + "/api/auth/password/reset",
  "verify-email": BASE + "/api/auth/email/verify",
  "accept-invitation": BASE + "/api/auth/invitations/accept",
};

const SUCCESS = {
  "sign-in": (data) => `Signed in as ${data.user.email}.`,
  "mfa": (data) => `Signed in as ${data.user.email}.`,
  "email-code": (data) => `Signed in as ${data.user.email}.`,
  "email-code-typed": (data) => `Signed in as ${data.user.email}.`,
  "reset-password": () => "Your password has been changed. You can now sign in with it.",
  "verify-email": () => "Your email address is confirmed.",
  "accept-invitation": () => "Welcome! Your account is ready. You can now sign in.",
};

const MESSAGES = {
  INVALID_TOKEN: "This link is invalid, already used or expired. Ask for a new one.",
  INVALID_MFA_CODE: "That code is wrong. Enter the current code from your app, or an unused recovery code.",
  MFA_REQUIRED: "Enter the 6-digit code from your authenticator app or one of your recovery codes, or use your passkey.",
  NO_PASSKEY: "This account has no passkey. Enter the code from your authenticator app, or a recovery code.",
  EMAIL_NOT_VERIFIED: "Your email address is not confirmed yet. Check your inbox for the confirmation link.",
  CONFLICT: "An account with this email exists already. Sign in instead.",
  PAYLOAD_TOO_LARGE: "That is too long.",
  RATE_LIMIT_EXCEEDED: "Too many attempts. Wait a minute and try again.",
  OAUTH_FAILED: "Signing in with the provider failed. Try again, or sign in with your email and password.",
  PASSKEY_FAILED: "Signing in with the passkey failed. Try again, or sign in with your email and password.",
  PERMISSION_DENIED: "This account may not sign in here. Ask an administrator for access.",
  UNAVAILABLE: "The service is unavailable. Try again in a moment.",
};

function show(kind, text) {
  const status = document.getElementById("status");
  status.hidden = false;
  status.className = kind;
  status.textContent = text;
  status.focus?.();
}

function markInvalid(form, field) {
  for (const input of form.querySelectorAll("input")) input.removeAttribute("aria-invalid");
  const input = field && form.querySelector(`[name="${field}"]`);
  if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); }
}

function body(action, form, token) {
  const value = (name) => form.querySelector(`[name="${name}"]`)?.value ?? "";
  switch (action) {
    case "sign-in": return { email: value("email"), password: value("password") };
    case "mfa": return { challenge: mfaChallenge, code: value("code") };
    case "email-code": return { token };
    case "email-code-typed": return { email: document.getElementById("email").value.trim(), code: value("code") };
    case "verify-email": return { token };
    default: return { token, password: value("password") };
  }
}

// Where to go after signing in: ?next= when it names a page of this
// service under its /admin/ (never another origin).
function nextPage() {
  const next = new URLSearchParams(location.search).get("next") ?? "";
  const page = next.startsWith(BASE + "/admin/") ? next.slice(BASE.length) : "";
  return /^\/admin\/[A-Za-z0-9\/_-]*(\?[A-Za-z0-9=&%._-]*)?$/.test(page) ? next : null;
}

async function submit(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const action = form.dataset.action;
  const token = new URLSearchParams(location.search).get("token") ?? "";
  if ((!(action in SIGN_INS) || action === "email-code") && !token) {
    show("error", MESSAGES.INVALID_TOKEN);
    return;
  }
  const confirm = form.querySelector('[name="confirm"]');
  if (confirm && confirm.value !== form.querySelector('[name="password"]').value) {
    markInvalid(form, "confirm");
    show("error", "The two passwords differ.");
    return;
  }
  const button = form.querySelector("button");
  button.disabled = true;
  try {
    const response = await fetch(ROUTES[action], {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body(action, form, token)),
    });
    const answer = response.status === 204 ? null : await response.json().catch(() => null);
    if (response.ok) {
      markInvalid(form, null);
      if (action in SIGN_INS) {
        if (action !== "sign-in") form.hidden = true;
        if (signedIn(answer.data.token)) return;
      } else form.hidden = true;
      show("success", SUCCESS[action](answer && answer.data));
      return;
    }
    const error = answer && answer.errors && answer.errors[0];
    if (error && error.code === "MFA_REQUIRED") { askCode(form, error.challenge); return; }
    if (action === "mfa" && error && error.code === "INVALID_TOKEN") {
      form.hidden = true;
      const first = document.querySelector('form[data-action="sign-in"]');
      if (first) first.hidden = false;
      show("error", "This sign-in has expired. Sign in again.");
      return;
    }
    markInvalid(form, error && error.field);
    if (action === "email-code-typed" && error && error.code === "INVALID_TOKEN") {
      show("error", "That code is wrong or has expired. Ask for a new one.");
      return;
    }
    show("error", (error && MESSAGES[error.code]) || (error && error.message) || `Request failed (${response.status}).`);
  } catch (_) {
    show("error", MESSAGES.UNAVAILABLE);
  } finally {
    button.disabled = false;
  }
}

// The sign-in page's forms that end in a session.
const SIGN_INS = { "sign-in": true, "mfa": true, "email-code": true, "email-code-typed": true };

// The challenge of a sign-in waiting for its second factor.
let mfaChallenge = "";

// The password was right and a code is needed: the code form replaces the
// password form.
function askCode(form, challenge) {
  mfaChallenge = challenge;
  form.hidden = true;
  const codeForm = document.querySelector('form[data-action="mfa"]');
  codeForm.hidden = false;
  codeForm.querySelector('[name="code"]').value = "";
  document.getElementById("mfa-passkey-offer").hidden = !window.PublicKeyCredential;
  show("success", MESSAGES.MFA_REQUIRED);
  codeForm.querySelector('[name="code"]').focus();
}

// Keeps the session as the page's own; answers true when leaving for ?next=.
function signedIn(token) {
  sessionStorage.setItem("tessera.session", token);
  const next = nextPage();
  if (next) { location.assign(next); return true; }
  return false;
}

const PROVIDER_NAMES = { google: "Google", github: "GitHub", oidc: "single sign-on" };

// One link per enabled provider, coming back to this very page.
async function showProviders() {
  const nav = document.getElementById("providers");
  if (!nav) return;
  const answer = await fetch(BASE + "/api/auth/oauth").then((r) => r.json()).catch(() => null);
  const providers = (answer && answer.data) || [];
  for (const p of providers) {
    const link = document.createElement("a");
    link.href = p.startUrl;
    link.dataset.provider = p.provider;
    link.addEventListener("click", () => { link.href = providerStart(p.startUrl); });
    link.textContent = `Sign in with ${PROVIDER_NAMES[p.provider] || p.provider}`;
    nav.append(link);
  }
  nav.hidden = providers.length === 0;
}

const NONCE_KEY = "tessera.oauth_nonce";
const NONCE_PARAM = "oauth_nonce";

// A provider's start address whose way back carries a nonce this tab alone
// keeps, so that only a sign-in started here may hand this page a session.
function providerStart(startUrl) {
  const nonce = crypto.getRandomValues(new Uint8Array(16)).reduce((s, b) => s + b.toString(16).padStart(2, "0"), "");
  sessionStorage.setItem(NONCE_KEY, nonce);
  const back = new URL(location.href);
  back.hash = "";
  back.searchParams.set(NONCE_PARAM, nonce);
  return `${startUrl}?redirect_to=${encodeURIComponent(back.href)}`;
}

// The end of a provider's flow: #token= or #error=, removed from the address
// at once, and believed only when this tab started that sign-in (its nonce).
async function finishProvider() {
  if (!document.getElementById("providers")) return;
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  const challenge = fragment.get("mfa");
  const error = fragment.get("error");
  const query = new URLSearchParams(location.search);
  const nonce = query.get(NONCE_PARAM);
  query.delete(NONCE_PARAM);
  const rest = query.toString();
  if (nonce || token || challenge || error) history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : ""));
  if (!token && !challenge && !error) return;
  const expected = sessionStorage.getItem(NONCE_KEY);
  sessionStorage.removeItem(NONCE_KEY);
  if (!nonce || nonce !== expected) return;
  if (error) { show("error", MESSAGES[error] || MESSAGES.OAUTH_FAILED); return; }
  if (challenge) { askCode(document.querySelector('form[data-action="sign-in"]'), challenge); return; }
  if (signedIn(token)) return;
  const me = await fetch(BASE + "/api/auth/me", { headers: { Authorization: `Bearer ${token}` } })
    .then((r) => r.json()).catch(() => null);
  show("success", SUCCESS["sign-in"]({ user: (me && me.data) || { email: "you" } }));
}

// "Email me a code" while the service sends sign-in codes, and "Sign in
// with a passkey" while passkeys are set up and the browser has them.
async function offerMethods() {
  const offer = document.getElementById("email-code-offer");
  if (!offer) return;
  const answer = await fetch(BASE + "/api/auth/methods").then((r) => r.json()).catch(() => null);
  const methods = (answer && answer.data) || {};
  offer.hidden = !methods.emailCode;
  document.getElementById("passkey-offer").hidden = !(methods.passkeys && window.PublicKeyCredential);
}

// WebAuthn's binary fields travel as base64url; the browser takes and
// gives ArrayBuffers.
function fromBase64url(text) {
  return Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0)).buffer;
}

function toBase64url(buffer) {
  let text = "";
  for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function withIds(list) {
  return (list || []).map((c) => ({ ...c, id: fromBase64url(c.id) }));
}

// The `publicKey` options of a ceremony as the browser takes them.
function passkeyOptions(options) {
  const decoded = { ...options, challenge: fromBase64url(options.challenge) };
  if (options.user) decoded.user = { ...options.user, id: fromBase64url(options.user.id) };
  if (options.excludeCredentials) decoded.excludeCredentials = withIds(options.excludeCredentials);
  if (options.allowCredentials) decoded.allowCredentials = withIds(options.allowCredentials);
  return decoded;
}

// A credential the browser made or used, as JSON (PublicKeyCredential.toJSON()).
function credentialJson(credential) {
  const r = credential.response;
  const response = { clientDataJSON: toBase64url(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = toBase64url(r.attestationObject);
    response.transports = r.getTransports ? r.getTransports() : [];
  } else {
    response.authenticatorData = toBase64url(r.authenticatorData);
    response.signature = toBase64url(r.signature);
    if (r.userHandle) response.userHandle = toBase64url(r.userHandle);
  }
  return {
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    response,
    clientExtensionResults: credential.getClientExtensionResults(),
  };
}

// Posts JSON to a route of this service: the answer's status and body.
async function postJson(path, payload) {
  const response = await fetch(BASE + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(payload),
  });
  return { ok: response.ok, answer: await response.json().catch(() => null) };
}

async function passkeySignIn() {
  const button = document.getElementById("passkey-sign-in");
  button.disabled = true;
  try {
    const start = await postJson("/api/auth/passkeys/login/start", {});
    if (!start.ok) throw new Error(start.answer?.errors?.[0]?.code);
    const credential = await navigator.credentials.get({ publicKey: passkeyOptions(start.answer.data.options) });
    const finish = await postJson("/api/auth/passkeys/login/finish", {
      challengeId: start.answer.data.challengeId,
      credential: credentialJson(credential),
    });
    if (!finish.ok) throw new Error(finish.answer?.errors?.[0]?.code);
    if (signedIn(finish.answer.data.token)) return;
    show("success", SUCCESS["sign-in"](finish.answer.data));
  } catch (error) {
    // A refusal, or the person cancelled: the same words either way.
    const code = error && error.message;
    show("error", code === "RATE_LIMIT_EXCEEDED" || code === "UNAVAILABLE" ? MESSAGES[code] : MESSAGES.PASSKEY_FAILED);
  } finally {
    button.disabled = false;
  }
}

// The second step of a sign-in with one of the account's passkeys.
async function mfaPasskey() {
  const button = document.getElementById("mfa-passkey");
  button.disabled = true;
  try {
    const start = await postJson("/api/auth/mfa/passkey", { challenge: mfaChallenge });
    if (!start.ok) throw new Error(start.answer?.errors?.[0]?.code);
    const credential = await navigator.credentials.get({ publicKey: passkeyOptions(start.answer.data.options) });
    const finish = await postJson("/api/auth/mfa/verify", {
      challenge: mfaChallenge,
      credential: credentialJson(credential),
    });
    if (!finish.ok) throw new Error(finish.answer?.errors?.[0]?.code);
    document.querySelector('form[data-action="mfa"]').hidden = true;
    if (signedIn(finish.answer.data.token)) return;
    show("success", SUCCESS["mfa"](finish.answer.data));
  } catch (error) {
    const code = error && error.message;
    if (code === "INVALID_TOKEN") {
      document.querySelector('form[data-action="mfa"]').hidden = true;
      document.querySelector('form[data-action="sign-in"]').hidden = false;
      show("error", "This sign-in has expired. Sign in again.");
    } else if (code === "INVALID_PAYLOAD") {
      show("error", MESSAGES.NO_PASSKEY);
    } else {
      show("error", code === "RATE_LIMIT_EXCEEDED" || code === "UNAVAILABLE" ? MESSAGES[code] : "The passkey did not check out. Try again, or enter a code.");
    }
  } finally {
    button.disabled = false;
  }
}

async function emailCode(event) {
  event.preventDefault();
  const email = document.getElementById("email").value;
  if (!email) { show("error", "Enter your email first."); return; }
  const response = await fetch(BASE + "/api/auth/email-code", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ email }),
  }).catch(() => null);
  if (!response || !response.ok) { show("error", MESSAGES.RATE_LIMIT_EXCEEDED); return; }
  document.querySelector('form[data-action="sign-in"]').hidden = true;
  const form = document.querySelector('form[data-action="email-code-typed"]');
  form.hidden = false;
  form.querySelector('[name="code"]').focus();
  show("success", "If this email has an account, a code is on its way. Type it here, or open the link of the email.");
}

async function forgot(event) {
  event.preventDefault();
  const email = document.getElementById("email").value;
  if (!email) { show("error", "Enter your email first."); return; }
  await fetch(BASE + "/api/auth/password/forgot", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ email }),
  }).catch(() => null);
  show("success", "If this email has an account, a link to reset the password is on its way.");
}

document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-action]")) form.addEventListener("submit", submit);
  document.getElementById("forgot-link")?.addEventListener("click", forgot);
  document.getElementById("email-code-link")?.addEventListener("click", emailCode);
  document.getElementById("passkey-sign-in")?.addEventListener("click", passkeySignIn);
  document.getElementById("mfa-passkey")?.addEventListener("click", mfaPasskey);
  offerMethods();
  showProviders();
  finishProvider();
});
