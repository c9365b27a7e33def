import { TesseraError } from "./errors.js";
import { type AuthChange, type SessionStore, localStorageStore, memoryStore } from "./session.js";

/** How a client is made. */
export interface ClientOptions {
  /** Where the session token is kept (a browser: `localStorage`; Node: memory). */
  store?: SessionStore;
  /** The `fetch` to use (the global one by default). */
  fetch?: typeof fetch;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** An IANA zone sent as `X-Service-Timezone`, for `$PERIOD` filters. */
  timezone?: string;
}

/** A successful answer: its `data` and `meta`. */
export interface Answer<T> {
  data: T;
  meta: Record<string, unknown> | undefined;
}

/** What a request sends besides its method and path. */
export interface RequestOptions {
  /** Query parameters; `undefined` values are left out. */
  query?: Record<string, string | number | boolean | undefined>;
  /** A JSON body (sent as is: wrap it in `{ data }` where the route wants it). */
  json?: unknown;
  /** A body sent as is (a file, a CSV stream), with its own content type. */
  body?: BodyInit;
  /** Headers of this request (beside the client's). */
  headers?: Record<string, string>;
  /** Aborts the request. */
  signal?: AbortSignal;
  /** Send no credential, even when signed in. */
  anonymous?: boolean;
}

type Listener = (change: AuthChange, token: string | null) => void;

/** The connection to one server: the session, and requests in its envelope. */
export class Transport {
  readonly url: string;
  private readonly store: SessionStore;
  private readonly fetcher: typeof fetch;
  private readonly headers: Record<string, string>;
  private readonly listeners = new Set<Listener>();
  /** Stops following other tabs' sign-ins and sign-outs. */
  readonly unwatch: () => void;

  constructor(url: string, options: ClientOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    const browser = typeof (globalThis as { window?: unknown }).window !== "undefined";
    // One key per server (its origin and the path it is mounted at): a page
    // that talks to another server never sends it this one's session.
    const base = new URL(this.url);
    this.store = options.store ?? (browser ? localStorageStore(`tessera.session:${base.origin}${base.pathname.replace(/\/+$/, "")}`) : memoryStore());
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.headers = { ...options.headers };
    if (options.timezone) this.headers["x-service-timezone"] = options.timezone;
    // Another tab signed in or out: this one follows.
    this.unwatch =
      this.store.watch?.((token) => {
        for (const listener of this.listeners) listener(token === null ? "SIGNED_OUT" : "SIGNED_IN", token);
      }) ?? (() => {});
  }

  /** The session token, if signed in. */
  async token(): Promise<string | null> {
    return (await this.store.get()) ?? null;
  }

  /** Keeps `token` as the session (or forgets it) and tells the listeners. */
  async setSession(token: string | null, change: AuthChange): Promise<void> {
    if (token === null) await this.store.remove();
    else await this.store.set(token);
    for (const listener of this.listeners) listener(change, token);
  }

  /** Calls `listener` on every change of the session; answers how to stop. */
  onAuthChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The absolute URL of `path` with `query` (its keys and values encoded). */
  href(path: string, query?: RequestOptions["query"]): string {
    let url = this.url + path;
    let separator = "?";
    for (const key of query ? Object.keys(query) : []) {
      const value = query?.[key];
      if (value === undefined) continue;
      url += `${separator}${encodeURIComponent(key)}=${encodeURIComponent(value)}`;
      separator = "&";
    }
    return url;
  }

  /**
   * Sends a request and answers the raw response when it succeeded. A
   * refusal is thrown as a {@link TesseraError}; a 401 to a request that
   * carried the session ends that session here.
   */
  async fetch(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    // The store answers at once unless it is asynchronous: no await then.
    let token = options.anonymous ? null : this.store.get();
    if (token !== null && typeof token !== "string") token = (await token) ?? null;
    const headers = this.headersWith(options, token);
    let body = options.body;
    if (options.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.json);
    }
    let response: Response;
    try {
      const init: RequestInit & { duplex?: "half" } = { method, headers, body: body ?? null };
      if (options.signal) init.signal = options.signal;
      if (body && typeof (body as ReadableStream).getReader === "function") init.duplex = "half";
      response = await this.fetcher(this.href(path, options.query), init);
    } catch (cause) {
      if ((cause as Error)?.name === "AbortError") throw cause;
      throw new TesseraError(0, "NETWORK_ERROR", `could not reach ${this.url}: ${String(cause)}`);
    }
    if (response.ok) return response;
    throw await this.refused(response.status, await response.json().catch(() => null), token);
  }

  /** The headers of a request (the client's, the request's, the session's) and the token sent. */
  async credentials(options: Pick<RequestOptions, "headers" | "anonymous"> = {}): Promise<{ headers: Record<string, string>; token: string | null }> {
    const token = options.anonymous ? null : await this.token();
    return { headers: this.headersWith(options, token), token };
  }

  /** The client's headers, the request's, and `token`'s. */
  private headersWith(options: Pick<RequestOptions, "headers">, token: string | null): Record<string, string> {
    const headers: Record<string, string> = { ...this.headers, ...options.headers };
    if (token) headers.authorization = `Bearer ${token}`;
    return headers;
  }

  /** The error of a refused request; a 401 to one that carried the current session ends it here. */
  async refused(status: number, body: unknown, token: string | null): Promise<TesseraError> {
    if (status === 401 && token && token === (await this.token())) await this.setSession(null, "SESSION_ENDED");
    return TesseraError.fromAnswer(status, body);
  }

  /** Sends a request and answers the envelope's `data` and `meta` (204: `data` null). */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<Answer<T>> {
    const response = await this.fetch(method, path, options);
    if (response.status === 204) return { data: null as T, meta: undefined };
    const envelope = (await response.json()) as { data: T; meta?: Record<string, unknown> };
    return { data: envelope.data, meta: envelope.meta };
  }
}
