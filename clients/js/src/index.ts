/**
 * `@tessera/client`: the official client of a Tessera server, for
 * browsers and Node >= 20, with no runtime dependency.
 *
 * ```ts
 * const tessera = createClient("https://api.example.com");
 * await tessera.auth.signInWithPassword({ email, password });
 * const { data } = await tessera.from("app.notes").select("id,title").sort("-id").limit(20);
 * const total = await tessera.rpc("shop.order_total", { order_id: 7 });
 * ```
 */
import { AuthApi } from "./auth.js";
import { type BatchAnswer, type BatchBuilder, runBatch } from "./batch.js";
import { type ClientOptions, Transport } from "./http.js";
import { type AnyTable, type Runner, type TableShape, TableQuery, tablePath } from "./query.js";
import { type ChangeEvent, type SubscribeOptions, type Subscription, subscribe } from "./realtime.js";
import { type AnyFunction, type Functions, type RpcOptions, callFunction, functionPath } from "./rpc.js";
import { FilesApi, ViewsApi, WorkflowsApi } from "./services.js";

export { TesseraError } from "./errors.js";
export { memoryStore, localStorageStore } from "./session.js";
export type { SessionStore, AuthChange } from "./session.js";
export type { ClientOptions } from "./http.js";
export type { User, SignIn, SessionInfo, TokenInfo, PasskeyInfo, Provider } from "./auth.js";
export type { Filter, Comparison, Page, TableShape, AnyTable } from "./query.js";
export { TableQuery } from "./query.js";
export type { AuthApi, MfaApi, PasskeysApi } from "./auth.js";
export type { FilesApi, ViewsApi, WorkflowsApi } from "./services.js";
export type { BatchAnswer, BatchBuilder, BatchRef } from "./batch.js";
export type { ChangeEvent, SubscribeOptions, Subscription } from "./realtime.js";
export type { AnyFunction, FunctionShape, Functions, RpcOptions } from "./rpc.js";
export type { FileInfo, RunOutcome, Dashboard } from "./services.js";
export { toBase64url, fromBase64url } from "./webauthn.js";

/** The tables of a database, by `schema.table` (what `tessera-types` writes). */
export type Database = Record<string, TableShape>;

/**
 * A client of one Tessera server (made by {@link createClient}), typed by
 * the tables and the functions `tessera-types` writes.
 */
export class TesseraClient<DB extends Database = Record<string, AnyTable>, FN extends Functions = Record<string, AnyFunction>> {
  /** Sign-in, the account, second factors, passkeys, tokens. */
  readonly auth: AuthApi;
  /** Files: upload, download, URLs. */
  readonly files: FilesApi;
  /** Workflows' webhooks and results. */
  readonly workflows: WorkflowsApi;
  /** Published DataViews and dashboards. */
  readonly views: ViewsApi;
  private readonly transport: Transport;
  private readonly runner: Runner;

  constructor(url: string, options: ClientOptions = {}) {
    this.transport = new Transport(url, options);
    this.auth = new AuthApi(this.transport);
    this.files = new FilesApi(this.transport);
    this.workflows = new WorkflowsApi(this.transport);
    this.views = new ViewsApi(this.transport);
    const transport = this.transport;
    this.runner = {
      run: (method, path, query, body) => transport.request(method, path, body === undefined ? { query } : { query, json: body }),
    };
  }

  /** The server's address. */
  get url(): string {
    return this.transport.url;
  }

  /**
   * Stops following other tabs' sign-ins and sign-outs (a client made for
   * a part of a page that goes away); requests still work.
   */
  close(): void {
    this.transport.unwatch();
  }

  /** A query of table `name` (`schema.table`). */
  from<K extends keyof DB & string>(name: K): TableQuery<DB[K]> {
    tablePath(name); // a name that is not schema.table throws here, not at the first request
    return new TableQuery<DB[K]>(this.runner, name);
  }

  /**
   * Calls the database function `name` (`schema.function`) with its
   * arguments by name; answers its result. A function's refusal (its
   * `RAISE EXCEPTION`) is a TesseraError with FUNCTION_RAISED or the
   * code of its hint.
   */
  rpc<K extends keyof FN & string>(name: K, args?: FN[K]["Args"], options: RpcOptions = {}): Promise<FN[K]["Returns"]> {
    // A name that is not schema.function throws here, not at the request.
    return callFunction<FN[K]["Returns"]>(this.transport, functionPath(name), args ?? {}, options);
  }

  /** Runs the operations `build` adds in one transaction: all or nothing. */
  batch(build: (batch: BatchBuilder) => void): Promise<BatchAnswer[]> {
    return runBatch(this.transport, build);
  }

  /** The rows of `query` as CSV, streamed (every matching row unless it has a limit). */
  async exportCsv<T extends TableShape>(query: TableQuery<T, unknown>): Promise<ReadableStream<Uint8Array>> {
    const response = await this.transport.fetch("GET", query.path(), { query: query.query(), headers: { accept: "text/csv" } });
    if (!response.body) throw new Error("the CSV answer has no body");
    return response.body;
  }

  /**
   * Inserts the rows of a CSV file (a header row naming columns) into
   * `table` in one transaction; a bad line is a TesseraError whose
   * `meta.line` names it, and nothing is inserted.
   */
  async importCsv(table: keyof DB & string, csv: Blob | ReadableStream<Uint8Array> | string): Promise<{ inserted: number }> {
    const path = tablePath(table);
    const answer = await this.transport.request<{ inserted: number }>("POST", path, {
      body: csv,
      headers: { "content-type": "text/csv" },
    });
    return answer.data;
  }

  /**
   * Listens to the changes of `tables` under the caller's grants:
   * reconnects with `Last-Event-ID` after a dropped stream, stops with
   * `onError` when refused (401, 403, 404).
   */
  subscribe<K extends keyof DB & string>(
    tables: K | K[],
    options: SubscribeOptions<DB[K]["Row"]>,
    onEvent: (event: ChangeEvent<DB[K]["Row"]>) => void,
  ): Subscription {
    return subscribe(this.transport, tables, options, onEvent);
  }
}

/** A client of the Tessera server at `url`. */
export function createClient<DB extends Database = Record<string, AnyTable>, FN extends Functions = Record<string, AnyFunction>>(
  url: string,
  options?: ClientOptions,
): TesseraClient<DB, FN> {
  return new TesseraClient<DB, FN>(url, options);
}
