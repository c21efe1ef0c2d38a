/**
 * Connected AI apps (interface spec: Connected AI apps; Authentication, on their consent): the
 * records and requests of the JSON routes, and the pure rules of the OAuth 2.1 authorization server
 * in front of the MCP endpoint (decision 040): which redirect addresses a client may register, PKCE
 * S256, which app a client is recognised as, the access a call really has (a workspace not on the
 * paid plan reads as `read`), and which of the service's operations an app sees as tools. No I/O.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { TimestampSchema, UuidSchema, lineSchema, type Plan, type Role } from '../shared/common.js';
import { offeredTo, type CatalogueOperation } from '../assistant/operations.js';
import { assistantOperations } from '../assistant/tool-cards.js';

export const accessValues = ['read', 'write'] as const;
export const AccessSchema = z.enum(accessValues).meta({ id: 'ConnectedAppAccess' });
export type Access = z.infer<typeof AccessSchema>;
export const brands = ['assistant_a', 'assistant_b', 'other'] as const;
export const BrandSchema = z.enum(brands).meta({ id: 'ConnectedAppBrand' });
export type Brand = z.infer<typeof BrandSchema>;

// ---- The JSON routes ----

export const ConnectedAppSchema = z
  .object({
    id: UuidSchema,
    app_name: z.string(),
    brand: BrandSchema,
    redirect_host: z.string().describe('Where the app receives its code: the host of its redirect address'),
    access: AccessSchema.describe(
      'What the person chose; a workspace not on the paid plan reads as `read` on every call',
    ),
    user_id: z
      .string()
      .describe('The identity-provider user id of the person who approved it (the member the app acts as)'),
    person_name: z.string().describe('Their full name, or their email when they have none'),
    person_email: z.string(),
    last_used_at: TimestampSchema.nullable().describe('The last call, to the minute'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'ConnectedApp' });
export type ConnectedApp = z.infer<typeof ConnectedAppSchema>;
export const ConnectedAppListSchema = z
  .object({ data: z.array(ConnectedAppSchema).describe('Newest first') })
  .meta({ id: 'ConnectedAppList' });

export const ConsentWorkspaceSchema = z
  .object({
    workspace_id: z.string(),
    name: z.string(),
    can_write: z
      .boolean()
      .describe('Whether `write` would take effect: only a workspace on the paid plan makes changes from an AI app'),
  })
  .meta({ id: 'ConsentWorkspace' });
export const ConsentRequestSchema = z
  .object({
    app_name: z.string(),
    brand: BrandSchema,
    is_local: z
      .boolean()
      .describe(
        'The redirect goes to this computer (a loopback address): only an app running on this machine receives the code',
      ),
    recognised: z.boolean().describe('False shows as unverified: the name is what the app says about itself'),
    redirect_host: z.string().describe('Where approving sends the person (and the code)'),
    workspaces: z.array(ConsentWorkspaceSchema).describe("The signed-in person's workspaces"),
  })
  .meta({ id: 'ConsentRequest' });
export type ConsentRequest = z.infer<typeof ConsentRequestSchema>;

export const ConsentApproveSchema = z
  .strictObject({
    workspace_id: lineSchema(1, 255).describe('One of the workspaces the consent request lists'),
    access: AccessSchema,
  })
  .meta({ id: 'ConsentApprove' });
export const ConsentRedirectSchema = z
  .object({
    redirect_url: z
      .string()
      .describe(
        "The app's redirect address with the code (or the refusal) and its state: send the person's browser there",
      ),
  })
  .meta({ id: 'ConsentRedirect' });

// ---- Lifetimes ----

/** A consent request waits this long for a decision. */
export const authorizationRequestSeconds = 10 * 60;
/** An authorization code is good for one exchange within this. */
export const authorizationCodeSeconds = 60;
/** Access tokens are short-lived and opaque; a refresh token gets a new one. */
export const accessTokenSeconds = 15 * 60;
/** A refresh token rotates on every use; unused, it lapses after this. */
export const refreshTokenSeconds = 30 * 86_400;

/** Scopes: `read` always; `write` when the person chose it (and the plan allows it on each call). */
export const scopesSupported = ['read', 'write'] as const;
export const scopeOf = (access: Access) => (access === 'write' ? 'read write' : 'read');

// ---- Client registration ----

export const redirectUrisMax = 20;
export const clientNameMax = 255;

/** The part of RFC 7591 client metadata the service reads; everything else is kept but not trusted. */
export const ClientRegistrationSchema = z.looseObject({
  redirect_uris: z.array(z.string().max(2048)).min(1).max(redirectUrisMax),
  client_name: z.string().max(clientNameMax).optional(),
  client_uri: z.string().max(2048).optional(),
  logo_uri: z.string().max(2048).optional(),
  software_id: z.string().max(255).optional(),
  software_version: z.string().max(255).optional(),
  grant_types: z.array(z.string().max(100)).max(10).optional(),
  response_types: z.array(z.string().max(100)).max(10).optional(),
  token_endpoint_auth_method: z.string().max(100).optional(),
  scope: z.string().max(1000).optional(),
});
export type ClientRegistration = z.infer<typeof ClientRegistrationSchema>;

const loopbackHosts = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * A redirect address a client may register: https anywhere, or http to a loopback address (any
 * port: a desktop app listens where it can, RFC 8252), never with a fragment. `is_local` marks the
 * loopback ones. Custom schemes are refused: the consent page could not name who receives the code.
 */
export function checkRedirectUri(
  value: string,
): { ok: true; host: string; isLocal: boolean } | { ok: false; reason: string } {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { ok: false, reason: `${value} is not an absolute URL` };
  }
  if (url.hash) return { ok: false, reason: `${value} has a fragment; a redirect address may not` };
  if (url.username || url.password) return { ok: false, reason: `${value} carries credentials` };
  const isLocal = loopbackHosts.has(url.hostname);
  if (url.protocol === 'http:' && !isLocal)
    return {
      ok: false,
      reason: `${value} is plain http to another machine; only https, or http to a loopback address`,
    };
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return { ok: false, reason: `${value} is not https (or http to a loopback address)` };
  return { ok: true, host: url.hostname, isLocal };
}

/**
 * Whether `given` is one of the registered redirects. Exact match, except that a loopback
 * redirect matches on any port (RFC 8252 7.3).
 */
export function redirectMatches(registered: readonly string[], given: string): boolean {
  if (registered.includes(given)) return true;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return false;
  }
  if (!loopbackHosts.has(url.hostname)) return false;
  return registered.some((r) => {
    try {
      const known = new URL(r);
      return (
        loopbackHosts.has(known.hostname) &&
        known.protocol === url.protocol &&
        known.hostname === url.hostname &&
        known.pathname === url.pathname &&
        known.search === url.search
      );
    } catch {
      return false;
    }
  });
}

/**
 * A Client ID Metadata Document's address: an https URL with a path (a non-root path), no
 * fragment, no credentials. `allowHttp` admits http too (development only, with private networks allowed).
 */
export function isClientMetadataUrl(value: string, allowHttp = false): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' && !(allowHttp && url.protocol === 'http:')) return false;
  return url.pathname !== '/' && url.pathname !== '' && !url.hash && !url.username && !url.password;
}

/**
 * Recognised apps: a metadata document served from a host the service knows for a brand (and
 * every redirect on that host or below it). Dynamic registrations are never recognised: anyone
 * can register any name.
 */
export type KnownApps = Partial<Record<Exclude<Brand, 'other'>, string[]>>;

const onHost = (host: string, known: string) => host === known || host.endsWith(`.${known}`);

export function recognise(
  known: KnownApps,
  client: { registration: 'dynamic' | 'metadata_document'; client_id: string; redirect_uris: readonly string[] },
): { brand: Brand; recognised: boolean } {
  if (client.registration !== 'metadata_document') return { brand: 'other', recognised: false };
  const host = new URL(client.client_id).hostname;
  for (const [brand, hosts] of Object.entries(known) as [Exclude<Brand, 'other'>, string[]][]) {
    const match = hosts.find((h) => onHost(host, h));
    if (match && client.redirect_uris.every((r) => onHost(new URL(r).hostname, match)))
      return { brand, recognised: true };
  }
  return { brand: 'other', recognised: false };
}

/** `CONNECTED_APPS_KNOWN`: `assistant_a=host,host;assistant_b=host`. */
export function parseKnownApps(raw: string | undefined): KnownApps {
  const known: KnownApps = {};
  for (const part of (raw ?? '')
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [brand, hosts] = part.split('=', 2) as [string, string | undefined];
    if (brand !== 'assistant_a' && brand !== 'assistant_b')
      throw new Error(`CONNECTED_APPS_KNOWN names brand "${brand}"; only assistant_a and assistant_b are known apps.`);
    known[brand] = (hosts ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean);
  }
  return known;
}

// ---- PKCE ----

/** RFC 7636: 43 to 128 characters of the unreserved set. */
export const codeVerifierPattern = /^[A-Za-z0-9._~-]{43,128}$/;
/** The S256 challenge: 43 base64url characters. */
export const codeChallengePattern = /^[A-Za-z0-9_-]{43}$/;

export function pkceMatches(verifier: string, challenge: string): boolean {
  if (!codeVerifierPattern.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

// ---- Access on each call ----

/** What a call may do: the person's choice, and `read` whenever the workspace is not on the paid plan. */
export const effectiveAccess = (chosen: Access, plan: Plan): Access =>
  chosen === 'write' && plan === 'paid' ? 'write' : 'read';

/**
 * What an app may call: the assistant's own list less connecting and revoking apps (an app may not
 * widen or hide itself), as the member who approved it may (an admin-only operation only for an admin).
 */
export function appOperations(catalogue: CatalogueOperation[], access: Access, role: Role): CatalogueOperation[] {
  return assistantOperations(offeredTo(catalogue, role)).filter(
    (op) => !op.tags.includes('connected-apps') && (access === 'write' || op.access === 'read'),
  );
}

/** The host of a redirect address, as the consent page shows it. */
export const redirectHost = (uri: string) => new URL(uri).host;

/**
 * The MCP spec's guard against DNS rebinding: a page whose origin names the very host it sent the
 * request to, while the service is known by another address (`base`, PUBLIC_BASE_URL), is a name of
 * someone else's resolved to us; answers that origin. Without PUBLIC_BASE_URL that host is the
 * service's own address, and the token's audience (issued for the real address) refuses such a call.
 */
export function reboundOrigin(origin: string | undefined, base: string, requestHost: string): string | undefined {
  if (typeof origin !== 'string' || origin === new URL(base).origin) return undefined;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return undefined;
  }
  return host === requestHost.toLowerCase() ? origin : undefined;
}

/** The JSON-RPC tool calls a request body carries (one message or a batch). */
export function calledTools(body: unknown): string[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((m) => {
    const msg = m as { method?: unknown; params?: { name?: unknown } } | null;
    return msg && msg.method === 'tools/call' && typeof msg.params?.name === 'string' ? [msg.params.name] : [];
  });
}

/**
 * Why a call of an app that may only read is refused before the MCP server sees it (403
 * `insufficient_scope`, as the MCP authorization spec asks), or null: the first write tool the
 * body calls, and whether the app or the plan limits it to reading.
 */
export function readOnlyRefusal(
  catalogue: CatalogueOperation[],
  app: { access: Access; role: Role },
  body: unknown,
): string | null {
  const writeOnly = new Set(
    appOperations(catalogue, 'write', app.role)
      .filter((op) => op.access === 'write')
      .map((op) => op.name),
  );
  const refused = calledTools(body).find((name) => writeOnly.has(name));
  if (!refused) return null;
  const why =
    app.access === 'write'
      ? 'the workspace is not on the paid plan, so connected apps only read there'
      : 'this app was approved to read only';
  return `${refused} makes changes, and ${why}.`;
}
