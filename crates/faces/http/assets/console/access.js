// The tokens and invitations page: every access token with its user, plane
// and expiry, a new token (its secret shown once), revocation; pending
// invitations, a new one (the email is queued), withdrawal.
"use strict";

const people = new Map();
const roleNames = new Map();

function revokeButton(label, path, reload) {
  const button = element("button", "Revoke", { type: "button", "aria-label": label });
  button.addEventListener("click", async () => {
    const result = await call("DELETE", path);
    if (result && result.status !== 204) return showStatus(refusal(result));
    await reload();
  });
  const cell = element("td");
  cell.append(button);
  return cell;
}

async function loadTokens() {
  const result = await api("/admin/api/tokens");
  if (!result) return;
  if (result.status !== 200) return showAlert("token-error", refusal(result));
  document.querySelector("#tokens tbody").replaceChildren(...result.answer.data.map((token) => {
    const row = element("tr", null, { "data-token": token.name });
    row.append(element("td", token.name), element("td", people.get(token.userId) || token.userId), element("td", token.plane),
      element("td", token.prefix), element("td", new Date(token.expiresAt).toLocaleDateString()),
      revokeButton(`Revoke ${token.name}`, `/admin/api/tokens/${token.id}`, loadTokens));
    return row;
  }));
}

async function loadInvitations() {
  const result = await api("/admin/api/invitations");
  if (!result) return;
  if (result.status !== 200) return showAlert("invitation-error", refusal(result));
  document.querySelector("#invitations tbody").replaceChildren(...result.answer.data.map((invitation) => {
    const row = element("tr", null, { "data-invitation": invitation.email });
    row.append(element("td", invitation.email), element("td", invitation.roleIds.map((id) => roleNames.get(id) || id).join(", ")),
      element("td", new Date(invitation.expiresAt).toLocaleString()),
      revokeButton(`Withdraw the invitation of ${invitation.email}`, `/admin/api/invitations/${invitation.id}`, loadInvitations));
    return row;
  }));
}

async function createToken(event) {
  event.preventDefault();
  showAlert("token-error", "");
  const data = {
    userId: document.getElementById("token-user").value,
    name: document.getElementById("token-name").value.trim(),
    lifetimeDays: Number(document.getElementById("token-days").value),
    plane: document.getElementById("token-plane").value,
  };
  const result = await call("POST", "/admin/api/tokens", data);
  if (!result) return;
  if (result.status !== 201) return showAlert("token-error", refusal(result));
  document.getElementById("token-value").textContent = result.answer.data.token;
  document.getElementById("token-secret").hidden = false;
  document.getElementById("token-name").value = "";
  await loadTokens();
}

async function invite(event) {
  event.preventDefault();
  showAlert("invitation-error", "");
  const data = { email: document.getElementById("invite-email").value.trim(), roleIds: [document.getElementById("invite-role").value] };
  const name = document.getElementById("invite-name").value.trim();
  if (name) data.name = name;
  const result = await call("POST", "/admin/api/invitations", data);
  if (!result) return;
  if (result.status !== 201) return showAlert("invitation-error", refusal(result));
  event.target.reset();
  showStatus(`Invited ${data.email}; the email is on its way.`);
  await loadInvitations();
}

async function accessPage() {
  const [users, roles] = await Promise.all([api("/admin/api/users?limit=1000"), api("/admin/api/roles")]);
  if (!users || !roles) return;
  if (users.status !== 200) return showStatus(refusal(users));
  for (const user of users.answer.data) people.set(user.id, user.email);
  for (const role of roles.answer.data) roleNames.set(role.id, role.name);
  document.getElementById("token-user").replaceChildren(...users.answer.data.map((u) => element("option", u.email, { value: u.id })));
  document.getElementById("invite-role").replaceChildren(...roles.answer.data.map((r) => element("option", r.name, { value: r.id })));
  document.getElementById("invite-role").value = roles.answer.data.find((r) => r.name === "Users")?.id || "";
  document.getElementById("new-token").addEventListener("submit", createToken);
  document.getElementById("new-invitation").addEventListener("submit", invite);
  await Promise.all([loadTokens(), loadInvitations()]);
}
