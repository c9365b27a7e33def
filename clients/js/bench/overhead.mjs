// What the library adds to the list route's time, measured from Node in
// one run: the same page (100 rows of app.notes under a grant's row
// filter) read with plain `fetch` and with `from(...)`, in alternating
// rounds of TESSERA_BENCH_REQUESTS (2,000: shorter rounds measure the
// host's scheduling more than the library); the median of the per-round
// ratios. TESSERA_BIN names the
// server (cargo xtask bench client passes the release build).
import { performance } from "node:perf_hooks";

import { createClient } from "../dist/index.js";
import { notesApp } from "../test/fixtures.mjs";
import { linkToken, startServer } from "../test/harness.mjs";

const ROUNDS = Number(process.env.TESSERA_BENCH_ROUNDS ?? 11);
const REQUESTS = Number(process.env.TESSERA_BENCH_REQUESTS ?? 2000);
const CONCURRENCY = 8;

const server = await startServer();
try {
  await notesApp(server);
  const tessera = createClient(server.url);
  await tessera.auth.register({ email: "bench@example.com", password: "password-1" });
  await tessera.auth.verifyEmail(linkToken((await server.smtp.waitFor("bench@example.com", "token=")).text, "verify"));
  const { user } = await tessera.auth.signInWithPassword({ email: "bench@example.com", password: "password-1" });
  await tessera.from("app.notes").insert(Array.from({ length: 100 }, (_, i) => ({ title: `note ${i}`, owner_id: user.id })));
  const token = await tessera.auth.token();
  const url = `${server.url}/api/data/app/notes?select=id,title,done&sort=-id&limit=100`;

  const plain = async () => {
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    const body = await response.json();
    if (body.data.length !== 100) throw new Error("plain: a short page");
  };
  const library = async () => {
    const page = await tessera.from("app.notes").select("id,title,done").sort("-id").limit(100);
    if (page.data.length !== 100) throw new Error("library: a short page");
  };
  /** Requests per second of `shot`, CONCURRENCY at a time. */
  const rate = async (shot) => {
    let left = REQUESTS;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) await shot();
      }),
    );
    return REQUESTS / ((performance.now() - start) / 1000);
  };
  for (let i = 0; i < 2; i++) await Promise.all([rate(plain), rate(library)]);
  const ratios = [];
  const sides = { plain: [], library: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? ["plain", "library"] : ["library", "plain"];
    const got = {};
    for (const side of order) got[side] = await rate(side === "plain" ? plain : library);
    sides.plain.push(got.plain);
    sides.library.push(got.library);
    ratios.push(got.library / got.plain);
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(`list route from Node, ${ROUNDS} rounds of ${REQUESTS} requests, ${CONCURRENCY} at a time:`);
  console.log(`  plain fetch: ${median(sides.plain).toFixed(0)} req/s (median)`);
  console.log(`  @tessera/client: ${median(sides.library).toFixed(0)} req/s (median)`);
  console.log(`  library / plain, median of the per-round ratios: ${(median(ratios) * 100).toFixed(1)}%`);
} finally {
  await server.stop();
}
