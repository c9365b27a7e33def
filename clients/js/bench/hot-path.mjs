// The library's own work per list request, without a server: the same
// page read with plain `fetch` and with `from(...)` over a `fetch` that
// answers a parsed page at once, so that only the library's JavaScript
// (the query built, the URL, the headers, the envelope, the promise
// chain) differs. Medians of 7 runs of 200,000 requests each side.
import { performance } from "node:perf_hooks";

import { createClient } from "../dist/index.js";

const page = { data: Array.from({ length: 100 }, (_, i) => ({ id: i, title: `note ${i}`, done: false })), meta: { limit: 100, offset: 0 } };
const answer = { ok: true, status: 200, json: async () => page };
const fetchNow = async () => answer;
const token = "session-token-of-forty-three-characters-abc";
const url = "http://127.0.0.1:1/api/data/app/notes?select=id,title,done&sort=-id&limit=100";
const store = { get: () => token, set() {}, remove() {} };
const tessera = createClient("http://127.0.0.1:1", { fetch: fetchNow, store });

const plain = async () => {
  const body = await (await fetchNow(url, { headers: { authorization: `Bearer ${token}` } })).json();
  if (body.data.length !== 100) throw new Error("plain: a short page");
};
const library = async () => {
  const got = await tessera.from("app.notes").select("id,title,done").sort("-id").limit(100);
  if (got.data.length !== 100) throw new Error("library: a short page");
};
const N = 200_000;
/** Microseconds per call of `shot`. */
const time = async (shot) => {
  const start = performance.now();
  for (let i = 0; i < N; i++) await shot();
  return ((performance.now() - start) * 1000) / N;
};
for (let i = 0; i < 2; i++) await Promise.all([time(plain), time(library)]);
const sides = { plain: [], library: [] };
for (let i = 0; i < 7; i++) {
  sides.plain.push(await time(plain));
  sides.library.push(await time(library));
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const [p, l] = [median(sides.plain), median(sides.library)];
console.log(`the library's own work per list request (no server): ${(l - p).toFixed(2)} µs (plain ${p.toFixed(2)} µs, library ${l.toFixed(2)} µs)`);
