/** base64url without padding, both ways, and the WebAuthn JSON forms. */

/** `bytes` as base64url without padding. */
export function toBase64url(bytes: ArrayBuffer | Uint8Array): string {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let binary = "";
  for (const byte of view) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The bytes of base64url `text` (padding optional). */
export function fromBase64url(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

type Json = Record<string, unknown>;

/** The options of `navigator.credentials.create` from the server's JSON. */
export function creationOptions(options: Json): PublicKeyCredentialCreationOptions {
  const user = options.user as Json;
  return {
    ...(options as unknown as PublicKeyCredentialCreationOptions),
    challenge: fromBase64url(options.challenge as string),
    user: { ...(user as unknown as PublicKeyCredentialUserEntity), id: fromBase64url(user.id as string) },
    excludeCredentials: descriptors(options.excludeCredentials),
  };
}

/** The options of `navigator.credentials.get` from the server's JSON. */
export function requestOptions(options: Json): PublicKeyCredentialRequestOptions {
  return {
    ...(options as unknown as PublicKeyCredentialRequestOptions),
    challenge: fromBase64url(options.challenge as string),
    allowCredentials: descriptors(options.allowCredentials),
  };
}

function descriptors(list: unknown): PublicKeyCredentialDescriptor[] {
  return ((list as Json[] | undefined) ?? []).map((d) => ({
    ...(d as unknown as PublicKeyCredentialDescriptor),
    id: fromBase64url(d.id as string),
  }));
}

/** A credential in the standard JSON form (`PublicKeyCredential.toJSON()`). */
export function credentialJson(credential: PublicKeyCredential): Json {
  const response = credential.response as AuthenticatorResponse & Record<string, unknown>;
  const fields: Json = { clientDataJSON: toBase64url(response.clientDataJSON) };
  for (const name of ["attestationObject", "authenticatorData", "signature", "userHandle"]) {
    const value = response[name];
    if (value instanceof ArrayBuffer) fields[name] = toBase64url(value);
  }
  const transports = (response as { getTransports?: () => string[] }).getTransports?.();
  if (transports) fields.transports = transports;
  return {
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    response: fields,
    clientExtensionResults: credential.getClientExtensionResults(),
    ...(credential.authenticatorAttachment ? { authenticatorAttachment: credential.authenticatorAttachment } : {}),
  };
}

/** `navigator.credentials`, or an error saying there is none here. */
export function credentials(): CredentialsContainer {
  const container = (globalThis as { navigator?: Navigator }).navigator?.credentials;
  if (!container) throw new Error("passkeys need a browser (navigator.credentials)");
  return container;
}
