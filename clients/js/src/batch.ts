import type { Transport } from "./http.js";
import { type AnyTable, type TableShape, type TableQuery, tablePath } from "./query.js";

/** One operation of a batch, as the server takes it. */
interface Operation {
  method: string;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
}

/** An operation's place in its batch, to name its answer in later ones. */
export class BatchRef {
  constructor(readonly index: number) {}

  /**
   * A value of this operation's answer, for a later operation's body or
   * key: `ref('id')`, `ref('0.id')` (the first row of an array answer).
   */
  ref(path: string): string {
    return `{{${this.index}.data.${path}}}`;
  }
}

/** The answer of each operation of a batch that succeeded. */
export interface BatchAnswer {
  /** The status the route would have answered. */
  status: number;
  /** Its `data` (a delete: null). */
  data: unknown;
}

/**
 * Collects the operations of a batch (`client.batch(b => ...)`): each verb
 * adds one and answers its {@link BatchRef}; they run in order in one
 * transaction, all or nothing.
 */
export class BatchBuilder {
  readonly operations: Operation[] = [];

  private add(method: string, path: string, query: Record<string, string>, body?: unknown): BatchRef {
    this.operations.push({
      method,
      path,
      ...(Object.keys(query).length > 0 ? { query } : {}),
      ...(body === undefined ? {} : { body }),
    });
    return new BatchRef(this.operations.length - 1);
  }


  /** Lists a page of `query` (built with `client.from(...)`). */
  list<T extends TableShape = AnyTable>(query: TableQuery<T, unknown>): BatchRef {
    return this.add("GET", query.path(), query.query());
  }

  /** Reads one row of `table` by key (a key may be a {@link BatchRef.ref}). */
  get(table: string, key: string | number): BatchRef {
    return this.add("GET", tablePath(table, key, true), {});
  }

  /** Inserts a row or rows into `table`. */
  insert(table: string, rows: unknown): BatchRef {
    return this.add("POST", tablePath(table), {}, { data: rows });
  }

  /** Inserts or updates rows of `table` on the unique columns `onConflict`. */
  upsert(table: string, rows: unknown, onConflict: string): BatchRef {
    return this.add("POST", tablePath(table), { onConflict }, { data: rows });
  }

  /** Changes one row of `table` by key. */
  update(table: string, key: string | number, changes: unknown): BatchRef {
    return this.add("PATCH", tablePath(table, key, true), {}, { data: changes });
  }

  /** Deletes one row of `table` by key. */
  delete(table: string, key: string | number): BatchRef {
    return this.add("DELETE", tablePath(table, key, true), {});
  }
}

/** Runs the operations `build` adds, in one transaction. */
export async function runBatch(transport: Transport, build: (batch: BatchBuilder) => void): Promise<BatchAnswer[]> {
  const batch = new BatchBuilder();
  build(batch);
  return (await transport.request<BatchAnswer[]>("POST", "/api/batch", { json: { data: batch.operations } })).data;
}
