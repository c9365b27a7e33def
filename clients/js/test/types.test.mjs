// tessera-types against a real server: the types of a role's tables,
// checked with `tsc --strict` in a file that uses them through the client.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { notesAppForTests } from "./fixtures.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const app = notesAppForTests();

function tsc(dir) {
  try {
    execFileSync(join(root, "node_modules/.bin/tsc"), ["-p", dir], { encoding: "utf8" });
    return "";
  } catch (error) {
    return error.stdout || String(error);
  }
}

test("the types of a role's tables type the client, strictly", () => {
  const dir = mkdtempSync(join(tmpdir(), "tessera-types-"));
  execFileSync(process.execPath, [join(root, "bin/tessera-types.mjs"), "--url", app.server.url, "--role", app.fixture.role, "--out", join(dir, "database.ts")], {
    env: { ...process.env, TESSERA_TOKEN: app.server.admin },
  });
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { target: "ES2022", lib: ["ES2022", "DOM"], module: "ESNext", moduleResolution: "Bundler", strict: true, noEmit: true, skipLibCheck: false, paths: { "@tessera/client": [join(root, "dist/index.d.ts")] } },
      include: ["*.ts"],
    }),
  );
  const good = `
import { createClient } from "@tessera/client";
import type { Database, Functions } from "./database";
const tessera = createClient<Database, Functions>("http://localhost:8080");
export async function run(owner: string): Promise<string> {
  const page = await tessera.from("app.notes").where({ done: { eq: false } }).sort("-id").limit(20);
  const first = page.data[0];
  const title: string = first ? first.title : "";
  const done: boolean | undefined = first?.done;
  await tessera.from("app.notes").insert({ title: "x", owner_id: owner });
  await tessera.from("app.notes").update(1, { done: true });
  const count: number | null = await tessera.rpc("app.note_count", { only_done: true });
  await tessera.rpc("app.refuse", { reason: "no" });
  return title + String(done) + String(count);
}
`;
  writeFileSync(join(dir, "good.ts"), good);
  assert.equal(tsc(dir), "", "a correct use compiles");
  // Each misuse is a compile error: an unknown table, a wrong type, a missing required column.
  for (const [name, line] of [
    ["table", `tessera.from("app.nope");`],
    ["type", `tessera.from("app.notes").insert({ title: 1, owner_id: "u" });`],
    ["required", `tessera.from("app.notes").insert({ owner_id: "u" });`],
    ["filter", `tessera.from("app.notes").where({ nope: { eq: 1 } });`],
    ["function", `tessera.rpc("app.nope", {});`],
    ["argument", `tessera.rpc("app.note_count", { only_done: "yes" });`],
    ["result", `tessera.rpc("app.note_count").then((n) => { const s: string = n; return s; });`],
  ]) {
    writeFileSync(join(dir, "bad.ts"), `${good}\nexport function bad() { ${line} }\n`);
    assert.match(tsc(dir), /error TS/, `${name}: ${line}`);
  }
  const text = execFileSync(process.execPath, [join(root, "bin/tessera-types.mjs"), "--url", app.server.url, "--role", app.fixture.role], {
    env: { ...process.env, TESSERA_TOKEN: app.server.admin },
    encoding: "utf8",
  });
  assert.match(text, /"app\.notes": \{/);
  assert.match(text, /"title": string;/);
  assert.match(text, /"app\.note_count": \{/);
});
