// The example of docs/clients.md: the Admin API and the Data API through
// clients generated from Tessera's OpenAPI documents. The openapi tests
// generate `generated/admin` (from GET /admin/api/openapi) and
// `generated/data` (from GET /admin/api/openapi/data?role=<id>, a role that
// may read, insert, change and delete rows of app.notes, and read and insert
// rows of app.comments, whose note_id points at a note) with
// @hey-api/openapi-ts, the bare types with openapi-typescript, then
// type-check this file against them.
import { client as admin } from "./generated/admin/client.gen";
import { createRole, listUsers, login } from "./generated/admin";
import { client as data } from "./generated/data/client.gen";
import { batch, createAppNotes, listAppNotes, updateAppNotesRow } from "./generated/data";
// The types alone, from openapi-typescript (`generated/admin-types.ts`).
import type { paths } from "./generated/admin-types";

/** The body of `GET /api/auth/me`, as openapi-typescript names it. */
export type Me = paths["/api/auth/me"]["get"]["responses"][200]["content"]["application/json"];

/** The signed-in user's email, read from a `GET /api/auth/me` body. */
export function emailOf(me: Me): string {
  return me.data.email;
}

export async function tour(baseUrl: string, email: string, password: string): Promise<void> {
  // Sign in; the session token authenticates both clients.
  admin.setConfig({ baseUrl });
  const session = await login({ body: { email, password }, throwOnError: true });
  const token = session.data.data.token;
  admin.setConfig({ baseUrl, auth: () => token });
  data.setConfig({ baseUrl, auth: () => token });

  // Admin API: create a role, list the users.
  const role = await createRole({ body: { data: { name: "Editors", apiAccess: true } } });
  if (role.error) {
    throw new Error(role.error.errors.map((e) => e.message).join("; "));
  }
  const users = await listUsers({ query: { limit: 10 } });
  console.log(users.data?.data.map((user) => user.email));

  // Data API: insert a row, change it, read the open ones back.
  await createAppNotes({ body: { data: { title: "Write the docs" } }, throwOnError: true });
  await updateAppNotesRow({ path: { pk: "1" }, body: { data: { done: true } } });
  const open = await listAppNotes({
    query: { filter: JSON.stringify({ done: { eq: false } }), sort: "-id", limit: 20 },
  });
  for (const note of open.data?.data ?? []) {
    console.log(note.id, note.title);
  }

  // A note and its first comment in one transaction: the second operation
  // takes the new note's id from the first one's answer.
  const written = await batch({
    body: {
      data: [
        { method: "POST", path: "/api/data/app/notes", body: { data: { title: "Plan the launch" } } },
        {
          method: "POST",
          path: "/api/data/app/comments",
          body: { data: { note_id: "{{0.data.id}}", body: "Start with the docs" } },
        },
      ],
    },
    throwOnError: true,
  });
  console.log(written.data.data.map((answer) => answer.status));

  // Each note with its comments, in one request.
  const withComments = await listAppNotes({
    query: { select: "id,title,comments:app.comments!note_id(id,body)", limit: 50 },
  });
  console.log(withComments.data?.data);

  // How many notes are done and how many are not.
  const counts = await listAppNotes({ query: { aggregate: "notes:count()", groupBy: "done" } });
  console.log(counts.data?.data);
}
