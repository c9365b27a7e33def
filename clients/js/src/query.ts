/** A comparison of one column (API.md 5, and `search` of API.md 13). */
export interface Comparison<V = unknown> {
  eq?: V | string;
  neq?: V | string;
  gt?: V | string;
  gte?: V | string;
  lt?: V | string;
  lte?: V | string;
  in?: Array<V | string>;
  nin?: Array<V | string>;
  like?: string;
  ilike?: string;
  isNull?: boolean;
  search?: string;
}

/**
 * A filter in the language of API.md 5: columns compared, and `and`, `or`,
 * `not`. Values may be variables (`$USER.id`, `$PERIOD.today`).
 */
export type Filter<Row = Record<string, unknown>> =
  | { [K in keyof Row]?: Comparison<Row[K]> }
  | { and: Array<Filter<Row>> }
  | { or: Array<Filter<Row>> }
  | { not: Filter<Row> };

/** The shapes of one table: what is read, inserted and updated. */
export interface TableShape {
  Row: Record<string, unknown>;
  Insert: Record<string, unknown>;
  Update: Record<string, unknown>;
}

/** Any table, when the client is not given generated types. */
export interface AnyTable extends TableShape {
  Row: Record<string, any>;
  Insert: Record<string, any>;
  Update: Record<string, any>;
}

/** A page of rows: the rows, and where they sit. */
export interface Page<Row> {
  /** The rows. */
  data: Row[];
  /** The page's size. */
  limit: number;
  /** How many rows came before it. */
  offset: number;
  /** The number of matching rows, with {@link TableQuery.count}. */
  total: number | undefined;
}

/** The request a read sends, for a batch or a URL. */
interface ReadParams {
  select?: string;
  filter?: unknown;
  sort?: string;
  limit?: number;
  offset?: number;
  count?: boolean;
  aggregate?: string;
  groupBy?: string;
}

/** A batch's reference to a value of an earlier answer: `{{n.data.path}}`. */
export const REFERENCE = /^\{\{\d+\.data\.[\w.]+\}\}$/;

/**
 * `/api/data/schema/table` of `table` (`schema.table`), and the path of a
 * row's `key` under it, encoded; a batch passes `references` to keep a
 * {@link REFERENCE} as the server reads it. A name that is not
 * `schema.table`, or a key `.` or `..`, is a TypeError.
 */
export function tablePath(table: string, key?: string | number, references = false): string {
  if (!/^[^./]+\.[^./]+$/.test(table)) throw new TypeError(`a table is named schema.table, not "${table}"`);
  const [schema, name] = table.split(".") as [string, string];
  const base = `/api/data/${encodeURIComponent(schema)}/${encodeURIComponent(name)}`;
  if (key === undefined) return base;
  const text = String(key);
  if (references && REFERENCE.test(text)) return `${base}/${text}`;
  // URLs read a segment of dots, encoded or not, as a step up the path.
  if (text === "." || text === "..") throw new TypeError(`"${text}" is not a key`);
  return `${base}/${encodeURIComponent(text)}`;
}

/** Runs or collects the requests of a {@link TableQuery}. */
export interface Runner {
  run<T>(method: string, path: string, query: Record<string, string>, body?: unknown): Promise<{ data: T; meta?: Record<string, unknown> }>;
}

/**
 * A query of one table, built by chaining, that reads like the request it
 * sends: `from('app.notes').select('id,title').where({ done: { eq: false } })
 * .sort('-id').limit(20)`. Awaiting it lists the page; the other verbs
 * (`get`, `insert`, `update`, ...) send their own request.
 */
export class TableQuery<T extends TableShape = AnyTable, Row = T["Row"]> implements PromiseLike<Page<Row>> {
  private readonly params: ReadParams;

  constructor(
    private readonly runner: Runner,
    /** `schema.table`. */
    readonly table: string,
    params: ReadParams = {},
  ) {
    this.params = params;
  }

  private with(changes: ReadParams): TableQuery<T, Row> {
    return new TableQuery<T, Row>(this.runner, this.table, { ...this.params, ...changes });
  }

  /** `/api/data/schema/table`, and a row's path under it. */
  path(key?: string | number): string {
    return tablePath(this.table, key);
  }

  /** The columns and related rows to read: `id,title,author:author_id(name)`. */
  select<Shape = Row>(columns: string): TableQuery<T, Shape> {
    return new TableQuery<T, Shape>(this.runner, this.table, { ...this.params, select: columns });
  }

  /** Keeps the rows `filter` matches; several calls must all match. */
  where(filter: Filter<T["Row"]>): TableQuery<T, Row> {
    const filter_ = this.params.filter === undefined ? filter : { and: [this.params.filter, filter] };
    return this.with({ filter: filter_ });
  }

  /** Orders the rows: `-created_at,id` (`-` for descending). */
  sort(columns: string): TableQuery<T, Row> {
    return this.with({ sort: columns });
  }

  /** At most `n` rows (1 to 1000; the server's default is 100). */
  limit(n: number): TableQuery<T, Row> {
    return this.with({ limit: n });
  }

  /** Skips the first `n` rows. */
  offset(n: number): TableQuery<T, Row> {
    return this.with({ offset: n });
  }

  /** Asks for the number of matching rows too (`total` of the page). */
  count(): TableQuery<T, Row> {
    return this.with({ count: true });
  }

  /** Aggregates instead of rows: `n:count(),spent:sum(amount)`, with {@link groupBy}. */
  aggregate<Shape = Record<string, unknown>>(aggregates: string): TableQuery<T, Shape> {
    return new TableQuery<T, Shape>(this.runner, this.table, { ...this.params, aggregate: aggregates });
  }

  /** Groups an aggregate by these columns: `status,owner_id`. */
  groupBy(columns: string): TableQuery<T, Row> {
    return this.with({ groupBy: columns });
  }

  /** The query parameters of this read, as strings. */
  query(): Record<string, string> {
    const p = this.params;
    const query: Record<string, string> = {};
    if (p.select !== undefined) query.select = p.select;
    if (p.filter !== undefined) query.filter = JSON.stringify(p.filter);
    if (p.sort !== undefined) query.sort = p.sort;
    if (p.limit !== undefined) query.limit = String(p.limit);
    if (p.offset !== undefined) query.offset = String(p.offset);
    if (p.count) query.count = "exact";
    if (p.aggregate !== undefined) query.aggregate = p.aggregate;
    if (p.groupBy !== undefined) query.groupBy = p.groupBy;
    return query;
  }

  /** Lists the page. */
  async list(): Promise<Page<Row>> {
    const answer = await this.runner.run<Row[]>("GET", this.path(), this.query());
    const meta = answer.meta ?? {};
    return {
      data: answer.data,
      limit: Number(meta.limit ?? this.params.limit ?? 100),
      offset: Number(meta.offset ?? this.params.offset ?? 0),
      total: typeof meta.total === "number" ? meta.total : undefined,
    };
  }

  /** Lists the page when the query is awaited. */
  then<A = Page<Row>, B = never>(
    onfulfilled?: ((value: Page<Row>) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): PromiseLike<A | B> {
    return this.list().then(onfulfilled, onrejected);
  }

  /** Every matching row, page after page of `size` (the query's limit, else 100). */
  async *all(size = this.params.limit ?? 100): AsyncGenerator<Row> {
    for (let offset = this.params.offset ?? 0; ; offset += size) {
      const page = await this.with({ limit: size, offset }).list();
      yield* page.data;
      if (page.data.length < size) return;
    }
  }

  /** The row whose primary key is `key` (with `select`'s columns); NOT_FOUND when hidden or missing. */
  async get(key: string | number): Promise<Row> {
    const query: Record<string, string> = this.params.select === undefined ? {} : { select: this.params.select };
    return (await this.runner.run<Row>("GET", this.path(key), query)).data;
  }

  /** Inserts a row, or rows in one statement: what was written, as the caller may read it. */
  insert(row: T["Insert"]): Promise<T["Row"]>;
  insert(rows: Array<T["Insert"]>): Promise<Array<T["Row"]>>;
  async insert(rows: T["Insert"] | Array<T["Insert"]>): Promise<T["Row"] | Array<T["Row"]>> {
    return (await this.runner.run<T["Row"]>("POST", this.path(), {}, { data: rows })).data;
  }

  /**
   * Inserts each row or, where one with the same `onConflict` columns (a
   * unique key) exists, updates it; needs create and update grants.
   */
  async upsert(rows: T["Insert"] | Array<T["Insert"]>, options: { onConflict: string }): Promise<Array<T["Row"]>> {
    const data = Array.isArray(rows) ? rows : [rows];
    return (await this.runner.run<Array<T["Row"]>>("POST", this.path(), { onConflict: options.onConflict }, { data })).data;
  }

  /** Changes the row whose primary key is `key`. */
  async update(key: string | number, changes: T["Update"]): Promise<T["Row"]> {
    return (await this.runner.run<T["Row"]>("PATCH", this.path(key), {}, { data: changes })).data;
  }

  /** Deletes the row whose primary key is `key`. */
  async delete(key: string | number): Promise<void> {
    await this.runner.run("DELETE", this.path(key), {});
  }
}
