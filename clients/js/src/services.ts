import { TesseraError } from "./errors.js";
import type { Transport } from "./http.js";
import type { Filter } from "./query.js";

/** A stored file's record. */
export interface FileInfo {
  /** The file's id, for its routes. */
  id: string;
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  visibility: "PRIVATE" | "PUBLIC";
  ownerId: string | null;
  createdAt: string;
}

/** Uploading, reading and deleting files (`client.files`). */
export class FilesApi {
  constructor(private readonly transport: Transport) {}

  /**
   * Uploads `file` (a `Blob` or `File`; `name` for a Blob without one).
   * `onProgress` gets the bytes sent and the total, in a browser with
   * `XMLHttpRequest`; elsewhere it is called once, when the upload ends.
   */
  async upload(
    file: Blob,
    options: { name?: string; visibility?: "PRIVATE" | "PUBLIC"; onProgress?: (sent: number, total: number) => void } = {},
  ): Promise<FileInfo> {
    const form = new FormData();
    const name = options.name ?? (file as File).name ?? "file";
    form.set("file", file, name);
    if (options.visibility) form.set("visibility", options.visibility);
    const XHR = (globalThis as { XMLHttpRequest?: typeof XMLHttpRequest }).XMLHttpRequest;
    if (options.onProgress && XHR) return this.uploadWithProgress(XHR, form, file.size, options.onProgress);
    const answer = await this.transport.request<FileInfo>("POST", "/api/files", { body: form });
    options.onProgress?.(file.size, file.size);
    return answer.data;
  }

  private async uploadWithProgress(
    XHR: typeof XMLHttpRequest,
    form: FormData,
    total: number,
    onProgress: (sent: number, total: number) => void,
  ): Promise<FileInfo> {
    const { headers, token } = await this.transport.credentials();
    return new Promise((resolve, reject) => {
      const request = new XHR();
      request.open("POST", this.transport.href("/api/files"));
      for (const [name, value] of Object.entries(headers)) request.setRequestHeader(name, value);
      request.upload.onprogress = (event) => onProgress(event.loaded, event.lengthComputable ? event.total : total);
      request.onerror = () => reject(new TesseraError(0, "NETWORK_ERROR", "the upload did not reach the server"));
      request.onload = () => {
        let body: unknown = null;
        try {
          body = JSON.parse(request.responseText);
        } catch {
          // Not JSON: the error says so by its status.
        }
        if (request.status === 201) resolve((body as { data: FileInfo }).data);
        else void this.transport.refused(request.status, body, token).then(reject);
      };
      request.send(form);
    });
  }

  /** The file's record. */
  async info(id: string): Promise<FileInfo> {
    return (await this.transport.request<FileInfo>("GET", `/api/files/${encodeURIComponent(id)}/meta`)).data;
  }

  /** The file's bytes, with its content type. */
  async download(id: string): Promise<Blob> {
    return (await this.transport.fetch("GET", `/api/files/${encodeURIComponent(id)}`)).blob();
  }

  /** The address of a file: a PUBLIC one opens anywhere (`<img src>`); a PRIVATE one needs {@link download}. */
  url(id: string): string {
    return this.transport.href(`/api/files/${encodeURIComponent(id)}`);
  }

  /** Deletes the file. */
  async remove(id: string): Promise<void> {
    await this.transport.request("DELETE", `/api/files/${encodeURIComponent(id)}`);
  }
}

/** A workflow run's outcome. */
export interface RunOutcome<Result = unknown> {
  id: string;
  status: "RUNNING" | "SUCCEEDED" | "FAILED" | "CANCELLED";
  result: Result | null;
  error: { code: string; message: string } | null;
}

/** Calling workflows' webhooks and reading their results (`client.workflows`). */
export class WorkflowsApi {
  constructor(private readonly transport: Transport) {}

  /**
   * Calls the webhook of workflow `slug` (POST with `body`, or GET with
   * `query`): a synchronous one answers its outcome; an asynchronous one
   * is waited for (the result route polled) unless `wait` is false, when
   * the run's id comes back at once as a RUNNING outcome. A synchronous
   * call past its wait is followed the same way.
   */
  async invoke<Result = unknown>(
    slug: string,
    options: {
      body?: unknown;
      query?: Record<string, string>;
      method?: "POST" | "GET";
      /** Call a public webhook without the session (its steps could read it). */
      anonymous?: boolean;
      wait?: boolean;
      pollMs?: number;
      timeoutMs?: number;
    } = {},
  ): Promise<RunOutcome<Result>> {
    const method = options.method ?? (options.body === undefined && options.query ? "GET" : "POST");
    const path = `/api/workflows/${encodeURIComponent(slug)}/webhook`;
    let run: string;
    try {
      const answer = await this.transport.request<RunOutcome<Result> | { run: string }>(method, path, {
        ...(method === "POST" ? { json: options.body ?? {} } : {}),
        ...(options.query ? { query: options.query } : {}),
        ...(options.anonymous ? { anonymous: true } : {}),
      });
      if (!("run" in answer.data)) return answer.data;
      run = answer.data.run;
    } catch (error) {
      if (!(error instanceof TesseraError) || error.code !== "WORKFLOW_SYNC_TIMEOUT" || typeof error.meta?.run !== "string") throw error;
      run = error.meta.run;
    }
    // A public webhook's runs have no caller: their results cannot be read.
    if (options.wait === false || options.anonymous) return { id: run, status: "RUNNING", result: null, error: null };
    return this.waitFor<Result>(run, options);
  }

  /** The outcome of run `id` now (the caller's own runs, for a day after they end). */
  async result<Result = unknown>(id: string): Promise<RunOutcome<Result>> {
    const path = `/api/workflows/runs/${encodeURIComponent(id)}/result`;
    return (await this.transport.request<RunOutcome<Result>>("GET", path)).data;
  }

  /** Polls run `id` until it is no longer RUNNING (or `timeoutMs` passes: a TIMEOUT error). */
  async waitFor<Result = unknown>(id: string, options: { pollMs?: number; timeoutMs?: number } = {}): Promise<RunOutcome<Result>> {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    let pause = options.pollMs ?? 200;
    for (;;) {
      const outcome = await this.result<Result>(id);
      if (outcome.status !== "RUNNING") return outcome;
      if (Date.now() + pause > deadline) throw new TesseraError(0, "TIMEOUT", `run ${id} is still running`, { meta: { run: id } });
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, 2_000);
    }
  }
}

/** A dashboard with each widget's rows, as the caller may read them. */
export interface Dashboard {
  id: string;
  slug: string;
  name: string;
  widgets: Array<Record<string, unknown> & { id: string; type: string; rows?: Array<Record<string, unknown>>; error?: { code: string } }>;
}

/** Reading published DataViews and dashboards (`client.views`). */
export class ViewsApi {
  constructor(private readonly transport: Transport) {}

  /** A page of DataView `slug`'s rows. */
  async read<Row = Record<string, unknown>>(
    slug: string,
    options: { filter?: Filter<Row>; limit?: number; offset?: number; count?: boolean } = {},
  ): Promise<{ data: Row[]; total: number | undefined }> {
    const answer = await this.transport.request<Row[]>("GET", `/api/views/${encodeURIComponent(slug)}`, {
      query: {
        filter: options.filter === undefined ? undefined : JSON.stringify(options.filter),
        limit: options.limit,
        offset: options.offset,
        count: options.count ? "exact" : undefined,
      },
    });
    const total = answer.meta?.total;
    return { data: answer.data, total: typeof total === "number" ? total : undefined };
  }

  /** Dashboard `slug`, each widget resolved under the caller's grants. */
  async dashboard(slug: string): Promise<Dashboard> {
    return (await this.transport.request<Dashboard>("GET", `/api/dashboards/${encodeURIComponent(slug)}`)).data;
  }
}
