#!/usr/bin/env node
// Writes TypeScript types of one role's tables and database functions from
// its Data document (GET /admin/api/openapi/data?role=<id>), for
// `createClient<Database, Functions>()`.
//
//   tessera-types --url http://localhost:8080 --role <role id> [--out src/database.ts]
//   tessera-types --from data.json [--out src/database.ts]
//
// The credential is an administrator's session or ADMIN token, in
// TESSERA_TOKEN (or --token).
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    role: { type: "string" },
    token: { type: "string" },
    from: { type: "string" },
    out: { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});

if (values.help || (!values.from && !(values.url && values.role))) {
  process.stderr.write(
    "usage: tessera-types --url <server> --role <role id> [--out <file>]\n" +
      "       tessera-types --from <data document.json> [--out <file>]\n" +
      "the credential (an administrator's) comes from TESSERA_TOKEN or --token\n",
  );
  process.exit(values.help ? 0 : 2);
}

const document = values.from ? JSON.parse(await readFile(values.from, "utf8")) : await fetchDocument();
const text = render(document);
if (values.out) await writeFile(values.out, text);
else process.stdout.write(text);

async function fetchDocument() {
  const token = values.token ?? process.env.TESSERA_TOKEN;
  if (!token) fail("set TESSERA_TOKEN (or --token) to an administrator's credential");
  const url = new URL(`/admin/api/openapi/data?role=${encodeURIComponent(values.role)}`, values.url);
  let response;
  try {
    response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  } catch (error) {
    fail(`could not reach ${values.url}: ${error.message}`);
  }
  const body = await response.json().catch(() => null);
  if (!response.ok) fail(`${response.status} ${body?.errors?.[0]?.code ?? ""}: ${body?.errors?.[0]?.message ?? "no Data document"}`);
  return body;
}

function fail(message) {
  process.stderr.write(`tessera-types: ${message}\n`);
  process.exit(1);
}

/** The module: one entry per table, with its Row, Insert and Update shapes, then one per function with its Args and Returns. */
export function render(document) {
  const schemas = document.components?.schemas ?? {};
  const tables = new Map();
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    const match = /^\/api\/data\/([^/]+)\/([^/]+)(\/\{pk\})?$/.exec(path);
    if (!match) continue;
    const name = `${match[1]}.${match[2]}`;
    const table = tables.get(name) ?? { Row: null, Insert: null, Update: null };
    if (!match[3] && item.get) table.Row = schemas[name] ?? null;
    if (!match[3] && item.post) {
      const data = item.post.requestBody?.content?.["application/json"]?.schema?.properties?.data;
      table.Insert = data?.oneOf?.[0] ?? null;
    }
    if (match[3] && item.patch) {
      table.Update = item.patch.requestBody?.content?.["application/json"]?.schema?.properties?.data ?? null;
    }
    tables.set(name, table);
  }
  const lines = [
    "// Written by tessera-types from a role's Data document: do not edit.",
    `// ${document.info?.title ?? "Tessera Data API"}`,
    "",
    // A type, not an interface: it must fit the client's `Record<string, TableShape>`.
    "export type Database = {",
  ];
  for (const [name, table] of [...tables].sort(([a], [b]) => a.localeCompare(b))) {
    lines.push(`  ${JSON.stringify(name)}: {`);
    for (const part of ["Row", "Insert", "Update"]) {
      const schema = table[part];
      // A shape the role may not use is `never`: the client refuses it at compile time.
      const mode = { Row: "required", Insert: "schema", Update: "optional" }[part];
      lines.push(`    ${part}: ${schema ? typeOf(schema, 3, mode) : "never"};`);
    }
    lines.push("  };");
  }
  lines.push("};", "", "export type Functions = {");
  for (const [name, fn] of functions(document)) {
    lines.push(`  ${JSON.stringify(name)}: {`, `    Args: ${typeOf(fn.args, 3)};`, `    Returns: ${fn.returns ? typeOf(fn.returns, 3) : "unknown"};`, "  };");
  }
  lines.push("};", "");
  return lines.join("\n");
}

/** The functions of `/api/rpc/{schema}/{function}`, sorted: arguments from the POST body or the GET parameters. */
function functions(document) {
  const found = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    const match = /^\/api\/rpc\/([^/]+)\/([^/]+)$/.exec(path);
    if (!match) continue;
    const operation = item.post ?? item.get;
    let args = operation.requestBody?.content?.["application/json"]?.schema?.properties?.data;
    if (!args) {
      const parameters = operation.parameters ?? [];
      args = {
        type: "object",
        properties: Object.fromEntries(parameters.map((p) => [p.name, p.schema ?? {}])),
        required: parameters.filter((p) => p.required).map((p) => p.name),
      };
    }
    // No argument at all: an empty object.
    if (!Object.keys(args.properties ?? {}).length) args = { type: "object", properties: {}, empty: true };
    const returns = operation.responses?.["200"]?.content?.["application/json"]?.schema?.properties?.data;
    found.push([`${match[1]}.${match[2]}`, { args, returns }]);
  }
  return found.sort(([a], [b]) => a.localeCompare(b));
}

/**
 * The TypeScript type of JSON schema `schema`, indented `depth` levels; an
 * object's properties are all `required` (a row as read), as the schema
 * says (`schema`: an insert), or all `optional` (an update).
 */
function typeOf(schema, depth, mode = "schema") {
  if (schema.oneOf || schema.anyOf) return (schema.oneOf ?? schema.anyOf).map((s) => typeOf(s, depth)).join(" | ");
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length === 0) return "unknown";
  return types
    .map((type) => {
      switch (type) {
        case "null":
          return "null";
        case "string":
          return "string";
        case "integer":
        case "number":
          return "number";
        case "boolean":
          return "boolean";
        case "array":
          return `Array<${schema.items ? typeOf(schema.items, depth) : "unknown"}>`;
        case "object":
          return objectType(schema, depth, mode);
        default:
          return "unknown";
      }
    })
    .join(" | ");
}

function objectType(schema, depth, mode) {
  const properties = Object.entries(schema.properties ?? {});
  if (schema.empty) return "Record<string, never>";
  if (properties.length === 0) return "Record<string, unknown>";
  const required = new Set(schema.required ?? []);
  const pad = "  ".repeat(depth);
  const fields = properties.map(([key, value]) => {
    const optional = mode === "optional" || (mode === "schema" && !required.has(key)) ? "?" : "";
    return `${pad}${JSON.stringify(key)}${optional}: ${typeOf(value, depth + 1)};`;
  });
  return `{\n${fields.join("\n")}\n${"  ".repeat(depth - 1)}}`;
}
