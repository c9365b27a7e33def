// The users and roles page of the console: roles with their API access, a
// new role, a new user, and every user (searched) with their roles, which
// are added and removed in place, whether the account is active, and its
// second factors (reset in place, as for a person who lost their phone).
"use strict";

let roles = [];

async function loadRoles() {
  const result = await api("/admin/api/roles");
  if (!result) return;
  if (result.status !== 200) return showStatus(refusal(result));
  roles = result.answer.data;
  document.getElementById("roles").replaceChildren(...roles.map((role) =>
    element("li", `${role.name}${role.apiAccess ? " (API access)" : ""}`, { "data-role": role.name })));
  const select = document.getElementById("user-role");
  // No choice made: the API gives the new user the Users role.
  select.replaceChildren(element("option", "— (Users)", { value: "" }),
    ...roles.map((role) => element("option", role.name, { value: role.id })));
}

function roleChip(user, role) {
  const chip = element("span", role.name + " ", { class: "chip", "data-role": role.name });
  const remove = element("button", "×", { type: "button", class: "link", "aria-label": `Remove ${user.email} from ${role.name}` });
  remove.addEventListener("click", async () => {
    const result = await call("DELETE", `/admin/api/roles/${role.id}/members/${user.id}`);
    if (result && result.status !== 204) return showStatus(refusal(result));
    await loadUsers();
  });
  chip.append(remove);
  return chip;
}

function userRow(user) {
  const tr = element("tr", null, { "data-user": user.email });
  tr.append(element("td", user.email), element("td", user.name || ""));
  const active = element("input", null, { type: "checkbox", "aria-label": `${user.email} is active` });
  active.checked = user.active;
  active.addEventListener("change", async () => {
    const result = await call("PATCH", `/admin/api/users/${user.id}`, { active: active.checked });
    if (result && result.status !== 200) { active.checked = !active.checked; showStatus(refusal(result)); }
  });
  const activeCell = element("td");
  activeCell.append(active);
  const chips = element("td");
  chips.append(...user.roles.map((role) => roleChip(user, role)));
  const factors = element("td", null, { "data-factors": user.email });
  const passkeys = user.mfa.passkeys ? `${user.mfa.passkeys} passkey${user.mfa.passkeys === 1 ? "" : "s"}` : "";
  const named = [user.mfa.totp ? "authenticator app" : "", passkeys].filter(Boolean).join(", ");
  factors.append(element("span", (named || "none") + " "));
  if (named) {
    const reset = element("button", "Reset", { type: "button", class: "link", "aria-label": `Remove the second factors of ${user.email}` });
    reset.addEventListener("click", async () => {
      const result = await call("DELETE", `/admin/api/users/${user.id}/mfa`);
      if (result && result.status !== 204) return showStatus(refusal(result));
      await loadUsers();
    });
    factors.append(reset);
  }
  const add = element("select", null, { "aria-label": `Add ${user.email} to a role` });
  add.append(element("option", "—", { value: "" }),
    ...roles.filter((r) => !user.roles.some((own) => own.id === r.id)).map((r) => element("option", r.name, { value: r.id })));
  add.addEventListener("change", async () => {
    if (!add.value) return;
    const result = await call("PUT", `/admin/api/roles/${add.value}/members/${user.id}`);
    if (result && result.status !== 204) return showStatus(refusal(result));
    await loadUsers();
  });
  const addCell = element("td");
  addCell.append(add);
  tr.append(activeCell, factors, chips, addCell);
  return tr;
}

async function loadUsers() {
  const search = document.getElementById("search-text").value.trim();
  const result = await api("/admin/api/users?limit=100" + (search ? "&search=" + encodeURIComponent(search) : ""));
  if (!result) return;
  if (result.status !== 200) return showStatus(refusal(result));
  document.querySelector("#users tbody").replaceChildren(...result.answer.data.map(userRow));
}

async function peoplePage() {
  document.getElementById("new-role").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = document.getElementById("role-name").value.trim();
    const result = await call("POST", "/admin/api/roles", { name, apiAccess: document.getElementById("role-api").checked });
    if (!result) return;
    if (result.status !== 201) return showStatus(refusal(result));
    document.getElementById("role-name").value = "";
    showStatus(`Added the role ${name}.`);
    await loadRoles();
    await loadUsers();
  });
  document.getElementById("new-user").addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (id) => document.getElementById(id).value.trim();
    const data = { email: value("user-email"), password: document.getElementById("user-password").value };
    if (value("user-name")) data.name = value("user-name");
    if (value("user-role")) data.roleIds = [value("user-role")];
    const result = await call("POST", "/admin/api/users", data);
    if (!result) return;
    if (result.status !== 201) return showStatus(refusal(result));
    event.target.reset();
    showStatus(`Created ${data.email}.`);
    await loadUsers();
  });
  document.getElementById("search").addEventListener("submit", (event) => { event.preventDefault(); loadUsers(); });
  await loadRoles();
  await loadUsers();
}
