// The app the tests use: the notes app of examples/notes-app (`app.notes`
// owned by whoever wrote them, open registration into a "Writers" role,
// files), with a DataView, a dashboard, two workflows, two database
// functions and a write hook.
import { createHmac } from "node:crypto";
import { after, before } from "node:test";

import { setUpNotes } from "../../../examples/notes-app/setup.mjs";
import { startServer } from "./harness.mjs";

/**
 * A server with the notes app for the tests of one file: started before
 * them, stopped after; `server` and `fixture` are set once it is up.
 */
export function notesAppForTests() {
  const app = { server: undefined, fixture: undefined };
  before(async () => {
    app.server = await startServer();
    app.fixture = await notesApp(app.server);
  });
  after(async () => {
    await app.server?.stop();
  });
  return app;
}

/**
 * Sets up the notes app on `server` (the example's own setup), and for
 * the tests a DataView, a dashboard and two workflows; answers the ids.
 */
export async function notesApp(server) {
  const a = server.adminCall.bind(server);
  const { resource, role: roleId } = await setUpNotes(a, server.url);
  const role = { id: roleId };
  await a("PATCH", "/admin/api/settings", {
    "auth.email_code_enabled": true,
    "auth.account_rate_limit_per_minute": 10000,
    "auth.login_rate_limit_per_minute": 10000,
    "auth.emails_per_address_per_hour": 100,
  });
  const view = await a("POST", "/admin/api/dataviews", {
    slug: "notes-per-state",
    name: "Notes per state",
    source: "app.notes",
    columns: [
      { name: "done", column: "done" },
      { name: "count", agg: "count" },
    ],
    sort: ["done"],
  });
  await a("POST", `/admin/api/dataviews/${view.id}/publish`, undefined, null);
  await a("POST", "/admin/api/grants", { roleId: role.id, dataViewId: view.id, action: "read" });
  await a("POST", "/admin/api/dashboards", {
    slug: "notes",
    name: "Notes",
    widgets: [{ id: "w1", type: "table", title: "Per state", dataViewId: view.id, layout: { col: 0, row: 0, w: 6, h: 4 } }],
  });
  const steps = [
    { id: "greet", type: "transform", output: { hello: "{{start.data.body.name}}" } },
    { id: "done", type: "finish", result: "{{steps.greet.result}}" },
  ];
  for (const [slug, response] of [
    ["greet", "sync"],
    ["greet-later", "async"],
  ]) {
    const workflow = await a("POST", "/admin/api/workflows", {
      slug,
      name: slug,
      trigger: { type: "webhook", method: "POST", response, access: "authenticated" },
      steps,
    });
    await a("POST", `/admin/api/workflows/${workflow.id}/publish`, undefined, null);
    await a("POST", "/admin/api/grants", { roleId: role.id, workflowId: workflow.id, action: "invoke" });
  }
  for (const query of [
    `CREATE FUNCTION app.note_count(only_done boolean DEFAULT NULL) RETURNS bigint LANGUAGE sql STABLE AS $$
       SELECT count(*) FROM app.notes WHERE owner_id = current_setting('tessera.user_id', true)::uuid
         AND (only_done IS NULL OR done = only_done) $$`,
    `CREATE FUNCTION app.refuse(reason text) RETURNS void LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION '%', reason USING HINT = 'OUT_OF_STOCK'; END $$`,
  ]) {
    await a("POST", "/admin/api/sql", { query });
  }
  for (const [name, exposedMethods] of [
    ["note_count", ["GET", "POST"]],
    ["refuse", ["POST"]],
  ]) {
    const fn = await a("POST", "/admin/api/resources", { schema: "app", function: name });
    await a("PATCH", `/admin/api/resources/${fn.id}`, { exposedMethods });
    await a("POST", "/admin/api/grants", { roleId: role.id, resourceId: fn.id, action: "invoke" });
  }
  // A write hook: a note titled "forbidden" is refused with its own code.
  const hook = await a("POST", "/admin/api/workflows", {
    slug: "note-rules",
    name: "Note rules",
    trigger: { type: "beforeWrite", resourceId: resource, events: ["insert", "update"] },
    steps: [{ id: "c", type: "condition", if: { "start.data.new.title": { eq: "forbidden" } },
      then: [{ id: "no", type: "fail", code: "TITLE_REFUSED", message: "That title is not allowed" }], else: [] }],
  });
  await a("POST", `/admin/api/workflows/${hook.id}/publish`, undefined, null);
  return { resource, role: role.id, view: view.id };
}

/** The TOTP code of base32 `secret` now (RFC 6238, SHA-1, 6 digits, 30 s). */
export function totp(secret, at = Date.now()) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const char of secret.replace(/=+$/, "").toUpperCase()) bits += alphabet.indexOf(char).toString(2).padStart(5, "0");
  const key = Buffer.from(bits.match(/.{8}/g).map((byte) => parseInt(byte, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30_000)));
  const hmac = createHmac("sha1", key).update(counter).digest();
  const offset = hmac[hmac.length - 1] & 0xf;
  const code = (hmac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000;
  return String(code).padStart(6, "0");
}
