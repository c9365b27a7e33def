// The library's size against supabase-js and the PocketBase SDK, each
// bundled the same way in one run (esbuild: ESM, bundled, minified, for
// browsers), then gzipped. The peers come from npm at pinned versions.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const root = fileURLToPath(new URL("..", import.meta.url));
const esbuild = join(root, "node_modules/.bin/esbuild");
const PEERS = { "@supabase/supabase-js": "2.119.1", pocketbase: "0.28.1" };

const dir = mkdtempSync(join(tmpdir(), "tessera-size-"));
writeFileSync(join(dir, "package.json"), JSON.stringify({ private: true, type: "module" }));
execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...Object.entries(PEERS).map(([n, v]) => `${n}@${v}`)], {
  cwd: dir,
  stdio: "inherit",
});

/** Minified and gzipped bytes of `entry` bundled for browsers. */
function size(name, entry) {
  const out = join(dir, `${name.replace(/\W/g, "_")}.min.js`);
  execFileSync(esbuild, [entry, "--bundle", "--format=esm", "--minify", "--platform=browser", "--target=es2022", `--outfile=${out}`], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const bytes = readFileSync(out);
  return { name, minified: bytes.length, gzipped: gzipSync(bytes, { level: 9 }).length };
}

const rows = [size("@tessera/client", join(root, "src/index.ts"))];
for (const [name, version] of Object.entries(PEERS)) {
  const entry = join(dir, `${name.replace(/\W/g, "_")}.entry.js`);
  writeFileSync(entry, `export * from "${name}";\n`);
  rows.push({ ...size(`${name}@${version}`, entry) });
}
console.log("| library | minified | minified + gzip |\n|---|---:|---:|");
for (const row of rows) console.log(`| ${row.name} | ${row.minified.toLocaleString("en")} B | ${row.gzipped.toLocaleString("en")} B |`);
const [ours, ...peers] = rows;
const smallest = Math.min(...peers.map((p) => p.gzipped));
console.log(`\n@tessera/client is ${((ours.gzipped / smallest) * 100).toFixed(0)}% of the smallest peer (gzipped)`);
if (ours.gzipped >= smallest) process.exitCode = 1;
