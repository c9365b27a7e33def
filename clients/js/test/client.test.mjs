// The library against a real server: every method at least once, each
// refusal mapped to a TesseraError with the server's code.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { TesseraError, createClient, memoryStore } from "../dist/index.js";
import { linkToken } from "./harness.mjs";
import { notesAppForTests, totp } from "./fixtures.mjs";

const app = notesAppForTests();

/** A person registered through the library, email verified, signed in. */
async function person(email) {
  const client = createClient(app.server.url);
  const user = await client.auth.register({ email, password: "password-1", name: email.split("@")[0] });
  assert.equal(user.email, email);
  const mail = await app.server.smtp.waitFor(email, "token=");
  await client.auth.verifyEmail(linkToken(mail.text, "verify"));
  const signedIn = await client.auth.signInWithPassword({ email, password: "password-1" });
  assert.equal(signedIn.user?.email, email);
  return { client, user: signedIn.user };
}

async function refused(promise, status, code) {
  await assert.rejects(Promise.resolve(promise), (error) => {
    assert.ok(error instanceof TesseraError, `a TesseraError, not ${error}`);
    assert.equal(error.status, status, `${error.code}: ${error.message}`);
    assert.equal(error.code, code);
    return true;
  });
}

describe("auth", () => {
  test("register, verify, sign in, me, sessions, tokens, sign out", async () => {
    const { client, user } = await person("ann@example.com");
    const changes = [];
    client.auth.onAuthChange((change) => changes.push(change));
    const me = await client.auth.me();
    assert.equal(me.id, user.id);
    // No provider is set up on this server (the example's test signs in with one).
    assert.deepEqual(await client.auth.providers(), []);
    const renamed = await client.auth.updateMe({ name: "Ann B", timezone: "Europe/Paris" });
    assert.equal(renamed.name, "Ann B");
    await refused(client.auth.updateMe({ timezone: "Mars/Olympus" }), 400, "INVALID_PAYLOAD");
    const sessions = await client.auth.sessions();
    assert.equal(sessions.filter((s) => s.current).length, 1);
    const made = await client.auth.createToken({ name: "cli", lifetimeDays: 7 });
    assert.match(made.token, /^svc_/);
    assert.equal((await client.auth.tokens()).length, 1);
    // A token is a credential of its own, kept in a store the app passes.
    const viaToken = createClient(app.server.url, { store: memoryStore() });
    await refused(viaToken.auth.me(), 401, "AUTHENTICATION_REQUIRED");
    await client.auth.revokeToken(made.id);
    assert.equal((await client.auth.tokens()).length, 0);
    await client.auth.changePassword("password-1", "password-2");
    await client.auth.signOut();
    assert.equal(await client.auth.token(), null);
    assert.deepEqual(changes, ["SIGNED_OUT"]);
    await refused(client.auth.me(), 401, "AUTHENTICATION_REQUIRED");
    await refused(client.auth.signInWithPassword({ email: "ann@example.com", password: "password-1" }), 401, "AUTHENTICATION_REQUIRED");
    assert.ok((await client.auth.signInWithPassword({ email: "ann@example.com", password: "password-2" })).user);
  });

  test("a session ended elsewhere ends here on its next request", async () => {
    const { client } = await person("bob@example.com");
    const other = createClient(app.server.url);
    await other.auth.signInWithPassword({ email: "bob@example.com", password: "password-1" });
    const mine = (await other.auth.sessions()).find((s) => !s.current);
    const changes = [];
    client.auth.onAuthChange((change, token) => changes.push([change, token]));
    await other.auth.endSession(mine.id);
    await refused(client.auth.me(), 401, "SESSION_EXPIRED");
    assert.deepEqual(changes, [["SESSION_ENDED", null]]);
    assert.equal(await client.auth.token(), null);
  });

  test("forgot and reset, resend, email codes", async () => {
    await person("cy@example.com");
    const client = createClient(app.server.url);
    await client.auth.forgotPassword("cy@example.com");
    await client.auth.forgotPassword("nobody@example.com");
    const mail = await app.server.smtp.waitFor("cy@example.com", "reset");
    await client.auth.resetPassword(linkToken(mail.text, "reset"), "password-3");
    await refused(client.auth.resetPassword(linkToken(mail.text, "reset"), "password-4"), 400, "INVALID_TOKEN");
    assert.ok((await client.auth.signInWithPassword({ email: "cy@example.com", password: "password-3" })).user);
    await client.auth.resendVerification("nobody@example.com");
    // A verification email asked for again (without a session) is a new
    // link that verifies the address.
    await client.auth.register({ email: "dot@example.com", password: "password-1" });
    const first = await app.server.smtp.waitFor("dot@example.com", "token=");
    await client.auth.resendVerification("dot@example.com");
    let again;
    for (let i = 0; i < 100 && !again; i++) {
      again = app.server.smtp.emails.find((e) => e !== first && e.to.includes("dot@example.com") && e.text.includes("token="));
      if (!again) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.ok(again, "a second verification email");
    await client.auth.verifyEmail(linkToken(again.text, "verify"));
    assert.ok((await client.auth.signInWithPassword({ email: "dot@example.com", password: "password-1" })).user);
    await client.auth.signOut();
    // An invitation accepted through the library signs in after.
    await app.server.adminCall("POST", "/admin/api/invitations", { email: "ivy@example.com", roleIds: [app.fixture.role] });
    const invitation = await app.server.smtp.waitFor("ivy@example.com", "token=");
    await client.auth.acceptInvitation(linkToken(invitation.text, "invitation"), "password-5");
    assert.ok((await client.auth.signInWithPassword({ email: "ivy@example.com", password: "password-5" })).user);
    await refused(client.auth.acceptInvitation(linkToken(invitation.text, "invitation"), "password-6"), 400, "INVALID_TOKEN");
    await refused(client.auth.verifyEmail("no-such-token"), 400, "INVALID_TOKEN");

    const count = app.server.smtp.emails.length;
    await client.auth.requestEmailCode("cy@example.com");
    let code;
    for (let i = 0; i < 100 && !code; i++) {
      const mail = app.server.smtp.emails.slice(count).find((e) => e.to.includes("cy@example.com") && e.text.includes("code is "));
      code = mail && /code is (\d{6})/.exec(mail.text)?.[1];
      if (!code) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.ok(code, "the emailed code");
    const byCode = await client.auth.signInWithEmailCode({ email: "cy@example.com", code });
    assert.equal(byCode.user?.email, "cy@example.com");
    await refused(client.auth.signInWithEmailCode({ email: "cy@example.com", code }), 400, "INVALID_TOKEN");
  });

  test("TOTP: enrol, a sign-in held at a challenge, verify, turn off", async () => {
    const { client } = await person("dee@example.com");
    const { secret, otpauthUrl } = await client.auth.mfa.enrollTotp();
    assert.match(otpauthUrl, /^otpauth:\/\/totp\//);
    await refused(client.auth.mfa.confirmTotp("000000" === totp(secret) ? "111111" : "000000"), 400, "INVALID_MFA_CODE");
    const recovery = await client.auth.mfa.confirmTotp(totp(secret));
    assert.equal(recovery.length, 10);
    const again = createClient(app.server.url);
    const held = await again.auth.signInWithPassword({ email: "dee@example.com", password: "password-1" });
    assert.equal(typeof held.challenge, "string");
    assert.equal(held.user, undefined);
    await refused(again.auth.mfa.verify(held.challenge, "abc"), 401, "INVALID_MFA_CODE");
    const done = await again.auth.mfa.verify(held.challenge, recovery[0]);
    assert.equal(done.user?.email, "dee@example.com");
    // The session made with the factor may turn it off.
    await again.auth.mfa.disableTotp(recovery[1]);
    assert.equal((await again.auth.me()).mfa.totp, false);
  });

  test("passkeys need a browser", async () => {
    const { client } = await person("eve@example.com");
    assert.deepEqual(await client.auth.passkeys.list(), []);
    await assert.rejects(client.auth.passkeys.register("Laptop"), /navigator.credentials/);
  });
});

describe("data", () => {
  test("the query builder lists, counts, pages, reads, writes and refuses", async () => {
    const { client, user } = await person("fay@example.com");
    const notes = client.from("app.notes");
    const one = await notes.insert({ title: "first", owner_id: user.id });
    assert.equal(one.title, "first");
    assert.equal(one.done, false);
    const many = await notes.insert([
      { title: "second", owner_id: user.id, body: "rust and postgres" },
      { title: "third", owner_id: user.id, done: true },
    ]);
    assert.equal(many.length, 2);
    const page = await notes.select("id,title").where({ done: { eq: false } }).sort("-id").limit(1).count();
    assert.deepEqual(page.data, [{ id: many[0].id, title: "second" }]);
    assert.equal(page.total, 2);
    assert.equal(page.limit, 1);
    const next = await notes.select("id,title").where({ done: { eq: false } }).sort("-id").limit(1).offset(1);
    assert.deepEqual(next.data, [{ id: one.id, title: "first" }]);
    assert.equal(next.offset, 1);
    assert.deepEqual(notes.select("id").sort("-id").limit(5).offset(10).query(), { select: "id", sort: "-id", limit: "5", offset: "10" });
    const titles = [];
    for await (const row of notes.select("title").sort("id").all(2)) titles.push(row.title);
    assert.deepEqual(titles, ["first", "second", "third"]);
    const found = await notes.where({ body: { search: "postgres" } }).where({ done: { eq: false } });
    assert.deepEqual(found.data.map((r) => r.title), ["second"]);
    assert.equal((await notes.select("title").get(one.id)).title, "first");
    const updated = await notes.update(one.id, { done: true });
    assert.equal(updated.done, true);
    const groups = await notes.aggregate("n:count()").groupBy("done").sort("done");
    assert.deepEqual(groups.data, [{ done: false, n: 1 }, { done: true, n: 2 }]);
    const upserted = await notes.upsert([{ slug: "s-1", title: "up", owner_id: user.id }], { onConflict: "slug" });
    await notes.upsert([{ slug: "s-1", title: "up again", owner_id: user.id }], { onConflict: "slug" });
    assert.equal((await notes.get(upserted[0].id)).title, "up again");
    await notes.delete(one.id);
    await refused(notes.get(one.id), 404, "NOT_FOUND");
    // Another person's rows are out of reach (the grant's row filter).
    const { client: other } = await person("gus@example.com");
    assert.equal((await other.from("app.notes")).data.length, 0);
    await refused(other.from("app.notes").insert({ title: "x", owner_id: user.id }), 403, "PERMISSION_DENIED");
    await refused(notes.where({ nope: { eq: 1 } }), 400, "INVALID_QUERY");
    await refused(notes.insert({ owner_id: user.id }), 400, "NOT_NULL_VIOLATION");
    await refused(client.from("app.missing").list(), 404, "NOT_FOUND");
    assert.throws(() => client.from("notes"), TypeError);
    // A key is always one encoded segment: it cannot reach another route.
    assert.equal(notes.path("{{0.data.a/../../auth/tokens/x?}}"), "/api/data/app/notes/%7B%7B0.data.a%2F..%2F..%2Fauth%2Ftokens%2Fx%3F%7D%7D");
    await refused(notes.delete("../../auth/me"), 404, "NOT_FOUND");
    assert.throws(() => notes.path(".."), TypeError);
    await assert.rejects(notes.delete("."), TypeError);
  });

  test("a store another tab can change is followed until the client closes", () => {
    let heard = null;
    let stopped = 0;
    const store = { get: () => null, set() {}, remove() {}, watch: (changed) => ((heard = changed), () => stopped++) };
    const client = createClient("http://127.0.0.1:9", { store });
    const changes = [];
    client.auth.onAuthChange((change, token) => changes.push([change, token]));
    heard("t-1");
    heard(null);
    assert.deepEqual(changes, [["SIGNED_IN", "t-1"], ["SIGNED_OUT", null]]);
    client.close();
    assert.equal(stopped, 1);
  });

  test("batches with references, all or nothing", async () => {
    const { client, user } = await person("hal@example.com");
    const answers = await client.batch((b) => {
      const first = b.insert("app.notes", { title: "a", owner_id: user.id });
      b.update("app.notes", first.ref("id"), { title: first.ref("title") + "" });
      b.insert("app.notes", { title: "b", owner_id: user.id, body: first.ref("title") });
    });
    assert.deepEqual(answers.map((a) => a.status), [201, 200, 201]);
    // Only a plain reference stays unencoded in a batch's path.
    await assert.rejects(
      client.batch((b) => b.delete("app.notes", "{{0.data.x/../../y}}")),
      (error) => error instanceof TesseraError && [400, 404].includes(error.status),
    );
    assert.equal(answers[2].data.body, "a");
    await assert.rejects(
      client.batch((b) => {
        b.insert("app.notes", { title: "c", owner_id: user.id });
        b.insert("app.notes", { owner_id: user.id });
      }),
      (error) => error instanceof TesseraError && error.code === "NOT_NULL_VIOLATION" && error.meta.index === 1,
    );
    assert.equal((await client.from("app.notes").count()).total, 2);
  });

  test("CSV out as a stream, CSV in from a string or a stream, its bad line named", async () => {
    const { client, user } = await person("ida@example.com");
    const inserted = await client.importCsv("app.notes", `title,owner_id\nfrom csv,${user.id}\n"two, quoted",${user.id}\n`);
    assert.deepEqual(inserted, { inserted: 2 });
    const stream = new Blob([`title,owner_id\nstreamed,${user.id}\n`]).stream();
    assert.deepEqual(await client.importCsv("app.notes", stream), { inserted: 1 });
    await assert.rejects(
      client.importCsv("app.notes", `title,owner_id\nok,${user.id}\n,${user.id}\n`),
      (error) => error instanceof TesseraError && error.meta.line === 3,
    );
    const csv = await client.exportCsv(client.from("app.notes").select("title").sort("id"));
    const text = await new Response(csv).text();
    assert.equal(text, 'title\r\nfrom csv\r\n"two, quoted"\r\nstreamed\r\n');
  });
});

describe("realtime", () => {
  test("changes arrive, a dropped stream resumes, a refusal stops it", async () => {
    const { client, user } = await person("jo@example.com");
    const events = [];
    let failed;
    let opened;
    const open = new Promise((resolve) => (opened = resolve));
    const subscription = client.subscribe("app.notes", { onOpen: opened, onError: (error) => (failed = error) }, (event) => events.push(event));
    await open;
    const row = await client.from("app.notes").insert({ title: "live", owner_id: user.id });
    await client.from("app.notes").update(row.id, { title: "live 2" });
    for (let i = 0; i < 50 && events.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(events.map((e) => e.type), ["insert", "update"]);
    assert.equal(events[1].old.title, "live");
    assert.equal(subscription.lastEventId, events[1].id);
    // Signed out elsewhere: the stream ends, and the next attempt is refused.
    const token = await client.auth.token();
    await fetch(`${app.server.url}/api/auth/logout`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    for (let i = 0; i < 100 && !failed; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(failed?.status, 401);
    subscription.close();
  });

  test("a resumed subscription replays what it missed", async () => {
    const { client, user } = await person("kit@example.com");
    const first = [];
    let opened;
    const open = new Promise((resolve) => (opened = resolve));
    const a = client.subscribe("app.notes", { onOpen: opened }, (event) => first.push(event));
    await open;
    await client.from("app.notes").insert({ title: "one", owner_id: user.id });
    for (let i = 0; i < 50 && first.length < 1; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    a.close();
    await client.from("app.notes").insert({ title: "two", owner_id: user.id });
    const resumed = [];
    const b = client.subscribe("app.notes", { lastEventId: a.lastEventId }, (event) => resumed.push(event));
    for (let i = 0; i < 50 && resumed.length < 1; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    b.close();
    assert.deepEqual(resumed.map((e) => e.row.title), ["two"]);
    await refused(
      new Promise((_, reject) => client.subscribe("app.nothing", { onError: reject }, () => {})),
      404,
      "NOT_FOUND",
    );
  });
});

describe("files, views and workflows", () => {
  test("upload, read, download and remove a file", async () => {
    const { client } = await person("lea@example.com");
    let progress = 0;
    const file = await client.files.upload(new Blob(["hello file"], { type: "text/plain" }), {
      name: "hello.txt",
      onProgress: (sent) => (progress = sent),
    });
    assert.equal(file.size, 10);
    assert.equal(progress, 10);
    assert.equal((await client.files.info(file.id)).name, "hello.txt");
    assert.equal(await (await client.files.download(file.id)).text(), "hello file");
    assert.ok(client.files.url(file.id).endsWith(`/api/files/${file.id}`));
    await client.files.remove(file.id);
    await refused(client.files.info(file.id), 404, "NOT_FOUND");
  });

  test("a DataView's rows and workflows sync and async", async () => {
    const { client, user } = await person("max@example.com");
    await client.from("app.notes").insert([
      { title: "a", owner_id: user.id },
      { title: "b", owner_id: user.id, done: true },
    ]);
    const view = await client.views.read("notes-per-state", { count: true });
    assert.deepEqual(view.data, [{ done: false, count: 1 }, { done: true, count: 1 }]);
    assert.equal(view.total, 2);
    await refused(client.views.read("no-such-view"), 404, "NOT_FOUND");
    const dashboard = await client.views.dashboard("notes");
    assert.deepEqual(dashboard.widgets[0].rows, view.data);
    const sync = await client.workflows.invoke("greet", { body: { name: "Ada" } });
    assert.deepEqual([sync.status, sync.result], ["SUCCEEDED", { hello: "Ada" }]);
    const later = await client.workflows.invoke("greet-later", { body: { name: "Bo" } });
    assert.deepEqual([later.status, later.result], ["SUCCEEDED", { hello: "Bo" }]);
    const started = await client.workflows.invoke("greet-later", { body: { name: "Cy" }, wait: false });
    assert.equal((await client.workflows.waitFor(started.id)).result.hello, "Cy");
    await refused(client.workflows.invoke("nope", { body: {} }), 404, "WORKFLOW_NOT_FOUND");
  });

  test("database functions by POST and GET, their refusals as errors with codes", async () => {
    const { client, user } = await person("rue@example.com");
    assert.equal(await client.rpc("app.note_count"), 0);
    await client.from("app.notes").insert([
      { title: "a", owner_id: user.id },
      { title: "b", owner_id: user.id, done: true },
    ]);
    assert.equal(await client.rpc("app.note_count", {}), 2);
    assert.equal(await client.rpc("app.note_count", { only_done: true }, { get: true }), 1);
    assert.equal(await client.rpc("app.note_count", { only_done: false }, { get: true }), 1);
    await refused(client.rpc("app.refuse", { reason: "no more ink" }), 400, "OUT_OF_STOCK");
    await refused(client.rpc("app.refuse", { reason: "x" }, { get: true }), 405, "METHOD_NOT_ALLOWED");
    await refused(client.rpc("app.note_count", { nope: 1 }), 400, "INVALID_PAYLOAD");
    await refused(client.rpc("app.nothing"), 404, "NOT_FOUND");
    assert.throws(() => client.rpc("note_count"), TypeError);
  });

  test("a write hook's refusal is an error with the hook's code, and nothing is written", async () => {
    const { client, user } = await person("hook@example.com");
    await client.from("app.notes").insert({ title: "fine", owner_id: user.id });
    await refused(client.from("app.notes").insert({ title: "forbidden", owner_id: user.id }), 400, "TITLE_REFUSED");
    assert.equal((await client.from("app.notes").count()).total, 1);
  });
});
