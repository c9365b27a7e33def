// The notes app: plain HTML and @tessera/client's built module, no
// framework and no build step. The server's address is in config.js,
// written by setup.mjs (never taken from the page's address: a link could
// point the app, and the passwords typed into it, elsewhere). Checked
// with `tsc --strict` through the JSDoc types below.
// @ts-check
import { TesseraError, createClient } from "../../clients/js/dist/index.js";
import { server } from "./config.js";

/**
 * @typedef {{ id: number, title: string, body: string | null, done: boolean, owner_id: string, slug: string | null, attachment_id: string | null }} Note
 * @typedef {{ "app.notes": { Row: Note, Insert: Partial<Note> & { title: string, owner_id: string }, Update: Partial<Note> } }} Database
 */
/** @type {import("../../clients/js/dist/index.js").TesseraClient<Database>} */
const tessera = createClient(server);
/**
 * The page's element `selector` (the page always has it).
 * @template {HTMLElement} [E=HTMLElement]
 * @param {string} selector
 * @returns {E}
 */
const $ = (selector) => /** @type {E} */ (document.querySelector(selector));
/** @type {import("../../clients/js/dist/index.js").User | null} */
let me = null;
/** @type {import("../../clients/js/dist/index.js").Subscription | null} */
let subscription = null;
/** @type {string} */
let pendingChallenge = "";

/** @param {string} text */
function say(text) {
  $("#status").textContent = text;
}

/**
 * Shows what went wrong in the words of the server.
 * @param {unknown} error
 */
function failed(error) {
  say(error instanceof TesseraError ? `${error.message} (${error.code})` : String(error));
}

/** Counts calls of show(): a later one wins over one still waiting. */
let shown = 0;

async function show() {
  const turn = ++shown;
  subscription?.close();
  subscription = null;
  const who = (await tessera.auth.token()) ? await tessera.auth.me().catch(() => null) : null;
  if (turn !== shown) return;
  me = who;
  $("#signed-out").hidden = Boolean(me);
  $("#signed-in").hidden = !me;
  if (!me) return;
  $("#who").textContent = me.name || me.email;
  await loadNotes();
  if (turn !== shown) return;
  // Another tab's (or device's) changes arrive here, under the same grants.
  subscription = tessera.subscribe(
    "app.notes",
    { onReset: loadNotes, onError: (error) => { $("#live").hidden = true; failed(error); } },
    (event) => {
      if (event.type === "delete") document.querySelector(`li[data-id="${CSS.escape(String(event.row.id))}"]`)?.remove();
      else upsertNote(event.row, true);
    },
  );
  $("#live").hidden = false;
}

async function loadNotes() {
  const page = await tessera.from("app.notes").sort("-id").limit(100);
  $("#notes").replaceChildren(...page.data.map((note) => noteItem(note, false)));
}

/**
 * @param {Note} note
 * @param {boolean} arrived
 */
function noteItem(note, arrived) {
  const item = document.createElement("li");
  item.dataset.id = String(note.id);
  item.classList.toggle("done", note.done);
  if (arrived) item.classList.add("arrived");
  const done = document.createElement("input");
  done.type = "checkbox";
  done.checked = note.done;
  done.setAttribute("aria-label", `Done: ${note.title}`);
  done.addEventListener("change", () => tessera.from("app.notes").update(note.id, { done: done.checked }).catch(failed));
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = note.title;
  item.append(done, title);
  const attachment = note.attachment_id;
  if (attachment) {
    const open = document.createElement("button");
    open.type = "button";
    open.textContent = "Attachment";
    open.addEventListener("click", async () => {
      const blob = await tessera.files.download(attachment).catch(failed);
      if (!blob) return;
      // Saved, never rendered in the app's origin (an HTML or SVG file
      // would run beside the session).
      const link = document.createElement("a");
      link.href = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
      link.download = note.title;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    });
    item.append(open);
  }
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "Delete";
  remove.addEventListener("click", () => tessera.from("app.notes").delete(note.id).catch(failed));
  item.append(remove);
  return item;
}

/**
 * @param {Note} note
 * @param {boolean} arrived
 */
function upsertNote(note, arrived) {
  const existing = document.querySelector(`li[data-id="${CSS.escape(String(note.id))}"]`);
  const item = noteItem(note, arrived);
  if (existing) existing.replaceWith(item);
  else $("#notes").prepend(item);
}

/**
 * After a sign-in: signed in, or a second step to take.
 * @param {import("../../clients/js/dist/index.js").SignIn} result
 */
async function signedIn(result) {
  if (result.challenge) {
    pendingChallenge = result.challenge;
    $("#second-step").hidden = false;
    say("This account has a second factor: enter a code or use a passkey.");
    return;
  }
  // Signed in: the library's SIGNED_IN change shows the notes (below).
  pendingChallenge = "";
  $("#second-step").hidden = true;
  say("");
}

/**
 * The text of field `name` of the form an event came from.
 * @param {Event} event
 * @param {string} name
 */
const field = (event, name) => String(new FormData(/** @type {HTMLFormElement} */ (event.currentTarget)).get(name) ?? "");

$("#sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  await tessera.auth
    .signInWithPassword({ email: field(event, "email"), password: field(event, "password") })
    .then(signedIn, failed);
});

$("#passkey-sign-in").addEventListener("click", () => tessera.auth.passkeys.signIn().then(signedIn, failed));

$("#second-step").addEventListener("submit", async (event) => {
  event.preventDefault();
  await tessera.auth.mfa.verify(pendingChallenge, field(event, "code")).then(signedIn, failed);
});

$("#second-step-passkey").addEventListener("click", () =>
  tessera.auth.mfa.verifyWithPasskey(pendingChallenge).then(signedIn, failed),
);

$("#sign-up").addEventListener("submit", async (event) => {
  event.preventDefault();
  // Taken before any await: `currentTarget` is only set while the event is dispatched.
  const form = /** @type {HTMLFormElement} */ (event.currentTarget);
  try {
    const name = field(event, "name");
    await tessera.auth.register({ email: field(event, "email"), password: field(event, "password"), ...(name ? { name } : {}) });
    say("Account created. Confirm your email with the link we sent, then sign in.");
    form.reset();
  } catch (error) {
    failed(error);
  }
});

$("#add-passkey").addEventListener("click", async () => {
  try {
    await tessera.auth.passkeys.register("This device");
    say("Passkey added: next time, sign in with it.");
  } catch (error) {
    failed(error);
  }
});

// A button per provider the server signs in with; the provider sends the
// browser back to this page, where the sign-in ends (below).
for (const provider of await tessera.auth.providers().catch(() => [])) {
  const button = document.createElement("button");
  button.type = "button";
  button.dataset.provider = provider;
  button.textContent = `Sign in with ${provider}`;
  button.addEventListener("click", () => {
    const back = new URL(location.href);
    back.hash = "";
    tessera.auth.signInWithProvider(provider, { redirectTo: back.toString() });
  });
  $("#providers").append(button);
}

$("#sign-out").addEventListener("click", () => tessera.auth.signOut().catch(failed));

$("#new-note").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = /** @type {HTMLFormElement} */ (event.currentTarget);
  const title = field(event, "title");
  /** @type {HTMLInputElement} */
  const input = $("#note-attachment");
  const file = input.files?.[0];
  try {
    let attachment_id = null;
    if (file) {
      /** @type {HTMLProgressElement} */
      const progress = $("#upload");
      progress.hidden = false;
      const stored = await tessera.files.upload(file, { onProgress: (sent, total) => (progress.value = total ? sent / total : 1) });
      progress.hidden = true;
      attachment_id = stored.id;
    }
    if (!me) return;
    const note = await tessera.from("app.notes").insert({ title, owner_id: me.id, attachment_id });
    upsertNote(note, false);
    form.reset();
  } catch (error) {
    failed(error);
  }
});

// Every change of the session, in this tab or another (signed in or out
// there, expired or revoked), shows what the person now sees.
tessera.auth.onAuthChange((change) => {
  if (change === "SESSION_ENDED") say("Your session ended: sign in again.");
  void show();
});

// Back from a provider: signed in, or a second step to take.
const returned = await tessera.auth.finishProviderSignIn().catch((error) => {
  failed(error);
  return null;
});
if (returned) await signedIn(returned);
if (!returned?.user) await show();
