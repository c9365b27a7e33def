import type { Transport } from "./http.js";

/** A database function's arguments and result, as `tessera-types` writes them. */
export interface FunctionShape {
  Args: Record<string, unknown>;
  Returns: unknown;
}

/** A function of no known shape: any arguments, any result. */
export interface AnyFunction extends FunctionShape {
  Args: Record<string, unknown>;
  Returns: unknown;
}

/** The database functions a role may call, by `schema.function`. */
export type Functions = Record<string, FunctionShape>;

/** How {@link callFunction} calls. */
export interface RpcOptions {
  /** Call with GET (a function exposed for GET: immutable or stable), so caches may keep it. */
  get?: boolean;
}

/** `/api/rpc/{schema}/{function}` of `name` (`schema.function`). */
export function functionPath(name: string): string {
  if (!/^[^./]+\.[^./]+$/.test(name)) throw new TypeError(`a function is named schema.function, not "${name}"`);
  const [schema, fn] = name.split(".") as [string, string];
  return `/api/rpc/${encodeURIComponent(schema)}/${encodeURIComponent(fn)}`;
}

/**
 * Calls the database function at `path` (its {@link functionPath}) with
 * `args` by name: POST with the
 * arguments as the body, or GET with each one JSON-encoded as a query
 * parameter (a string stays a string). Answers the function's result: a
 * scalar, a row as an object, a set as an array, void as null.
 */
export async function callFunction<T>(
  transport: Transport,
  path: string,
  args: Record<string, unknown>,
  options: RpcOptions,
): Promise<T> {
  if (!options.get) return (await transport.request<T>("POST", path, { json: { data: args } })).data;
  const query: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(args)) query[key] = value === undefined ? undefined : JSON.stringify(value);
  return (await transport.request<T>("GET", path, { query })).data;
}
