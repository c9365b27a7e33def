/** Where a client keeps its session token between page loads. */
export interface SessionStore {
  get(): string | null | Promise<string | null>;
  set(token: string): void | Promise<void>;
  remove(): void | Promise<void>;
  /**
   * Calls `changed` when another tab or window changes the token
   * (optional); answers how to stop.
   */
  watch?(changed: (token: string | null) => void): () => void;
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

/**
 * A store in `localStorage` under `key`: a browser's default. Every tab of
 * the origin shares it, and hears another's sign-in and sign-out.
 */
export function localStorageStore(key = "tessera.session"): SessionStore {
  const scope = globalThis as { localStorage?: Storage; addEventListener?: Window["addEventListener"]; removeEventListener?: Window["removeEventListener"] };
  const storage = scope.localStorage;
  if (!storage) return memoryStore();
  return {
    get: () => storage.getItem(key),
    set: (value) => storage.setItem(key, value),
    remove: () => storage.removeItem(key),
    watch: (changed) => {
      const heard = (event: StorageEvent) => {
        if (event.storageArea === storage && (event.key === key || event.key === null)) changed(event.newValue);
      };
      scope.addEventListener?.("storage", heard);
      return () => scope.removeEventListener?.("storage", heard);
    },
  };
}
