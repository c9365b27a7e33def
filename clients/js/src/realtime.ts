import { TesseraError } from "./errors.js";
import type { Transport } from "./http.js";
import type { Filter } from "./query.js";

/** A change of a subscribed table, as the caller may see it. */
export interface ChangeEvent<Row = Record<string, unknown>> {
  type: "insert" | "update" | "delete";
  /** The event's id: ids increase across every instance. */
  id: string;
  /** `schema.table`. */
  resource: string;
  /** The row as the list route would show it (a delete: its key columns). */
  row: Row;
  /** An update's previous row, as the caller could see it. */
  old?: Row;
}

/** What a subscription tells besides changes. */
export interface SubscribeOptions<Row> {
  /** One filter over every listed table. */
  filter?: Filter<Row>;
  /** Resume after this event id (replayed within the server's window). */
  lastEventId?: string;
  /**
   * Called when the events missed cannot be replayed (`reset`): reload
   * what is shown, then changes follow.
   */
  onReset?: () => void;
  /** Called each time the stream opens (first, then after each reconnection): changes flow from then on. */
  onOpen?: () => void;
  /** Called once when the stream is refused or ends for good (401, 403, 404...). */
  onError?: (error: TesseraError) => void;
  /** `eventsource` (a browser's default) or `fetch` (Node's, and anywhere streams are). */
  via?: "eventsource" | "fetch";
}

/** An open subscription. */
export interface Subscription {
  /** The last event id seen, to resume from. */
  readonly lastEventId: string | undefined;
  /** Stops listening. */
  close(): void;
}

/** The longest wait between two reconnections. */
const MAX_BACKOFF_MS = 30_000;

/**
 * Listens to the changes of `tables` (`schema.table`, one or several):
 * reconnects after a dropped stream with `Last-Event-ID`, and stops with
 * `onError` when the server refuses it.
 */
export function subscribe<Row = Record<string, unknown>>(
  transport: Transport,
  tables: string | string[],
  options: SubscribeOptions<Row>,
  onEvent: (event: ChangeEvent<Row>) => void,
): Subscription {
  const subscribe = Array.isArray(tables) ? tables.join(",") : tables;
  const query: Record<string, string> = { subscribe };
  if (options.filter !== undefined) query.filter = JSON.stringify(options.filter);
  const browser = typeof (globalThis as { EventSource?: unknown }).EventSource === "function";
  const via = options.via ?? (browser ? "eventsource" : "fetch");
  const state = { lastEventId: options.lastEventId, closed: false, attempt: 0 };
  const stop = new AbortController();
  let source: EventSource | undefined;

  const fail = (error: TesseraError) => {
    if (state.closed) return;
    subscription.close();
    options.onError?.(error);
  };
  const deliver = (type: string, id: string, data: string) => {
    if (type === "reset") {
      options.onReset?.();
      return;
    }
    if (type !== "insert" && type !== "update" && type !== "delete") return;
    if (id) state.lastEventId = id;
    const body = JSON.parse(data) as { resource: string; row: Row; old?: Row };
    try {
      onEvent({ type, id, resource: body.resource, row: body.row, ...(body.old ? { old: body.old } : {}) });
    } catch (error) {
      // The app's own error: reported, and the stream kept.
      queueMicrotask(() => {
        throw error;
      });
    }
  };
  const backoff = () => Math.min(MAX_BACKOFF_MS, 500 * 2 ** state.attempt++);
  /** A refusal that will not change by asking again (not 429). */
  const final = (error: unknown): error is TesseraError =>
    error instanceof TesseraError && error.status >= 400 && error.status < 500 && error.status !== 429;

  const viaFetch = async () => {
    while (!state.closed) {
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (state.lastEventId) headers["last-event-id"] = state.lastEventId;
        const response = await transport.fetch("GET", "/api/realtime", { query, headers, signal: stop.signal });
        state.attempt = 0;
        options.onOpen?.();
        await readEvents(response, deliver);
      } catch (error) {
        if (state.closed) return;
        if (final(error)) {
          fail(error);
          return;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, backoff()));
    }
  };

  const viaEventSource = () => {
    const open = async () => {
      // The session of now: a sign-in since the last attempt is used.
      const token = await transport.token();
      if (state.closed) return;
      const q = { ...query, ...(token ? { access_token: token } : {}), ...(state.lastEventId ? { lastEventId: state.lastEventId } : {}) };
      source = new EventSource(transport.href("/api/realtime", q));
      source.onopen = () => {
        state.attempt = 0;
        options.onOpen?.();
      };
      for (const type of ["insert", "update", "delete", "reset"]) {
        source.addEventListener(type, (event) => {
          state.attempt = 0;
          const message = event as MessageEvent<string>;
          deliver(type, message.lastEventId, message.data);
        });
      }
      source.onerror = () => {
        if (source?.readyState !== EventSource.CLOSED || state.closed) return;
        // The browser gave up (an answer that is not a stream): ask again
        // with fetch to learn why, and stop on a refusal.
        transport
          .fetch("GET", "/api/realtime", { query, headers: { accept: "text/event-stream" }, signal: stop.signal })
          .then((response) => {
            void response.body?.cancel();
            setTimeout(() => !state.closed && void open(), backoff());
          })
          .catch((error: unknown) => {
            if (final(error)) fail(error);
            else if (!state.closed) setTimeout(() => !state.closed && void open(), backoff());
          });
      };
    };
    void open();
  };

  const subscription: Subscription = {
    get lastEventId() {
      return state.lastEventId;
    },
    close() {
      state.closed = true;
      stop.abort();
      source?.close();
    },
  };
  void (via === "eventsource" ? viaEventSource() : viaFetch());
  return subscription;
}

/** Reads the server-sent events of `response` until it ends. */
async function readEvents(response: Response, deliver: (type: string, id: string, data: string) => void): Promise<void> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { type: "message", id: "", data: [] as string[] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
      // A CR that ends the chunk may be the first half of a CRLF.
      if (buffer[end] === "\r" && end === buffer.length - 1) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (event.data.length > 0) deliver(event.type, event.id, event.data.join("\n"));
        event = { type: "message", id: "", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event.type = text;
      else if (field === "id") event.id = text;
      else if (field === "data") event.data.push(text);
    }
  }
}
