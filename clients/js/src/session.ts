/** Where a client keeps its session token between page loads. */
export interface SessionStore {
  get(): string | null | Promise<string | null>;
  set(token: string): void | Promise<void>;
  remove(): void | Promise<void>;
}

/** Why the session changed. */
export type AuthChange = "SIGNED_IN" | "SIGNED_OUT" | "SESSION_ENDED";

/** A store in memory: Node's default, gone with the process. */
export function memoryStore(): SessionStore {
  let token: string | null = null;
  return {
    get: () => token,
    set: (value) => {
      token = value;
    },
    remove: () => {
      token = null;
    },
  };
}

/** A store in `localStorage` under `key`: a browser's default. */
export function localStorageStore(key = "tessera.session"): SessionStore {
  const storage = (globalThis as { localStorage?: Storage }).localStorage;
  if (!storage) return memoryStore();
  return {
    get: () => storage.getItem(key),
    set: (value) => storage.setItem(key, value),
    remove: () => storage.removeItem(key),
  };
}
