// A real Tessera server for the library's tests, as the Rust tests start
// one: a database of its own (dropped afterwards), the binary named by
// TESSERA_BIN on a free port, and a real SMTP sink for its emails.
import { spawn, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import net from "node:net";

export const ADMIN = { email: "admin@example.com", password: "admin-password-1" };
const PG = process.env.TESSERA_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432";

/** A local SMTP server that keeps every message it receives. */
export async function smtpSink() {
  const emails = [];
  const waiters = new Set();
  const server = net.createServer((socket) => {
    let buffer = "";
    let data = null;
    let to = [];
    const say = (line) => socket.write(`${line}\r\n`);
    say("220 sink ESMTP");
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      for (;;) {
        if (data !== null) {
          const end = buffer.indexOf("\r\n.\r\n");
          if (end < 0) return;
          data += buffer.slice(0, end);
          buffer = buffer.slice(end + 5);
          const text = data.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
          emails.push({ to, text: Buffer.from(text, "latin1").toString("utf8") });
          for (const wake of waiters) wake();
          data = null;
          to = [];
          say("250 kept");
          continue;
        }
        const end = buffer.indexOf("\r\n");
        if (end < 0) return;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === "EHLO" || verb === "HELO") say("250 sink");
        else if (verb === "RCPT") {
          to.push(/<([^>]*)>/.exec(line)?.[1] ?? "");
          say("250 ok");
        } else if (verb === "DATA") {
          data = "";
          say("354 go on");
        } else if (verb === "QUIT") {
          say("221 bye");
          socket.end();
        } else say("250 ok");
      }
    });
    socket.on("error", () => {});
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `smtp://127.0.0.1:${server.address().port}`,
    emails,
    /** The first email to `address` whose text contains `needle`, waiting up to 20 s. */
    async waitFor(address, needle) {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const found = emails.find((e) => e.to.includes(address) && e.text.includes(needle));
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no email to ${address} with ${needle}`);
        await new Promise((resolve) => {
          waiters.add(resolve);
          setTimeout(resolve, 200);
        });
      }
    },
    close: () => server.close(),
  };
}

/** The token of the first link in `text` that contains `page`. */
export function linkToken(text, page) {
  const link = text.split(/[\s"<]/).find((part) => part.startsWith("http") && part.includes(page) && part.includes("token="));
  if (!link) throw new Error(`no ${page} link in the email`);
  return new URL(link).searchParams.get("token");
}

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function psql(sql) {
  execFileSync("psql", [`${PG}/postgres`, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql], { stdio: ["ignore", "ignore", "inherit"] });
}

/**
 * Starts a server on a fresh database; answers its URL, an administrator's
 * session, the SMTP sink, `sql(text)` on its database, and `stop()`.
 */
export async function startServer() {
  const binary = process.env.TESSERA_BIN;
  if (!binary) throw new Error("set TESSERA_BIN to a built tessera binary (cargo xtask test does)");
  const name = `tessera_js_${process.pid}_${randomBytes(4).toString("hex")}`;
  const database = `${PG}/${name}`;
  const smtp = await smtpSink();
  const port = await freePort();
  const url = `http://localhost:${port}`;
  const child = spawn(binary, ["serve"], {
    env: {
      ...process.env,
      TESSERA_DATABASE_URL: database,
      TESSERA_BIND: `127.0.0.1:${port}`,
      TESSERA_PUBLIC_URL: url,
      TESSERA_SMTP_URL: smtp.url,
      TESSERA_FILES_DIR: `/tmp/${name}-files`,
      TESSERA_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      TESSERA_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      TESSERA_LOG: "warn",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const stop = async () => {
    child.kill("SIGTERM");
    await new Promise((resolve) => (child.exitCode === null ? child.once("exit", resolve) : resolve()));
    smtp.close();
    psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  };
  try {
    await ready(url);
  } catch (error) {
    await stop();
    throw error;
  }
  const login = await fetch(`${url}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(ADMIN),
  }).then((r) => r.json());
  const admin = login.data.token;
  return {
    url,
    admin,
    smtp,
    sql: (text) => execFileSync("psql", [database, "-qAt", "-v", "ON_ERROR_STOP=1", "-c", text], { encoding: "utf8" }).trim(),
    /** `method path` with the administrator's session and `{ data }` (or `raw`) as the body. */
    async adminCall(method, path, data, raw) {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
        body: raw !== undefined ? JSON.stringify(raw) : data === undefined ? undefined : JSON.stringify({ data }),
      });
      const body = response.status === 204 ? null : await response.json();
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(body)}`);
      return body?.data;
    },
    stop,
  };
}

async function ready(url) {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the server did not become ready in 30 s");
}
