#!/usr/bin/env node
// Prepares a Tessera instance for the notes app, with an administrator's
// credential: the table `app.notes` (each person's own, by a grant's row
// filter), a "Writers" role new accounts join, their grants on notes and
// files, and the settings a browser app on another origin needs (CORS,
// passkeys, the return from a provider sign-in: the app's origin is added
// to what is set, and email verification is turned on for the instance). Safe to run twice. Writes
// config.js, the server's address the page reads.
//
//   TESSERA_TOKEN=<admin session or ADMIN token> node setup.mjs \
//     --app http://localhost:5173 [--server http://localhost:8080]
import { writeFile } from "node:fs/promises";
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
  // Everyone who signs up joins this role: never a built-in one (the
  // Administrators' role is built in; no other role can hold admin access).
  if (role.builtIn) throw new Error('"Writers" is a built-in role here: rename this app\'s role, then run this again');
  const grants = (await call("GET", "/admin/api/grants")).filter((g) => g.roleId === role.id);
  const files = resources.find((r) => r.schema === "svc" && r.table === "files");
  const own = { owner_id: { eq: "$USER.id" } };
  for (const [resource, actions] of [
    [notes.id, ["read", "create", "update", "delete"]],
    [files.id, ["read", "create", "delete"]],
  ]) {
    for (const action of actions) {
      const same = (g) => g.resourceId === resource && g.action === action && JSON.stringify(g.filter) === JSON.stringify(own) && !g.columns;
      if (grants.some(same)) continue;
      await call("POST", "/admin/api/grants", { roleId: role.id, resourceId: resource, action, filter: own });
    }
  }
  const origin = new URL(appOrigin);
  const settings = await call("GET", "/admin/api/settings");
  const adding = (list) => [...new Set([...(list ?? []), origin.origin])];
  await call("PATCH", "/admin/api/settings", {
    "auth.registration_enabled": true,
    "auth.registration_role_id": role.id,
    "auth.email_verification_required": true,
    "security.cors_origins": adding(settings["security.cors_origins"]),
    "auth.passkey_rp_id": settings["auth.passkey_rp_id"] ?? origin.hostname,
    "auth.passkey_origins": adding(settings["auth.passkey_origins"]),
    "auth.redirect_allow_list": adding(settings["auth.redirect_allow_list"]),
  });
  return { resource: notes.id, role: role.id };
}

async function main() {
  const { values } = parseArgs({
    options: { server: { type: "string", default: "http://localhost:8080" }, app: { type: "string" } },
  });
  if (!values.app) {
    // Named, never assumed: the app's origin is trusted with sessions
    // (CORS, passkeys, the return of a provider sign-in).
    process.stderr.write("set --app to the origin the app is served from, such as http://localhost:5173\n");
    process.exit(2);
  }
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
  // The page reads its server from here (config.js, not tracked by git).
  const config = new URL("./config.js", import.meta.url);
  await writeFile(config, `// Written by setup.mjs: the Tessera server this app talks to.\nexport const server = ${JSON.stringify(new URL(values.server).origin)};\n`);
  process.stdout.write(`The notes app is set up on ${values.server} (config.js): new accounts join role ${role}.\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
