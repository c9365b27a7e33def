#!/usr/bin/env node
// Prepares a Tessera instance for the notes app, with an administrator's
// credential: the table `app.notes` (each person's own, by a grant's row
// filter), a "Writers" role new accounts join, their grants on notes and
// files, and the settings a browser app on another origin needs (CORS,
// passkeys). Safe to run twice.
//
//   TESSERA_TOKEN=<admin session or ADMIN token> node setup.mjs \
//     [--server http://localhost:8080] [--app http://localhost:5173]
import { parseArgs } from "node:util";

/**
 * Sets up the notes app through `call(method, path, data)` (an
 * administrator's Admin API call answering `data`), for an app served
 * from `appOrigin`; answers the resource and role ids.
 */
export async function setUpNotes(call, appOrigin) {
  const resources = await call("GET", "/admin/api/resources");
  let notes = resources.find((r) => r.schema === "app" && r.table === "notes");
  if (!notes) {
    const table = await call("POST", "/admin/api/schema/app/tables", {
      name: "notes",
      columns: [
        { name: "id", dataType: "bigint", primaryKey: true, identity: "ALWAYS" },
        { name: "title", dataType: "text", nullable: false },
        { name: "body", dataType: "text" },
        { name: "done", dataType: "boolean", nullable: false, default: "false" },
        { name: "owner_id", dataType: "uuid", nullable: false },
        { name: "slug", dataType: "text", unique: true },
        { name: "attachment_id", dataType: "uuid" },
      ],
    });
    notes = { id: table.resourceId };
  }
  await call("PATCH", `/admin/api/resources/${notes.id}`, { exposedMethods: ["GET", "POST", "PATCH", "DELETE"] });
  const roles = await call("GET", "/admin/api/roles");
  const role = roles.find((r) => r.name === "Writers") ?? (await call("POST", "/admin/api/roles", { name: "Writers", apiAccess: true }));
  const grants = (await call("GET", "/admin/api/grants")).filter((g) => g.roleId === role.id);
  const files = resources.find((r) => r.schema === "svc" && r.table === "files");
  const own = { owner_id: { eq: "$USER.id" } };
  for (const [resource, actions] of [
    [notes.id, ["read", "create", "update", "delete"]],
    [files.id, ["read", "create", "delete"]],
  ]) {
    for (const action of actions) {
      if (grants.some((g) => g.resourceId === resource && g.action === action)) continue;
      await call("POST", "/admin/api/grants", { roleId: role.id, resourceId: resource, action, filter: own });
    }
  }
  const origin = new URL(appOrigin);
  await call("PATCH", "/admin/api/settings", {
    "auth.registration_enabled": true,
    "auth.registration_role_id": role.id,
    "auth.email_verification_required": true,
    "security.cors_origins": [origin.origin],
    "auth.passkey_rp_id": origin.hostname,
    "auth.passkey_origins": [origin.origin],
  });
  return { resource: notes.id, role: role.id };
}

async function main() {
  const { values } = parseArgs({
    options: { server: { type: "string", default: "http://localhost:8080" }, app: { type: "string", default: "http://localhost:5173" } },
  });
  const token = process.env.TESSERA_TOKEN;
  if (!token) {
    process.stderr.write("set TESSERA_TOKEN to an administrator's session or ADMIN token\n");
    process.exit(2);
  }
  const call = async (method, path, data) => {
    const response = await fetch(new URL(path, values.server), {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: data === undefined ? undefined : JSON.stringify({ data }),
    });
    const body = response.status === 204 ? null : await response.json();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(body?.errors ?? body)}`);
    return body?.data;
  };
  const { role } = await setUpNotes(call, values.app);
  process.stdout.write(`The notes app is set up on ${values.server}: new accounts join role ${role}.\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
