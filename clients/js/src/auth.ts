import { TesseraError } from "./errors.js";
import type { Transport } from "./http.js";
import { credentialJson, creationOptions, credentials, requestOptions } from "./webauthn.js";

/** A role as a user object names it. */
export interface RoleRef {
  id: string;
  name: string;
}

/** A user object (API.md 3 and 14). */
export interface User {
  id: string;
  email: string;
  name: string | null;
  emailVerified: boolean;
  active: boolean;
  timezone: string | null;
  roles: RoleRef[];
  createdAt: string;
  mfa?: { totp: boolean; passkeys: number };
}

/**
 * How a sign-in ended: signed in (`user`), or held until a second factor
 * finishes it (`challenge`, for {@link MfaApi.verify} or
 * {@link MfaApi.verifyWithPasskey}).
 */
export type SignIn = { user: User; challenge?: undefined } | { user?: undefined; challenge: string };

/** A live session of the signed-in person. */
export interface SessionInfo {
  id: string;
  createdAt: string;
  expiresAt: string;
  current: boolean;
  ip: string | null;
  userAgent: string | null;
}

/** A personal access token (its secret only in `created`). */
export interface TokenInfo {
  id: string;
  name: string;
  plane: "API" | "ADMIN";
  prefix: string;
  expiresAt: string;
  createdAt: string;
  lastUsedAt?: string | null;
}

/** A passkey of the signed-in person. */
export interface PasskeyInfo {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** The providers an instance may offer. */
export type Provider = "google" | "github" | "oidc";

/** The key under which a provider sign-in started in this tab is kept. */
const PROVIDER_NONCE = "tessera.provider-nonce";
/** The query parameter that carries it through the provider and back. */
const NONCE_PARAM = "tessera_nonce";

/** Signing in and out, the account, and its credentials (`client.auth`). */
export class AuthApi {
  /** Second factors: TOTP, and finishing a sign-in held at a challenge. */
  readonly mfa: MfaApi;
  /** Passkeys: adding, listing and removing them, and signing in with one. */
  readonly passkeys: PasskeysApi;

  constructor(private readonly transport: Transport) {
    this.mfa = new MfaApi(transport);
    this.passkeys = new PasskeysApi(transport);
  }

  /** Calls `listener` when the session starts, is signed out, or ends (any 401). */
  onAuthChange(listener: Parameters<Transport["onAuthChange"]>[0]): () => void {
    return this.transport.onAuthChange(listener);
  }

  /** The session token, if signed in. */
  token(): Promise<string | null> {
    return this.transport.token();
  }

  /** Creates an account (it may need its email verified before signing in). */
  async register(account: { email: string; password: string; name?: string }): Promise<User> {
    return (await this.post<User>("/api/auth/register", account)).data;
  }

  /** Signs in with an email and a password. */
  signInWithPassword(credentials: { email: string; password: string }): Promise<SignIn> {
    return signIn(this.transport, "/api/auth/login", credentials);
  }

  /** Asks for an emailed sign-in code (always succeeds, whoever the address is). */
  async requestEmailCode(email: string): Promise<void> {
    await this.post("/api/auth/email-code", { email });
  }

  /** Signs in with an emailed code (`{ email, code }`) or its link's `token`. */
  signInWithEmailCode(proof: { email: string; code: string } | { token: string }): Promise<SignIn> {
    return signIn(this.transport, "/api/auth/email-code/verify", proof);
  }

  /** Signs out: the session ends on the server and here. */
  async signOut(): Promise<void> {
    try {
      if (await this.transport.token()) await this.transport.request("POST", "/api/auth/logout");
    } catch (error) {
      if (!(error instanceof TesseraError) || error.status !== 401) throw error;
    } finally {
      // Signed out here whatever the server said (a 401 has ended it already).
      if (await this.transport.token()) await this.transport.setSession(null, "SIGNED_OUT");
    }
  }

  /** The signed-in person. */
  async me(): Promise<User> {
    return (await this.transport.request<User>("GET", "/api/auth/me")).data;
  }

  /** Changes the signed-in person's name or time zone. */
  async updateMe(changes: { name?: string; timezone?: string | null }): Promise<User> {
    return (await this.transport.request<User>("PATCH", "/api/auth/me", { json: changes })).data;
  }

  /** Sends a reset link (always succeeds, whoever the address is). */
  async forgotPassword(email: string): Promise<void> {
    await this.post("/api/auth/password/forgot", { email });
  }

  /** Sets a new password with a reset link's token. */
  async resetPassword(token: string, password: string): Promise<void> {
    await this.post("/api/auth/password/reset", { token, password });
  }

  /** Changes the signed-in person's password. */
  async changePassword(currentPassword: string, newPassword: string): Promise<void> {
    await this.transport.request("POST", "/api/auth/password/change", { json: { currentPassword, newPassword } });
  }

  /** Marks an email verified with its link's token. */
  async verifyEmail(token: string): Promise<void> {
    await this.post("/api/auth/email/verify", { token });
  }

  /** Sends the verification email again (to `email`, or the signed-in person). */
  async resendVerification(email?: string): Promise<void> {
    await this.transport.request("POST", "/api/auth/email/resend", {
      json: email === undefined ? {} : { email },
      anonymous: email !== undefined,
    });
  }

  /** Accepts an invitation: sets the password of the invited account. */
  async acceptInvitation(token: string, password: string): Promise<void> {
    await this.post("/api/auth/invitations/accept", { token, password });
  }

  /** The providers this server signs in with, for the page's buttons. */
  async providers(): Promise<Provider[]> {
    const listed = await this.transport.request<{ provider: Provider }[]>("GET", "/api/auth/oauth", { anonymous: true });
    return listed.data.map((p) => p.provider);
  }

  /**
   * Starts a provider sign-in: the browser leaves for the provider and comes
   * back to `redirectTo`, where {@link finishProviderSignIn} ends it. The
   * answer is accepted only in the tab that started it.
   */
  signInWithProvider(provider: Provider, options: { redirectTo: string }): void {
    const nonce = toHex(crypto.getRandomValues(new Uint8Array(16)));
    sessionStorage.setItem(PROVIDER_NONCE, nonce);
    const back = new URL(options.redirectTo);
    back.searchParams.set(NONCE_PARAM, nonce);
    location.assign(this.transport.href(`/api/auth/oauth/${encodeURIComponent(provider)}`, { redirect_to: back.toString() }));
  }

  /**
   * Ends a provider sign-in on the page it came back to: `null` when this
   * page is not such a return (or another tab started it), else the
   * sign-in. The token is taken out of the address either way.
   */
  async finishProviderSignIn(): Promise<SignIn | null> {
    const url = new URL(location.href);
    const fragment = new URLSearchParams(url.hash.slice(1));
    if (!["token", "error", "mfa"].some((key) => fragment.has(key))) return null;
    // Out of the address (and its history entry) first, whoever started it.
    const nonce = url.searchParams.get(NONCE_PARAM);
    url.searchParams.delete(NONCE_PARAM);
    url.hash = "";
    history.replaceState(history.state, "", url.toString());
    const expected = sessionStorage.getItem(PROVIDER_NONCE);
    sessionStorage.removeItem(PROVIDER_NONCE);
    if (!nonce || nonce !== expected) return null;
    const error = fragment.get("error");
    if (error) throw new TesseraError(0, error, `the provider sign-in failed (${error})`);
    const challenge = fragment.get("mfa");
    if (challenge) return { challenge };
    await this.transport.setSession(fragment.get("token"), "SIGNED_IN");
    return { user: await this.me() };
  }

  /** The signed-in person's sessions. */
  async sessions(): Promise<SessionInfo[]> {
    return (await this.transport.request<SessionInfo[]>("GET", "/api/auth/sessions")).data;
  }

  /** Ends one of the signed-in person's sessions. */
  async endSession(id: string): Promise<void> {
    await this.transport.request("DELETE", `/api/auth/sessions/${encodeURIComponent(id)}`);
  }

  /** The signed-in person's personal access tokens. */
  async tokens(): Promise<TokenInfo[]> {
    return (await this.transport.request<TokenInfo[]>("GET", "/api/auth/tokens")).data;
  }

  /** Creates a personal access token; its secret (`token`) is shown once. */
  async createToken(token: { name: string; lifetimeDays: number; plane?: "API" | "ADMIN" }): Promise<TokenInfo & { token: string }> {
    const json = { plane: "API", ...token };
    return (await this.transport.request<TokenInfo & { token: string }>("POST", "/api/auth/tokens", { json })).data;
  }

  /** Revokes a personal access token. */
  async revokeToken(id: string): Promise<void> {
    await this.transport.request("DELETE", `/api/auth/tokens/${encodeURIComponent(id)}`);
  }

  private post<T>(path: string, body: unknown) {
    return this.transport.request<T>("POST", path, { json: body, anonymous: true });
  }
}

/** TOTP, and the second step of a sign-in held at a challenge (`client.auth.mfa`). */
export class MfaApi {
  constructor(private readonly transport: Transport) {}

  /** Finishes a sign-in with a TOTP or recovery code. */
  verify(challenge: string, code: string): Promise<SignIn> {
    return signIn(this.transport, "/api/auth/mfa/verify", { challenge, code });
  }

  /** Finishes a sign-in with one of the account's passkeys (a browser's). */
  async verifyWithPasskey(challenge: string): Promise<SignIn> {
    const started = await this.transport.request<{ options: Record<string, unknown> }>("POST", "/api/auth/mfa/passkey", {
      json: { challenge },
      anonymous: true,
    });
    const credential = await assert(started.data.options);
    return signIn(this.transport, "/api/auth/mfa/verify", { challenge, credential });
  }

  /** Starts turning TOTP on: the secret and its `otpauth://` URL, for an app. */
  async enrollTotp(): Promise<{ secret: string; otpauthUrl: string }> {
    return (await this.transport.request<{ secret: string; otpauthUrl: string }>("POST", "/api/auth/mfa/totp")).data;
  }

  /** Turns TOTP on with a first code; answers the recovery codes, shown once. */
  async confirmTotp(code: string): Promise<string[]> {
    const answer = await this.transport.request<{ recoveryCodes: string[] }>("POST", "/api/auth/mfa/totp/confirm", {
      json: { code },
    });
    return answer.data.recoveryCodes;
  }

  /** Turns TOTP off with a TOTP or recovery code. */
  async disableTotp(code: string): Promise<void> {
    await this.transport.request("DELETE", "/api/auth/mfa/totp", { json: { code } });
  }
}

/** Passkeys of the signed-in person, and signing in with one (`client.auth.passkeys`). */
export class PasskeysApi {
  constructor(private readonly transport: Transport) {}

  /** Makes a passkey on this device (the browser asks the person) and stores it. */
  async register(name?: string): Promise<PasskeyInfo> {
    const started = await this.transport.request<{ challengeId: string; options: Record<string, unknown> }>(
      "POST",
      "/api/auth/passkeys/register/start",
      { json: {} },
    );
    const made = (await ceremony(() => credentials().create({ publicKey: creationOptions(started.data.options) }))) as PublicKeyCredential | null;
    if (!made) throw new TesseraError(0, "PASSKEY_CANCELLED", "no passkey was made");
    const json = { challengeId: started.data.challengeId, credential: credentialJson(made), ...(name ? { name } : {}) };
    return (await this.transport.request<PasskeyInfo>("POST", "/api/auth/passkeys/register/finish", { json })).data;
  }

  /** Signs in with a passkey of this device (the browser asks which). */
  async signIn(): Promise<SignIn> {
    const started = await this.transport.request<{ challengeId: string; options: Record<string, unknown> }>(
      "POST",
      "/api/auth/passkeys/login/start",
      { json: {}, anonymous: true },
    );
    const credential = await assert(started.data.options);
    return signIn(this.transport, "/api/auth/passkeys/login/finish", { challengeId: started.data.challengeId, credential });
  }

  /** The signed-in person's passkeys. */
  async list(): Promise<PasskeyInfo[]> {
    return (await this.transport.request<PasskeyInfo[]>("GET", "/api/auth/passkeys")).data;
  }

  /** Removes one of the signed-in person's passkeys. */
  async remove(id: string): Promise<void> {
    await this.transport.request("DELETE", `/api/auth/passkeys/${encodeURIComponent(id)}`);
  }
}

/** The browser's answer to a passkey request with the server's `options`. */
async function assert(options: Record<string, unknown>): Promise<Record<string, unknown>> {
  const answer = (await ceremony(() => credentials().get({ publicKey: requestOptions(options) }))) as PublicKeyCredential | null;
  if (!answer) throw new TesseraError(0, "PASSKEY_CANCELLED", "no passkey was used");
  return credentialJson(answer);
}

/** Runs a WebAuthn ceremony; the person's refusal or a timeout (NotAllowedError) is `null`. */
async function ceremony(run: () => Promise<Credential | null>): Promise<Credential | null> {
  try {
    return await run();
  } catch (error) {
    if ((error as DOMException)?.name === "NotAllowedError") return null;
    throw error;
  }
}

/** Posts a sign-in's `body` to `path`: the session kept, or the challenge. */
async function signIn(transport: Transport, path: string, body: unknown): Promise<SignIn> {
  try {
    const answer = await transport.request<{ token: string; user: User }>("POST", path, { json: body, anonymous: true });
    await transport.setSession(answer.data.token, "SIGNED_IN");
    return { user: answer.data.user };
  } catch (error) {
    if (error instanceof TesseraError && error.code === "MFA_REQUIRED" && typeof error.details.challenge === "string") {
      return { challenge: error.details.challenge };
    }
    throw error;
  }
}

function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
