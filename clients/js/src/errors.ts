/** A refusal of the server, or a request that never reached it. */
export class TesseraError extends Error {
  /** The HTTP status; 0 when the request never got an answer. */
  readonly status: number;
  /** The error code of the envelope (`PERMISSION_DENIED`), or `NETWORK_ERROR`. */
  readonly code: string;
  /** The JSON path of the field at fault, when the server names one. */
  readonly field: string | undefined;
  /** The envelope's `meta` (a batch's `index`, a CSV import's `line`). */
  readonly meta: Record<string, unknown> | undefined;
  /** What else the server said beside the code (an MFA `challenge`). */
  readonly details: Record<string, unknown>;

  constructor(
    status: number,
    code: string,
    message: string,
    extra: { field?: string; meta?: Record<string, unknown>; details?: Record<string, unknown> } = {},
  ) {
    super(message);
    this.name = "TesseraError";
    this.status = status;
    this.code = code;
    this.field = extra.field;
    this.meta = extra.meta;
    this.details = extra.details ?? {};
  }

  /** The error of a failed answer whose body is `body` (parsed JSON, if any). */
  static fromAnswer(status: number, body: unknown): TesseraError {
    const envelope = body as { errors?: Array<Record<string, unknown>>; meta?: Record<string, unknown> } | null;
    const first = envelope?.errors?.[0];
    if (!first || typeof first.code !== "string") {
      return new TesseraError(status, status >= 500 ? "INTERNAL" : "UNKNOWN", `the server answered ${status}`);
    }
    const { code, message, field, ...details } = first;
    return new TesseraError(status, code, typeof message === "string" ? message : code, {
      ...(typeof field === "string" ? { field } : {}),
      ...(envelope?.meta ? { meta: envelope.meta } : {}),
      details,
    });
  }
}
